package testdb

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Readers runs n sessions that query table in a loop, like an application,
// and returns a function that stops them and reports the slowest query and
// how many failed.
func (d *DB) Readers(t testing.TB, table string, n int) (stop func() (worst time.Duration, failed int64)) {
	t.Helper()
	var worstNs, failures atomic.Int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				start := time.Now()
				var c int
				if err := d.QueryRow("SELECT COUNT(*) FROM " + table + " WHERE id < 10").Scan(&c); err != nil {
					failures.Add(1)
				}
				took := int64(time.Since(start))
				for {
					w := worstNs.Load()
					if took <= w || worstNs.CompareAndSwap(w, took) {
						break
					}
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}
	return func() (time.Duration, int64) {
		close(done)
		wg.Wait()
		return time.Duration(worstNs.Load()), failures.Load()
	}
}

// Blocker runs query on its own session, which holds a metadata lock on the
// tables it reads until the query ends (as the long report of the
// metadata-lock seed does), waits until the lock is granted, and returns the
// session's connection id and a channel that receives the query's outcome.
// The session is killed when the test ends.
func (d *DB) Blocker(t testing.TB, query string) (id int64, done <-chan error) {
	t.Helper()
	conn, err := d.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRowContext(context.Background(), "SELECT CONNECTION_ID()").Scan(&id); err != nil {
		t.Fatal(err)
	}
	ch := make(chan error, 1)
	go func() {
		_, err := conn.ExecContext(context.Background(), query)
		conn.Close()
		ch <- err
	}()
	t.Cleanup(func() { d.Exec(fmt.Sprintf("KILL %d", id)) })
	for i := 0; i < 200; i++ {
		var n int
		d.QueryRow(`SELECT COUNT(*) FROM performance_schema.metadata_locks ml JOIN performance_schema.threads th
			ON th.THREAD_ID = ml.OWNER_THREAD_ID WHERE th.PROCESSLIST_ID = ? AND ml.OBJECT_TYPE = 'TABLE'
			AND ml.LOCK_STATUS = 'GRANTED'`, id).Scan(&n)
		if n > 0 {
			return id, ch
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the blocker never took its lock")
	return 0, nil
}

// Processes counts the server's sessions that match where, a condition on
// the process list's columns (ID, USER, HOST, DB, COMMAND, TIME, STATE,
// INFO). MySQL's information_schema.PROCESSLIST is utf8mb3 and fails (error
// 3854) while any session's statement holds a 4-byte character, as other
// packages' tests do at the same time; performance_schema.processlist is the
// same list in utf8mb4. MariaDB has only the first, and it never fails so.
func (d *DB) Processes(t testing.TB, where string, args ...any) int {
	t.Helper()
	var n int
	err := d.QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE "+where, args...).Scan(&n)
	if me := (*mysql.MySQLError)(nil); errors.As(err, &me) && me.Number == 3854 {
		err = d.QueryRow("SELECT COUNT(*) FROM performance_schema.processlist WHERE "+where, args...).Scan(&n)
	}
	if err != nil {
		t.Fatalf("read the process list: %v", err)
	}
	return n
}
