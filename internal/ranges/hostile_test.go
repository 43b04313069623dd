package ranges_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/ranges"
	"github.com/sluicedb/sluice/internal/rowkey"
	"github.com/sluicedb/sluice/internal/testdb"
)

// TestTailAppendsEndTheCut: a key whose application appends at the
// top while the copy runs. The integer cutter reads MIN and MAX once and its
// last span is open above, so it used to end after about (MAX-MIN)/size
// spans whatever the application did; since sendBounded probes the
// open-ended last span, the cutter walks the tail piece by piece and never
// ends while the application appends faster than the ranges are consumed.
// Here the consumer appends 2 x size rows for each span it takes (the
// application inserting twice as fast as the copy). The composite key
// (keyset walk) has always behaved so.
func TestTailAppendsEndTheCut(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE a (id BIGINT PRIMARY KEY, v INT)", "CREATE TABLE b (id BIGINT, v INT, PRIMARY KEY (id, v))")
	for _, table := range []string{"a", "b"} {
		t.Run(table, func(t *testing.T) {
			db.Fill(t, table, 100, "n, n")
			_, key := db.Mapping(t, table, table, false)
			const size = 10
			c := &ranges.Cutter{DB: db.DB, Table: "`" + db.Name + "`.`" + table + "`", Key: key,
				Size: func() int { return size }, EstimatedRows: 100}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			out := make(chan ranges.Span)
			errc := make(chan error, 1)
			go func() { errc <- c.Run(ctx, out); close(out) }()
			next := 101
			spans := 0
			for sp := range out {
				spans++
				if spans > 300 {
					cancel()
					for range out {
					}
					<-errc
					t.Fatalf("the cutter is still cutting after %d spans (a table of 100 rows, size %d; the last span taken: (%v, %v]); it never ends while the application appends faster than the copy",
						spans-1, size, sp.Lo, sp.Hi)
				}
				// The application appends 2 x size rows while this range is copied.
				db.MustExec(t, fmt.Sprintf("INSERT INTO %s SELECT n, n FROM (WITH RECURSIVE s(n) AS (SELECT %d UNION ALL SELECT n + 1 FROM s WHERE n < %d) SELECT n FROM s) x", table, next, next+2*size-1))
				next += 2 * size
			}
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			t.Logf("ended after %d spans", spans)
		})
	}
}

// TestWithinProbesWideSpans: a resumed copy (Cutter.Within) of an
// interval closed at both ends. Its first span (lower bound the interval's
// own) and its last (upper bound the interval's own) come from the planner
// with Width 0, so sendBounded sends them without probing, however many
// rows they hold: a dense cluster behind a sparse key is copied in one
// statement, as before the skew fix. The same table cut without Within is
// cut near the size (control).
func TestWithinProbesWideSpans(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE w (id BIGINT PRIMARY KEY, v INT)",
		"INSERT INTO w VALUES (0, 0), (1000000000000, 0)")
	db.Fill(t, "w", 5000, "n + 10000, n") // a cluster of 5,000 keys
	_, key := db.Mapping(t, "w", "w", false)
	const size = 100
	for _, within := range [][]ranges.Span{
		nil, // control
		{{Lo: rowkey.Key{int64(-1)}, Hi: rowkey.Key{int64(2000000000000)}}},
	} {
		c := &ranges.Cutter{DB: db.DB, Table: "`" + db.Name + "`.`w`", Key: key,
			Size: func() int { return size }, EstimatedRows: 5002, Within: within}
		out := make(chan ranges.Span)
		errc := make(chan error, 1)
		go func() { errc <- c.Run(context.Background(), out); close(out) }()
		got, most, spans := 0, 0, 0
		var widest ranges.Span
		for sp := range out {
			where, args := sp.Where(key)
			var n int
			if err := db.QueryRow("SELECT COUNT(*) FROM w WHERE "+where, args...).Scan(&n); err != nil {
				t.Fatal(err)
			}
			c.Observe(sp.Width, int64(n))
			if n > most {
				most, widest = n, sp
			}
			got, spans = got+n, spans+1
		}
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		what := "whole key"
		if within != nil {
			what = fmt.Sprintf("within %v", within)
		}
		if got != 5002 {
			t.Fatalf("%s: the spans hold %d rows, the table 5002", what, got)
		}
		if most > 4*size {
			t.Errorf("%s: span (%v, %v] (width %d) holds %d rows, more than 4 x %d (%d spans)", what, widest.Lo, widest.Hi, widest.Width, most, size, spans)
		} else {
			t.Logf("%s: largest span %d rows (%d spans)", what, most, spans)
		}
	}
}

