package migration_test

// The catalogue's concurrent writers. Each writer owns the logical rows n
// with n % writers == its number: rows 1..rows exist after the setup, new
// ones are drawn from its own residue class above them. A writer's
// statements come from the scenario's templates, so replaying each writer's
// log in order on a copy of the table taken before the writes (the model)
// reproduces the table's final state without sluice.

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/testdb"
)

// catWriters runs a scenario's workload.
type catWriters struct {
	sc    *catScenario
	db    *testdb.DB
	table string

	logs [][]stmt // per writer, the statements that took effect, in order
	ops  atomic.Int64
	errs atomic.Int64

	stopOnce sync.Once
	stop     chan struct{}
	wg       sync.WaitGroup
}

// catValue draws the value of one placeholder.
func catValue(r *rand.Rand, kind byte) any {
	pick := func(v ...string) string { return v[r.IntN(len(v))] }
	switch kind {
	case 'r':
		return r.IntN(1_000_000)
	case 's': // utf8mb4: 4-byte characters, quotes, backslashes, empty
		return pick("café", "😀漢字ü", "Ключ", "naïve façade", "", "a'b\"c\\d", "𝄞 clef", "Ω≈ç√") + fmt.Sprint(r.IntN(100))
	case 'l': // latin1
		return pick("café", "naïve", "Øre", "a'b", "¡olé!", "") + fmt.Sprint(r.IntN(100))
	case 'g': // gbk
		return pick("汉字", "中文测试", "数据库", "ab汉") + fmt.Sprint(r.IntN(100))
	case 'b': // bytes, often ending in zero bytes
		b := make([]byte, r.IntN(8))
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		if r.IntN(2) == 0 {
			b = append(b, 0, 0)
		}
		return b
	case 'd': // a DATETIME(6) that is also a valid TIMESTAMP, DST changes included
		base := pick("2024-03-31 02:30:00", "2024-10-27 02:30:00", "2024-03-10 02:15:00", "1999-12-31 23:59:59", "2037-12-31 23:59:59", "1970-01-02 00:00:00")
		return fmt.Sprintf("%s.%06d", base, r.IntN(1_000_000))
	case 'j':
		return fmt.Sprintf(`{"n": %d, "s": %q, "a": [1, 2.5, null, true], "o": {"k": "ü😀"}}`, r.IntN(1000), pick("x", "ü", "😀"))
	case 'u':
		return uint64(1)<<63 + r.Uint64N(1<<62)
	case 'x': // a larger text, for BLOB/TEXT columns
		return strings.Repeat(pick("blob ", "ü😀 ", "x"), 200+r.IntN(2000))
	}
	panic(fmt.Sprintf("placeholder ?%c", kind))
}

// catBind turns a template into statements: {t} is the table, ?n a live
// row, ?o another live row, ?m a fresh row, the other ?x placeholders values
// (catValue). A template of several statements (separated by ";;") is one
// transaction.
func catBind(tmpl, table string, r *rand.Rand, n, o, m int64) []stmt {
	var out []stmt
	for _, part := range strings.Split(tmpl, ";;") {
		q := strings.ReplaceAll(strings.TrimSpace(part), "{t}", dbconn.QuoteIdent(table))
		var b strings.Builder
		var args []any
		for i := 0; i < len(q); i++ {
			if q[i] != '?' || i+1 == len(q) || !strings.ContainsRune("nomrslgbdjux", rune(q[i+1])) {
				b.WriteByte(q[i])
				continue
			}
			i++
			switch q[i] {
			case 'n':
				args = append(args, n)
			case 'o':
				args = append(args, o)
			case 'm':
				args = append(args, m)
			default:
				args = append(args, catValue(r, q[i]))
			}
			b.WriteByte('?')
		}
		out = append(out, stmt{b.String(), args})
	}
	return out
}

// catAppSession prepares a connection as an application's: the server's
// own sql_mode, time zone and isolation, then the scenario's settings.
func catAppSession(ctx context.Context, c *sql.Conn, zone string, extra []string) error {
	tz := "@@GLOBAL.time_zone"
	if zone != "" {
		tz = dbconn.QuoteString(zone)
	}
	q := "SET SESSION sql_mode = @@GLOBAL.sql_mode, time_zone = " + tz + ", transaction_isolation = @@GLOBAL.transaction_isolation"
	if _, err := c.ExecContext(ctx, q); dbconn.ErrorNumber(err) == dbconn.ErrUnknownSystemVariable {
		// MariaDB before 11.1 names it tx_isolation.
		q = strings.ReplaceAll(q, "transaction_isolation", "tx_isolation")
		extra = slices.Clone(extra)
		for i := range extra {
			extra[i] = strings.ReplaceAll(extra[i], "transaction_isolation", "tx_isolation")
		}
	}
	for _, s := range append([]string{q}, extra...) {
		if _, err := c.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	return nil
}

func (w *catWriters) zone(i int) string {
	if len(w.sc.Zones) == 0 {
		return ""
	}
	return w.sc.Zones[i%len(w.sc.Zones)]
}

// start launches the writers.
func (w *catWriters) start(t *testing.T) {
	sc := w.sc
	w.logs = make([][]stmt, sc.Writers)
	w.stop = make(chan struct{})
	t.Cleanup(w.halt) // a test that fails early stops its writers too
	for i := 0; i < sc.Writers; i++ {
		c, err := w.db.Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if err := catAppSession(context.Background(), c, w.zone(i), sc.Session); err != nil {
			t.Fatalf("writer %d: %v", i, err)
		}
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			defer c.Close()
			w.run(t, i, c)
		}()
	}
}

