package apply

import (
	"context"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/rowkey"
	"github.com/sluicedb/sluice/internal/testdb"
)

// TestWaitingReadMakesNoDeadlockVictim: a key whose row the application
// holds is read with a wait (waitStarved). Had its transaction touched the
// shadow before waiting, another worker copying a row that moved under a
// unique key would wait on that shadow row while holding a lock on the
// original that the application then asks for: a cycle of waits in which
// the application is the victim. The application's transaction must succeed,
// and the shadow end level with the original.
func TestWaitingReadMakesNoDeadlockVictim(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE src (id INT PRIMARY KEY, u INT NOT NULL, v INT, UNIQUE KEY (u))",
		"CREATE TABLE dst (id INT PRIMARY KEY, u INT NOT NULL, v INT, UNIQUE KEY (u))")
	db.Fill(t, "src", 10, "n, n, n")
	db.MustExec(t, "INSERT INTO dst SELECT * FROM src")
	// A committed move of u=1 from row 1 to row 2 the apply has not seen yet.
	db.MustExec(t, "UPDATE src SET u = 100 WHERE id = 1", "UPDATE src SET u = 1 WHERE id = 2")
	ctx := context.Background()
	app, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	app.ExecContext(ctx, "SET SESSION innodb_lock_wait_timeout = 30")
	if _, err := app.ExecContext(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	if _, err := app.ExecContext(ctx, "UPDATE src SET v = v + 1 WHERE id = 1"); err != nil {
		t.Fatal(err)
	}
	m, key := db.Mapping(t, "src", "dst", false)
	sched := NewScheduler()
	a, err := New(Config{DB: db.DB, Mapping: m, Key: key, Workers: 2, BatchSize: 50, Flavor: db.Flavor}, sched)
	if err != nil {
		t.Fatal(err)
	}
	actx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- a.Run(actx) }()
	sched.Add(rowkey.Key{int64(1)})
	time.Sleep(500 * time.Millisecond) // three NOWAIT reads, then the waiting one
	sched.Add(rowkey.Key{int64(2)})
	time.Sleep(500 * time.Millisecond)
	start := time.Now()
	_, err = app.ExecContext(ctx, "UPDATE src SET v = v + 1 WHERE id = 2")
	t.Logf("the application's second UPDATE: %v after %v", err, time.Since(start))
	if err != nil {
		t.Errorf("the application's transaction failed: %v", err)
	}
	if _, err := app.ExecContext(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	// The application's commit marks its keys, as its binlog events would.
	sched.Add(rowkey.Key{int64(1)}, rowkey.Key{int64(2)})
	for end := time.Now().Add(10 * time.Second); sched.Backlog() > 0 && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("applier: %v", err)
	}
	var diff int
	db.QueryRow("SELECT COUNT(*) FROM src s LEFT JOIN dst d ON d.id = s.id WHERE d.id IS NULL OR d.v <> s.v OR d.u <> s.u").Scan(&diff)
	if diff != 0 {
		t.Errorf("%d rows differ between src and dst (backlog %d)", diff, sched.Backlog())
	}
}

// TestHeldSchedulerEndsWaitingReads: the application holds rows for long;
// the keys read with a wait must not keep a batch in flight once the
// scheduler is held (a cut-over's pause gives up after a minute): each wait
// is short, and none starts once it is held.
func TestHeldSchedulerEndsWaitingReads(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE src (id INT PRIMARY KEY, v INT)", "CREATE TABLE dst (id INT PRIMARY KEY, v INT)")
	db.Fill(t, "src", 20, "n, n")
	ctx := context.Background()
	app, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	if _, err := app.ExecContext(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	defer app.ExecContext(ctx, "ROLLBACK")
	if _, err := app.ExecContext(ctx, "UPDATE src SET v = v + 1 WHERE id <= 8"); err != nil {
		t.Fatal(err)
	}
	m, key := db.Mapping(t, "src", "dst", false)
	sched := NewScheduler()
	a, err := New(Config{DB: db.DB, Mapping: m, Key: key, Workers: 1, BatchSize: 50, Flavor: db.Flavor}, sched)
	if err != nil {
		t.Fatal(err)
	}
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	go a.Run(actx)
	for i := 1; i <= 20; i++ {
		sched.Add(rowkey.Key{int64(i)})
	}
	time.Sleep(time.Second) // three reads without a wait, then waiting ones
	sched.Hold(true)
	start := time.Now()
	for sched.InFlight() > 0 && time.Since(start) < 30*time.Second {
		time.Sleep(10 * time.Millisecond)
	}
	took := time.Since(start)
	t.Logf("in flight for %v after the hold", took)
	if took > 2*waitLock*time.Second {
		t.Errorf("keys stayed in flight %v after the hold, longer than one waiting read (%ds)", took, waitLock)
	}
}
