package migration_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/testdb"
	"github.com/sluicedb/sluice/migration"
)

// onOwnSession runs stmts in order on one connection of db (session
// settings hold for the statements after them).
func onOwnSession(t *testing.T, db *testdb.DB, stmts ...string) {
	t.Helper()
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Error(err)
		return
	}
	defer conn.Close()
	for _, q := range stmts {
		if _, err := conn.ExecContext(context.Background(), q); err != nil {
			t.Errorf("%s: %v", q, err)
		}
	}
}

// TestTriggerCaptureUnloggedWritesKeepReplicas: writes from a session with
// sql_log_bin=0 during a run by triggers. Their queue rows are not in the
// binlog, and sluice's logged deletes of them stopped the replica's applier
// (error 1032, "Can't find record in '_t_chg'"). Such rows now stay in the
// queue until it is dropped: the replica applies everything, and the new
// table holds the unlogged changes, as the original did.
func TestTriggerCaptureUnloggedWritesKeepReplicas(t *testing.T) {
	reps := testdb.Replicas(t)
	db := tableT(t, 3000)
	rep := openReplica(t, reps[0])
	caughtUp(t, db.DB, rep)
	cfg := config(t, db, "t", "ADD COLUMN x INT")
	cfg.Capture = migration.CaptureTriggers
	cfg.OnPhase = func(phase string) {
		if phase == "copy" {
			onOwnSession(t, db, "SET SESSION sql_log_bin = 0", "UPDATE t SET v = -v WHERE id <= 50",
				"DELETE FROM t WHERE id BETWEEN 2990 AND 3000", "INSERT INTO t (id, v) VALUES (5000, 1)")
		}
	}
	migrate(t, cfg)
	var rows, negative int
	if err := db.QueryRow("SELECT COUNT(*), COALESCE(SUM(v < 0), 0) FROM t").Scan(&rows, &negative); err != nil {
		t.Fatal(err)
	}
	if rows != 2990 || negative != 50 {
		t.Errorf("the new table holds %d rows, %d negated; want 2990 and 50", rows, negative)
	}
	caughtUp(t, db.DB, rep) // fails with the applier's error if it stopped
}

// TestTriggerCaptureStatementWritesStop: a write in statement format during a
// run by triggers is replayed on the replicas with the capture's triggers,
// whose queue rows of their own then collide with the queue's logged changes
// and stop the appliers (seen from outside: error 1062 on the queue's key,
// while sluice waited for the replica). MariaDB's triggers record the
// session's format and the run stops, the original intact; MySQL warns on
// every read of binlog_format, so there they do not look (README).
func TestTriggerCaptureStatementWritesStop(t *testing.T) {
	db := tableT(t, 3000)
	if db.Flavor != dbconn.MariaDB {
		t.Skip("the capture's triggers read binlog_format on MariaDB only")
	}
	cfg := config(t, db, "t", "ADD COLUMN x INT")
	cfg.Capture = migration.CaptureTriggers
	cfg.OnPhase = func(phase string) {
		if phase == "copy" {
			onOwnSession(t, db, "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ", "SET SESSION binlog_format = 'STATEMENT'", "UPDATE t SET v = v + 1 WHERE id = 7")
		}
	}
	_, err := mustRunner(t, cfg).Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "statement-format write") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("got %v, want a one-line stop naming the statement-format write", err)
	}
	if tables := db.Tables(t); !slices.Equal(tables, []string{"t"}) {
		t.Errorf("tables after the stop: %v", tables)
	}
	if trs := allTriggers(t, db); len(trs) > 0 {
		t.Errorf("triggers left: %v", trs)
	}
	var v int
	if err := db.QueryRow("SELECT v FROM t WHERE id = 7").Scan(&v); err != nil || v != 8 {
		t.Errorf("row 7 holds %d (%v), want 8", v, err)
	}
}
