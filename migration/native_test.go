package migration_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/testdb"
	"github.com/sluicedb/sluice/migration"
)

// auto is a migration that takes the planner's path.
func auto(t *testing.T, db *testdb.DB, table, alter string) migration.Config {
	c := config(t, db, table, alter)
	c.Method, c.Approve = "auto", nil
	return c
}

func columns(t *testing.T, db *testdb.DB, table string) string {
	t.Helper()
	var s string
	if err := db.QueryRow(`SELECT GROUP_CONCAT(COLUMN_NAME ORDER BY ORDINAL_POSITION) FROM information_schema.COLUMNS
		WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?`, db.Name, table).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestInstantPath(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE t (id INT PRIMARY KEY, v INT)")
	db.Fill(t, "t", 5000, "n, n * 2")
	before := db.Dump(t, "t", "id, v", "id")
	r, err := migration.New(auto(t, db, "t", "ADD COLUMN x INT NOT NULL DEFAULT 7, RENAME COLUMN v TO w"))
	if err == nil {
		// a rename is a risk: refused without approval
		_, err = r.Run(context.Background())
	}
	if err == nil || !strings.Contains(err.Error(), "--approve=rename-column") {
		t.Fatalf("an unapproved rename ran, or the error does not say how to approve it: %v", err)
	}
	if got := columns(t, db, "t"); got != "id,v" {
		t.Fatalf("refused migration changed the table: %s", got)
	}
	cfg := auto(t, db, "t", "ADD COLUMN x INT NOT NULL DEFAULT 7, RENAME COLUMN v TO w")
	cfg.Approve = []string{"rename-column"}
	r, err = migration.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Path != "instant" || res.RowsCopied != 0 {
		t.Errorf("path %q, %d rows copied: want instant, none", res.Path, res.RowsCopied)
	}
	if got := columns(t, db, "t"); got != "id,w,x" {
		t.Errorf("columns %s", got)
	}
	after := db.Dump(t, "t", "id, w", "id")
	if len(after) != len(before) || after[4999][1] != before[4999][1] {
		t.Error("the rows changed")
	}
	var sevens int
	db.QueryRow("SELECT COUNT(*) FROM t WHERE x = 7").Scan(&sevens)
	if sevens != 5000 {
		t.Errorf("%d rows have the new column's default", sevens)
	}
	if tables := db.Tables(t); len(tables) != 1 {
		t.Errorf("leftovers: %v", tables)
	}
}

func TestInplaceIndexPath(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE t (id INT PRIMARY KEY, v INT, s VARCHAR(40))")
	db.Fill(t, "t", 100000, "n, n % 1000, CONCAT('s', n * 7919 % 1000003)")
	// Reset the DDL memory high-water mark so the build's own peak shows.
	if db.Flavor == dbconn.MySQL {
		db.MustExec(t, "TRUNCATE TABLE performance_schema.memory_summary_global_by_event_name")
	}
	res, err := mustRunner(t, auto(t, db, "t", "ADD INDEX kv (v), ADD INDEX ks (s)")).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if db.Flavor == dbconn.MariaDB {
		// No parallel build settings nor DDL memory instrument there: the
		// server's own build, and no settings reported.
		if res.Path != "in-place" || res.DDL != nil {
			t.Fatalf("path %q, settings %+v: want in-place with none", res.Path, res.DDL)
		}
	} else {
		if res.Path != "in-place" || res.DDL == nil || res.DDL.Threads < 1 || res.DDL.BufferBytes < 1<<20 {
			t.Fatalf("path %q, settings %+v", res.Path, res.DDL)
		}
		if res.DDLPeakBytes <= 0 {
			t.Errorf("peak DDL memory %d: want the build's", res.DDLPeakBytes)
		}
	}
	var n int
	db.QueryRow(`SELECT COUNT(DISTINCT INDEX_NAME) FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 't'
		AND INDEX_NAME IN ('kv', 'ks')`, db.Name).Scan(&n)
	if n != 2 {
		t.Errorf("%d of the 2 indexes exist", n)
	}
	var cnt int
	db.QueryRow("SELECT COUNT(*) FROM t FORCE INDEX (kv) WHERE v = 7").Scan(&cnt)
	if cnt != 100 {
		t.Errorf("the new index finds %d rows with v = 7, want 100", cnt)
	}
}

func mustRunner(t *testing.T, cfg migration.Config) *migration.Runner {
	t.Helper()
	r, err := migration.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A forced path the server refuses is an error, and changes nothing.
func TestForcedInstantRefused(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE t (id INT PRIMARY KEY, v INT)", "INSERT INTO t VALUES (1, 1)")
	cfg := auto(t, db, "t", "MODIFY v BIGINT")
	cfg.Method = "instant"
	_, err := mustRunner(t, cfg).Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "refuses") {
		t.Fatalf("err = %v, want the server's refusal", err)
	}
	var typ string
	db.QueryRow("SELECT DATA_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 't' AND COLUMN_NAME = 'v'", db.Name).Scan(&typ)
	if typ != "int" {
		t.Errorf("v is %s after a refused migration", typ)
	}
}

// A transaction that read the table holds its metadata lock: each INSTANT
// attempt waits at most LockWait, a query arriving meanwhile waits no longer
// than that behind sluice, and sluice gives up after its attempts, changing
// nothing. Once the transaction ends, the same migration goes through.
func TestInstantBoundedLockWait(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE t (id INT PRIMARY KEY, v INT)", "INSERT INTO t VALUES (1, 1)")
	ctx := context.Background()
	holder, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	if _, err := holder.ExecContext(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	if _, err := holder.ExecContext(ctx, "SELECT * FROM t"); err != nil {
		t.Fatal(err)
	}
	cfg := auto(t, db, "t", "ADD COLUMN x INT")
	cfg.LockWait, cfg.LockDeadline = time.Second, 3*time.Second
	done := make(chan error, 1)
	start := time.Now()
	go func() { _, err := mustRunner(t, cfg).Run(ctx); done <- err }()

	// A reader that arrives while sluice waits for the lock.
	time.Sleep(300 * time.Millisecond)
	var worst time.Duration
	for time.Since(start) < 2*time.Second {
		q := time.Now()
		var v int
		if err := db.QueryRow("SELECT v FROM t WHERE id = 1").Scan(&v); err != nil {
			t.Fatal(err)
		}
		worst = max(worst, time.Since(q))
	}
	err = <-done
	if err == nil || !strings.Contains(err.Error(), "before the deadline") || !strings.Contains(err.Error(), "holds SHARED_READ; transaction open") {
		t.Fatalf("err = %v, want sluice to give up at its deadline, naming the blocker", err)
	}
	if worst > 1500*time.Millisecond {
		t.Errorf("a reader waited %s behind sluice; the bound is the 1s lock wait", worst)
	}
	if worst < 100*time.Millisecond {
		t.Errorf("no reader ever queued behind sluice (worst %s): the test did not exercise the wait", worst)
	}
	if got := columns(t, db, "t"); got != "id,v" {
		t.Errorf("columns %s after giving up", got)
	}
	holder.ExecContext(ctx, "COMMIT")
	if _, err := mustRunner(t, cfg).Run(ctx); err != nil {
		t.Fatal(err)
	}
	if got := columns(t, db, "t"); got != "id,v,x" {
		t.Errorf("columns %s", got)
	}
}

// Interrupting an in-place build kills it: the table keeps its old indexes
// and is free to lock at once.
func TestInterruptInplace(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE t (id INT PRIMARY KEY, v INT, s VARCHAR(200))")
	db.Fill(t, "t", 300000, "n, n % 977, REPEAT(CONCAT('s', n * 7919 % 1000003), 12)")
	cfg := auto(t, db, "t", "ADD INDEX ks (s), ADD INDEX kvs (v, s)")
	cfg.DDLThreads = 1
	ctx, cancel := context.WithCancel(context.Background())
	cfg.OnPhase = func(name string) {
		if name == "in-place" {
			time.AfterFunc(150*time.Millisecond, cancel)
		}
	}
	_, err := mustRunner(t, cfg).Run(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want cancelled", err)
	}
	var n int
	db.QueryRow(`SELECT COUNT(*) FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 't' AND INDEX_NAME <> 'PRIMARY'`, db.Name).Scan(&n)
	if n != 0 {
		t.Errorf("the interrupted build left %d index columns", n)
	}
	lock, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	lock.ExecContext(context.Background(), "SET SESSION lock_wait_timeout = 1")
	if _, err := lock.ExecContext(context.Background(), "LOCK TABLES t WRITE"); err != nil {
		t.Errorf("the table is still locked after the interrupt: %v", err)
	}
	lock.ExecContext(context.Background(), "UNLOCK TABLES")
}
