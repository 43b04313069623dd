package binlog_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/binlog"
	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/dbconn/dbconntest"
	"github.com/sluicedb/sluice/internal/rowkey"
	"github.com/sluicedb/sluice/internal/schema"
	"github.com/sluicedb/sluice/internal/testdb"
)

// startWith starts a streamer on table at the current end of the binary
// log, with the server settings conn, sink, and reconnects for up to
// reconnectFor, logging to logs.
func startWith(t *testing.T, db *testdb.DB, conn dbconn.Config, table string, sink binlog.Sink, reconnectFor time.Duration, logs *testdb.SyncBuffer) *binlog.Streamer {
	t.Helper()
	ctx := context.Background()
	tbl, err := schema.Load(ctx, db.DB, db.Name, table)
	if err != nil {
		t.Fatal(err)
	}
	key, err := rowkey.NewCols(tbl.PKColumns())
	if err != nil {
		t.Fatal(err)
	}
	pos, err := binlog.CurrentPosition(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	s, err := binlog.Start(ctx, binlog.Config{Conn: conn, Flavor: db.Flavor, Database: db.Name, Table: table,
		Columns: len(tbl.Columns), Key: key, Sink: sink, ReconnectFor: reconnectFor,
		Logger: slog.New(slog.NewTextHandler(logs, nil))}, pos)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// dumpThread waits until the streamer has a connection and returns its id,
// checking that the server runs a Binlog Dump command on it.
func dumpThread(t *testing.T, db *testdb.DB, s *binlog.Streamer, not uint32) uint32 {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if err := s.Err(); err != nil {
			t.Fatalf("the streamer stopped: %v", err)
		}
		if id := binlog.ConnectionID(s); id != 0 && id != not {
			if db.Processes(t, "ID = ? AND COMMAND LIKE 'Binlog Dump%'", id) == 1 {
				return id
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the streamer has no Binlog Dump connection after 30s")
	return 0
}

// writer inserts rows with keys from 1 up, alone or several in a
// transaction with an update, until stop is closed, and returns the keys
// it committed.
func writer(t *testing.T, db *testdb.DB, table string, stop <-chan struct{}) <-chan []int {
	out := make(chan []int, 1)
	go func() {
		var keys []int
		next := 1
		for i := 0; ; i++ {
			select {
			case <-stop:
				out <- keys
				return
			default:
			}
			if i%3 == 0 {
				if _, err := db.Exec(fmt.Sprintf("INSERT INTO `%s` VALUES (%d, 'a')", table, next)); err != nil {
					t.Errorf("insert: %v", err)
					out <- keys
					return
				}
				keys = append(keys, next)
				next++
				continue
			}
			tx, err := db.Begin()
			if err == nil {
				_, err = tx.Exec(fmt.Sprintf("INSERT INTO `%s` VALUES (%d, 'b'), (%d, 'b'), (%d, 'b')", table, next, next+1, next+2))
			}
			if err == nil {
				_, err = tx.Exec(fmt.Sprintf("UPDATE `%s` SET v = 'c' WHERE id = %d", table, next+1))
			}
			if err == nil {
				err = tx.Commit()
			}
			if err != nil {
				t.Errorf("transaction: %v", err)
				out <- keys
				return
			}
			keys = append(keys, next, next+1, next+2)
			next += 3
		}
	}()
	return out
}

// missing returns the keys of want that the sink never received.
func missing(sink *collector, want []int) []int {
	got := map[string]bool{}
	for _, k := range sink.take() {
		got[k] = true
	}
	var out []int
	for _, k := range want {
		if !got[fmt.Sprint(k)] {
			out = append(out, k)
		}
	}
	return out
}

// TestReconnectAfterKill: the streamer's Binlog Dump thread is KILLed three
// times while a writer inserts rows; the streamer reconnects each time, and
// every key the writer committed (its own record) reaches the sink.
func TestReconnectAfterKill(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(200))")
	logs := &testdb.SyncBuffer{}
	sink := &collector{}
	s := startWith(t, db, db.Server, "t", sink, time.Minute, logs)

	stop := make(chan struct{})
	written := writer(t, db, "t", stop)
	id := uint32(0)
	for range 3 {
		id = dumpThread(t, db, s, id)
		time.Sleep(300 * time.Millisecond)
		db.MustExec(t, fmt.Sprintf("KILL %d", id))
	}
	dumpThread(t, db, s, id) // reconnected after the last kill
	time.Sleep(300 * time.Millisecond)
	close(stop)
	keys := <-written
	caughtUp(t, db, s)
	if err := s.Err(); err != nil {
		t.Fatalf("Err() = %v after the reconnects", err)
	}
	if m := missing(sink, keys); len(m) > 0 {
		t.Fatalf("%d of %d keys never reached the sink: %.20v", len(m), len(keys), m)
	}
	if n := strings.Count(logs.String(), "binlog connection lost; reconnecting"); n < 3 {
		t.Errorf("%d reconnect lines logged, want 3 or more:\n%s", n, logs)
	}
	t.Logf("%d keys written and received across 3 kills; log:\n%s", len(keys), logs)
}

// blockingSink holds the reader in its first Add of a key from block up,
// until release is closed, and records the streamer's position then.
type blockingSink struct {
	collector
	block   int
	s       *binlog.Streamer
	entered chan binlog.Position
	release chan struct{}
	once    sync.Once
	seen    map[string]int // times each key was received
	mu      sync.Mutex
}

func (b *blockingSink) Add(keys ...rowkey.Key) {
	b.mu.Lock()
	for _, k := range keys {
		b.seen[fmt.Sprint(k...)]++
	}
	b.mu.Unlock()
	b.collector.Add(keys...)
	for _, k := range keys {
		if v, ok := k[0].(int64); ok && int(v) >= b.block {
			b.once.Do(func() {
				b.entered <- b.s.Position()
				<-b.release
			})
			return
		}
	}
}

// TestReconnectMidTransaction: the connection breaks while the reader is in
// the middle of a large transaction (the sink holds it at the
// transaction's first rows while the dump thread is KILLed). The streamer's
// position is still before the transaction, reading resumes there, and
// every key of the transaction reaches the sink: part of them twice.
func TestReconnectMidTransaction(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(200))")
	logs := &testdb.SyncBuffer{}
	sink := &blockingSink{block: 1_000_000, entered: make(chan binlog.Position, 1), release: make(chan struct{}), seen: map[string]int{}}
	s := startWith(t, db, db.Server, "t", sink, time.Minute, logs)
	sink.s = s
	id := dumpThread(t, db, s, 0)

	db.MustExec(t, "INSERT INTO t VALUES (1, 'before')")
	const rows = 20000
	conn := session(t, db, false)
	run(t, conn, "BEGIN")
	for lo := 1_000_000; lo < 1_000_000+rows; lo += 1000 {
		run(t, conn, fmt.Sprintf("INSERT INTO t SELECT n, REPEAT('x', 200) FROM (WITH RECURSIVE s(n) AS "+
			"(SELECT %d UNION ALL SELECT n + 1 FROM s WHERE n < %d) SELECT n FROM s) x", lo, lo+999))
	}
	run(t, conn, "COMMIT")

	var at binlog.Position
	select {
	case at = <-sink.entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the transaction's keys never reached the sink")
	}
	// The position is a transaction's start (other sessions may write to
	// the server's binlog too): its next event is a GTID event.
	var file, typ, info string
	var pos, server, end any
	err := db.QueryRow(fmt.Sprintf("SHOW BINLOG EVENTS IN '%s' FROM %d LIMIT 1", at.File, at.Pos)).Scan(&file, &pos, &typ, &server, &end, &info)
	if err != nil || !strings.Contains(typ, "Gtid") {
		t.Errorf("inside the transaction the streamer's position is %s, whose event is %q (%v), not a transaction's start", at, typ, err)
	}
	db.MustExec(t, fmt.Sprintf("KILL %d", id))
	time.Sleep(500 * time.Millisecond)
	close(sink.release)
	dumpThread(t, db, s, id)
	caughtUp(t, db, s)
	if err := s.Err(); err != nil {
		t.Fatalf("Err() = %v after the reconnect", err)
	}
	want := []int{1}
	for k := 1_000_000; k < 1_000_000+rows; k++ {
		want = append(want, k)
	}
	if m := missing(&sink.collector, want); len(m) > 0 {
		t.Fatalf("%d of %d keys never reached the sink: %.20v", len(m), len(want), m)
	}
	twice := 0
	for k := 1_000_000; k < 1_000_000+rows; k++ {
		if sink.seen[fmt.Sprint(k)] > 1 {
			twice++
		}
	}
	if sink.seen["1000000"] < 2 {
		t.Errorf("the transaction's first key was received %d times, %d of its keys twice: reading did not resume from before it", sink.seen["1000000"], twice)
	}
	t.Logf("%d of the transaction's %d keys received twice; log:\n%s", twice, rows, logs)
}

// TestReconnectThroughProxy: connections through a proxy that cuts them
// (a network error, not a KILL) and then refuses new ones for a while (a
// server restarting). The streamer reconnects once the proxy accepts again,
// and every key reaches the sink.
func TestReconnectThroughProxy(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(200))")
	proxy := dbconntest.New(t, db.Server)
	logs := &testdb.SyncBuffer{}
	sink := &collector{}
	s := startWith(t, db, proxy.Config(db.Server), "t", sink, time.Minute, logs)

	stop := make(chan struct{})
	written := writer(t, db, "t", stop)
	id := dumpThread(t, db, s, 0)
	time.Sleep(200 * time.Millisecond)
	proxy.Cut()
	id = dumpThread(t, db, s, id)
	time.Sleep(200 * time.Millisecond)
	proxy.Refuse(true)
	proxy.Cut()
	time.Sleep(2 * time.Second)
	proxy.Refuse(false)
	dumpThread(t, db, s, id)
	time.Sleep(200 * time.Millisecond)
	close(stop)
	keys := <-written
	caughtUp(t, db, s)
	if err := s.Err(); err != nil {
		t.Fatalf("Err() = %v after the reconnects", err)
	}
	if m := missing(sink, keys); len(m) > 0 {
		t.Fatalf("%d of %d keys never reached the sink: %.20v", len(m), len(keys), m)
	}
	if n := strings.Count(logs.String(), "binlog connection lost; reconnecting"); n < 3 {
		t.Errorf("%d reconnect lines logged, want 3 or more (one cut, then attempts refused):\n%s", n, logs)
	}
}

// TestReconnectGivesUp: with the server unreachable for longer than
// ReconnectFor, the streamer fails with an error that says so and names
// the cause, and WaitFor returns it.
func TestReconnectGivesUp(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(200))")
	proxy := dbconntest.New(t, db.Server)
	logs := &testdb.SyncBuffer{}
	s := startWith(t, db, proxy.Config(db.Server), "t", &collector{}, 1500*time.Millisecond, logs)
	dumpThread(t, db, s, 0)
	proxy.Refuse(true)
	proxy.Cut()
	lost := time.Now()
	db.MustExec(t, "INSERT INTO t VALUES (1, 'a')")
	err := waitFor(t, db, s)
	took := time.Since(lost)
	if err == nil {
		t.Fatal("WaitFor returned nil with the server unreachable")
	}
	if !errors.Is(err, s.Err()) || !strings.Contains(err.Error(), "not re-established within 1.5s") ||
		!strings.Contains(err.Error(), "connection was bad") {
		t.Errorf("error %q (Err() %v): want the deadline and the cause named", err, s.Err())
	}
	if took < time.Second || took > 10*time.Second {
		t.Errorf("the streamer gave up after %s, want about 1.5s", took)
	}
	t.Logf("gave up after %s: %v", took.Round(time.Millisecond), err)
}

