package migration_test

import (
	"context"
	"database/sql"
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

// allTriggers lists the database's triggers as "table.name", sorted.
func allTriggers(t *testing.T, db *testdb.DB) []string {
	t.Helper()
	return column(t, db, "SELECT CONCAT(EVENT_OBJECT_TABLE, '.', TRIGGER_NAME) FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = DATABASE()")
}

// TestTriggerCaptureWithWriters migrates with --capture=triggers, as an
// account without any replication privilege (PROCESS its only global one), while 8
// writers insert, update and delete: the table ends equal to the replayed
// model of the writes, and neither the queue nor a trigger is left.
func TestTriggerCaptureWithWriters(t *testing.T) {
	db := testdb.New(t)
	sysbenchTable(t, db)
	w := sysbenchWorkload()
	const rows = 20000
	db.MustExec(t, "CREATE TABLE model_ref LIKE t")
	w.load(t, db, "model_ref", rows)

	user := "tc_" + db.Name[len(db.Name)-8:]
	db.MustExec(t, "CREATE USER '"+user+"'@'127.0.0.1' IDENTIFIED BY 'pw-tc1'",
		"GRANT SELECT, INSERT, DELETE, CREATE, DROP, ALTER, LOCK TABLES, TRIGGER ON `"+db.Name+"`.* TO '"+user+"'@'127.0.0.1'",
		"GRANT PROCESS ON *.* TO '"+user+"'@'127.0.0.1'")
	t.Cleanup(func() { db.Exec("DROP USER '" + user + "'@'127.0.0.1'") })
	// CREATE TRIGGER with the binlog on wants SUPER, or this.
	var trust string
	db.QueryRow("SELECT @@global.log_bin_trust_function_creators").Scan(&trust)
	if trust != "1" {
		db.MustExec(t, "SET GLOBAL log_bin_trust_function_creators = 1")
		t.Cleanup(func() { db.Exec("SET GLOBAL log_bin_trust_function_creators = " + trust) })
	}

	stop := make(chan struct{})
	wait := w.run(t, db, stop)
	time.Sleep(100 * time.Millisecond)
	cfg := config(t, db, "t", "MODIFY k BIGINT NOT NULL DEFAULT 0, ADD COLUMN x INT")
	cfg.Capture = migration.CaptureTriggers
	cfg.Conn.User, cfg.Conn.Password = user, "pw-tc1"
	before := w.ops.Load()
	res, err := mustRunner(t, cfg).Run(context.Background())
	during := w.ops.Load() - before
	time.Sleep(100 * time.Millisecond)
	close(stop)
	wait()
	if err != nil {
		t.Fatalf("migration failed: %v", err)
	}
	if during < 50 || res.KeysApplied == 0 {
		t.Fatalf("%d writes during the migration, %d keys applied: the test proves little", during, res.KeysApplied)
	}
	t.Logf("rows copied %d, writes during migration %d, keys applied %d, changed rows verified %d, lock %s",
		res.RowsCopied, during, res.KeysApplied, res.ChangedRowsVerified, res.CutoverLock)
	w.replay(t, db, "model_ref")
	compare(t, db, "t", "model_ref", "id, k, c, pad", "id")
	want := []string{"_t_old", "model_ref", "t"}
	if tables := db.Tables(t); !slices.Equal(tables, want) {
		t.Errorf("tables after the migration: %v, want %v", tables, want)
	}
	if trs := allTriggers(t, db); len(trs) > 0 {
		t.Errorf("triggers left: %v", trs)
	}
}

// TestTriggerCaptureSeesTruncateAndAlter: a TRUNCATE (which fires no
// trigger), an ALTER of the original, or a capture trigger dropped by
// someone else, just before the cut-over, stops the run before the swap; the original keeps what the application did to it
// and no shadow, queue or trigger is left.
func TestTriggerCaptureSeesTruncateAndAlter(t *testing.T) {
	for _, tc := range []struct{ name, stmt, want string }{
		{"truncate", "TRUNCATE TABLE t", "was truncated"},
		{"alter", "ALTER TABLE t ADD COLUMN late INT", "was altered"},
		{"trigger dropped", "DROP TRIGGER _t_chg_u", "2 of the 3 change-capture triggers are on t"},
		{"trigger made again", "", "triggers or their queue _t_chg were dropped and made again"},
		{"queue truncated", "TRUNCATE TABLE _t_chg", "the queue truncated"},
		// Its values gone, its definition and InnoDB id the same.
		{"column dropped and added in place", "ALTER TABLE t DROP COLUMN v, ADD COLUMN v INT, ALGORITHM=INSTANT", "was altered"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := tableT(t, 2000)
			cfg := config(t, db, "t", "ADD COLUMN x INT")
			cfg.Capture = migration.CaptureTriggers
			cfg.OnPhase = func(phase string) {
				if phase != "cut-over" {
					return
				}
				if tc.stmt == "" {
					remakeTrigger(t, db, "_t_chg_u", "UPDATE t SET v = -v WHERE id = 9")
				} else {
					db.MustExec(t, tc.stmt)
				}
				db.MustExec(t, "INSERT INTO t (id, v) VALUES (2001, 5)")
			}
			_, err := mustRunner(t, cfg).Run(context.Background())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error saying the table %s", err, tc.want)
			}
			if tables := db.Tables(t); !slices.Equal(tables, []string{"t"}) {
				t.Errorf("tables after the stop: %v", tables)
			}
			if trs := allTriggers(t, db); len(trs) > 0 {
				t.Errorf("triggers left: %v", trs)
			}
			var n int
			db.QueryRow("SELECT COUNT(*) FROM t").Scan(&n)
			if want := map[string]int{"truncate": 1}[tc.name]; n != want && (want != 0 || n != 2001) {
				t.Errorf("the original has %d rows, want %d", n, want)
			}
		})
	}
}

