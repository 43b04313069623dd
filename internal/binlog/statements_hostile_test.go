package binlog_test

// Hostile cases: a change of the table that reaches the binlog in a form
// that does not name it. Each test runs one statement that changes the
// table's rows without a row event of the table's, then checks that the
// streamer stopped with ErrTableChanged or, failing that, reported the
// changed keys.

import (
	"database/sql"
	"errors"
	"testing"

	"github.com/sluicedb/sluice/internal/binlog"
	"github.com/sluicedb/sluice/internal/testdb"
)

// expectStopOrKeys fails the test when the streamer neither stopped with
// ErrTableChanged nor reported any key: the change it was shown is lost.
func expectStopOrKeys(t *testing.T, db *testdb.DB, s *binlog.Streamer, sink *collector, what string) {
	t.Helper()
	err := waitFor(t, db, s)
	keys := sink.take()
	switch {
	case errors.Is(err, binlog.ErrTableChanged):
		t.Logf("%s: stopped: %v", what, err)
	case err != nil:
		t.Fatalf("%s: WaitFor: %v", what, err)
	case len(keys) == 0:
		t.Errorf("%s changed the table's rows, yet the streamer reported no key and did not stop: the change is lost", what)
	default:
		t.Logf("%s: keys %v", what, keys)
	}
}

func count(t *testing.T, db *testdb.DB, q string) int {
	t.Helper()
	var n int
	if err := db.QueryRow(q).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// statementSession is a session whose writes are logged as statements.
func statementSession(t *testing.T, db *testdb.DB) *sql.Conn {
	c := session(t, db, false)
	run(t, c, db.Dialect("SET SESSION transaction_isolation = 'REPEATABLE-READ'"), "SET SESSION binlog_format = 'STATEMENT'")
	return c
}

// TestHostileStatementWriteThroughWriters: a statement-format write through
// a view over the table, into another table whose trigger writes it, or by a
// stored function that does: the binlog holds only that statement, which
// names neither the table nor its database, and the streamer, told of the
// writer, stops.
func TestHostileStatementWriteThroughWriters(t *testing.T) {
	for _, tc := range []struct{ name, writer, object, write, check string }{
		{"view", "vw", "CREATE VIEW vw AS SELECT id, v FROM orders",
			"UPDATE vw SET v = 'z' WHERE id = 1", "SELECT COUNT(*) FROM orders WHERE id = 1 AND v = 'z'"},
		{"trigger", "audit", "CREATE TRIGGER audit_ai AFTER INSERT ON audit FOR EACH ROW INSERT INTO orders VALUES (NEW.id, 'trg')",
			"INSERT INTO audit VALUES (7)", "SELECT COUNT(*) FROM orders WHERE id = 7"},
		{"function", "touch", "CREATE FUNCTION touch() RETURNS INT DETERMINISTIC MODIFIES SQL DATA BEGIN UPDATE orders SET v = 'f' WHERE id = 1; RETURN 1; END",
			"SELECT touch()", "SELECT COUNT(*) FROM orders WHERE v = 'f'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := testdb.New(t)
			db.MustExec(t, "CREATE TABLE orders (id INT PRIMARY KEY, v VARCHAR(20))", "CREATE TABLE audit (id INT PRIMARY KEY)",
				"INSERT INTO orders VALUES (1, 'a')", tc.object)
			s, sink := start(t, db, "orders", false, tc.writer)
			run(t, statementSession(t, db), tc.write)
			if n := count(t, db, tc.check); n != 1 {
				t.Fatalf("%s did not change orders", tc.write)
			}
			expectStopOrKeys(t, db, s, sink, "statement-format "+tc.write)
		})
	}
}

// TestHostileMariaDBExecutableComment: MariaDB runs the content of a /*M!
// comment; the parser sluice uses reads it as a plain comment. A TRUNCATE (or
// ALTER, DROP ...) written so is logged as is, and read as an empty
// statement.
func TestHostileMariaDBExecutableComment(t *testing.T) {
	db := testdb.New(t)
	if db.Flavor != "mariadb" {
		t.Skip("MariaDB syntax")
	}
	db.MustExec(t, "CREATE TABLE orders (id INT PRIMARY KEY, v VARCHAR(20))",
		"INSERT INTO orders VALUES (1, 'a'), (2, 'b')")
	s, sink := start(t, db, "orders", false)
	run(t, session(t, db, false), "/*M!100000 TRUNCATE TABLE orders */")
	if n := count(t, db, "SELECT COUNT(*) FROM orders"); n != 0 {
		t.Fatalf("the TRUNCATE in /*M! */ left %d rows", n)
	}
	expectStopOrKeys(t, db, s, sink, "/*M!100000 TRUNCATE TABLE orders */")
}

// TestHostileLatin1ClientDDL: a DDL is logged in the session's
// character_set_client. A table whose name is not ASCII, truncated from a
// latin1 session, is named in the binlog by latin1 bytes that the UTF-8 name
// sluice holds never matches.
func TestHostileLatin1ClientDDL(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE `t\u00ebst` (id INT PRIMARY KEY, v VARCHAR(20))",
		"INSERT INTO `t\u00ebst` VALUES (1, 'a'), (2, 'b')")
	s, sink := start(t, db, "t\u00ebst", false)
	run(t, session(t, db, false), "SET NAMES latin1", "TRUNCATE TABLE `t\xebst`")
	if n := count(t, db, "SELECT COUNT(*) FROM `t\u00ebst`"); n != 0 {
		t.Fatalf("the latin1 TRUNCATE left %d rows", n)
	}
	expectStopOrKeys(t, db, s, sink, "TRUNCATE TABLE `t\\xebst` from a latin1 session")
}

// TestHostileMinimalKeyOnUpdateTimestamp: with binlog_row_image=MINIMAL, an
// UPDATE that sets only v moves the row's key when a key column is
// ON UPDATE CURRENT_TIMESTAMP.
func TestHostileMinimalKeyOnUpdateTimestamp(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE ts (id INT NOT NULL, at TIMESTAMP(6) NOT NULL DEFAULT '2001-01-01 00:00:00' ON UPDATE CURRENT_TIMESTAMP(6), v VARCHAR(20), PRIMARY KEY (id, at))",
		"INSERT INTO ts (id, v) VALUES (1, 'a')")
	s, sink := start(t, db, "ts", false)
	c := session(t, db, false)
	run(t, c, "SET SESSION binlog_row_image = 'MINIMAL'")
	run(t, c, "UPDATE ts SET v = 'b' WHERE id = 1")
	if err := waitFor(t, db, s); err != nil {
		t.Logf("stopped: %v", err)
		return
	}
	keys, present := sink.take(), sink.takePresent()
	t.Logf("keys %v present %v", keys, present)
	if len(keys) != 2 || keys[0] == keys[1] {
		t.Errorf("UPDATE moving the row's timestamp key: keys %v, want the old and the new key", keys)
	}
}
