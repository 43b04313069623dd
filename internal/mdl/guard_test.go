package mdl

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/testdb"
)

func guard(db *testdb.DB, p Policy, log *testdb.SyncBuffer) *Guard {
	return &Guard{DB: db.DB, Database: db.Name, Tables: []string{"t"}, Policy: p,
		Log: slog.New(slog.NewTextHandler(log, nil))}
}

func instant(ctx context.Context, conn *sql.Conn) error {
	_, err := conn.ExecContext(ctx, "ALTER TABLE t ADD COLUMN x INT, ALGORITHM=INSTANT")
	return err
}

// TestGuardNeverPolicy: a long SELECT holds the table; 8 readers keep
// querying it. The guarded INSTANT ALTER gives up at its deadline, naming the
// blocker, and no reader waited much longer than the budget.
func TestGuardNeverPolicy(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE t (id INT PRIMARY KEY, v INT)", "INSERT INTO t VALUES (1, 1), (2, 2)")
	id, _ := db.Blocker(t, "SELECT t.*, SLEEP(60) FROM t")
	stop := db.Readers(t, "t", 8)
	time.Sleep(200 * time.Millisecond)
	var log testdb.SyncBuffer
	g := guard(db, Policy{Budget: time.Second, Deadline: 4 * time.Second}, &log)
	err := g.Run(context.Background(), "ALTER ... ALGORITHM=INSTANT", instant)
	worst, failed := stop()
	if !errors.Is(err, ErrDeadline) {
		t.Fatalf("want ErrDeadline, got %v", err)
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("connection %d", id)) || !strings.Contains(err.Error(), "SLEEP(60)") {
		t.Errorf("the error does not name the blocker: %v", err)
	}
	if !strings.Contains(log.String(), fmt.Sprintf("connection %d", id)) {
		t.Errorf("the log does not name the blocker:\n%s", log.String())
	}
	if worst > 1500*time.Millisecond || failed > 0 {
		t.Errorf("worst reader latency %s (want <= 1.5s), %d reader queries failed", worst, failed)
	}
	t.Logf("worst reader latency %s", worst)
	if worst < 500*time.Millisecond {
		t.Errorf("worst reader latency %s: no attempt queued the readers, so the bound was not exercised", worst)
	}
	if !strings.Contains(log.String(), "waiting without requesting the lock") {
		t.Errorf("once the blocker had held the table past the budget, sluice went on requesting the lock:\n%s", log.String())
	}
	var cols int
	db.QueryRow("SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 't'").Scan(&cols)
	if cols != 2 {
		t.Errorf("the table has %d columns; the ALTER must not have run", cols)
	}
}

// TestGuardMaxQueued ends an attempt as soon as more than one query queues
// behind it, long before the budget.
func TestGuardMaxQueued(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE t (id INT PRIMARY KEY, v INT)", "INSERT INTO t VALUES (1, 1)")
	db.Blocker(t, "SELECT t.*, SLEEP(60) FROM t")
	stop := db.Readers(t, "t", 8)
	var log testdb.SyncBuffer
	g := guard(db, Policy{Budget: 5 * time.Second, Deadline: 2 * time.Second, MaxQueued: 1}, &log)
	err := g.Run(context.Background(), "instant", instant)
	worst, failed := stop()
	if !errors.Is(err, ErrDeadline) || !strings.Contains(log.String(), "--max-queued=1") {
		t.Fatalf("want the queue to end the attempts: %v\n%s", err, log.String())
	}
	if worst > 1500*time.Millisecond || failed > 0 {
		t.Errorf("worst reader latency %s, %d failed", worst, failed)
	}
}

// TestGuardKillAfter kills the blocking reader once it has blocked for the
// policy's time, and the ALTER completes.
func TestGuardKillAfter(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE t (id INT PRIMARY KEY, v INT)", "INSERT INTO t VALUES (1, 1)")
	id, done := db.Blocker(t, "SELECT t.*, SLEEP(60) FROM t")
	stop := db.Readers(t, "t", 8)
	var log testdb.SyncBuffer
	g := guard(db, Policy{Budget: time.Second, Deadline: 20 * time.Second, KillAfter: 2 * time.Second, KillMaxRows: 1000}, &log)
	start := time.Now()
	err := g.Run(context.Background(), "instant", instant)
	worst, failed := stop()
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Error("the blocker is still running")
	}
	if !strings.Contains(log.String(), "killed a blocking session") || !strings.Contains(log.String(), fmt.Sprintf("connection %d", id)) {
		t.Errorf("the kill is not logged with the session:\n%s", log.String())
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("took %s", took)
	}
	if worst > 1500*time.Millisecond || failed > 0 {
		t.Errorf("worst reader latency %s, %d failed", worst, failed)
	}
}

// TestGuardSparesBigWriter: a transaction that modified more rows than
// --kill-max-rows is not killed, and the error says why sluice waits; the
// write is detected although the session is idle.
func TestGuardSparesBigWriter(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE t (id INT PRIMARY KEY, v INT)")
	db.Fill(t, "t", 3000, "n, n")
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var id int64
	tx.QueryRow("SELECT CONNECTION_ID()").Scan(&id)
	if _, err := tx.Exec("UPDATE t SET v = v + 1"); err != nil {
		t.Fatal(err)
	}
	var log testdb.SyncBuffer
	g := guard(db, Policy{Budget: time.Second, Deadline: 3 * time.Second, KillAfter: time.Second, KillMaxRows: 1000}, &log)
	err = g.Run(context.Background(), "instant", instant)
	if !errors.Is(err, ErrDeadline) {
		t.Fatalf("want ErrDeadline, got %v\n%s", err, log.String())
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("connection %d", id)) || !strings.Contains(err.Error(), "3000 rows modified") ||
		!strings.Contains(err.Error(), "not killed: its transaction modified 3000 rows, more than --kill-max-rows=1000") {
		t.Errorf("the error does not describe the writer: %v", err)
	}
	if strings.Contains(log.String(), "killed a blocking session") {
		t.Errorf("the writer was killed:\n%s", log.String())
	}
	var n int
	if err := tx.QueryRow("SELECT COUNT(*) FROM t").Scan(&n); err != nil || n != 3000 {
		t.Errorf("the writer's transaction is gone: %v", err)
	}
}

