package migration_test

// --capture=triggers against hostile inputs: key names, late commits,
// rebuilds, leftovers of dead runs, prepared XA transactions, key changes
// that keep the key equal.

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/capture"
	"github.com/sluicedb/sluice/internal/rowkey"
	"github.com/sluicedb/sluice/internal/schema"
	"github.com/sluicedb/sluice/internal/testdb"
	"github.com/sluicedb/sluice/migration"
)

// installCapture makes table's queue and capture triggers as a run of
// --capture=triggers does (capture.Queue.Create issues the same statements
// as startTriggerCapture).
func installCapture(t *testing.T, db *testdb.DB, table string) *capture.Queue {
	t.Helper()
	ctx := context.Background()
	tbl, err := schema.Load(ctx, db.DB, db.Name, table)
	if err != nil {
		t.Fatal(err)
	}
	key, err := rowkey.NewCols(tbl.PKColumns())
	if err != nil {
		t.Fatal(err)
	}
	q, err := capture.New(tbl, key, table)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Create(ctx, db.DB); err != nil {
		t.Fatal(err)
	}
	return q
}

// TestInsertIDUnchanged: the queue's AUTO_INCREMENT must not leak
// into the application's insert id (OK packet or LAST_INSERT_ID()).
func TestInsertIDUnchanged(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE t (id INT AUTO_INCREMENT PRIMARY KEY, u INT UNIQUE, v INT)",
		"INSERT INTO t (id, u, v) VALUES (1000, 1, 1)")
	installCapture(t, db, "t")
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, tc := range []struct {
		q       string
		ok, lid int64
	}{
		{"INSERT INTO t (u, v) VALUES (2, 2)", 1001, 1001},
		{"INSERT INTO t (u, v) VALUES (3, 3), (4, 4)", 1002, 1002},
		{"INSERT INTO t (u, v) VALUES (1, 9) ON DUPLICATE KEY UPDATE id = LAST_INSERT_ID(id), v = v + 1", 1000, 1000},
		{"UPDATE t SET v = v + 1 WHERE u = 2", 0, 1000},
	} {
		res, err := conn.ExecContext(ctx, tc.q)
		if err != nil {
			t.Fatalf("%s: %v", tc.q, err)
		}
		id, _ := res.LastInsertId()
		var lid int64
		conn.QueryRowContext(ctx, "SELECT LAST_INSERT_ID()").Scan(&lid)
		if id != tc.ok || lid != tc.lid {
			t.Errorf("%s: insert id %d, LAST_INSERT_ID() %d; want %d, %d", tc.q, id, lid, tc.ok, tc.lid)
		}
	}
}

// TestLaxWritesStillSucceed: values a non-strict application session
// can store in a key column must still be recorded by the triggers, whose
// sql_mode is sluice's strict one (the application's write must not fail).
func TestLaxWritesStillSucceed(t *testing.T) {
	for _, tc := range []struct{ name, create, mode, write string }{
		{"enum error value", "CREATE TABLE t (e ENUM('a','b') NOT NULL, n INT NOT NULL, PRIMARY KEY (e, n))", "", "INSERT INTO t VALUES ('zz', 1)"},
		{"invalid date", "CREATE TABLE t (d DATE NOT NULL, n INT NOT NULL, PRIMARY KEY (d, n))", "ALLOW_INVALID_DATES", "INSERT INTO t VALUES ('2020-02-30', 1)"},
		{"zero in date", "CREATE TABLE t (d DATE NOT NULL, n INT NOT NULL, PRIMARY KEY (d, n))", "", "INSERT INTO t VALUES ('2020-00-00', 1)"},
		{"truncated string", "CREATE TABLE t (s VARCHAR(3) NOT NULL PRIMARY KEY)", "", "INSERT INTO t VALUES ('abcdef')"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := testdb.New(t)
			db.MustExec(t, tc.create)
			installCapture(t, db, "t")
			ctx := context.Background()
			conn, err := db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := conn.ExecContext(ctx, "SET SESSION sql_mode = ?", tc.mode); err != nil {
				t.Fatal(err)
			}
			if _, err = conn.ExecContext(ctx, tc.write); err != nil {
				t.Errorf("application write in sql_mode %q fails with the capture triggers: %v", tc.mode, err)
			}
			if rows, queue := db.Dump(t, "t", "*", "1"), db.Dump(t, "_t_chg", "*", capture.SeqColumn); len(queue) != len(rows) {
				t.Errorf("rows %v, queue %v", rows, queue)
			}
		})
	}
}

