package binlog_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/binlog"
	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/rowkey"
	"github.com/sluicedb/sluice/internal/schema"
	"github.com/sluicedb/sluice/internal/testdb"
)

// collector is a Sink that remembers every key it was given, in order, and
// (a PresenceSink) whether each row is said to exist after its change.
type collector struct {
	mu      sync.Mutex
	keys    []string
	present []string // "key:true" or "key:false"
}

func (c *collector) Present(keys []rowkey.Key, present []bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, k := range keys {
		c.present = append(c.present, fmt.Sprint(k...)+":"+fmt.Sprint(present[i]))
	}
}

// takePresent returns the presences received so far and forgets them.
func (c *collector) takePresent() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.present
	c.present = nil
	return out
}

func (c *collector) Add(keys ...rowkey.Key) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range keys {
		c.keys = append(c.keys, fmt.Sprint(k...))
	}
}

// take returns the keys received so far and forgets them.
func (c *collector) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.keys
	c.keys = nil
	return out
}

// capture creates table (id INT PRIMARY KEY, v VARCHAR(200)) and a streamer
// on it that starts at the current end of the binary log.
func capture(t *testing.T, db *testdb.DB, table string) (*binlog.Streamer, *collector) {
	t.Helper()
	db.MustExec(t, "CREATE TABLE `"+table+"` (id INT PRIMARY KEY, v VARCHAR(200))")
	return start(t, db, table, false)
}

// start starts a streamer on table at the current end of the binary log,
// knowing the writers a migration finds (views, triggers' tables, routines).
func start(t *testing.T, db *testdb.DB, table string, foldCase bool, writers ...string) (*binlog.Streamer, *collector) {
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
	sink := &collector{}
	s, err := binlog.Start(ctx, binlog.Config{Conn: db.Server, Flavor: db.Flavor, Database: db.Name, Table: table,
		Columns: len(tbl.Columns), Key: key, Sink: sink, FoldCase: foldCase, Writers: writers}, pos)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, sink
}

// caughtUp waits until the streamer has handled every event logged so far.
func caughtUp(t *testing.T, db *testdb.DB, s *binlog.Streamer) {
	t.Helper()
	if err := waitFor(t, db, s); err != nil {
		t.Fatal(err)
	}
}

// waitFor returns WaitFor's outcome for the current end of the binary log.
func waitFor(t *testing.T, db *testdb.DB, s *binlog.Streamer) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pos, err := binlog.CurrentPosition(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	return s.WaitFor(ctx, pos)
}

// session returns a connection of its own, with compressed transactions when
// compressed is true.
func session(t *testing.T, db *testdb.DB, compressed bool) *sql.Conn {
	t.Helper()
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if compressed {
		compress(t, db, conn)
	}
	return conn
}

// compress turns compression on for what conn writes from now on: MySQL's
// binlog_transaction_compression in the session; MariaDB compresses each
// event (log_bin_compress), a global setting, put back after the test.
func compress(t *testing.T, db *testdb.DB, conn *sql.Conn) {
	t.Helper()
	if db.Flavor != dbconn.MariaDB {
		run(t, conn, "SET SESSION binlog_transaction_compression = ON")
		return
	}
	run(t, conn, "SET GLOBAL log_bin_compress_min_len = 10", "SET GLOBAL log_bin_compress = ON")
	t.Cleanup(func() {
		db.Exec("SET GLOBAL log_bin_compress = OFF")
		db.Exec("SET GLOBAL log_bin_compress_min_len = 256")
	})
}

