package copier

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/chunk"
	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/dbconn/dbconntest"
	"github.com/sluicedb/sluice/internal/testdb"
)

const lostLine = "copy: connection lost; copying the range again"

// sameTables checks, with queries of its own, that dst holds exactly src's
// rows: the same count, and every row of src in dst with equal columns.
func sameTables(t *testing.T, db *testdb.DB, rows int) {
	t.Helper()
	var nsrc, ndst, equal int
	db.QueryRow("SELECT COUNT(*) FROM src").Scan(&nsrc)
	db.QueryRow("SELECT COUNT(*) FROM dst").Scan(&ndst)
	db.QueryRow("SELECT COUNT(*) FROM src JOIN dst ON dst.id = src.id AND dst.v <=> src.v AND dst.pad <=> src.pad").Scan(&equal)
	if nsrc != rows || ndst != rows || equal != rows {
		t.Errorf("src has %d rows, dst %d, equal in both %d; want %d each", nsrc, ndst, equal, rows)
	}
}

// TestCopyAfterKills: while the copy runs, another session KILLs the
// connections running its INSERT ... SELECT, several times. Each killed
// range is copied again, and the new table ends up equal to the original.
func TestCopyAfterKills(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE src (id INT PRIMARY KEY, v INT NOT NULL, pad VARCHAR(1000))")
	const rows = 50000
	db.Fill(t, "src", rows, "n, n * 7, LPAD(n, 300, CHAR(65 + n % 26))")
	m, key := db.Mapping(t, "src", "dst", true)
	logs := &testdb.SyncBuffer{}
	c, err := New(Config{DB: db.DB, Key: key, Workers: 2, Mapping: m,
		Chunk:        chunk.Config{Initial: 2000, Min: 2000, Max: 2000},
		ReconnectFor: time.Minute, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const want = 5
	kills := 0
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		prefix := "INSERT INTO " + m.Target.Quoted()
		for kills < want && ctx.Err() == nil {
			var id int64
			err := db.QueryRowContext(ctx, `SELECT PROCESSLIST_ID FROM performance_schema.threads
				WHERE PROCESSLIST_COMMAND = 'Query' AND LEFT(PROCESSLIST_INFO, CHAR_LENGTH(?)) = ? LIMIT 1`, prefix, prefix).Scan(&id)
			if errors.Is(err, sql.ErrNoRows) {
				time.Sleep(time.Millisecond)
				continue
			}
			if err != nil {
				return
			}
			if _, err := db.ExecContext(ctx, fmt.Sprintf("KILL CONNECTION %d", id)); err == nil {
				kills++
				time.Sleep(30 * time.Millisecond)
			}
		}
	}()
	began := time.Now()
	err = c.Run(ctx)
	took := time.Since(began)
	cancel()
	wg.Wait()
	if err != nil {
		t.Fatalf("the copy failed: %v\n%s", err, logs)
	}
	retried := strings.Count(logs.String(), lostLine)
	if kills < 3 || retried < 3 {
		t.Fatalf("%d connections killed, %d ranges copied again (the copy took %s); want 3 or more of each", kills, retried, took)
	}
	sameTables(t, db, rows)
	if c.Rows() != rows {
		t.Errorf("Rows() = %d, want %d", c.Rows(), rows)
	}
	t.Logf("%d kills, %d ranges copied again; the copy took %s", kills, retried, took.Round(time.Millisecond))
}

// proxied returns a pool on db's database through proxy.
func proxied(t *testing.T, db *testdb.DB, proxy *dbconntest.Proxy) *sql.DB {
	t.Helper()
	pool, err := dbconn.Open(context.Background(), proxy.Config(db.Server), db.Name, 16)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close() })
	return pool
}

