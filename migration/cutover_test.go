package migration_test

import (
	"context"
	"database/sql"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/testdb"
	"github.com/sluicedb/sluice/migration"
)

// counterWriters increment rows 1..n of table t (column v) as fast as they
// can, one connection each, counting the increments that succeeded: the
// oracle of the tests below is the writers' own count, not anything sluice
// reports. check stops them and compares.
type counterWriters struct {
	n       int
	mu      sync.Mutex
	done    []int64 // increments that succeeded, by id
	failed  []int64 // increments that returned an error
	slowest time.Duration
	stop    func()
}

func startCounters(t *testing.T, db *testdb.DB, n int) *counterWriters {
	t.Helper()
	w := &counterWriters{n: n, done: make([]int64, n+1), failed: make([]int64, n+1)}
	w.stop = db.Writers(t, n, func(c *sql.Conn, id int) {
		start := time.Now()
		_, err := c.ExecContext(context.Background(), "UPDATE t SET v = v + 1 WHERE id = ?", id)
		took := time.Since(start)
		w.mu.Lock()
		if err != nil {
			w.failed[id]++
		} else {
			w.done[id]++
		}
		w.slowest = max(w.slowest, took)
		w.mu.Unlock()
	})
	return w
}

// check stops the writers and fails the test unless every increment that
// succeeded is in table t, and no other row changed. An increment that waited
// less than 5ms was not held by any cut-over: then the test proves nothing.
func (w *counterWriters) check(t *testing.T, db *testdb.DB) {
	t.Helper()
	w.stop()
	var total, lost, failed int64
	for id := 1; id <= w.n; id++ {
		var v int64
		if err := db.QueryRow("SELECT v FROM t WHERE id = ?", id).Scan(&v); err != nil {
			t.Fatal(err)
		}
		total, failed = total+w.done[id], failed+w.failed[id]
		if v != w.done[id] {
			lost += w.done[id] - v
			t.Errorf("row %d: v = %d, but %d increments succeeded (%d failed)", id, v, w.done[id], w.failed[id])
		}
	}
	t.Logf("%d increments (%d failed), the slowest %s, %d lost", total, failed, w.slowest.Round(time.Millisecond), lost)
	if total < 500 {
		t.Errorf("only %d increments ran; the test proves little", total)
	}
	if w.slowest < 5*time.Millisecond {
		t.Errorf("no increment waited on a cut-over (the slowest took %s); the test proves nothing", w.slowest)
	}
	var sum int64
	if err := db.QueryRow("SELECT COALESCE(SUM(v), 0) FROM t WHERE id > ?", w.n).Scan(&sum); err != nil || sum != 0 {
		t.Errorf("rows nobody wrote changed: SUM(v) = %d (%v)", sum, err)
	}
}

func counterTable(t *testing.T) *testdb.DB {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE t (id INT PRIMARY KEY, v INT NOT NULL, pad VARCHAR(200))")
	db.Fill(t, "t", 20000, "n, 0, REPEAT('p', n % 200)")
	return db
}

// TestWritesQueuedAtCutoverReachNewTable: writers are queued on the table's
// locks whenever a cut-over releases them, through three migrations. A swap
// that lets them run on the original before the RENAME (gh-ost's sentry
// cut-over does, on MariaDB) leaves their writes in the old table, after the
// last change was applied.
func TestWritesQueuedAtCutoverReachNewTable(t *testing.T) {
	db := counterTable(t)
	w := startCounters(t, db, 8)
	for i, alter := range []string{"ADD COLUMN x INT", "DROP COLUMN x", "MODIFY pad VARCHAR(250)"} {
		cfg := config(t, db, "t", alter)
		cfg.DropOld = true
		res, err := mustRunner(t, cfg).Run(context.Background())
		if err != nil {
			t.Fatalf("migration %d (%s): %v", i+1, alter, err)
		}
		if res.Path != "copy" {
			t.Fatalf("migration %d (%s) took the %s path; the test needs the copy's cut-over", i+1, alter, res.Path)
		}
		t.Logf("migration %d (%s): lock held %s, drain %s", i+1, alter, res.CutoverLock.Round(time.Millisecond), res.CutoverDrain.Round(time.Millisecond))
	}
	w.check(t, db)
}