// TestKeyColumnNamedSeq: a key column named like an ordinary sequence
// column (SEQ) is captured like any other; one with the queue's own
// sequence name is refused in preflight, before anything is made.
func TestKeyColumnNamedSeq(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE t (SEQ INT PRIMARY KEY, v INT)", "INSERT INTO t VALUES (1, 1), (2, 2)")
	cfg := config(t, db, "t", "ADD COLUMN x INT")
	cfg.Capture, cfg.DropOld = migration.CaptureTriggers, true
	migrate(t, cfg)
	if got := db.Dump(t, "t", "SEQ, v", "SEQ"); fmt.Sprint(got) != "[['1' '1'] ['2' '2']]" {
		t.Errorf("rows after the migration: %v", got)
	}

	db.MustExec(t, "CREATE TABLE u (_SLUICE_SEQ INT PRIMARY KEY, v INT)", "INSERT INTO u VALUES (1, 1)")
	cfg = config(t, db, "u", "ADD COLUMN x INT")
	cfg.Capture = migration.CaptureTriggers
	var phases []string
	cfg.OnPhase = func(p string) { phases = append(phases, p) }
	_, err := mustRunner(t, cfg).Run(context.Background())
	if !errors.Is(err, migration.ErrPreflight) || !strings.Contains(err.Error(), "_SLUICE_SEQ") {
		t.Errorf("a key column named %s: %v after the phases %v, want a refusal in preflight", capture.SeqColumn, err, phases)
	}
	if tables := db.Tables(t); !slices.Equal(tables, []string{"t", "u"}) {
		t.Errorf("tables left: %v", tables)
	}
}

// TestLateLowerSeqCommit: a transaction takes a queue number, then
// later numbers are written, committed and polled (the poller's cursor
// passes it), and only then does it commit. The poller's range read never
// sees it; the drain under the checksum's lock must.
func TestLateLowerSeqCommit(t *testing.T) {
	db := tableT(t, 3000)
	ctx := context.Background()
	late, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer late.Close()
	cfg := config(t, db, "t", "ADD COLUMN x INT")
	cfg.Capture = migration.CaptureTriggers
	var failed error
	cfg.OnPhase = func(p string) {
		switch p {
		case "copy": // the triggers exist
			for _, q := range []string{"BEGIN", "UPDATE t SET v = -1 WHERE id = 7", "DELETE FROM t WHERE id = 8", "INSERT INTO t VALUES (5001, 5001)"} {
				if _, err := late.ExecContext(ctx, q); err != nil {
					failed = err
				}
			}
			db.MustExec(t, "UPDATE t SET v = -2 WHERE id = 2900", "INSERT INTO t VALUES (5002, 5002)")
			time.Sleep(200 * time.Millisecond) // the poller reads past the open transaction's numbers
		case "checksum":
			if _, err := late.ExecContext(ctx, "COMMIT"); err != nil {
				failed = err
			}
		}
	}
	res, err := mustRunner(t, cfg).Run(ctx)
	if err != nil || failed != nil {
		t.Fatalf("migration: %v (writes: %v)", err, failed)
	}
	var v, n8, n int
	db.QueryRow("SELECT v FROM t WHERE id = 7").Scan(&v)
	db.QueryRow("SELECT COUNT(*) FROM t WHERE id = 8").Scan(&n8)
	db.QueryRow("SELECT COUNT(*) FROM t WHERE id IN (5001, 5002)").Scan(&n)
	if v != -1 || n8 != 0 || n != 2 {
		t.Errorf("after the swap: v(7) = %d want -1, rows with id 8: %d want 0, rows 5001/5002: %d want 2", v, n8, n)
	}
	t.Logf("keys applied %d", res.KeysApplied)
}

