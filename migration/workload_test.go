package migration_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/testdb"
)

// workload drives concurrent writers against a table and keeps, per writer,
// the exact statements that succeeded. Writers own disjoint sets of logical
// row numbers (n % writers), so replaying each writer's log in order onto a
// reference table with the original schema reproduces the table's expected
// final state: an oracle that does not depend on sluice.
type workload struct {
	table  string
	pk     []string
	key    func(n int64) []any // primary-key values of logical row n
	cols   []string            // other written columns
	gen    func(r *rand.Rand, n int64) []any
	update []func(r *rand.Rand) (set string, args []any)
	zones  []string // session time zones, one per writer in turn

	writers   int
	logs      [][]stmt
	ops       atomic.Int64
	deadlocks atomic.Int64
	halt      atomic.Bool // writers stop at their next statement
	live      []map[int64]bool
	next      []int64
}

type stmt struct {
	sql  string
	args []any
}

func (w *workload) where() string {
	parts := make([]string, len(w.pk))
	for i, c := range w.pk {
		parts[i] = dbconn.QuoteIdent(c) + " = ?"
	}
	return strings.Join(parts, " AND ")
}

func (w *workload) insertSQL(table string) string {
	all := append(append([]string{}, w.pk...), w.cols...)
	q := make([]string, len(all))
	ph := make([]string, len(all))
	for i, c := range all {
		q[i], ph[i] = dbconn.QuoteIdent(c), "?"
	}
	return "INSERT INTO " + dbconn.QuoteIdent(table) + " (" + strings.Join(q, ", ") + ") VALUES (" + strings.Join(ph, ", ") + ")"
}

// zone returns writer i's session time zone.
func (w *workload) zone(i int) string {
	if len(w.zones) == 0 {
		return "+00:00"
	}
	return w.zones[i%len(w.zones)]
}

func (w *workload) conn(t *testing.T, db *testdb.DB, i int) *sql.Conn {
	t.Helper()
	c, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ExecContext(context.Background(), "SET time_zone = ?", w.zone(i)); err != nil {
		t.Fatal(err)
	}
	return c
}