// TestCloseWhileReconnecting: Close returns promptly while the streamer
// waits to reconnect.
func TestCloseWhileReconnecting(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(200))")
	proxy := dbconntest.New(t, db.Server)
	logs := &testdb.SyncBuffer{}
	s := startWith(t, db, proxy.Config(db.Server), "t", &collector{}, time.Hour, logs)
	dumpThread(t, db, s, 0)
	proxy.Refuse(true)
	proxy.Cut()
	// Let the backoff grow past a second.
	for strings.Count(logs.String(), "reconnecting") < 6 {
		time.Sleep(50 * time.Millisecond)
	}
	start := time.Now()
	s.Close()
	if took := time.Since(start); took > time.Second {
		t.Errorf("Close took %s while the streamer waited to reconnect", took)
	}
	if err := s.Err(); err != nil {
		t.Errorf("Err() = %v after Close, want nil", err)
	}
}

// TestNoReconnectOnTableChange: an error that is not a lost connection
// (here ErrTableChanged) stops the streamer without a reconnect.
func TestNoReconnectOnTableChange(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(200))")
	logs := &testdb.SyncBuffer{}
	s := startWith(t, db, db.Server, "t", &collector{}, time.Minute, logs)
	db.MustExec(t, "ALTER TABLE t ADD COLUMN w INT")
	if err := waitFor(t, db, s); !errors.Is(err, binlog.ErrTableChanged) {
		t.Fatalf("WaitFor = %v, want ErrTableChanged", err)
	}
	time.Sleep(300 * time.Millisecond)
	if strings.Contains(logs.String(), "reconnecting") {
		t.Errorf("the streamer reconnected after ErrTableChanged:\n%s", logs)
	}
}