// TestOptimizeDuringRun: OPTIMIZE TABLE during a run by triggers gives the
// table a new storage id, as a TRUNCATE does (which fires no trigger): the
// run stops before the swap, says so in words that name the rebuild, and
// leaves the original as it was, with no trigger or table of sluice's.
func TestOptimizeDuringRun(t *testing.T) {
	db := tableT(t, 2000)
	before := db.Dump(t, "t", "id, v", "id")
	cfg := config(t, db, "t", "ADD COLUMN x INT")
	cfg.Capture = migration.CaptureTriggers
	cfg.OnPhase = func(p string) {
		if p == "cut-over" {
			db.MustExec(t, "OPTIMIZE TABLE t")
		}
	}
	_, err := mustRunner(t, cfg).Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "rebuilt (OPTIMIZE TABLE") {
		t.Fatalf("a run by triggers with an OPTIMIZE TABLE before its cut-over: %v, want a stop that names the rebuild", err)
	}
	if after := db.Dump(t, "t", "id, v", "id"); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Error("the original changed")
	}
	if trs := allTriggers(t, db); len(trs) > 0 {
		t.Errorf("triggers left: %v", trs)
	}
	if tables := db.Tables(t); !slices.Equal(tables, []string{"t"}) {
		t.Errorf("tables left: %v", tables)
	}
}

// TestRestartUnreadableCheckpointKeepsCaptureTriggers: a dead run by
// triggers left its queue and triggers, and a checkpoint sluice cannot
// read. Without --restart the run refuses and changes nothing; with it
// (from the binlog, carrying triggers) the capture triggers go before the
// table's triggers are read as the user's, so none is carried to the new
// table. A leftover queue that a trigger of another name writes to (a copy
// carried by an older run) is refused, not dropped: dropping it would fail
// every write that fires that trigger.
func TestRestartUnreadableCheckpointKeepsCaptureTriggers(t *testing.T) {
	db := tableT(t, 300)
	installCapture(t, db, "t")
	unreadable := []string{"CREATE TABLE IF NOT EXISTS _t_ckpt (id TINYINT UNSIGNED NOT NULL PRIMARY KEY, body LONGTEXT NOT NULL, at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)) COMMENT='sluice checkpoint of the migration of t'",
		`REPLACE INTO _t_ckpt (id, body) VALUES (1, '{"format": "not a number"')`}
	db.MustExec(t, unreadable...)
	db.MustExec(t, "UPDATE t SET v = v + 1 WHERE id < 5")
	before := db.Dump(t, "t", "id, v", "id")

	cfg := config(t, db, "t", "ADD COLUMN x INT")
	cfg.CarryTriggers, cfg.DropOld = true, true
	if _, err := mustRunner(t, cfg).Run(context.Background()); !errors.Is(err, migration.ErrPreflight) {
		t.Fatalf("an unreadable checkpoint without --restart: %v, want a refusal", err)
	}
	if trs := allTriggers(t, db); len(trs) != 3 {
		t.Fatalf("the refusal changed the triggers: %v", trs)
	}

	cfg.Restart = true
	migrate(t, cfg)
	if trs := allTriggers(t, db); len(trs) > 0 {
		t.Errorf("after --restart the triggers are %v: sluice's capture triggers were carried as the user's", trs)
	}
	if tables := db.Tables(t); !slices.Equal(tables, []string{"t"}) {
		t.Errorf("tables left: %v", tables)
	}
	if after := db.Dump(t, "t", "id, v", "id"); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Error("the rows changed")
	}

	// A queue left with a copy of a capture trigger under another name.
	q := installCapture(t, db, "t")
	db.MustExec(t, "DROP TRIGGER "+q.Triggers[0],
		"CREATE TRIGGER t_chg_i AFTER INSERT ON t FOR EACH ROW INSERT INTO `_t_chg` (id) VALUES (NEW.id)")
	db.MustExec(t, unreadable...)
	later := config(t, db, "t", "ADD COLUMN y INT")
	later.Restart = true
	_, err := mustRunner(t, later).Run(context.Background())
	if !errors.Is(err, migration.ErrPreflight) || !strings.Contains(err.Error(), "trigger t_chg_i of t writes to _t_chg") {
		t.Errorf("a leftover queue another trigger writes to: %v, want a refusal naming the trigger", err)
	}
	if _, err := db.Exec("INSERT INTO t (id, v) VALUES (1001, 1)"); err != nil {
		t.Errorf("after the refused run, the application's write to t fails: %v", err)
	}
}