// load inserts rows 0..n-1 into the table and into ref, each writer's rows
// through that writer's time zone.
func (w *workload) load(t *testing.T, db *testdb.DB, ref string, n int64) {
	t.Helper()
	w.logs = make([][]stmt, w.writers)
	w.live = make([]map[int64]bool, w.writers)
	w.next = make([]int64, w.writers)
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < w.writers; i++ {
		w.live[i] = map[int64]bool{}
		c := w.conn(t, db, i)
		tx, err := c.BeginTx(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		for row := int64(i); row < n; row += int64(w.writers) {
			args := append(w.key(row), w.gen(r, row)...)
			for _, tbl := range []string{w.table, ref} {
				if _, err := tx.Exec(w.insertSQL(tbl), args...); err != nil {
					t.Fatalf("load row %d: %v", row, err)
				}
			}
			w.live[i][row] = true
			w.next[i] = row + int64(w.writers)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
}

// start starts the writers and returns what stops them and waits for them
// (once, however often it is called: a deferred call after an explicit one
// does nothing).
func (w *workload) start(t *testing.T, db *testdb.DB) (stop func()) {
	ch := make(chan struct{})
	wait := w.run(t, db, ch)
	var once sync.Once
	return func() { once.Do(func() { close(ch); wait() }) }
}

// run starts the writers; they write until stop is closed, or the test ends
// (a t.Fatal before stop is closed: a writer must not report after that).
// wait returns once they have all stopped.
func (w *workload) run(t *testing.T, db *testdb.DB, stop <-chan struct{}) (wait func()) {
	var wg sync.WaitGroup
	ended := make(chan struct{})
	t.Cleanup(func() { close(ended); wg.Wait() })
	for i := 0; i < w.writers; i++ {
		wg.Add(1)
		c := w.conn(t, db, i)
		go func() {
			defer wg.Done()
			defer c.Close()
			r := rand.New(rand.NewPCG(uint64(i), 99))
			for {
				select {
				case <-stop:
					return
				case <-ended:
					return
				default:
				}
				if w.halt.Load() {
					return
				}
				s, ok := w.pick(r, i)
				if !ok {
					continue
				}
				res, err := c.ExecContext(context.Background(), s.sql, s.args...)
				for retry := 0; err != nil && dbconn.Retryable(err) && retry < 10; retry++ {
					// A deadlock victim's statement had no effect: an
					// application retries it, and so does the writer.
					w.deadlocks.Add(1)
					res, err = c.ExecContext(context.Background(), s.sql, s.args...)
				}
				if err != nil {
					t.Errorf("writer %d: %s: %v", i, s.sql, err)
					return
				}
				if n, _ := res.RowsAffected(); n == 0 && !strings.HasPrefix(s.sql, "UPDATE") {
					t.Errorf("writer %d: %s affected no row", i, s.sql)
					return
				}
				w.logs[i] = append(w.logs[i], s)
				w.ops.Add(1)
			}
		}()
	}
	return wg.Wait
}

// pick chooses writer i's next statement and updates its view of live rows.
func (w *workload) pick(r *rand.Rand, i int) (stmt, bool) {
	live := w.live[i]
	any := func() (int64, bool) {
		if len(live) == 0 {
			return 0, false
		}
		k := r.IntN(len(live))
		for n := range live {
			if k == 0 {
				return n, true
			}
			k--
		}
		return 0, false
	}
	tbl := dbconn.QuoteIdent(w.table)
	switch p := r.IntN(100); {
	case p < 25 || len(live) < 10: // insert a new row
		n := w.next[i]
		w.next[i] += int64(w.writers)
		live[n] = true
		return stmt{w.insertSQL(w.table), append(w.key(n), w.gen(r, n)...)}, true
	case p < 65: // update other columns
		n, ok := any()
		if !ok {
			return stmt{}, false
		}
		set, args := w.update[r.IntN(len(w.update))](r)
		return stmt{"UPDATE " + tbl + " SET " + set + " WHERE " + w.where(), append(args, w.key(n)...)}, true
	case p < 80: // move a row to a new primary key
		n, ok := any()
		if !ok {
			return stmt{}, false
		}
		m := w.next[i]
		w.next[i] += int64(w.writers)
		delete(live, n)
		live[m] = true
		sets := make([]string, len(w.pk))
		for j, c := range w.pk {
			sets[j] = dbconn.QuoteIdent(c) + " = ?"
		}
		return stmt{"UPDATE " + tbl + " SET " + strings.Join(sets, ", ") + " WHERE " + w.where(), append(w.key(m), w.key(n)...)}, true
	default: // delete
		n, ok := any()
		if !ok {
			return stmt{}, false
		}
		delete(live, n)
		return stmt{"DELETE FROM " + tbl + " WHERE " + w.where(), w.key(n)}, true
	}
}

// replay applies every writer's log, in its order, to table ref.
func (w *workload) replay(t *testing.T, db *testdb.DB, ref string) {
	t.Helper()
	from := dbconn.QuoteIdent(w.table)
	to := dbconn.QuoteIdent(ref)
	for i, log := range w.logs {
		c := w.conn(t, db, i)
		for _, s := range log {
			q := strings.Replace(s.sql, from, to, 1)
			if _, err := c.ExecContext(context.Background(), q, s.args...); err != nil {
				t.Fatalf("replay writer %d: %s: %v", i, q, err)
			}
		}
		c.Close()
	}
}

// compare fails the test unless table and ref hold the same rows in cols.
func compare(t *testing.T, db *testdb.DB, table, ref, cols, orderBy string) {
	t.Helper()
	got := db.Dump(t, table, cols, orderBy)
	want := db.Dump(t, ref, cols, orderBy)
	if len(got) != len(want) {
		t.Errorf("%s has %d rows, the model %d", table, len(got), len(want))
	}
	bad := 0
	for i := 0; i < min(len(got), len(want)); i++ {
		if fmt.Sprint(got[i]) != fmt.Sprint(want[i]) {
			if bad < 5 {
				t.Errorf("row %d differs:\n got  %v\n want %v", i, got[i], want[i])
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d rows differ", bad, len(want))
	}
}
