package ranges_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicedb/sluice/internal/ranges"
	"github.com/sluicedb/sluice/internal/testdb"
)

// TestSkewedKeysCutNearTheSize: integer keys that cluster far apart (a few
// rows at the ends of the type's range, the rest together) are still cut
// into spans that hold at most a few times the rows asked for, and the
// spans hold every row once (oracle: COUNT over each span's own predicate
// against COUNT(*)). Random clusters, signed and unsigned, with and without
// lanes (SLUICE_RANGES_SEED replays a case).
func TestSkewedKeysCutNearTheSize(t *testing.T) {
	db := testdb.New(t)
	seed := uint64(rand.Int64())
	if s := os.Getenv("SLUICE_RANGES_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (SLUICE_RANGES_SEED)", seed)
	r := rand.New(rand.NewPCG(seed, 2))
	for round := range 6 {
		unsigned := round%2 == 1
		typ, lo, hi := "BIGINT", "-9223372036854775808", "9223372036854775807"
		if unsigned {
			typ, lo, hi = "BIGINT UNSIGNED", "0", "18446744073709551615"
		}
		table := fmt.Sprintf("s%d", round)
		db.MustExec(t, fmt.Sprintf("CREATE TABLE %s (id %s PRIMARY KEY, v INT)", table, typ))
		// One to three clusters of consecutive keys, somewhere in the range.
		for n := 1 + r.IntN(3); n > 0; n-- {
			start := r.Int64N(1 << 62)
			if !unsigned && r.IntN(2) == 0 {
				start = -start
			}
			db.Fill(t, table, 1000+r.IntN(4000), fmt.Sprintf("n + %d, n", start))
		}
		// A few rows at the very ends.
		ends := []string{lo, hi}
		if !unsigned {
			ends = append(ends, "-9223372036854775807")
		}
		for _, v := range ends {
			db.MustExec(t, fmt.Sprintf("INSERT IGNORE INTO %s VALUES (%s, 0)", table, v))
		}
		var total, est int
		db.QueryRow("SELECT COUNT(*) FROM " + table).Scan(&total)
		db.MustExec(t, "ANALYZE TABLE "+table)
		db.QueryRow("SELECT TABLE_ROWS FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?", table).Scan(&est)
		_, key := db.Mapping(t, table, table, false)
		size, lanes := 50+r.IntN(200), 1+3*(round/2%2)
		c := &ranges.Cutter{DB: db.DB, Table: "`" + db.Name + "`.`" + table + "`", Key: key, Size: func() int { return size },
			EstimatedRows: int64(est), Lanes: lanes}
		out := make(chan ranges.Span)
		errc := make(chan error, 1)
		go func() { errc <- c.Run(context.Background(), out); close(out) }()
		got, most, spans := 0, 0, 0
		for sp := range out {
			where, args := sp.Where(key)
			var n int
			if err := db.QueryRow("SELECT COUNT(*) FROM "+table+" WHERE "+where, args...).Scan(&n); err != nil {
				t.Fatal(err)
			}
			c.Observe(sp.Width, int64(n))
			got, most, spans = got+n, max(most, n), spans+1
		}
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		what := fmt.Sprintf("round %d (%s, %d rows, size %d, %d lanes, %d spans)", round, strings.ToLower(typ), total, size, lanes, spans)
		if got != total {
			t.Fatalf("%s: the spans hold %d rows, the table %d", what, got, total)
		}
		if most > 4*size {
			t.Errorf("%s: a span holds %d rows, more than 4 x %d", what, most, size)
		}
		t.Logf("%s: largest span %d rows", what, most)
	}
}
