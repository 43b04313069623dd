package migration_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/testdb"
	"github.com/sluicedb/sluice/migration"
)

// xa runs an XA transaction's statements up to XA PREPARE on a session of its
// own, which then ends: a prepared XA transaction outlives its session, as
// after an application server's crash. Its XID is the test database's own.
func xa(t *testing.T, db *testdb.DB, name string, stmts ...string) string {
	t.Helper()
	xid := "'" + db.Name + "-" + name + "'"
	t.Cleanup(func() { db.Exec("XA ROLLBACK " + xid) })
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The session ends for good (not back to the pool): MariaDB keeps a
	// session that prepared an XA transaction attached to it.
	defer func() {
		conn.Raw(func(any) error { return driver.ErrBadConn })
		conn.Close()
	}()
	all := append(append([]string{"XA START " + xid}, stmts...), "XA END "+xid, "XA PREPARE "+xid)
	for _, q := range all {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	return xid
}

// TestXAPreparedBeforeStart: an XA transaction prepared before sluice starts
// has its rows in the binlog before the position the capture reads from, and
// the copy cannot see them until it commits. Committed during the run, its
// rows would reach the new table by no path: sluice waits for it to end
// before the copy, and the rows it committed are in the table after.
func TestXAPreparedBeforeStart(t *testing.T) {
	db := tableT(t, 2000)
	xid := xa(t, db, "early", "INSERT INTO t VALUES (100000, 7)", "UPDATE t SET v = -1 WHERE id = 5", "DELETE FROM t WHERE id = 6")
	cfg := config(t, db, "t", "ADD COLUMN x INT")
	r := mustRunner(t, cfg)
	errc := make(chan error, 1)
	go func() { _, err := r.Run(context.Background()); errc <- err }()
	waitPhase(t, r, "capture", errc)
	const hold = 700 * time.Millisecond
	time.Sleep(hold)
	if r.Phase() != "capture" {
		t.Errorf("sluice went on to %q while an XA transaction prepared before it started was still prepared", r.Phase())
	}
	db.MustExec(t, "XA COMMIT "+xid)
	if err := ended(t, errc, 2*time.Minute, "after the XA transaction committed"); err != nil {
		t.Fatal(err)
	}
	var n int
	var v100000, v5 sql.NullInt64
	if err := db.QueryRow("SELECT COUNT(*), MAX(CASE WHEN id = 100000 THEN v END), MAX(CASE WHEN id = 5 THEN v END) FROM t").Scan(&n, &v100000, &v5); err != nil {
		t.Fatal(err)
	}
	if n != 2000 || v100000.Int64 != 7 || v5.Int64 != -1 {
		t.Errorf("after the migration: %d rows, row 100000 has v=%v, row 5 has v=%v; want 2000 rows, 7 and -1 (the XA transaction's changes)", n, v100000, v5)
	}
	if db.QueryRow("SELECT 1 FROM t WHERE id = 6").Scan(new(int)) != sql.ErrNoRows {
		t.Error("the row the XA transaction deleted is back")
	}
}

// TestXAPreparedBeforeStartNeverEnds: an XA transaction prepared before the
// start that stays prepared past the lock deadline stops sluice before the
// copy, with a line naming it and what to do, and leaves the table as it was.
func TestXAPreparedBeforeStartNeverEnds(t *testing.T) {
	db := tableT(t, 100)
	before := snapshot(t, db, "t")
	xid := xa(t, db, "stuck", "UPDATE t SET v = -1 WHERE id = 5")
	cfg := config(t, db, "t", "ADD COLUMN x INT")
	cfg.LockDeadline = time.Second
	r := mustRunner(t, cfg)
	_, err := r.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "XA COMMIT or XA ROLLBACK") || !strings.Contains(err.Error(), strings.Trim(xid, "'")) {
		t.Fatalf("want a refusal naming the prepared XA transaction, got %v", err)
	}
	db.MustExec(t, "XA ROLLBACK "+xid)
	untouched(t, db, "t", before)
}