// TestConcurrentWritesTile: while a skewed integer key is cut (keyset
// probes included), a writer deletes and inserts rows at random inside and
// around the clusters; afterwards, with the writer stopped, the spans taken
// must still hold every row once (their predicates tile the key whatever
// the data did meanwhile).
func TestConcurrentWritesTile(t *testing.T) {
	db := testdb.New(t)
	for _, typ := range []string{"BIGINT", "BIGINT UNSIGNED"} {
		db.MustExec(t, "DROP TABLE IF EXISTS k", fmt.Sprintf("CREATE TABLE k (id %s PRIMARY KEY, v INT)", typ))
		lo, hi := "-9223372036854775808", "9223372036854775807"
		if typ != "BIGINT" {
			lo, hi = "0", "18446744073709551615"
		}
		db.MustExec(t, "INSERT INTO k VALUES ("+lo+", 0), ("+hi+", 0)")
		db.Fill(t, "k", 3000, "n + 4611686018427387904, n")
		_, key := db.Mapping(t, "k", "k", false)
		var calls atomic.Int64
		c := &ranges.Cutter{DB: db.DB, Table: "`" + db.Name + "`.`k`", Key: key,
			Size: func() int { return 20 + int(calls.Add(1)*7%60) }, EstimatedRows: 3002, Lanes: 3}
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				base := 4611686018427387904 + int64(i*97%3500)
				db.Exec(fmt.Sprintf("DELETE FROM k WHERE id BETWEEN %d AND %d", base, base+5))
				db.Exec(fmt.Sprintf("INSERT IGNORE INTO k VALUES (%d, 1), (%d, 1)", base+3, base+4000))
				time.Sleep(time.Millisecond)
			}
		}()
		out := make(chan ranges.Span)
		errc := make(chan error, 1)
		go func() { errc <- c.Run(context.Background(), out); close(out) }()
		var spans []ranges.Span
		for sp := range out {
			spans = append(spans, sp)
			where, args := sp.Where(key)
			var n int64
			if err := db.QueryRow("SELECT COUNT(*) FROM k WHERE "+where, args...).Scan(&n); err != nil {
				t.Fatal(err)
			}
			c.Observe(sp.Width, n)
		}
		close(stop)
		<-done
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		var total, got int
		db.QueryRow("SELECT COUNT(*) FROM k").Scan(&total)
		for _, sp := range spans {
			where, args := sp.Where(key)
			var n int
			if err := db.QueryRow("SELECT COUNT(*) FROM k WHERE "+where, args...).Scan(&n); err != nil {
				t.Fatal(err)
			}
			got += n
		}
		if got != total {
			t.Fatalf("%s: %d spans hold %d rows, the table %d", typ, len(spans), got, total)
		}
		t.Logf("%s: %d spans tile %d rows", typ, len(spans), total)
	}
}

// TestExtremes: empty, one-row and two-row tables at the ends of
// BIGINT and BIGINT UNSIGNED, sizes 1 and 2, with and without lanes and
// with Within intervals at the extremes: the spans hold every row once, and
// the cutter ends.
func TestExtremes(t *testing.T) {
	db := testdb.New(t)
	for _, typ := range []string{"BIGINT", "BIGINT UNSIGNED"} {
		lo, hi := "-9223372036854775808", "9223372036854775807"
		loK, hiK := rowkey.Key{int64(-1 << 63)}, rowkey.Key{int64(1<<63 - 1)}
		if typ != "BIGINT" {
			lo, hi = "0", "18446744073709551615"
			loK, hiK = rowkey.Key{uint64(0)}, rowkey.Key{uint64(1<<64 - 1)}
		}
		for _, rows := range [][]string{{}, {lo}, {hi}, {lo, hi}, {lo, "1", "2", "3", hi}} {
			db.MustExec(t, "DROP TABLE IF EXISTS e", fmt.Sprintf("CREATE TABLE e (id %s PRIMARY KEY)", typ))
			for _, v := range rows {
				db.MustExec(t, "INSERT INTO e VALUES ("+v+")")
			}
			_, key := db.Mapping(t, "e", "e", false)
			for _, within := range [][]ranges.Span{nil, {{Hi: loK}, {Lo: loK, Hi: hiK}, {Lo: hiK}}, {{Lo: loK}}} {
				for _, size := range []int{1, 2} {
					for _, lanes := range []int{1, 4} {
						c := &ranges.Cutter{DB: db.DB, Table: "`" + db.Name + "`.`e`", Key: key,
							Size: func() int { return size }, EstimatedRows: int64(len(rows)), Lanes: lanes, Within: within}
						out := make(chan ranges.Span)
						errc := make(chan error, 1)
						go func() { errc <- c.Run(context.Background(), out); close(out) }()
						got, spans := 0, 0
						for sp := range out {
							spans++
							if spans > 1000 {
								t.Fatalf("%s %v size %d lanes %d within %v: more than 1000 spans", typ, rows, size, lanes, within)
							}
							where, args := sp.Where(key)
							var n int
							if err := db.QueryRow("SELECT COUNT(*) FROM e WHERE "+where, args...).Scan(&n); err != nil {
								t.Fatal(err)
							}
							c.Observe(sp.Width, int64(n))
							got += n
						}
						if err := <-errc; err != nil {
							t.Fatal(err)
						}
						want := len(rows)
						if within != nil && len(within) == 1 {
							want = 0 // (lo, open): every row but lo
							for _, v := range rows {
								if v != lo {
									want++
								}
							}
						}
						if got != want {
							t.Errorf("%s %v size %d lanes %d within %v: the spans hold %d rows, want %d", typ, rows, size, lanes, within, got, want)
						}
					}
				}
			}
		}
	}
}