// TestCopyAfterLostCommit: three ranges' INSERT ... SELECT commit on the
// server but their connection breaks before the answer arrives (a proxy
// swallows it). Run again as it was, such a range would stop on a
// duplicate key; the copier clears the range and copies it again, and the
// new table ends up equal to the original.
func TestCopyAfterLostCommit(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE src (id BIGINT PRIMARY KEY, v INT NOT NULL, pad VARCHAR(1000))")
	const rows = 20000
	db.Fill(t, "src", rows, "n, n * 7, LPAD(n, 40, CHAR(65 + n % 26))")
	m, key := db.Mapping(t, "src", "dst", true)
	proxy := dbconntest.New(t, db.Server)
	proxy.Swallow("INSERT INTO "+m.Target.Quoted(), 3)
	logs := &testdb.SyncBuffer{}
	c, err := New(Config{DB: proxied(t, db, proxy), Key: key, Workers: 2, Mapping: m,
		Chunk:        chunk.Config{Initial: 1000, Min: 1000, Max: 1000},
		ReconnectFor: time.Minute, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Run(context.Background()); err != nil {
		t.Fatalf("the copy failed: %v\n%s", err, logs)
	}
	if n := proxy.Swallowed(); n != 3 {
		t.Errorf("%d answers swallowed, want 3", n)
	}
	if n := strings.Count(logs.String(), lostLine); n < 3 {
		t.Errorf("%d ranges copied again, want 3 or more:\n%s", n, logs)
	}
	sameTables(t, db, rows)
	if c.Rows() != rows {
		t.Errorf("Rows() = %d, want %d", c.Rows(), rows)
	}
}

// TestCopyAfterLostBoundaryRead: the connection of the query that finds the
// next range boundary breaks as its answer comes (a proxy swallows it), for
// an integer key (its bounds) and a string key (each boundary). The query is
// read again on another connection, and the new table ends up equal to the
// original.
func TestCopyAfterLostBoundaryRead(t *testing.T) {
	for _, c := range []struct{ name, ddl, fill string }{
		{"integer", "CREATE TABLE src (id INT PRIMARY KEY, v INT NOT NULL, pad VARCHAR(1000))", "n, n * 7, 'x'"},
		{"string", "CREATE TABLE src (id VARCHAR(20) PRIMARY KEY, v INT NOT NULL, pad VARCHAR(1000))", "CONCAT('k', n), n * 7, 'x'"},
	} {
		t.Run(c.name, func(t *testing.T) {
			db := testdb.New(t)
			db.MustExec(t, c.ddl)
			const rows = 5000
			db.Fill(t, "src", rows, c.fill)
			m, key := db.Mapping(t, "src", "dst", true)
			proxy := dbconntest.New(t, db.Server)
			prefix := "SELECT MIN(`id`)"
			if c.name == "string" {
				prefix = "SELECT " + key.SelectExprs() + " FROM"
			}
			proxy.Swallow(prefix, 2)
			logs := &testdb.SyncBuffer{}
			cp, err := New(Config{DB: proxied(t, db, proxy), Key: key, Workers: 2, Mapping: m,
				Chunk:        chunk.Config{Initial: 1000, Min: 1000, Max: 1000},
				ReconnectFor: time.Minute, Logger: slog.New(slog.NewTextHandler(logs, nil))})
			if err != nil {
				t.Fatal(err)
			}
			if err := cp.Run(context.Background()); err != nil {
				t.Fatalf("the copy failed: %v\n%s", err, logs)
			}
			if n := proxy.Swallowed(); n < 1 {
				t.Fatalf("no answer to %q was swallowed: the test proves nothing", prefix)
			}
			if !strings.Contains(logs.String(), "while finding a range boundary") {
				t.Errorf("the lost boundary read is not logged:\n%s", logs)
			}
			sameTables(t, db, rows)
		})
	}
}

// TestLostCommitKeyTypeChanged: when the key's type changes in the new
// table (here its collation), a range's predicate may select other rows in
// the new table than in the original, so a range that may have committed is
// not cleared: the copy stops, saying why, rather than risk deleting rows
// of another range.
func TestLostCommitKeyTypeChanged(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE src (id VARCHAR(20) COLLATE utf8mb4_bin PRIMARY KEY, v INT NOT NULL, pad VARCHAR(1000))",
		"CREATE TABLE dst (id VARCHAR(20) COLLATE utf8mb4_0900_ai_ci PRIMARY KEY, v INT NOT NULL, pad VARCHAR(1000))")
	db.Fill(t, "src", 3000, "CONCAT('k', n), n, ''")
	m, key := db.Mapping(t, "src", "dst", false)
	proxy := dbconntest.New(t, db.Server)
	proxy.Swallow("INSERT INTO "+m.Target.Quoted(), 1)
	c, err := New(Config{DB: proxied(t, db, proxy), Key: key, Workers: 1, Mapping: m,
		Chunk: chunk.Config{Initial: 1000, Min: 1000, Max: 1000}, ReconnectFor: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if c.exact {
		t.Fatal("a key whose collation changes counts as exact")
	}
	err = c.Run(context.Background())
	if err == nil || errors.Is(err, ErrDuplicate) || !strings.Contains(err.Error(), "cannot clear the range") {
		t.Fatalf("Run = %v, want the range's possible commit named", err)
	}
}

// TestSettleWaitsForTheLostStatement: settle returns only once the session
// it is given no longer runs a statement into the new table.
func TestSettleWaitsForTheLostStatement(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE src (id INT PRIMARY KEY, v INT NOT NULL, pad VARCHAR(1000))",
		"INSERT INTO src VALUES (1, 1, 'a')")
	m, key := db.Mapping(t, "src", "dst", true)
	c, err := New(Config{DB: db.DB, Key: key, Mapping: m})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	other, id, err := c.conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	done := make(chan time.Time, 1)
	go func() {
		other.ExecContext(ctx, "INSERT INTO "+m.Target.Quoted()+" SELECT * FROM src WHERE SLEEP(1) = 0")
		done <- time.Now()
	}()
	for {
		var n int
		// Its text too, which settle looks for: the command shows a moment
		// before it.
		db.QueryRow("SELECT COUNT(*) FROM performance_schema.threads WHERE PROCESSLIST_ID = ? AND PROCESSLIST_COMMAND = 'Query' AND PROCESSLIST_INFO LIKE 'INSERT INTO%'", id).Scan(&n)
		if n == 1 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	q, _, err := c.conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if err := c.settle(ctx, q, []int64{id + 1000, id}, time.Now().Add(30*time.Second)); err != nil {
		t.Fatal(err)
	}
	settled := time.Now()
	ended := <-done
	if settled.Before(ended.Add(-100 * time.Millisecond)) {
		t.Errorf("settle returned %s before the statement ended", ended.Sub(settled))
	}
}

// TestKeyDupAfterPrimaryKeyChange: when the ALTER changed the primary key,
// rows are found in the new table by another index (Target.KeyIndex), but a
// row copied twice (a range copied again after a lost commit) meets itself
// on the primary key first: that is a duplicate of the row key, not of two
// rows of the original.
func TestKeyDupAfterPrimaryKeyChange(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE s1 (u INT NOT NULL PRIMARY KEY, id INT NOT NULL, UNIQUE KEY uk_id (id))",
		"CREATE TABLE s2 (tenant INT NOT NULL, id INT NOT NULL, PRIMARY KEY (tenant, id), KEY by_id (id))",
		"CREATE TABLE s3 (id INT NOT NULL, v INT NOT NULL, UNIQUE KEY uk_id (id), UNIQUE KEY uk_v (v))",
		"INSERT INTO s1 VALUES (100001, 1)", "INSERT INTO s2 VALUES (3, 1)", "INSERT INTO s3 VALUES (1, 1)")
	for _, c := range []struct {
		again, keyIndex string
		want            bool
	}{
		{"INSERT INTO s1 VALUES (100001, 1)", "uk_id", true},
		{"INSERT INTO s2 VALUES (3, 1)", "by_id", true},
		{"INSERT INTO s3 VALUES (2, 1)", "uk_id", false}, // another row, on another unique index
	} {
		_, err := db.Exec(c.again)
		if err == nil {
			t.Fatalf("%s: no duplicate", c.again)
		}
		if got := keyDup(err, c.keyIndex); got != c.want {
			t.Errorf("%s (%v), row key %s: keyDup = %v, want %v", c.again, err, c.keyIndex, got, c.want)
		}
	}
}
