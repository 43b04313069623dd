package apply

import (
	"context"
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
