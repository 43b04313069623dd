package migration_test

import (
	"context"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/testdb"
	"github.com/sluicedb/sluice/migration"
)

// TestAddedTimeDefaultOneMoment: columns added with the current time for
// their default (CURRENT_TIMESTAMP(6), CURDATE()) hold, after the server's
// own ALTER, the moment of that ALTER in every row. On the copy path, under
// writers that insert, update and move rows during the copy, every row must
// hold one moment too (it held the moment sluice last copied it), within the
// run.
func TestAddedTimeDefaultOneMoment(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, `CREATE TABLE clk (id BIGINT NOT NULL PRIMARY KEY, v INT NOT NULL, pad VARCHAR(100))`)
	w := &workload{
		table: "clk", pk: []string{"id"}, writers: 6,
		key:    func(n int64) []any { return []any{n} },
		cols:   []string{"v", "pad"},
		gen:    func(r *rand.Rand, n int64) []any { return []any{r.IntN(1e6), strings.Repeat("p", r.IntN(90))} },
		update: applyCopyUpdates,
	}
	var before, after float64
	db.QueryRow("SELECT UNIX_TIMESTAMP(NOW(6))").Scan(&before)
	migrateUnderWorkload(t, db, w, 2*applyCopyRows, "n - 1, n, REPEAT('f', n % 90)",
		"MODIFY v BIGINT NOT NULL, ADD COLUMN at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6), ADD COLUMN d DATE DEFAULT (CURDATE())",
		"id, v, pad", "id", func(cfg *migration.Config) {
			// A row inserted after the swap takes its own time, as after
			// the server's own ALTER: the writers stop before the swap.
			cfg.OnPhase = func(name string) {
				if name == "checksum" {
					w.halt.Store(true)
				}
			}
		})
	db.QueryRow("SELECT UNIX_TIMESTAMP(NOW(6))").Scan(&after)
	var moments, days int
	var at float64
	if err := db.QueryRow("SELECT COUNT(DISTINCT at), COUNT(DISTINCT d), UNIX_TIMESTAMP(MIN(at)) FROM clk").Scan(&moments, &days, &at); err != nil {
		t.Fatal(err)
	}
	if moments != 1 || days != 1 {
		t.Errorf("the rows hold %d moments and %d days, want one of each", moments, days)
	}
	if at < before || at > after {
		t.Errorf("the moment %f is not within the run (%f to %f)", at, before, after)
	}
}

// TestAddedTimeDefaultResumed: a run killed while its cut-over is postponed
// and taken up again keeps the moment of the first: rows changed in between,
// which the second run copies, hold it too.
func TestAddedTimeDefaultResumed(t *testing.T) {
	if os.Getenv("SLUICE_RESUME_CHILD") != "" {
		t.Skip()
	}
	const alter = "ADD COLUMN at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)"
	db := killedWhilePostponed(t, alter, 300*time.Millisecond)
	time.Sleep(50 * time.Millisecond)
	db.MustExec(t, "UPDATE t SET v = -v WHERE id % 100 = 3", "INSERT INTO t (id, v) VALUES (50000, 1)")
	res, err := mustRunner(t, config(t, db, "t", alter)).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !res.Resumed || res.KeysApplied == 0 {
		t.Fatalf("the second run did not resume, or applied no change (resumed %v, applied %d)", res.Resumed, res.KeysApplied)
	}
	var moments, rows int
	if err := db.QueryRow("SELECT COUNT(DISTINCT at), COUNT(*) FROM t").Scan(&moments, &rows); err != nil || moments != 1 || rows != 20001 {
		t.Errorf("%d rows hold %d moments (%v), want 20001 rows and one moment", rows, moments, err)
	}
}