// TestStringKeysTile: the keyset walk over string keys whose
// collations equate or pad values (trailing spaces, case, NO PAD on CHAR),
// size 1 and 2: the spans hold every row once and the walk ends.
func TestStringKeysTile(t *testing.T) {
	db := testdb.New(t)
	colls := []string{"utf8mb4_bin", "utf8mb4_general_ci", "latin1_swedish_ci"}
	if db.Flavor == "mariadb" {
		// CHAR keys in these NO PAD collations are refused by the
		// preflight (checkCharNoPadKey): only their VARCHAR keys are cut.
		colls = append(colls, "utf8mb4_nopad_bin", "latin1_nopad_bin", "utf8mb4_0900_bin", "utf8mb4_general_nopad_ci", "utf8mb4_uca1400_ai_ci", "utf8mb4_uca1400_nopad_as_cs")
	} else {
		colls = append(colls, "utf8mb4_0900_ai_ci", "utf8mb4_0900_as_cs")
	}
	vals := []string{"", " ", "  ", "a", "a ", " a", "A", "b", "B ", "\t", "ß", "ss", "é", "e", "z", "\x00", "~"}
	for _, coll := range colls {
		cs := "utf8mb4"
		if coll[:6] == "latin1" {
			cs = "latin1"
		}
		for _, kind := range []string{"CHAR(4)", "VARCHAR(4)", "INT, s2 VARCHAR(4)", "INT, s2 CHAR(4)"} {
			if strings.HasPrefix(kind, "CHAR") || strings.HasSuffix(kind, "CHAR(4)") && !strings.HasSuffix(kind, "VARCHAR(4)") {
				if db.Flavor == "mariadb" && (strings.Contains(coll, "_nopad_") || strings.Contains(coll, "_0900_")) {
					continue // refused by the preflight
				}
			}
			ddl := fmt.Sprintf("CREATE TABLE s (s %s CHARACTER SET %s COLLATE %s NOT NULL, PRIMARY KEY (s))", kind, cs, coll)
			if strings.HasPrefix(kind, "INT, s2 ") {
				ddl = fmt.Sprintf("CREATE TABLE s (s INT NOT NULL, s2 %s CHARACTER SET %s COLLATE %s NOT NULL, PRIMARY KEY (s, s2))", strings.TrimPrefix(kind, "INT, s2 "), cs, coll)
			}
			db.MustExec(t, "DROP TABLE IF EXISTS s", ddl)
			for i, v := range vals {
				if strings.HasPrefix(kind, "INT, s2 ") {
					db.Exec("INSERT IGNORE INTO s VALUES (?, ?)", i%3, v)
				} else {
					db.Exec("INSERT IGNORE INTO s VALUES (?)", v)
				}
			}
			var total int
			db.QueryRow("SELECT COUNT(*) FROM s").Scan(&total)
			_, key := db.Mapping(t, "s", "s", false)
			for _, size := range []int{1, 2} {
				c := &ranges.Cutter{DB: db.DB, Table: "`" + db.Name + "`.`s`", Key: key, Size: func() int { return size }}
				out := make(chan ranges.Span)
				errc := make(chan error, 1)
				ctx, cancel := context.WithCancel(context.Background())
				go func() { errc <- c.Run(ctx, out); close(out) }()
				got, spans := 0, 0
				for sp := range out {
					spans++
					if spans > 200 {
						cancel()
						for range out {
						}
						t.Fatalf("%s %s size %d: more than 200 spans for %d rows (at (%v, %v])", kind, coll, size, total, sp.Lo, sp.Hi)
					}
					where, args := sp.Where(key)
					var n int
					if err := db.QueryRow("SELECT COUNT(*) FROM s WHERE "+where, args...).Scan(&n); err != nil {
						t.Fatal(err)
					}
					got += n
				}
				cancel()
				if err := <-errc; err != nil {
					t.Fatal(err)
				}
				if got != total {
					t.Errorf("%s %s size %d: the spans hold %d rows, the table %d", kind, coll, size, got, total)
				}
			}
		}
	}
}
