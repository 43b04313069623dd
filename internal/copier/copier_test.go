package copier

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/chunk"
	"github.com/sluicedb/sluice/internal/rowkey"
	"github.com/sluicedb/sluice/internal/testdb"
)

func setup(t *testing.T, db *testdb.DB) *Copier {
	t.Helper()
	m, key := db.Mapping(t, "src", "dst", true)
	c, err := New(Config{
		DB: db.DB, Key: key, Workers: 2,
		Mapping: m,
		Chunk:   chunk.Config{Initial: 500, Min: 100},
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCopyDoesNotWaitOnApplicationLocks holds a row lock in an application
// transaction while the copy runs: the copy retries that range without
// waiting, finishes once the application commits, and copies the committed
// value of every row.
func TestCopyDoesNotWaitOnApplicationLocks(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE src (id INT PRIMARY KEY, v INT NOT NULL)")
	db.Fill(t, "src", 20000, "n, n")
	c := setup(t, db)

	app, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := app.Exec("UPDATE src SET v = -1 WHERE id = 12345"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Run(context.Background()) }()
	time.Sleep(300 * time.Millisecond)
	if err := app.Commit(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the copy did not finish")
	}
	if c.LockRetries() == 0 {
		t.Error("the locked range was never retried: the test did not exercise NOWAIT")
	}
	var n, v int
	db.QueryRow("SELECT COUNT(*) FROM dst").Scan(&n)
	db.QueryRow("SELECT v FROM dst WHERE id = 12345").Scan(&v)
	if n != 20000 || v != -1 {
		t.Errorf("dst has %d rows and v=%d for the locked row; want 20000 and the committed -1", n, v)
	}
}

// TestCopySparseSignedKeys copies a table whose signed integer key spans
// almost all of BIGINT with big gaps, and checks every row arrives once.
func TestCopySparseSignedKeys(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE src (id BIGINT PRIMARY KEY, v INT)",
		"INSERT INTO src VALUES (-9223372036854775808, 1), (-5, 2), (0, 3), (7, 4), (1000000000000, 5), (9223372036854775807, 6)")
	db.Fill(t, "src", 3000, "n * 1000003, n")
	c := setup(t, db)
	if err := c.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	var n int
	db.QueryRow("SELECT COUNT(*) FROM dst").Scan(&n)
	if n != 3006 || c.Rows() != 3006 {
		t.Errorf("copied %d rows (dst has %d), want 3006", c.Rows(), n)
	}
}

// TestCopyDefersALockedRange: an application transaction holds a row lock
// for longer than the copy keeps retrying. With Defer set, the copy never
// waits for the lock (it finishes while the lock is still held) and hands the
// keys of that range, the locked row's included, to Defer instead of copying
// them; every other row is copied.
func TestCopyDefersALockedRange(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE src (id INT PRIMARY KEY, v INT NOT NULL)")
	db.Fill(t, "src", 20000, "n, n")
	m, key := db.Mapping(t, "src", "dst", true)
	var mu sync.Mutex
	deferred := map[int64]bool{}
	c, err := New(Config{
		DB: db.DB, Key: key, Workers: 2, Mapping: m,
		Chunk: chunk.Config{Initial: 500, Min: 100},
		Defer: func(keys ...rowkey.Key) {
			mu.Lock()
			defer mu.Unlock()
			for _, k := range keys {
				deferred[k[0].(int64)] = true
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	app, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer app.Rollback()
	if _, err := app.Exec("UPDATE src SET v = -1 WHERE id = 12345"); err != nil {
		t.Fatal(err)
	}
	if err := c.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The lock is still held here: the copy did not wait for it.
	if !deferred[12345] {
		t.Fatalf("the locked row's key was not deferred (%d keys deferred)", len(deferred))
	}
	if int64(len(deferred)) != c.Deferred() || len(deferred) >= 10000 {
		t.Errorf("%d keys deferred, Deferred() = %d: want the locked range only", len(deferred), c.Deferred())
	}
	var n, missing int
	db.QueryRow("SELECT COUNT(*) FROM dst").Scan(&n)
	db.QueryRow("SELECT COUNT(*) FROM src WHERE id NOT IN (SELECT id FROM dst)").Scan(&missing)
	if n+len(deferred) != 20000 || missing != len(deferred) {
		t.Errorf("dst has %d rows, %d are missing, %d deferred: every row must be copied or deferred, once", n, missing, len(deferred))
	}
	if c.Rows() != 20000 {
		t.Errorf("Rows() = %d, want 20000 (copied or deferred)", c.Rows())
	}
}