// TestTriggerCaptureRefusals: what capture by triggers cannot see or record
// is refused in one line, and nothing changes.
func TestTriggerCaptureRefusals(t *testing.T) {
	for _, tc := range []struct{ name, table, create, want string }{
		{"a trigger whose copy takes a capture name", "t", "CREATE TABLE t (id INT PRIMARY KEY, v INT); CREATE TRIGGER t_chg_i AFTER INSERT ON t FOR EACH ROW SET @x = 1",
			"has trigger t_chg_i, and capture by triggers makes a trigger _t_chg_i"},
		{"foreign keys", "c", "CREATE TABLE p (id INT PRIMARY KEY); CREATE TABLE c (id INT PRIMARY KEY, p INT, FOREIGN KEY (p) REFERENCES p (id) ON DELETE CASCADE)",
			"has foreign keys, whose cascades change rows without firing a trigger"},
		{"timestamp key", "t", "CREATE TABLE t (at TIMESTAMP NOT NULL PRIMARY KEY, v INT)", "key column at is a TIMESTAMP"},
		{"encoded name", "t-x", "CREATE TABLE `t-x` (id INT PRIMARY KEY, v INT)", "only for names of ASCII letters, digits and _"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := testdb.New(t)
			for _, s := range strings.Split(tc.create, "; ") {
				db.MustExec(t, s)
			}
			before := db.Tables(t)
			trs := allTriggers(t, db)
			cfg := config(t, db, tc.table, "ADD COLUMN x INT")
			cfg.Capture = migration.CaptureTriggers
			cfg.CarryTriggers = true
			_, err := mustRunner(t, cfg).Run(context.Background())
			if !errors.Is(err, migration.ErrPreflight) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("got %v, want one preflight line containing %q", err, tc.want)
			}
			if after := db.Tables(t); !slices.Equal(after, before) {
				t.Errorf("tables %v, before %v", after, before)
			}
			if after := allTriggers(t, db); !slices.Equal(after, trs) {
				t.Errorf("triggers %v, before %v", after, trs)
			}
		})
	}
}

// TestLeftoverCaptureDropped: the queue and triggers of a run that died are
// dropped by the next run of the table, which then migrates it (here from
// the binlog), and no trigger of theirs is carried or left.
func TestLeftoverCaptureDropped(t *testing.T) {
	db := tableT(t, 500)
	ctx := context.Background()
	tbl, err := schema.Load(ctx, db.DB, db.Name, "t")
	if err != nil {
		t.Fatal(err)
	}
	key, err := rowkey.NewCols(tbl.PKColumns())
	if err != nil {
		t.Fatal(err)
	}
	q, err := capture.New(tbl, key, "t")
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Create(ctx, db.DB); err != nil {
		t.Fatal(err)
	}
	db.MustExec(t, "UPDATE t SET v = v + 1 WHERE id < 10")
	if n := len(allTriggers(t, db)); n != 3 {
		t.Fatalf("%d triggers made by hand, want 3", n)
	}
	cfg := config(t, db, "t", "ADD COLUMN x INT")
	cfg.DropOld = true
	res := migrate(t, cfg)
	if trs := allTriggers(t, db); len(trs) > 0 {
		t.Errorf("triggers left: %v", trs)
	}
	if tables := db.Tables(t); !slices.Equal(tables, []string{"t"}) {
		t.Errorf("tables after the migration: %v", tables)
	}
	var sum int
	db.QueryRow("SELECT SUM(v) FROM t").Scan(&sum)
	if want := 500*501/2 + 9; sum != want {
		t.Errorf("sum of v %d, want %d", sum, want)
	}
	t.Log(fmt.Sprintf("rows copied %d", res.RowsCopied))
}

