package migration_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/sluicedb/sluice/internal/testdb"
)

// TestUnloggedChangeStopsTheSwap: a TRUNCATE or an ALTER of the original run
// with sql_log_bin=0 while the cut-over waits is not in the binlog. The swap
// undid it with exit 0 (the truncated rows came back, the added column went);
// the cut-over now compares the original's InnoDB id and definition with
// those read when the capture started, stops, and leaves the original as the
// session left it.
func TestUnloggedChangeStopsTheSwap(t *testing.T) {
	// (OPTIMIZE of a table of the same name in another database does not
	// count: TestRebuildsCounted.)
	for _, c := range []struct {
		name, stmt, says string
		rows             int // the original's rows afterwards
	}{
		{"truncate", "SET SESSION sql_log_bin = 0; TRUNCATE TABLE t", "truncated", 0},
		{"alter", "SET SESSION sql_log_bin = 0; ALTER TABLE t ADD COLUMN q INT DEFAULT 5", "altered", 50},
		{"rebuild-by-rename", "SET SESSION sql_log_bin = 0; CREATE TABLE t2 LIKE t; INSERT INTO t2 SELECT * FROM t WHERE id > 10; RENAME TABLE t TO gone, t2 TO t", "truncated", 40},
		{"drop-index", "SET SESSION sql_log_bin = 0; ALTER TABLE t DROP INDEX v", "altered", 50},
		// A logged OPTIMIZE (another InnoDB id, the same rows) does not
		// hide an unlogged ALTER after it.
		{"optimize-then-alter", "OPTIMIZE TABLE t; SET SESSION sql_log_bin = 0; ALTER TABLE t ADD COLUMN q INT DEFAULT 5", "altered", 50},
		// Nor a TRUNCATE without the binlog, before or after it (its
		// rows came back): the tables are compared again.
		{"optimize-then-truncate", "OPTIMIZE TABLE t; SET SESSION sql_log_bin = 0; TRUNCATE TABLE t", "rebuilt", 0},
		{"truncate-then-optimize", "SET SESSION sql_log_bin = 0; TRUNCATE TABLE t; SET SESSION sql_log_bin = 1; OPTIMIZE TABLE t", "rebuilt", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			db := testdb.New(t)
			db.MustExec(t, "CREATE TABLE t (id INT PRIMARY KEY, v INT, KEY v (v))")
			db.Fill(t, "t", 50, "n, n")
			cfg := config(t, db, "t", "MODIFY v BIGINT")
			cfg.PostponeCutover = true
			cfg.OnPhase = func(phase string) {
				if phase != "postponed" {
					return
				}
				conn, err := db.Conn(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				defer conn.Close()
				for _, q := range append(strings.Split(c.stmt, "; "), "SET SESSION sql_log_bin = 1", "DROP TABLE `_t_cutover`") {
					if _, err := conn.ExecContext(context.Background(), q); err != nil {
						t.Errorf("%s: %v", q, err)
					}
				}
			}
			res, err := mustRunner(t, cfg).Run(context.Background())
			if err == nil || !strings.Contains(err.Error(), c.says) || !strings.Contains(err.Error(), "sql_log_bin") {
				t.Fatalf("migrate: %v (swapped %v), want the unlogged change named", err, res.Swapped)
			}
			if res.Swapped {
				t.Error("the tables were swapped")
			}
			if got := len(db.Dump(t, "t", "id", "id")); got != c.rows {
				t.Errorf("the original holds %d rows, want %d", got, c.rows)
			}
			var typ string
			if err := db.QueryRow("SELECT DATA_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 't' AND COLUMN_NAME = 'v'", db.Name).Scan(&typ); err != nil || typ != "int" {
				t.Errorf("the original's v is %q (%v), want int", typ, err)
			}
		})
	}
}

// TestOptimizeAfterTheChecksum: a logged OPTIMIZE of the original while the
// cut-over is postponed gives it another InnoDB id; the tables are compared
// again before the swap, which then goes ahead with every row.
func TestOptimizeAfterTheChecksum(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE t (id INT PRIMARY KEY, v INT, KEY v (v))")
	db.Fill(t, "t", 500, "n, n")
	cfg := config(t, db, "t", "MODIFY v BIGINT")
	cfg.PostponeCutover = true
	log := &testdb.SyncBuffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(log, nil))
	cfg.OnPhase = func(phase string) {
		if phase == "postponed" {
			db.MustExec(t, "OPTIMIZE TABLE t", "UPDATE t SET v = -1 WHERE id = 7", "DROP TABLE `_t_cutover`")
		}
	}
	res, err := mustRunner(t, cfg).Run(context.Background())
	if err != nil || !res.Swapped {
		t.Fatalf("migrate: %v (swapped %v)", err, res.Swapped)
	}
	if !strings.Contains(log.String(), "compared again before the swap") {
		t.Errorf("the tables were not compared again after the OPTIMIZE:\n%s", log.String())
	}
	var n, v int
	if err := db.QueryRow("SELECT COUNT(*), SUM(v = -1) FROM t").Scan(&n, &v); err != nil || n != 500 || v != 1 {
		t.Errorf("t holds %d rows, %d of them updated (%v), want 500 and 1", n, v, err)
	}
}
