package testdb

import (
	"context"
	"database/sql"
	"sync"
	"testing"
)

// Writers runs n goroutines, each on a connection of its own, calling write
// with the goroutine's number (1..n) over and over until stop is called (at
// the latest when the test ends). stop waits for them.
func (db *DB) Writers(t testing.TB, n int, write func(c *sql.Conn, id int)) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for id := 1; id <= n; id++ {
		c, err := db.Conn(context.Background())
		if err != nil {
			cancel()
			wg.Wait()
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			for ctx.Err() == nil {
				write(c, id)
			}
		}()
	}
	stop = sync.OnceFunc(func() { cancel(); wg.Wait() })
	t.Cleanup(stop)
	return stop
}