// TestGuardWaitsOutLongBlocker: a blocker that has already held the table
// longer than the budget is waited out without any lock request, so the
// readers do not queue at all; the ALTER runs once the blocker ends.
func TestGuardWaitsOutLongBlocker(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE t (id INT PRIMARY KEY, v INT)", "INSERT INTO t VALUES (1, 1)")
	_, done := db.Blocker(t, "SELECT t.*, SLEEP(5) FROM t")
	time.Sleep(2500 * time.Millisecond) // its time shows at least 2s: held for 1s at least
	stop := db.Readers(t, "t", 8)
	var log testdb.SyncBuffer
	g := guard(db, Policy{Budget: time.Second, Deadline: 20 * time.Second}, &log)
	start := time.Now()
	err := g.Run(context.Background(), "instant", instant)
	took := time.Since(start)
	worst, failed := stop()
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("the blocker was ended: %v", err)
		}
	default:
		t.Error("the ALTER ran while the blocker still held the table")
	}
	// A lock request would queue the readers for its budget (1s); the
	// ALTER at the end queues them briefly, longer on a loaded machine.
	if worst > 600*time.Millisecond || failed > 0 {
		t.Errorf("worst reader latency %s (want no queueing for a lock request), %d failed", worst, failed)
	}
	if !strings.Contains(log.String(), "waiting without requesting the lock") || strings.Contains(log.String(), "metadata lock attempt ended") {
		t.Errorf("want a wait without attempts:\n%s", log.String())
	}
	t.Logf("ALTER done %s after the guard started; worst reader latency %s", took.Round(time.Millisecond), worst)
}

// TestSessionsLeaveOutOwnRun: a session of the run itself (marked by the
// sluice_run connection attribute) holding the table is not listed, so the
// guard never waits for, counts or kills sluice's own connections.
func TestSessionsLeaveOutOwnRun(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE t (id INT PRIMARY KEY, v INT)", "INSERT INTO t VALUES (1, 1)")
	cfg := db.Server
	cfg.RunID = "0123456789abcdef"
	own, err := dbconn.Open(context.Background(), cfg, db.Name, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	tx, err := own.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var id int64
	tx.QueryRow("SELECT CONNECTION_ID()").Scan(&id)
	if _, err := tx.Exec("UPDATE t SET v = 2"); err != nil {
		t.Fatal(err)
	}
	listed := func(run string) bool {
		ss, err := Sessions(context.Background(), db.DB, db.Name, []string{"t"}, run)
		if err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(ss, func(s Session) bool { return s.ID == id })
	}
	if !listed("") || !listed("another") {
		t.Error("the holder is not listed for another run")
	}
	if listed(cfg.RunID) {
		t.Error("the run's own session is listed as a blocker")
	}
}

// TestGuardWithFourByteStatement: a blocker whose statement holds an emoji
// makes information_schema.INNODB_TRX unreadable on MySQL (error 3854). The
// guard still names the blocker, and never kills it, since its transaction
// cannot be measured.
func TestGuardWithFourByteStatement(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE t (id INT PRIMARY KEY, s VARCHAR(20)) CHARSET utf8mb4", "INSERT INTO t VALUES (1, 'a')")
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var id int64
	conn.QueryRowContext(context.Background(), "SELECT CONNECTION_ID()").Scan(&id)
	if _, err := conn.ExecContext(context.Background(), "BEGIN"); err != nil {
		t.Fatal(err)
	}
	// A running statement with a 4-byte character holds the table.
	go conn.ExecContext(context.Background(), "SELECT s, SLEEP(4), '\U0001F600' FROM t")
	time.Sleep(300 * time.Millisecond)
	var probe int
	probeErr := db.QueryRow("SELECT COUNT(*) FROM information_schema.INNODB_TRX").Scan(&probe)
	if probeErr == nil {
		t.Skipf("this %s server reads INNODB_TRX beside a 4-byte character: the blocker is measured like any other", db.Flavor)
	}
	var log testdb.SyncBuffer
	g := guard(db, Policy{Budget: 500 * time.Millisecond, Deadline: 2 * time.Second, KillAfter: 500 * time.Millisecond, KillMaxRows: 1000}, &log)
	err = g.Run(context.Background(), "instant", instant)
	if !errors.Is(err, ErrDeadline) {
		t.Fatalf("want ErrDeadline naming the blocker, got %v\n%s", err, log.String())
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("connection %d", id)) {
		t.Errorf("the error does not name the blocker: %v", err)
	}
	if dbconn.ErrorNumber(probeErr) == errCannotConvert && !strings.Contains(err.Error(), "could not be read") {
		t.Errorf("INNODB_TRX was unreadable, but the error does not say why the blocker was spared: %v", err)
	}
	if strings.Contains(log.String(), "killed a blocking session") {
		t.Errorf("a blocker whose transaction could not be read was killed:\n%s", log.String())
	}
	t.Logf("INNODB_TRX read: %v", probeErr)
}