// halt stops the writers and waits for them (idempotent).
func (w *catWriters) halt() {
	w.stopOnce.Do(func() { close(w.stop) })
	w.wg.Wait()
}

// run is writer i's loop.
func (w *catWriters) run(t *testing.T, i int, c *sql.Conn) {
	sc := w.sc
	r := rand.New(rand.NewPCG(uint64(i)+1, uint64(sc.Line)))
	nw := int64(sc.Writers)
	var live []int64
	for n := int64(1); n <= sc.Rows; n++ {
		if n%nw == int64(i) {
			live = append(live, n)
		}
	}
	next := sc.Rows + 1
	for next%nw != int64(i) {
		next++
	}
	fresh := func() int64 { m := next; next += nw; return m }
	takeLive := func(remove bool) int64 {
		k := r.IntN(len(live))
		n := live[k]
		if remove {
			live[k] = live[len(live)-1]
			live = live[:len(live)-1]
		}
		return n
	}
	other := func(n int64) int64 {
		for {
			if o := live[r.IntN(len(live))]; o != n {
				return o
			}
		}
	}
	// pick draws the next statement and updates the live set.
	pick := func() ([]stmt, bool) {
		weights := [4]int{sc.Mix[0], sc.Mix[1], sc.Mix[2], sc.Mix[3]}
		if len(sc.Update) == 0 {
			weights[1] = 0
		}
		if sc.Move == "" {
			weights[2] = 0
		}
		if sc.Delete == "" {
			weights[3] = 0
		}
		if len(live) < 5 {
			weights = [4]int{1, 0, 0, 0}
		}
		total := weights[0] + weights[1] + weights[2] + weights[3]
		if total == 0 {
			return nil, false
		}
		p := r.IntN(total)
		switch {
		case p < weights[0]:
			m := fresh()
			live = append(live, m)
			return catBind(sc.Insert, w.table, r, m, m, m), true
		case p < weights[0]+weights[1]:
			n := takeLive(false)
			return catBind(sc.Update[r.IntN(len(sc.Update))], w.table, r, n, other(n), n), true
		case p < weights[0]+weights[1]+weights[2]:
			n, m := takeLive(true), fresh()
			live = append(live, m)
			return catBind(sc.Move, w.table, r, n, n, m), true
		default:
			n := takeLive(true)
			return catBind(sc.Delete, w.table, r, n, n, n), true
		}
	}
	batch := max(sc.Txn, 1)
	for {
		select {
		case <-w.stop:
			return
		default:
		}
		var todo []stmt
		for n := 0; n < batch; n++ {
			s, ok := pick()
			if !ok {
				return
			}
			todo = append(todo, s...)
		}
		if err := w.exec(c, todo, sc.Txn > 0 || len(todo) > 1); err != nil {
			// The table may be gone or changed by the scenario's own DDL;
			// the scenario's oracle judges. Stop this writer.
			w.errs.Add(1)
			t.Logf("writer %d stops: %v", i, err)
			return
		}
		w.logs[i] = append(w.logs[i], todo...)
		w.ops.Add(int64(len(todo)))
		if sc.Pace > 0 {
			time.Sleep(sc.Pace)
		}
	}
}

// exec runs statements, in one transaction when txn is set, retrying the
// whole of it when the server picks it as a deadlock victim (its statements
// had no effect; the writer owns its rows, so the retry does the same).
func (w *catWriters) exec(c *sql.Conn, todo []stmt, txn bool) error {
	ctx := context.Background()
	var err error
	for attempt := 0; attempt < 20; attempt++ {
		err = func() error {
			if txn {
				if _, err := c.ExecContext(ctx, "BEGIN"); err != nil {
					return err
				}
			}
			for _, s := range todo {
				res, err := c.ExecContext(ctx, s.sql, s.args...)
				if err != nil {
					return err
				}
				if n, _ := res.RowsAffected(); n == 0 && (strings.HasPrefix(s.sql, "INSERT") || strings.HasPrefix(s.sql, "DELETE")) {
					return fmt.Errorf("%s %v affected no row: the writer's view of its rows is wrong", s.sql, s.args)
				}
			}
			if txn {
				_, err := c.ExecContext(ctx, "COMMIT")
				return err
			}
			return nil
		}()
		if err == nil || !dbconn.Retryable(err) {
			break
		}
		if txn {
			c.ExecContext(ctx, "ROLLBACK")
		}
	}
	if err != nil && txn {
		c.ExecContext(ctx, "ROLLBACK")
	}
	return err
}

// replay applies every writer's log, in order, to table model, each in its
// writer's session settings.
func (w *catWriters) replay(t *testing.T, model string) {
	t.Helper()
	from, to := dbconn.QuoteIdent(w.table), dbconn.QuoteIdent(model)
	for i, log := range w.logs {
		c, err := w.db.Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if err := catAppSession(context.Background(), c, w.zone(i), w.sc.Session); err != nil {
			t.Fatal(err)
		}
		// In transactions of a few hundred statements: one commit each.
		for j, s := range log {
			if j%300 == 0 {
				if j > 0 {
					c.ExecContext(context.Background(), "COMMIT")
				}
				c.ExecContext(context.Background(), "BEGIN")
			}
			q := strings.ReplaceAll(s.sql, from, to)
			if _, err := c.ExecContext(context.Background(), q, s.args...); err != nil {
				c.Close()
				t.Fatalf("replay writer %d: %s: %v", i, q, err)
			}
		}
		if _, err := c.ExecContext(context.Background(), "COMMIT"); err != nil {
			t.Fatalf("replay writer %d: commit: %v", i, err)
		}
		c.Close()
	}
}