// TestRestartLeavesAForeignCheckpointName: a table of the user's under the
// checkpoint's name (_t_ckpt) is neither read nor dropped, --restart or not:
// the run refuses in one line, and every table stays as it was.
func TestRestartLeavesAForeignCheckpointName(t *testing.T) {
	db := tableT(t, 300)
	db.MustExec(t, "CREATE TABLE _t_ckpt (x INT)", "INSERT INTO _t_ckpt VALUES (42)")
	before := db.Dump(t, "t", "id, v", "id")
	for _, restart := range []bool{false, true} {
		cfg := config(t, db, "t", "ADD COLUMN c INT")
		cfg.Method, cfg.Restart = "copy", restart
		_, err := mustRunner(t, cfg).Run(context.Background())
		if !errors.Is(err, migration.ErrPreflight) || !strings.Contains(err.Error(), "is a table sluice did not make") {
			t.Errorf("restart %v: %v, want a refusal naming _t_ckpt", restart, err)
		}
		if got := db.Dump(t, "_t_ckpt", "x", "x"); len(got) != 1 || strings.Trim(got[0][0], "'") != "42" {
			t.Errorf("restart %v: _t_ckpt holds %v, want its row 42", restart, got)
		}
		if after := db.Dump(t, "t", "id, v", "id"); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Errorf("restart %v: t changed", restart)
		}
		if tables := db.Tables(t); !slices.Equal(tables, []string{"_t_ckpt", "t"}) {
			t.Errorf("restart %v: tables %v", restart, tables)
		}
	}
}

// TestPreparedXAAtCutover: an XA transaction that changes a row after
// the triggers exist, is prepared, and whose client goes away (a
// transaction manager that commits later). Its queue row is uncommitted, so
// no drain sees it, and nothing in sluice's cut-over looks for prepared XA
// transactions. On MariaDB 11.8 such a transaction holds no metadata lock on
// the table (LOCK TABLES is granted), but the RENAME waits on its InnoDB
// table lock, so the swap fails and the change is kept; the test checks
// that it is not lost whatever the server.
func TestPreparedXAAtCutover(t *testing.T) {
	db := tableT(t, 2000)
	ctx := context.Background()
	xid := "'rv" + db.Name[len(db.Name)-8:] + "'"
	prepared := false
	defer func() {
		if prepared {
			db.Exec("XA ROLLBACK " + xid)
		}
	}()
	cfg := config(t, db, "t", "ADD COLUMN x INT")
	cfg.Capture = migration.CaptureTriggers
	cfg.LockDeadline = 5 * time.Second
	cfg.OnPhase = func(p string) {
		if p != "copy" {
			return
		}
		a, err := db.Conn(ctx)
		if err != nil {
			t.Error(err)
			return
		}
		for _, q := range []string{"XA START " + xid, "UPDATE t SET v = -5 WHERE id = 3", "XA END " + xid, "XA PREPARE " + xid} {
			if _, err := a.ExecContext(ctx, q); err != nil {
				t.Errorf("%s: %v", q, err)
				return
			}
		}
		prepared = true
		a.Raw(func(any) error { return driver.ErrBadConn }) // the transaction manager's connection goes
		a.Close()
	}
	done := make(chan error, 1)
	var res migration.Result
	go func() {
		var err error
		res, err = mustRunner(t, cfg).Run(ctx)
		done <- err
	}()
	var err error
	select {
	case err = <-done:
	case <-time.After(3 * time.Minute):
		t.Fatal("the migration did not end in 3 minutes")
	}
	t.Logf("migration: swapped %v, err %v", res.Swapped, err)
	if _, cerr := db.Exec("XA COMMIT " + xid); cerr != nil {
		t.Fatalf("XA COMMIT: %v", cerr)
	}
	prepared = false
	var v, old int
	db.QueryRow("SELECT v FROM t WHERE id = 3").Scan(&v)
	if res.Swapped {
		db.QueryRow("SELECT v FROM _t_old WHERE id = 3").Scan(&old)
	}
	t.Logf("after XA COMMIT: t.v(3) = %d, _t_old.v(3) = %d", v, old)
	if v != -5 {
		t.Errorf("the committed XA transaction's update is not in the migrated table t (v = %d, want -5); it went to _t_old (v = %d)", v, old)
	}
}