func run(t *testing.T, conn *sql.Conn, stmts ...string) {
	t.Helper()
	for _, q := range stmts {
		if _, err := conn.ExecContext(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// expectKeys checks that the sink received exactly want, in that order, since
// the last call.
func expectKeys(t *testing.T, what string, sink *collector, want ...int) {
	t.Helper()
	w := make([]string, len(want))
	for i, k := range want {
		w[i] = fmt.Sprint(k)
	}
	got := sink.take()
	if slices.Equal(got, w) {
		return
	}
	if len(got)+len(w) < 40 {
		t.Errorf("%s: keys %v, want %v", what, got, w)
		return
	}
	i := 0
	for i < min(len(got), len(w)) && got[i] == w[i] {
		i++
	}
	t.Errorf("%s: %d keys, want %d; they differ from number %d on: %.80v, want %.80v", what, len(got), len(w), i+1, got[i:], w[i:])
}

// TestCompressedTransactions: the row events of a transaction that the server
// logged compressed (binlog_transaction_compression=ON in the session) reach
// the sink exactly as uncompressed ones do, filtered to the table, and
// WaitFor(the position after it) returns only once they all have.
func TestCompressedTransactions(t *testing.T) {
	db := testdb.New(t)
	s, sink := capture(t, db, "t")
	db.MustExec(t, "CREATE TABLE other (id INT PRIMARY KEY, v VARCHAR(200))")
	c := session(t, db, true)

	run(t, c, "INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'c')",
		"INSERT INTO other VALUES (1, 'a'), (50, 'b')",
		"UPDATE t SET v = 'x' WHERE id = 2",
		"DELETE FROM t WHERE id = 3")
	caughtUp(t, db, s)
	// An UPDATE logs the row's before and after images.
	expectKeys(t, "autocommit statements", sink, 1, 2, 3, 2, 2, 3)

	run(t, c, "BEGIN",
		"INSERT INTO t VALUES (10, 'a'), (11, 'b')",
		"INSERT INTO other VALUES (10, 'a')",
		"UPDATE t SET id = 12 WHERE id = 10",
		"DELETE FROM t WHERE id IN (1, 11)",
		"COMMIT")
	caughtUp(t, db, s)
	expectKeys(t, "one transaction", sink, 10, 11, 10, 12, 1, 11)

	// Large enough for several row events inside one payload.
	run(t, c, "INSERT INTO t SELECT n, REPEAT('v', 200) FROM (WITH RECURSIVE s(n) AS "+
		"(SELECT 100 UNION ALL SELECT n + 1 FROM s WHERE n < 1099) SELECT n FROM s) x")
	caughtUp(t, db, s)
	want := make([]int, 0, 1000)
	for n := 100; n < 1100; n++ {
		want = append(want, n)
	}
	expectKeys(t, "a payload of many row events", sink, want...)

	if err := s.Err(); err != nil {
		t.Fatalf("the streamer failed: %v", err)
	}
}

// TestCompressionTurnedOnMidway: a session writes uncompressed, then turns
// compression on and keeps writing, inside and outside transactions, while a
// plain session writes too.
func TestCompressionTurnedOnMidway(t *testing.T) {
	db := testdb.New(t)
	s, sink := capture(t, db, "t")
	c := session(t, db, false)
	plain := session(t, db, false)

	run(t, c, "INSERT INTO t VALUES (1, 'a'), (2, 'b')", "UPDATE t SET v = 'c' WHERE id = 1")
	compress(t, db, c)
	run(t, c, "INSERT INTO t VALUES (3, 'a')")
	run(t, plain, "INSERT INTO t VALUES (4, 'a')")
	run(t, c, "BEGIN", "DELETE FROM t WHERE id = 2", "INSERT INTO t VALUES (5, 'a')", "COMMIT")
	run(t, plain, "DELETE FROM t WHERE id = 4")
	run(t, c, "UPDATE t SET v = 'z' WHERE id IN (3, 5)")
	caughtUp(t, db, s)
	expectKeys(t, "mixed", sink, 1, 2, 1, 1, 3, 4, 2, 5, 4, 3, 3, 5, 5)
	if err := s.Err(); err != nil {
		t.Fatalf("the streamer failed: %v", err)
	}
}

// TestNameCase: with lower_case_table_names=0 names are case-sensitive, so
// writes to `T` are not changes of `t`, and DDL on `T` does not stop the
// streamer of `t`. A streamer told to fold case (as for
// lower_case_table_names=1) takes them for the same table.
func TestNameCase(t *testing.T) {
	db := testdb.New(t)
	var lctn int
	if err := db.QueryRow("SELECT @@lower_case_table_names").Scan(&lctn); err != nil {
		t.Fatal(err)
	}
	if lctn != 0 {
		t.Skipf("lower_case_table_names is %d: names are not case-sensitive", lctn)
	}
	s, sink := capture(t, db, "t")
	folding, folded := start(t, db, "t", true)
	db.MustExec(t, "CREATE TABLE T (id INT PRIMARY KEY, v VARCHAR(200))")
	for i, compressed := range []bool{false, true} {
		c := session(t, db, compressed)
		run(t, c, "INSERT INTO T VALUES (1, 'a')", fmt.Sprintf("INSERT INTO t VALUES (%d, 'a')", i), "DELETE FROM T")
	}
	caughtUp(t, db, folding)
	expectKeys(t, "writes to t and T, folding case", folded, 1, 0, 1, 1, 1, 1)

	db.MustExec(t, "ALTER TABLE T ADD COLUMN x INT", "RENAME TABLE T TO T2", "DROP TABLE T2")
	caughtUp(t, db, s)
	expectKeys(t, "writes to t and T", sink, 0, 1)
	if err := s.Err(); err != nil {
		t.Fatalf("the streamer failed: %v", err)
	}
	if err := waitFor(t, db, folding); !errors.Is(err, binlog.ErrTableChanged) {
		t.Errorf("ALTER TABLE T, folding case: the streamer of t returned %v, want ErrTableChanged", err)
	}
}

// TestDDLStops: a DDL on the table, logged while the streamer runs, stops it
// with ErrTableChanged, also after a compressed transaction.
func TestDDLStops(t *testing.T) {
	for name, ddl := range map[string]string{
		"alter":    "ALTER TABLE t ADD COLUMN x INT",
		"exchange": "ALTER TABLE other EXCHANGE PARTITION p0 WITH TABLE t",
		"rename":   "RENAME TABLE t TO t_old, other TO t",
	} {
		t.Run(name, func(t *testing.T) {
			db := testdb.New(t)
			s, _ := capture(t, db, "t")
			db.MustExec(t, "CREATE TABLE other (id INT PRIMARY KEY, v VARCHAR(200)) PARTITION BY HASH (id) PARTITIONS 1")
			run(t, session(t, db, true), "INSERT INTO t VALUES (1, 'a')")
			db.MustExec(t, ddl)
			if err := waitFor(t, db, s); !errors.Is(err, binlog.ErrTableChanged) {
				t.Fatalf("%s: WaitFor returned %v, want ErrTableChanged", ddl, err)
			}
		})
	}
}

// TestStatementFormat: a session with binlog_format=STATEMENT that writes
// other tables (reading ours) does not stop the streamer; one that writes
// ours, by UPDATE or by LOAD DATA (logged as an EXECUTE_LOAD_QUERY event),
// stops it.
func TestStatementFormat(t *testing.T) {
	for name, write := range map[string]string{
		"update": "UPDATE t SET v = 'z'",
		"load":   "LOAD DATA INFILE %s INTO TABLE t (id, v)",
	} {
		t.Run(name, func(t *testing.T) {
			db := testdb.New(t)
			s, sink := capture(t, db, "t")
			db.MustExec(t, "CREATE TABLE other (id INT PRIMARY KEY, v VARCHAR(200))")
			c := session(t, db, false)
			run(t, c, "INSERT INTO t VALUES (1, 'a')",
				// InnoDB logs statements only at REPEATABLE READ or above.
				db.Dialect("SET SESSION transaction_isolation = 'REPEATABLE-READ'"),
				"SET SESSION binlog_format = 'STATEMENT'",
				"INSERT INTO other VALUES (1, 't')",
				"INSERT INTO other SELECT id + 10, v FROM t",
				"UPDATE other SET v = (SELECT MAX(v) FROM t)")
			if name == "load" {
				file := loadFile(t, db)
				run(t, c, fmt.Sprintf("LOAD DATA INFILE %s INTO TABLE other (id, v)", dbconn.QuoteString(file)))
				write = fmt.Sprintf(write, dbconn.QuoteString(file))
			}
			caughtUp(t, db, s)
			expectKeys(t, "row-format insert", sink, 1)

			run(t, c, write)
			err := waitFor(t, db, s)
			if !errors.Is(err, binlog.ErrTableChanged) {
				t.Fatalf("%s: WaitFor returned %v, want ErrTableChanged", write, err)
			}
			t.Log(err)
		})
	}
}

// loadFile returns the path of a file on the server that LOAD DATA INFILE can
// read, holding the row (1000, 'x'). It is written once, to the directory
// secure_file_priv names (tmpdir when it is empty), and left for later runs.
func loadFile(t *testing.T, db *testdb.DB) string {
	t.Helper()
	var priv sql.NullString
	var tmp string
	if err := db.QueryRow("SELECT @@secure_file_priv, @@tmpdir").Scan(&priv, &tmp); err != nil {
		t.Fatal(err)
	}
	if !priv.Valid {
		t.Skip("secure_file_priv is NULL: the server reads no file")
	}
	dir := priv.String
	if dir == "" {
		dir, _, _ = strings.Cut(tmp, ":")
	}
	path := strings.TrimRight(dir, "/") + "/sluice_binlog_load_test.txt"
	const errFileExists = 1086
	if _, err := db.Exec("SELECT 1000, 'x' INTO OUTFILE " + dbconn.QuoteString(path)); err != nil && dbconn.ErrorNumber(err) != errFileExists {
		t.Skipf("cannot write %s on the server: %v", path, err)
	}
	return path
}