// TestCutoverWaitsOutShadowReader: a session keeps a transaction open that
// read the shadow while writers run. On MariaDB the RENAME then cannot take
// the shadow's lock, so it would not be queued on the original when the
// locks go: the cut-over must see that, back off and try again, and lose no
// write. On MySQL the lock on the shadow waits the reader out.
func TestCutoverWaitsOutShadowReader(t *testing.T) {
	db := counterTable(t)
	var log testdb.SyncBuffer
	cfg := config(t, db, "t", "ADD COLUMN x INT")
	cfg.Logger = slog.New(slog.NewTextHandler(&log, nil))
	cfg.PostponeCutover = true
	cfg.LockWait = time.Second
	r := mustRunner(t, cfg)
	errc := make(chan error, 1)
	go func() { _, err := r.Run(context.Background()); errc <- err }()
	waitPhase(t, r, "postponed", errc)

	w := startCounters(t, db, 8)
	reader, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	ctx := context.Background()
	if _, err := reader.ExecContext(ctx, "START TRANSACTION"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := reader.QueryRowContext(ctx, "SELECT COUNT(*) FROM _t_new").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if err := migration.TriggerCutover(ctx, db.DB, db.Name, "t"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	if _, err := reader.ExecContext(ctx, "COMMIT"); err != nil {
		t.Logf("the reader's transaction ended: %v", err)
	}
	if err := ended(t, errc, 60*time.Second, "after the reader committed"); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	if got := columns(t, db, "t"); got != "id,v,pad,x" {
		t.Errorf("columns %s", got)
	}
	w.check(t, db)
	if db.Flavor == dbconn.MariaDB && !strings.Contains(log.String(), "waits on a lock other than the original") {
		t.Errorf("the cut-over never saw its RENAME wait on the shadow:\n%s", log.String())
	}
}

// TestPostponeNeedsTheCopyPath: --postpone-cutover on an ALTER the planner
// gives the instant or in-place path changed the table at once and exited 0,
// as if the flag had not been given. It is refused in one line, with the
// table as it was (its definition too); with --method copy it is postponed.
func TestPostponeNeedsTheCopyPath(t *testing.T) {
	db := tableT(t, 200)
	for _, alter := range []string{"ADD COLUMN c INT", "ADD INDEX (v)"} {
		var def, after string
		db.QueryRow("SHOW CREATE TABLE t").Scan(new(string), &def)
		before := snapshot(t, db, "t")
		cfg := config(t, db, "t", alter)
		cfg.Method, cfg.PostponeCutover = "auto", true
		_, err := mustRunner(t, cfg).Run(context.Background())
		if err == nil || !strings.Contains(err.Error(), "--postpone-cutover") || !strings.Contains(err.Error(), "--method copy") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want a refusal in one line", alter, err)
		}
		db.QueryRow("SHOW CREATE TABLE t").Scan(new(string), &after)
		if after != def {
			t.Errorf("%s: the table's definition changed:\n%s", alter, after)
		}
		untouched(t, db, "t", before)
	}
	cfg := config(t, db, "t", "ADD COLUMN c INT")
	cfg.PostponeCutover = true
	cfg.OnPhase = func(phase string) {
		if phase == "postponed" {
			db.MustExec(t, "DROP TABLE `_t_cutover`")
		}
	}
	res, err := mustRunner(t, cfg).Run(context.Background())
	if err != nil || res.RowsCopied != 200 {
		t.Errorf("with --method copy: %v, %d rows copied of 200", err, res.RowsCopied)
	}
}

// TestLeftoverPostponeTable: the postponed cut-over's table an earlier run
// left (one interrupted before it knew it had made it) made every later run
// of the command fail ("already exists"); it is dropped and made again. A
// table of that name that is not sluice's is left, and refused in one line.
func TestLeftoverPostponeTable(t *testing.T) {
	db := tableT(t, 300)
	db.MustExec(t, "CREATE TABLE `_t_cutover` (action VARCHAR(16) NOT NULL) COMMENT='sluice waits to cut over t while this table exists: drop it to cut over'",
		"INSERT INTO `_t_cutover` VALUES ('cancel')")
	cfg := config(t, db, "t", "ADD COLUMN x INT")
	cfg.PostponeCutover = true
	cfg.OnPhase = func(phase string) {
		if phase == "postponed" {
			db.MustExec(t, "DROP TABLE `_t_cutover`")
		}
	}
	res, err := mustRunner(t, cfg).Run(context.Background())
	if err != nil || !res.Swapped || res.RowsCopied != 300 {
		t.Fatalf("with a leftover postponed cut-over's table: %v (swapped %v, %d rows copied)", err, res.Swapped, res.RowsCopied)
	}
	db.MustExec(t, "DROP TABLE "+res.OldTable, "CREATE TABLE `_t_cutover` (n INT) COMMENT='mine'")
	cfg.Alter = "DROP COLUMN x"
	_, err = mustRunner(t, cfg).Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "_t_cutover") || strings.Contains(err.Error(), "\n") {
		t.Errorf("with a user's table of that name: %v, want a refusal naming it", err)
	}
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = '_t_cutover' AND TABLE_COMMENT = 'mine'").Scan(&n); err != nil || n != 1 {
		t.Errorf("the user's _t_cutover: %d (%v), want it kept", n, err)
	}
}
