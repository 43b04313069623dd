package migration_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/testdb"
	"github.com/sluicedb/sluice/migration"
)

// TestStatementQueuedBeforeRename: another session's statement that takes
// the whole table (a TRUNCATE, LOCK TABLES ... WRITE, an ALTER) asks for the
// original while the cut-over holds its locks, before the RENAME is sent.
// Whatever sluice does, that statement must act on the table the application
// knows by the name once it is done: a TRUNCATE must leave it empty, a row
// written under LOCK TABLES must be in it, an ALTER's column must be on it.
// On MariaDB the server grants queued exclusive requests in their order, so a
// RENAME sent after such a statement and let go would let it run on the table
// about to become the old one.
func TestStatementQueuedBeforeRename(t *testing.T) {
	cases := []struct {
		name  string
		stmts []string
		check func(t *testing.T, db *testdb.DB)
	}{
		{"truncate", []string{"TRUNCATE TABLE t"}, func(t *testing.T, db *testdb.DB) {
			if n := count(t, db, "t"); n != 0 {
				t.Errorf("t holds %d rows after a TRUNCATE that succeeded", n)
			}
		}},
		{"lock-tables-write", []string{"LOCK TABLES t WRITE", "INSERT INTO t (id, v) VALUES (1000001, 7)", "DELETE FROM t WHERE id = 5", "UNLOCK TABLES"},
			func(t *testing.T, db *testdb.DB) {
				var n int
				if err := db.QueryRow("SELECT COUNT(*) FROM t WHERE id = 1000001 OR id = 5").Scan(&n); err != nil || n != 1 {
					t.Errorf("t does not hold what was written under LOCK TABLES t WRITE (%d rows of 1000001 and 5, %v)", n, err)
				}
				if n := count(t, db, "t"); n != 2000 {
					t.Errorf("t holds %d rows, want 2000", n)
				}
			}},
		{"alter", []string{"ALTER TABLE t ADD COLUMN late INT"}, func(t *testing.T, db *testdb.DB) {
			if got := columns(t, db, "t"); !strings.Contains(got, "late") {
				t.Errorf("t has columns %s: the ALTER that succeeded is not on it", got)
			}
		}},
	}
	if flavor := testdb.New(t).Flavor; flavor == dbconn.MariaDB {
		cases = append(cases, struct {
			name  string
			stmts []string
			check func(t *testing.T, db *testdb.DB)
		}{"set-statement-truncate", []string{"SET STATEMENT lock_wait_timeout=60 FOR TRUNCATE TABLE t"}, cases[0].check})
	}
	// Where performance_schema is off, the session list tells.
	for _, c := range slices.Clone(cases) {
		c.name += "/session-list"
		cases = append(cases, c)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			db := tableT(t, 2000)
			if strings.HasSuffix(c.name, "/session-list") {
				migration.SessionListOnly(db.Name)
			}
			var log testdb.SyncBuffer
			cfg := config(t, db, "t", "ADD COLUMN x INT")
			cfg.Logger = slog.New(slog.NewTextHandler(&log, nil))
			other, err := db.Conn(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()
			var otherID int64
			if err := other.QueryRowContext(context.Background(), "SELECT CONNECTION_ID()").Scan(&otherID); err != nil {
				t.Fatal(err)
			}
			stmtErr := make(chan error, 1)
			queued := false
			migration.AtRenameOnce(db.Name, func() {
				go func() { stmtErr <- runAll(other, c.stmts) }()
				queued = waitsForMDL(db, otherID, 5*time.Second)
			})
			res, runErr := mustRunner(t, cfg).Run(context.Background())
			var serr error
			select {
			case serr = <-stmtErr:
			case <-time.After(30 * time.Second):
				t.Fatalf("the session's statements did not end (the run: %v)", runErr)
			}
			if !queued {
				t.Fatalf("the session's %q was never seen waiting on the cut-over's locks: the test proves nothing", c.stmts[0])
			}
			if serr != nil {
				t.Fatalf("the session's statements failed: %v", serr)
			}
			t.Logf("run: %v; path %v", runErr, res.Path)
			c.check(t, db)
			if runErr == nil && !strings.Contains(columns(t, db, "t"), "x") {
				t.Errorf("the run succeeded, but t has columns %s", columns(t, db, "t"))
			}
			if db.Flavor == dbconn.MariaDB && runErr == nil && !strings.Contains(log.String(), "could run on") {
				t.Errorf("the cut-over never saw the statement queued before its RENAME:\n%s", log.String())
			}
		})
	}
}

// runAll runs stmts on c in order.
func runAll(c *sql.Conn, stmts []string) error {
	for _, s := range stmts {
		if _, err := c.ExecContext(context.Background(), s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	return nil
}

// waitsForMDL reports whether connection id is seen waiting for a metadata
// lock within d.
func waitsForMDL(db *testdb.DB, id int64, d time.Duration) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(2 * time.Millisecond) {
		var state sql.NullString
		if db.QueryRow("SELECT STATE FROM information_schema.PROCESSLIST WHERE ID = ?", id).Scan(&state) == nil &&
			strings.Contains(strings.ToLower(state.String), "metadata lock") {
			return true
		}
	}
	return false
}

// count is table's row count.
func count(t *testing.T, db *testdb.DB, table string) int {
	t.Helper()
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM " + table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