// TestSecondRunAfterKillInTriggerMode: a run by triggers dies just
// after its triggers are made (kill -9 at the failpoint), the application
// writes through them; a second run with another ALTER, then one with the
// first run's ALTER. What does each do, and what is left?
func TestSecondRunAfterKillInTriggerMode(t *testing.T) {
	if os.Getenv("SLUICE_RESUME_CHILD") != "" {
		t.Skip()
	}
	db := tableT(t, 3000)
	job := childJob{DSN: os.Getenv(testdb.Env), Database: db.Name, Table: "t", Alter: "ADD COLUMN extra INT NOT NULL DEFAULT 7",
		Every: time.Second, Capture: migration.CaptureTriggers, Die: "capture-started"}
	c := startChild(t, job)
	<-c.done
	if code := c.cmd.ProcessState.ExitCode(); code != 9 {
		t.Fatalf("the child did not die (exit %d):\n%s", code, c.out)
	}
	db.MustExec(t, "UPDATE t SET v = -v WHERE id <= 10", "DELETE FROM t WHERE id = 11", "INSERT INTO t VALUES (9001, 9001)")
	t.Logf("after the death: triggers %v, tables %v", allTriggers(t, db), db.Tables(t))

	other := config(t, db, "t", "ADD COLUMN other INT")
	other.Capture = migration.CaptureTriggers
	_, err := mustRunner(t, other).Run(context.Background())
	t.Logf("second run, another ALTER: %v", err)
	t.Logf("then: triggers %v, tables %v", allTriggers(t, db), db.Tables(t))
	if err != nil && strings.Contains(err.Error(), "to resume it") {
		t.Logf("NOTE: the refusal offers to resume a run by triggers, which never resumes")
	}

	same := config(t, db, "t", job.Alter)
	same.Capture = migration.CaptureTriggers
	res, err := mustRunner(t, same).Run(context.Background())
	t.Logf("third run, the first ALTER: %v (rows copied %d, already done %v)", err, res.RowsCopied, res.AlreadyDone)
	if err != nil {
		t.Fatal(err)
	}
	var sum, n, extra int
	db.QueryRow("SELECT SUM(v), COUNT(*), SUM(extra <> 7) FROM t").Scan(&sum, &n, &extra)
	want := 3000*3001/2 - 2*(10*11/2) - 11 + 9001
	if sum != want || n != 3000 || extra != 0 {
		t.Errorf("after the third run: sum(v) %d want %d, rows %d want 3000, rows without the default %d", sum, want, n, extra)
	}
	if trs := allTriggers(t, db); len(trs) > 0 {
		t.Errorf("triggers left: %v", trs)
	}
	t.Logf("tables at the end: %v", db.Tables(t))
}