// TestXARolledBackAfterPrepare: the rows of an XA transaction are logged at
// XA PREPARE, as if they existed; its XA ROLLBACK, logged later, has none. A
// row inserted so after the checksum and rolled back is in neither table, and
// the cut-over must not take the binlog's word that it exists. One committed
// so is in the table after.
func TestXARolledBackAfterPrepare(t *testing.T) {
	db := tableT(t, 500)
	cfg := config(t, db, "t", "ADD COLUMN x INT")
	cfg.PostponeCutover = true
	r := mustRunner(t, cfg)
	errc := make(chan error, 1)
	go func() { _, err := r.Run(context.Background()); errc <- err }()
	waitPhase(t, r, "postponed", errc)

	gone := xa(t, db, "gone", "INSERT INTO t VALUES (100000, 1)", "UPDATE t SET v = -1 WHERE id = 5")
	kept := xa(t, db, "kept", "INSERT INTO t VALUES (100001, 2)", "UPDATE t SET v = -2 WHERE id = 6")
	time.Sleep(300 * time.Millisecond) // the prepares reach sluice before the ends
	db.MustExec(t, "XA ROLLBACK "+gone)
	db.MustExec(t, "XA COMMIT "+kept)
	if err := migration.TriggerCutover(context.Background(), db.DB, db.Name, "t"); err != nil {
		t.Fatal(err)
	}
	if err := ended(t, errc, 2*time.Minute, "after the cut-over was triggered"); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, row := range db.Dump(t, "t", "id, v", "id") {
		id, v := strings.Trim(row[0], "'"), strings.Trim(row[1], "'")
		if id == "5" || id == "6" || len(id) == 6 && strings.HasPrefix(id, "10000") {
			got = append(got, id+"="+v)
		}
	}
	if s, want := strings.Join(got, " "), "5=5 6=-2 100001=2"; s != want {
		t.Errorf("rows %s, want %s", s, want)
	}
}

// TestXAPreparedDuringCutover: an XA transaction prepared while the cut-over
// waits holds a row lock on a changed row. The cut-over's apply waited for
// it under the table locks (10 s a try, 20 tries), holding every write of
// the application the while; now a try waits a second at most, releases the
// locks and tries again later, and the run ends once the transaction does,
// with its change.
//
// Under capture by triggers the transaction's row in the queue is unseen
// until it commits, and on MariaDB its session, gone, holds no metadata
// lock: the tables were swapped and its change landed in the old table, exit
// 0 (found by a black-box hunt). The cut-over now meets that row's lock.
func TestXAPreparedDuringCutover(t *testing.T) {
	for _, capture := range []string{migration.CaptureBinlog, migration.CaptureTriggers} {
		t.Run(capture, func(t *testing.T) { xaPreparedDuringCutover(t, capture) })
	}
}

func xaPreparedDuringCutover(t *testing.T, capture string) {
	db := tableT(t, 2000)
	cfg := config(t, db, "t", "ADD COLUMN x INT")
	cfg.PostponeCutover, cfg.Capture = true, capture
	var xid string
	var worst atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	cfg.OnPhase = func(phase string) {
		if phase != "postponed" {
			return
		}
		xid = xa(t, db, "cutover", "UPDATE t SET v = -5 WHERE id = 7")
		wg.Add(1)
		go func() { // the application, on another row
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				case <-time.After(20 * time.Millisecond):
				}
				start := time.Now()
				if _, err := db.Exec("UPDATE t SET v = v + 1 WHERE id = 1000"); err != nil {
					t.Error(err)
					return
				}
				if d := int64(time.Since(start)); d > worst.Load() {
					worst.Store(d)
				}
			}
		}()
		db.MustExec(t, "DROP TABLE `_t_cutover`")
		time.AfterFunc(8*time.Second, func() { db.Exec("XA COMMIT " + xid) })
	}
	res := migrate(t, cfg)
	close(stop)
	wg.Wait()
	t.Logf("the longest application write took %s", time.Duration(worst.Load()))
	if w := time.Duration(worst.Load()); w > 3*time.Second {
		t.Errorf("an application write waited %s for the cut-over's locks", w)
	}
	var v int
	if err := db.QueryRow("SELECT v FROM t WHERE id = 7").Scan(&v); err != nil || v != -5 {
		t.Errorf("row 7 has v=%d (%v), want the XA transaction's -5", v, err)
	}
	// Row 1000 took the application's writes after the swap too.
	but1000 := func(rows [][]string) [][]string {
		return slices.DeleteFunc(rows, func(r []string) bool { return r[0] == "'1000'" })
	}
	if got, want := but1000(db.Dump(t, "t", "id, v", "id")), but1000(db.Dump(t, res.OldTable, "id, v", "id")); len(got) != 1999 || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the new table differs from the original's final state (%d rows, %d)", len(got), len(want))
	}
}