// TestDeathWithTriggerCapture kills runs by triggers, under writers, once
// just after their triggers are made and once just after the RENAME: the
// next run drops what the dead one left (triggers on the original or on the
// old table, the queue), and the last one finds the migration done; the
// table then equals the replayed writes, and no trigger or queue is left
// but the copy of the table's own trigger (which changes every insert:
// model_ref has it too), carried to the new table.
func TestDeathWithTriggerCapture(t *testing.T) {
	if os.Getenv("SLUICE_RESUME_CHILD") != "" {
		t.Skip()
	}
	db := testdb.New(t)
	sysbenchTable(t, db)
	w := sysbenchWorkload()
	w.writers = 4
	db.MustExec(t, "CREATE TABLE model_ref LIKE t")
	w.load(t, db, "model_ref", 20000)
	db.MustExec(t, "CREATE TRIGGER t_bi BEFORE INSERT ON t FOR EACH ROW SET NEW.k = NEW.k + 1000000",
		"CREATE TRIGGER model_bi BEFORE INSERT ON model_ref FOR EACH ROW SET NEW.k = NEW.k + 1000000")
	stop := w.start(t, db)
	defer stop()
	job := childJob{DSN: os.Getenv(testdb.Env), Database: db.Name, Table: "t", Alter: "ADD COLUMN extra INT NOT NULL DEFAULT 7",
		Every: time.Second, Capture: migration.CaptureTriggers, Carry: true}
	for _, die := range []struct{ at, triggersOn string }{{"capture-started", "t"}, {"triggers-copied", "t"}, {"renamed", "_t_old"}} {
		job.Die = die.at
		c := startChild(t, job)
		err := <-c.done
		if code := c.cmd.ProcessState.ExitCode(); code != 9 {
			t.Fatalf("the child did not die at %s (exit %d, %v):\n%s", die.at, code, err, c.out)
		}
		left := slices.DeleteFunc(allTriggers(t, db), func(n string) bool { return !strings.Contains(n, "_t_chg_") })
		if len(left) != 3 || !strings.HasPrefix(left[0], die.triggersOn+".") {
			t.Fatalf("after a death at %s the capture triggers are %v, want the three of them on %s", die.at, left, die.triggersOn)
		}
		for _, line := range strings.Split(c.out.String(), "\n") {
			// The run that took the capture up named its triggers among
			// the table's own, to be carried (the copies made were right).
			if strings.Contains(line, "copied to the new table") && strings.Contains(line, "_t_chg_") {
				t.Errorf("the capture's triggers are named among the table's own: %s", line)
			}
		}
		time.Sleep(300 * time.Millisecond) // the application writes through the dead run's triggers
	}
	job.Die = ""
	c := startChild(t, job)
	if err := <-c.done; err != nil {
		_, line := c.result(t)
		t.Fatalf("the run after the deaths failed: %s\n%s", line, c.out)
	}
	if res, _ := c.result(t); !res.AlreadyDone {
		t.Errorf("the last run did not find the migration done: %+v", res)
	}
	stop()
	if trs := allTriggers(t, db); !slices.Equal(trs, []string{"model_ref.model_bi", "t._t_bi"}) {
		t.Errorf("triggers after the migration: %v, want model_bi and t_bi's copy on t", trs)
	}
	var raised int
	if err := db.QueryRow("SELECT COUNT(*) FROM t WHERE k >= 1000000").Scan(&raised); err != nil || raised == 0 {
		t.Errorf("%d rows were inserted through the table's own trigger (%v): the check proves nothing of it", raised, err)
	}
	if tables := db.Tables(t); !slices.Equal(tables, []string{"model_ref", "t"}) {
		t.Errorf("tables left: %v", tables)
	}
	w.replay(t, db, "model_ref")
	compare(t, db, "t", "model_ref", "id, k, c, pad", "id")
	var extra int
	if err := db.QueryRow("SELECT COUNT(*) FROM t WHERE extra <> 7").Scan(&extra); err != nil || extra != 0 {
		t.Errorf("rows without the new column's default: %d (%v)", extra, err)
	}
}

