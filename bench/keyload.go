package bench

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
)

// The key round's load generator: writers making autocommit single-row
// writes on random keys of one table, at a target rate, recorded second by
// second in a Load like sysbench's. It is an application: its sessions keep
// the server's defaults (lock waits included), and it ignores failures
// (deadlocks, lock wait timeouts) as sysbench does with
// --mysql-ignore-errors=all, counting them.

// keyMix is the generator's mix of writes, in percent.
var keyMix = []struct {
	kind keyWrite
	pct  int
}{{writeUpdate, 55}, {writeInsert, 15}, {writeDelete, 15}, {writeMove, 15}}

const keyMixText = "55% updates of k and c, 15% inserts, 15% deletes, 15% updates of the primary key"

type keyWrite int

const (
	writeUpdate keyWrite = iota // UPDATE ... SET k = k + 1, c = ? WHERE key
	writeInsert                 // INSERT a new key
	writeDelete                 // DELETE WHERE key
	writeMove                   // UPDATE ... SET key = a new key WHERE key
)

// keyStatements are one table's statements.
type keyStatements struct {
	update, insert, delete, move string
}

func statementsFor(kt keyTable) keyStatements {
	t := benchDB + "." + kt.name
	var where, set []string
	for _, c := range kt.keyCols {
		where = append(where, c+" = ?")
		set = append(set, c+" = ?")
	}
	w := strings.Join(where, " AND ")
	marks := strings.Repeat("?, ", len(kt.keyCols))
	return keyStatements{
		update: "UPDATE " + t + " SET k = k + 1, c = ? WHERE " + w,
		insert: "INSERT INTO " + t + " (" + strings.Join(kt.keyCols, ", ") + ", k, c, pad) VALUES (" + marks + "?, ?, ?)",
		delete: "DELETE FROM " + t + " WHERE " + w,
		move:   "UPDATE " + t + " SET " + strings.Join(set, ", ") + " WHERE " + w,
	}
}

// pickWrite draws a write from the mix.
func pickWrite(r *rand.Rand) keyWrite {
	p := r.IntN(100)
	for _, m := range keyMix {
		if p < m.pct {
			return m.kind
		}
		p -= m.pct
	}
	return writeUpdate
}

// digits is sysbench's text for c and pad: groups of 11 digits joined by
// dashes.
func digits(r *rand.Rand, groups int) string {
	b := make([]byte, 0, groups*12)
	for g := range groups {
		if g > 0 {
			b = append(b, '-')
		}
		for range 11 {
			b = append(b, byte('0'+r.IntN(10)))
		}
	}
	return string(b)
}

// StartKeyLoad starts the generator on sbtest.<kt.name>, a table made from
// rows template rows: threads writers making rate writes a second in all
// (0: as many as they can). New keys (inserts, key updates) are numbered
// from rows+1 on; a write on an existing key picks any number issued so far,
// so some find no row (deleted or moved), as an application's would.
func (s *Server) StartKeyLoad(ctx context.Context, kt keyTable, threads int, rate float64, rows int) (*Load, error) {
	mc := mysql.NewConfig()
	mc.User, mc.Passwd, mc.Net = s.Conn.User, s.Conn.Password, "tcp"
	mc.Addr = s.Conn.Host + ":" + strconv.Itoa(s.Conn.Port)
	mc.InterpolateParams = true
	mc.Params = map[string]string{"charset": "utf8mb4"}
	db, err := sql.Open("mysql", mc.FormatDSN())
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(threads)
	db.SetMaxIdleConns(threads)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("key load: %w", err)
	}
	st := statementsFor(kt)
	gctx, cancel := context.WithCancel(ctx)
	l := &Load{done: make(chan struct{}), start: time.Now()}
	var next atomic.Int64 // the highest key number issued
	next.Store(int64(rows))
	var misses, writes atomic.Int64
	var wg sync.WaitGroup

	// With a rate, a pacer hands out one token per write due, like
	// sysbench's --rate: writers that fall behind catch up afterwards.
	var tokens chan struct{}
	if rate > 0 {
		tokens = make(chan struct{}, 1<<16)
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(time.Millisecond)
			defer t.Stop()
			sent := 0
			for {
				select {
				case <-gctx.Done():
					return
				case <-t.C:
				}
				for due := int(time.Since(l.start).Seconds() * rate); sent < due; sent++ {
					select {
					case tokens <- struct{}{}:
					default: // the queue is full: the write is dropped
					}
				}
			}
		}()
	}
	// Seconds without a single write still count, as zeros.
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-gctx.Done():
				return
			case <-t.C:
				l.tally(time.Since(l.start), 0, 0)
			}
		}
	}()
	for w := range threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			for {
				if tokens != nil {
					select {
					case <-gctx.Done():
						return
					case <-tokens:
					}
				} else if gctx.Err() != nil {
					return
				}
				n := 1 + r.Int64N(next.Load())
				var q string
				var args []any
				switch pickWrite(r) {
				case writeUpdate:
					q, args = st.update, append([]any{digits(r, 10)}, kt.keyOf(n)...)
				case writeInsert:
					q, args = st.insert, append(kt.keyOf(next.Add(1)), 1+r.IntN(rows), digits(r, 10), digits(r, 5))
				case writeDelete:
					q, args = st.delete, kt.keyOf(n)
				case writeMove:
					q, args = st.move, append(kt.keyOf(next.Add(1)), kt.keyOf(n)...)
				}
				res, err := db.ExecContext(gctx, q, args...)
				if gctx.Err() != nil {
					return
				}
				if err != nil {
					l.tally(time.Since(l.start), 0, 1)
					continue
				}
				writes.Add(1)
				if a, _ := res.RowsAffected(); a == 0 {
					misses.Add(1)
				}
				l.tally(time.Since(l.start), 1, 0)
			}
		}()
	}
	l.halt = func() {
		cancel()
		wg.Wait()
		db.Close()
		close(l.done)
		if n := writes.Load(); n > 0 {
			logf("  key load on %s: %d writes, %.0f%% of them found no row (deleted or moved)", kt.name, n, float64(misses.Load())*100/float64(n))
		}
	}
	return l, nil
}

// tally adds ok writes and failed ones to the second at offset at, first
// filling every second before it (with zeros if none).
func (l *Load) tally(at time.Duration, ok, failed float64) {
	sec := int(at / time.Second)
	l.mu.Lock()
	defer l.mu.Unlock()
	for len(l.tps) <= sec {
		l.tps = append(l.tps, 0)
		l.errs = append(l.errs, 0)
	}
	l.tps[sec] += ok
	l.errs[sec] += failed
}
