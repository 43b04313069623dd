package migration_test

// The catalogue's faults that run beside a migration: a session holding the
// table's metadata lock, and the kill of sluice's binlog connection.

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/testdb"
)

// catExecer runs statements (a *sql.Conn or a *sql.DB).
type catExecer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// catBlock opens a transaction that reads the table, so that it holds a
// shared metadata lock, and commits it after the scenario's hold. Meanwhile
// a probe queries the table like an application and records its slowest
// query: one that queued behind sluice's lock request.
func catBlock(t *testing.T, d *testdb.DB, sc *catScenario, st *catRunState, bg *sync.WaitGroup, done <-chan struct{}) {
	ctx := context.Background()
	c, err := d.Conn(ctx)
	if err != nil {
		t.Error(err)
		return
	}
	q := dbconn.QuoteIdent(sc.Table)
	for _, s := range []string{"BEGIN", "SELECT COUNT(*) FROM " + q} {
		if _, err := c.ExecContext(ctx, s); err != nil {
			t.Errorf("blocker: %s: %v", s, err)
		}
	}
	bg.Add(2)
	go func() {
		defer bg.Done()
		defer c.Close()
		select {
		case <-time.After(sc.Blocker.Hold):
		case <-done:
		}
		c.ExecContext(ctx, "COMMIT")
	}()
	go func() {
		defer bg.Done()
		end := time.After(sc.Blocker.Hold + 2*time.Second)
		for {
			select {
			case <-end:
				return
			case <-done:
				return
			case <-time.After(50 * time.Millisecond):
			}
			start := time.Now()
			var n int
			d.QueryRow("SELECT COUNT(*) FROM " + q + " WHERE 1 = 0").Scan(&n)
			took := time.Since(start)
			st.mu.Lock()
			st.probes++
			st.worst = max(st.worst, took)
			st.mu.Unlock()
		}
	}()
}

// catKillBinlog kills the run's binlog connection (a Binlog Dump thread of
// the scenario's own account) the scenario's number of times.
func catKillBinlog(t *testing.T, d *testdb.DB, sc *catScenario, user string, st *catRunState, bg *sync.WaitGroup, done <-chan struct{}) {
	bg.Add(1)
	go func() {
		defer bg.Done()
		for i := 0; i < sc.Kill.Times; i++ {
			select {
			case <-time.After(sc.Kill.Every):
			case <-done:
				return
			}
			rows, err := d.Query(`SELECT PROCESSLIST_ID FROM performance_schema.threads
				WHERE PROCESSLIST_USER = ? AND PROCESSLIST_COMMAND LIKE 'Binlog Dump%'`, user)
			if err != nil {
				t.Errorf("find the binlog connection: %v", err)
				return
			}
			var ids []int64
			for rows.Next() {
				var id int64
				rows.Scan(&id)
				ids = append(ids, id)
			}
			rows.Close()
			for _, id := range ids {
				if _, err := d.Exec(fmt.Sprintf("KILL %d", id)); err == nil {
					st.mu.Lock()
					st.kills++
					st.mu.Unlock()
				}
			}
		}
	}()
}
