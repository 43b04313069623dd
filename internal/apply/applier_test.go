package apply

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/rowkey"
	"github.com/sluicedb/sluice/internal/testdb"
)

// TestLockedRowsAreRequeuedNotLost applies a batch while the application holds
// a lock on some of its rows: the batch is split, the free rows are applied,
// the locked ones stay queued (none stuck in flight), and once the
// application commits they are applied too.
func TestLockedRowsAreRequeuedNotLost(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE src (id INT PRIMARY KEY, v INT)", "CREATE TABLE dst (id INT PRIMARY KEY, v INT)")
	for i := 1; i <= 40; i++ {
		db.MustExec(t, fmt.Sprintf("INSERT INTO src VALUES (%d, %d)", i, i))
	}
	ctx := context.Background()
	m, key := db.Mapping(t, "src", "dst", false)
	sched := NewScheduler()
	a, err := New(Config{DB: db.DB, Mapping: m, Key: key, Workers: 1, BatchSize: 40, Flavor: db.Flavor}, sched)
	if err != nil {
		t.Fatal(err)
	}

	// The application locks rows 1 and 3 in an open transaction.
	app, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := app.Exec("UPDATE src SET v = v + 100 WHERE id IN (1, 3)"); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 40; i++ {
		sched.Add(rowkey.Key{int64(i)})
	}
	batch := sched.Next(40)
	// Key order decides how the batch is split; make it deterministic.
	slices.SortFunc(batch, func(x, y rowkey.Key) int { return int(x[0].(int64) - y[0].(int64)) })
	start := time.Now()
	locked, err := a.applyNowait(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	if time.Since(start) > 5*time.Second {
		t.Error("applyNowait waited for the application's lock")
	}
	got := make([]int64, len(locked))
	for i, k := range locked {
		got[i] = k[0].(int64)
	}
	slices.Sort(got)
	if !slices.Equal(got, []int64{1, 3}) {
		t.Fatalf("locked keys = %v, want [1 3]", got)
	}
	sched.Done(without(batch, locked))
	sched.Requeue(locked)
	if sched.InFlight() != 0 || sched.Backlog() != 2 {
		t.Fatalf("in flight %d, backlog %d; want 0 and 2", sched.InFlight(), sched.Backlog())
	}
	var n int
	db.QueryRow("SELECT COUNT(*) FROM dst").Scan(&n)
	if n != 38 {
		t.Errorf("dst has %d rows, want 38", n)
	}

	// The application commits; running the applier finishes the job.
	if err := app.Commit(); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); a.Run(rctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for sched.Backlog() > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	var sum int
	db.QueryRow("SELECT COUNT(*), SUM(v) FROM dst").Scan(&n, &sum)
	if n != 40 || sum != 820+200 {
		t.Errorf("dst has %d rows summing to %d, want 40 and 1020", n, sum)
	}
}

// TestRowsLockedWithoutPauseAreApplied: writers lock every row of the table,
// one transaction after another with no pause between them, as scans of the
// whole table do (an UPDATE whose WHERE uses no index). A read that never
// waits would find the rows locked at every try and never apply them, and a
// cut-over waiting for the backlog would wait for ever: the keys must be
// applied within seconds, with every value the writers left.
func TestRowsLockedWithoutPauseAreApplied(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE src (id INT PRIMARY KEY, v INT)", "CREATE TABLE dst (id INT PRIMARY KEY, v INT)")
	db.Fill(t, "src", 300, "n, n")
	var scans [3]int
	stop := db.Writers(t, len(scans), func(c *sql.Conn, w int) {
		// Every row locked by each statement, back to back.
		if _, err := c.ExecContext(context.Background(), "UPDATE src SET v = v + 1 WHERE v + 0 >= 0"); err == nil {
			scans[w-1]++
		}
	})
	m, key := db.Mapping(t, "src", "dst", false)
	sched := NewScheduler()
	a, err := New(Config{DB: db.DB, Mapping: m, Key: key, Workers: 2, BatchSize: 50, Flavor: db.Flavor}, sched)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 300; i++ {
		sched.Add(rowkey.Key{int64(i)})
	}
	actx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- a.Run(actx) }()
	deadline := time.Now().Add(20 * time.Second)
	for sched.Backlog() > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	left := sched.Backlog()
	stop()
	t.Logf("scans by the writers: %v; keys left: %d", scans, left)
	if left > 0 {
		t.Fatalf("%d of 300 keys were still not applied after 20s of writers locking every row", left)
	}
	// The writers stopped: the last marks bring dst level with src.
	for i := 1; i <= 300; i++ {
		sched.Add(rowkey.Key{int64(i)})
	}
	for end := time.Now().Add(10 * time.Second); sched.Backlog() > 0 && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	var diff int
	db.QueryRow("SELECT COUNT(*) FROM src s LEFT JOIN dst d ON d.id = s.id WHERE d.v IS NULL OR d.v <> s.v").Scan(&diff)
	if diff != 0 || scans[0]+scans[1]+scans[2] < 10 {
		t.Errorf("%d rows differ between src and dst; the writers scanned %v times", diff, scans)
	}
}