// TestKeyChangesKeepBytes: key updates that keep the key equal under
// its collation or type but change its bytes (case, a trailing space in a
// PAD SPACE collation, BINARY padding, DECIMAL scale), made while the copy
// runs by triggers: the new table must hold the original's bytes.
func TestKeyChangesKeepBytes(t *testing.T) {
	for _, tc := range []struct{ name, create, fill string }{
		{"varchar ci", "CREATE TABLE t (k VARCHAR(12) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL PRIMARY KEY, v INT)", "CONCAT('k', n), n"},
		{"binary", "CREATE TABLE t (k VARBINARY(12) NOT NULL PRIMARY KEY, v INT)", "CONCAT('k', n), n"},
		{"binary padded", "CREATE TABLE t (k BINARY(8) NOT NULL PRIMARY KEY, v INT)", "CONCAT('k', n), n"},
		{"decimal", "CREATE TABLE t (k DECIMAL(30,10) NOT NULL PRIMARY KEY, v INT)", "n + 0.0000000001, n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := testdb.New(t)
			db.MustExec(t, tc.create)
			db.Fill(t, "t", 2000, tc.fill)
			cfg := config(t, db, "t", "ADD COLUMN x INT")
			cfg.Capture = migration.CaptureTriggers
			cfg.OnPhase = func(p string) {
				if p != "copy" {
					return
				}
				switch tc.name {
				case "varchar ci":
					db.MustExec(t, "UPDATE t SET k = 'K5' WHERE k = 'k5'", "UPDATE t SET k = 'k6 ' WHERE k = 'k6'",
						"DELETE FROM t WHERE k = 'k1999 '", "UPDATE t SET k = 'K1999' WHERE k = 'k7'", "UPDATE t SET k = 'k8' WHERE k = 'k8 '")
				case "binary":
					db.MustExec(t, "UPDATE t SET k = 'k5\\0' WHERE k = 'k5'", "UPDATE t SET k = 'K6' WHERE k = 'k6'")
				case "binary padded":
					db.MustExec(t, "UPDATE t SET k = 'k5\\0\\0' WHERE k = 'k5'", "UPDATE t SET k = 'zz' WHERE k = 'k1999\\0\\0\\0'", "UPDATE t SET k = 'k7\\0\\0\\0\\0\\0\\1' WHERE k = 'k7\\0\\0\\0\\0\\0\\0'")
				case "decimal":
					db.MustExec(t, "UPDATE t SET k = k + 0.0000000001 WHERE k < 3", "UPDATE t SET k = 99999 WHERE k > 2000")
				}
			}
			before := func() [][]string { return db.Dump(t, "t", "HEX(k), v", "HEX(k)") }
			res, err := mustRunner(t, cfg).Run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			got := before()
			want := db.Dump(t, "_t_old", "HEX(k), v", "HEX(k)")
			if len(got) != len(want) {
				t.Fatalf("%d rows, the old table %d", len(got), len(want))
			}
			for i := range got {
				if !slices.Equal(got[i], want[i]) {
					t.Errorf("row %d: %v, the old table %v", i, got[i], want[i])
				}
			}
			t.Logf("keys applied %d", res.KeysApplied)
		})
	}
}

// TestQueueOfAnotherDatabase: a run by triggers of another database's table
// of the same name, alive or dead (its triggers and queue left), is not this
// table's leftover: this run neither refuses nor touches it.
func TestQueueOfAnotherDatabase(t *testing.T) {
	db := tableT(t, 300)
	other := testdb.New(t)
	other.MustExec(t, "CREATE TABLE t (id INT PRIMARY KEY, v INT)")
	installCapture(t, other, "t")
	cfg := config(t, db, "t", "ADD COLUMN x INT")
	cfg.Capture, cfg.DropOld = migration.CaptureTriggers, true
	migrate(t, cfg)
	if trs := allTriggers(t, other); len(trs) != 3 {
		t.Errorf("the other database's capture triggers are now %v", trs)
	}
	if tables := other.Tables(t); !slices.Equal(tables, []string{"_t_chg", "t"}) {
		t.Errorf("the other database's tables are now %v", tables)
	}
}
