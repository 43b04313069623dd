package ranges_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"github.com/sluicedb/sluice/internal/ranges"
	"github.com/sluicedb/sluice/internal/rowkey"
	"github.com/sluicedb/sluice/internal/testdb"
)

// TestWithinCoversExactlyTheIntervals: a cutter limited to intervals (a
// resumed copy) yields spans, one lane per interval, that hold exactly the
// rows of the intervals, each once; the oracle is a COUNT over the
// intervals' own predicates. Integer and composite keys; random intervals
// (SLUICE_RANGES_SEED replays a case).
func TestWithinCoversExactlyTheIntervals(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE i (id BIGINT PRIMARY KEY, v INT)",
		"CREATE TABLE c (a INT, b VARCHAR(8), v INT, PRIMARY KEY (a, b))")
	db.Fill(t, "i", 5000, "n * 3 - 7000, n")
	db.Fill(t, "c", 5000, "n DIV 10, CONCAT('k', n MOD 10), n")
	seed := uint64(rand.Int64())
	if s := os.Getenv("SLUICE_RANGES_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (SLUICE_RANGES_SEED)", seed)
	r := rand.New(rand.NewPCG(seed, 1))
	for round := range 12 {
		table, cols := "i", []string{"id"}
		if round%2 == 1 {
			table, cols = "c", []string{"a", "b"}
		}
		_, key := db.Mapping(t, table, table, false)
		// Bounds: sorted distinct keys of the table, some outside it.
		bound := func() rowkey.Key {
			if table == "i" {
				return rowkey.Key{int64(r.IntN(20000) - 9000)}
			}
			return rowkey.Key{int64(r.IntN(520) - 10), []byte(fmt.Sprintf("k%d", r.IntN(10)))}
		}
		var ivs []ranges.Span
		var lo rowkey.Key
		for n := 1 + r.IntN(4); n > 0; n-- {
			a, b := bound(), bound()
			if less(b, a) {
				a, b = b, a
			}
			if lo != nil && !less(lo, a) {
				continue
			}
			if r.IntN(3) == 0 && len(ivs) == 0 {
				a = nil
			}
			ivs = append(ivs, ranges.Span{Lo: a, Hi: b})
			lo = b
		}
		if r.IntN(2) == 0 {
			ivs = append(ivs, ranges.Span{Lo: lo})
		}
		want := 0
		for _, iv := range ivs {
			where, args := iv.Where(key)
			var n int
			if err := db.QueryRow("SELECT COUNT(*) FROM "+table+" WHERE "+where, args...).Scan(&n); err != nil {
				t.Fatal(err)
			}
			want += n
		}
		size := 1 + r.IntN(400)
		c := &ranges.Cutter{DB: db.DB, Table: "`" + db.Name + "`.`" + table + "`", Key: key, Size: func() int { return size }, Within: ivs}
		out := make(chan ranges.Span)
		errc := make(chan error, 1)
		go func() { errc <- c.Run(context.Background(), out); close(out) }()
		got, lastLane := 0, 0
		for sp := range out {
			if sp.Lane < lastLane || sp.Lane >= len(ivs) {
				t.Fatalf("round %d: span lane %d after %d of %d intervals", round, sp.Lane, lastLane, len(ivs))
			}
			lastLane = sp.Lane
			where, args := sp.Where(key)
			var n int
			if err := db.QueryRow("SELECT COUNT(*) FROM "+table+" WHERE "+where, args...).Scan(&n); err != nil {
				t.Fatal(err)
			}
			got += n
		}
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("round %d (%s, cols %v, size %d, %d intervals): the spans hold %d rows, the intervals %d", round, table, cols, size, len(ivs), got, want)
		}
		if c.LanesUsed() != len(ivs) {
			t.Errorf("LanesUsed %d, want %d", c.LanesUsed(), len(ivs))
		}
	}
}

// less orders the test's keys: an integer, or an integer and a short ASCII
// string (whose collation order is its byte order).
func less(x, y rowkey.Key) bool {
	if x[0].(int64) != y[0].(int64) {
		return x[0].(int64) < y[0].(int64)
	}
	return len(x) > 1 && string(x[1].([]byte)) < string(y[1].([]byte))
}