// TestQueueNameOfAnother: a table with the queue's name that sluice did not
// make (no comment of sluice's), and a trigger of a capture name that writes
// to it, are left alone by a run from the binlog, which carries that trigger
// like any other; capture by triggers refuses the table in one line.
func TestQueueNameOfAnother(t *testing.T) {
	db := tableT(t, 200)
	db.MustExec(t, "CREATE TABLE _t_chg (n INT AUTO_INCREMENT PRIMARY KEY, id INT)",
		"CREATE TRIGGER _t_chg_i AFTER INSERT ON t FOR EACH ROW INSERT INTO _t_chg (id) VALUES (NEW.id)")
	cfg := config(t, db, "t", "ADD COLUMN x INT")
	cfg.Capture = migration.CaptureTriggers
	cfg.CarryTriggers = true
	_, err := mustRunner(t, cfg).Run(context.Background())
	if !errors.Is(err, migration.ErrPreflight) || !strings.Contains(err.Error(), "has trigger _t_chg_i,") {
		t.Fatalf("capture by triggers: %v, want a refusal naming the table's own trigger", err)
	}
	cfg.Capture = ""
	res := migrate(t, cfg)
	if trs := allTriggers(t, db); !slices.Equal(trs, []string{"_t_old._t_chg_i", "t.t_chg_i"}) {
		t.Errorf("triggers after the migration: %v, want the user's on the old table, and carried as t_chg_i", trs)
	}
	db.MustExec(t, "INSERT INTO t (id, v) VALUES (1000, 1)")
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM _t_chg WHERE id = 1000").Scan(&n); err != nil || n != 1 {
		t.Errorf("the user's trigger wrote %d rows to the user's table (%v), want 1", n, err)
	}
	t.Logf("old table %s", res.OldTable)
}

