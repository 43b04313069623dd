package bench

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/testdb"
)

// deadlock makes two transactions on table deadlock each other and returns
// once InnoDB has chosen its victim.
func deadlock(t *testing.T, db *sql.DB, table string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, s := range []struct {
		c *sql.Conn
		q string
	}{{a, "BEGIN"}, {a, "UPDATE " + table + " SET v = 1 WHERE id = 1"}, {b, "BEGIN"}, {b, "UPDATE " + table + " SET v = 1 WHERE id = 2"}} {
		if _, err := s.c.ExecContext(ctx, s.q); err != nil {
			t.Fatalf("%s: %v", s.q, err)
		}
	}
	errc := make(chan error, 1)
	go func() {
		_, err := a.ExecContext(ctx, "UPDATE "+table+" SET v = 2 WHERE id = 2")
		errc <- err
	}()
	// b closes the cycle once a is seen waiting for its lock.
	time.Sleep(150 * time.Millisecond)
	for waiting := 0; waiting == 0; {
		// performance_schema, not INNODB_TRX: a concurrent test's statement
		// with a 4-byte character makes INNODB_TRX (utf8mb3) fail to read.
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM performance_schema.data_locks WHERE OBJECT_SCHEMA = DATABASE() AND OBJECT_NAME = ? AND LOCK_STATUS = 'WAITING'", table).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-errc:
			t.Fatalf("the first update did not wait: %v", err)
		default:
		}
		// InnoDB refreshes INNODB_TRX only when it has not been read for
		// 100ms: a faster poll would read the same stale rows forever.
		time.Sleep(150 * time.Millisecond)
	}
	_, errB := b.ExecContext(ctx, "UPDATE "+table+" SET v = 2 WHERE id = 1")
	errA := <-errc
	if dbconn.ErrorNumber(errA) != 1213 && dbconn.ErrorNumber(errB) != 1213 {
		t.Fatalf("no deadlock: %v", errors.Join(errA, errB))
	}
	a.ExecContext(ctx, "ROLLBACK")
	b.ExecContext(ctx, "ROLLBACK")
}

// TestWatchDeadlocks counts real deadlocks and tells those with a marked
// statement from the others. Other tests may deadlock on the same server
// meanwhile, so counts are lower bounds and the attribution is checked on
// tables only this test uses.
func TestWatchDeadlocks(t *testing.T) {
	db := testdb.New(t)
	db.SkipUnless(t, dbconn.MySQL, "the benchmark reads deadlocks from performance_schema.data_locks, which MariaDB lacks; the benchmarks run on MySQL")
	db.MustExec(t,
		"CREATE TABLE plain (id INT PRIMARY KEY, v INT)", "INSERT INTO plain VALUES (1, 0), (2, 0)",
		"CREATE TABLE marked_x (id INT PRIMARY KEY, v INT)", "INSERT INTO marked_x VALUES (1, 0), (2, 0)")
	if n, err := deadlockCount(context.Background(), db.DB); err != nil || n < 0 {
		t.Fatalf("deadlock counter: %d, %v", n, err)
	}

	w := WatchDeadlocks(context.Background(), db.DB, "marked_x")
	deadlock(t, db.DB, "plain")
	time.Sleep(500 * time.Millisecond) // more than a poll: each deadlock is examined on its own
	seen, their := w.Stop()
	if seen < 1 {
		t.Errorf("a deadlock on plain: seen %d", seen)
	}
	if their != 0 {
		t.Errorf("a deadlock on plain was counted as involving marked_x")
	}

	w = WatchDeadlocks(context.Background(), db.DB, "marked_x")
	deadlock(t, db.DB, "plain")
	time.Sleep(500 * time.Millisecond)
	deadlock(t, db.DB, "marked_x")
	time.Sleep(500 * time.Millisecond)
	seen, their = w.Stop()
	if seen < 2 || their != 1 {
		t.Errorf("one deadlock on plain, one on marked_x: seen %d, with marked_x %d; want >= 2 and 1", seen, their)
	}
}