// TestTakeUpTriggerCapture: what a run checks before it takes up the
// triggers and queue of a run killed in its copy. The application writes
// while no sluice runs; then the same ALTER without --capture=triggers is
// refused and leaves the triggers recording; with it, the run resumes and
// the table holds every write. A second migration killed the same way
// finds one of its triggers dropped, a third its table rebuilt: each is
// refused in one line that says --restart, its triggers are gone, and
// --restart then migrates the table with every write.
func TestTakeUpTriggerCapture(t *testing.T) {
	if os.Getenv("SLUICE_RESUME_CHILD") != "" {
		t.Skip()
	}
	db := tableT(t, 100000)
	sum := func() (int64, int64) {
		var s, n int64
		db.QueryRow("SELECT SUM(v), COUNT(*) FROM t").Scan(&s, &n)
		return s, n
	}
	next := 200000
	killedInCopy := func(alter string) {
		t.Helper()
		c := startChild(t, childJob{DSN: os.Getenv(testdb.Env), Database: db.Name, Table: "t", Alter: alter,
			Every: 100 * time.Millisecond, Capture: migration.CaptureTriggers})
		if err, killed := c.killIn("copy", 150*time.Millisecond); !killed {
			t.Fatalf("the run was not killed in its copy (%v):\n%s", err, c.out)
		}
		if trs := allTriggers(t, db); len(trs) != 3 {
			t.Fatalf("after the kill the triggers are %v, want the three capture triggers", trs)
		}
		// Writes no sluice sees but through the triggers.
		next += 2
		db.MustExec(t, "UPDATE t SET v = -v WHERE id % 1000 = 7", "DELETE FROM t WHERE id % 1000 = 8",
			fmt.Sprintf("INSERT INTO t (id, v) VALUES (%d, 5), (%d, 6)", next, next+1))
	}
	run := func(alter string, edit func(*migration.Config)) (migration.Result, error) {
		cfg := config(t, db, "t", alter)
		edit(&cfg)
		return mustRunner(t, cfg).Run(context.Background())
	}
	byTriggers := func(c *migration.Config) { c.Capture = migration.CaptureTriggers }
	check := func(what string) {
		t.Helper()
		if trs := allTriggers(t, db); len(trs) > 0 {
			t.Errorf("%s: triggers left: %v", what, trs)
		}
	}

	const first = "ADD COLUMN extra INT NOT NULL DEFAULT 7"
	killedInCopy(first)
	wantSum, wantRows := sum()
	_, err := run(first, func(*migration.Config) {})
	if err == nil || !strings.Contains(err.Error(), "resume it with --capture=triggers") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("the run without --capture=triggers: %v, want a one-line refusal saying to resume with it", err)
	}
	if trs := allTriggers(t, db); len(trs) != 3 {
		t.Fatalf("the refusal dropped the triggers the run with the flag needs: %v", trs)
	}
	// Another ALTER is refused too, and the triggers stay for the run of
	// the first, which takes them up.
	_, err = run("ADD COLUMN other INT", byTriggers)
	if err == nil || !strings.Contains(err.Error(), "of another ALTER") || !strings.Contains(err.Error(), "triggers stay on t") {
		t.Fatalf("a run of another ALTER: %v, want a refusal saying the triggers stay", err)
	}
	if trs := allTriggers(t, db); len(trs) != 3 {
		t.Fatalf("the refusal of another ALTER dropped the triggers: %v", trs)
	}
	// A refusal after the capture is checked and before the shadow is
	// taken up (both names of the old table taken) keeps them too.
	db.MustExec(t, "CREATE TABLE _t_old (x INT)")
	var stamped []string
	for i := range 90 {
		stamped = append(stamped, "`"+schema.StampedOld("t", time.Now().Add(time.Duration(i)*time.Second))+"`")
		db.MustExec(t, "CREATE TABLE "+stamped[i]+" (x INT)")
	}
	_, err = run(first, byTriggers)
	if err == nil || !strings.Contains(err.Error(), "already exist") || !strings.Contains(err.Error(), "triggers stay on t") {
		t.Fatalf("a run with both old names taken: %v, want a refusal saying the triggers stay", err)
	}
	if trs := allTriggers(t, db); len(trs) != 3 {
		t.Fatalf("the refusal for the old table's name dropped the triggers: %v", trs)
	}
	db.MustExec(t, "DROP TABLE _t_old, "+strings.Join(stamped, ", "))
	// And one before the capture is checked (a panic flag file there
	// already).
	panicFile := t.TempDir() + "/panic"
	if err := os.WriteFile(panicFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = run(first, func(c *migration.Config) { byTriggers(c); c.PanicFlagFile = panicFile })
	if err == nil || !strings.Contains(err.Error(), "panic flag file") || !strings.Contains(err.Error(), "triggers stay on t") {
		t.Fatalf("a run with the panic flag file there: %v, want a refusal saying the triggers stay", err)
	}
	if trs := allTriggers(t, db); len(trs) != 3 {
		t.Fatalf("the refusal for the panic flag file dropped the triggers: %v", trs)
	}
	db.MustExec(t, "UPDATE t SET v = v + 1 WHERE id = 3")
	wantSum++
	res, err := run(first, byTriggers)
	if err != nil || !res.Resumed || res.RowsCopied >= 100000 {
		t.Fatalf("the run with --capture=triggers did not take up the earlier one: %v, resumed %v, copied %d", err, res.Resumed, res.RowsCopied)
	}
	if s, n := sum(); s != wantSum || n != wantRows {
		t.Errorf("after the resumed run: sum %d rows %d, want %d and %d", s, n, wantSum, wantRows)
	}
	check("after the resumed run")
	t.Logf("resumed: copied %d rows again, %d keys applied", res.RowsCopied, res.KeysApplied)

	// The update trigger dropped and made again as it was: the writes in
	// between went unrecorded.
	remade := func() { remakeTrigger(t, db, "_t_chg_u", "UPDATE t SET v = v + 1 WHERE id = 5") }
	for _, tc := range []struct {
		name, alter, meddle, want string
		by                        func()
	}{
		{"a trigger dropped", "DROP COLUMN extra", "DROP TRIGGER _t_chg_d", "of the 3 change-capture triggers", nil},
		{"the table rebuilt", "ADD COLUMN extra2 INT", "ALTER TABLE t FORCE", "truncated, made again or rebuilt", nil},
		{"a trigger made again", "ADD COLUMN extra3 INT", "", "dropped and made again", remade},
		{"the queue truncated", "ADD COLUMN extra4 INT", "TRUNCATE TABLE _t_chg", "the queue truncated", nil},
		// Its values gone, its definition and InnoDB id the same.
		{"a column dropped and added in place", "ADD COLUMN extra5 INT", "ALTER TABLE t DROP COLUMN v, ADD COLUMN v INT, ALGORITHM=INSTANT", "changed since the checkpoint", nil},
	} {
		db.MustExec(t, "DROP TABLE IF EXISTS _t_old")
		killedInCopy(tc.alter)
		trs := allTriggers(t, db)
		if tc.name == "a trigger dropped" && !slices.Contains(trs, "t._t_chg_d") {
			t.Fatalf("the capture triggers are %v: the test drops one that does not exist", trs)
		}
		if tc.by != nil {
			tc.by()
		} else {
			db.MustExec(t, tc.meddle)
		}
		wantSum, wantRows = sum()
		_, err := run(tc.alter, byTriggers)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "--restart") || strings.Contains(err.Error(), "\n") {
			t.Fatalf("%s: got %v, want one line saying %q and --restart", tc.name, err, tc.want)
		}
		if trs := allTriggers(t, db); len(trs) > 0 {
			t.Errorf("%s: the refusal left the triggers that can no longer be taken up: %v", tc.name, trs)
		}
		res, err := run(tc.alter, func(c *migration.Config) { byTriggers(c); c.Restart = true })
		if err != nil || res.Resumed {
			t.Fatalf("%s: --restart: %v (resumed %v)", tc.name, err, res.Resumed)
		}
		if s, n := sum(); s != wantSum || n != wantRows {
			t.Errorf("%s: after --restart: sum %d rows %d, want %d and %d", tc.name, s, n, wantSum, wantRows)
		}
		check(tc.name)
	}
}

// remakeTrigger drops trigger name and creates it again as it was, running
// between stmt, a write the trigger does not see.
func remakeTrigger(t *testing.T, db *testdb.DB, name, between string) {
	t.Helper()
	rows, err := db.Query("SHOW CREATE TRIGGER " + name)
	if err != nil {
		t.Fatal(err)
	}
	cols, _ := rows.Columns()
	dest := make([]any, len(cols))
	for i := range dest {
		dest[i] = new(sql.RawBytes)
	}
	var body string
	dest[2] = &body
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			t.Fatal(err)
		}
	}
	rows.Close()
	if body == "" {
		t.Fatalf("SHOW CREATE TRIGGER %s gave no statement", name)
	}
	db.MustExec(t, "DROP TRIGGER "+name, between, body)
}

// TestTriggerMadeDuringTriggerCapture: a trigger of the table's own made
// while sluice captures by triggers comes after the capture's in the
// server's order; the cut-over carries it with the others (their copies
// numbered among themselves), where it stopped the run on a false mismatch.
func TestTriggerMadeDuringTriggerCapture(t *testing.T) {
	db := tableT(t, 300)
	db.MustExec(t, "CREATE TABLE audit (id INT, what VARCHAR(8))",
		"CREATE TRIGGER a1 AFTER INSERT ON t FOR EACH ROW INSERT INTO audit VALUES (NEW.id, 'a1')")
	cfg := config(t, db, "t", "ADD COLUMN x INT")
	cfg.Capture, cfg.CarryTriggers, cfg.PostponeCutover = migration.CaptureTriggers, true, true
	cfg.OnPhase = func(phase string) {
		if phase == "postponed" {
			db.MustExec(t, "CREATE TRIGGER a2 AFTER INSERT ON t FOR EACH ROW INSERT INTO audit VALUES (NEW.id, 'a2')",
				"INSERT INTO t (id, v) VALUES (1001, 1)", "DROP TABLE `_t_cutover`")
		}
	}
	res, err := mustRunner(t, cfg).Run(context.Background())
	if err != nil || !res.Swapped {
		t.Fatalf("migrate: %v (swapped %v)", err, res.Swapped)
	}
	db.MustExec(t, "INSERT INTO t (id, v) VALUES (1002, 1)")
	got := column(t, db, "SELECT CONCAT(id, what) FROM audit")
	if want := []string{"1001a1", "1001a2", "1002a1", "1002a2"}; !slices.Equal(got, want) {
		t.Errorf("audit rows %v, want %v: each insert through both triggers, before and after the swap", got, want)
	}
	if trs := allTriggers(t, db); !slices.Equal(trs, []string{res.OldTable + ".a1", res.OldTable + ".a2", "t._a1", "t._a2"}) {
		t.Errorf("triggers after the migration: %v", trs)
	}
}
