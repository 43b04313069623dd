package binlog_test

import (
	"slices"
	"testing"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/testdb"
)

// TestXATransactions: the rows of an XA transaction reach the sink when it is
// prepared (that is when the server logs them), and the position moves past
// each part of it, so that WaitFor returns after a prepare, a commit, a
// one-phase commit and a rollback alike. MariaDB 10.11 ends the stream of a
// reader that does not take its GTID events as they are. Whether the rows of
// an XA transaction exist after it is not known when they are logged (it may
// still roll back), so they are never said to be present.
func TestXATransactions(t *testing.T) {
	for _, compressed := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "compressed"}[compressed], func(t *testing.T) { testXA(t, compressed) })
	}
}

// testXA is TestXATransactions with or without compressed transactions (in
// MySQL's binlog an XA transaction's events are then inside one payload).
func testXA(t *testing.T, compressed bool) {
	db := testdb.New(t)
	s, sink := capture(t, db, "t")
	conn := session(t, db, compressed)
	// XIDs are the server's, not the connection's: a prepared one outlives
	// its session, so each is this test's own and none is left behind.
	xid := func(s string) string { return "'" + db.Name + "-" + s + "'" }
	t.Cleanup(func() {
		for _, s := range []string{"a", "c"} {
			db.Exec("XA ROLLBACK " + xid(s))
		}
	})

	run(t, conn, "XA START "+xid("a"), "INSERT INTO t VALUES (1, 'a')", "XA END "+xid("a"), "XA PREPARE "+xid("a"))
	caughtUp(t, db, s)
	expectKeys(t, "prepared", sink, 1)
	expectPresent(t, "prepared", sink, "1:false")
	run(t, conn, "XA COMMIT "+xid("a"))
	caughtUp(t, db, s)
	expectKeys(t, "committed", sink)

	run(t, conn, "XA START "+xid("b"), "UPDATE t SET v = 'b' WHERE id = 1", "INSERT INTO t VALUES (2, 'b')", "XA END "+xid("b"), "XA COMMIT "+xid("b")+" ONE PHASE")
	caughtUp(t, db, s)
	expectKeys(t, "one phase", sink, 1, 1, 2) // the update logs both images
	if db.Flavor == dbconn.MariaDB {
		// MariaDB logs a one-phase commit as a plain transaction: its rows
		// are committed when they are logged.
		expectPresent(t, "one phase", sink, "1:false", "1:true", "2:true")
	} else {
		expectPresent(t, "one phase", sink, "1:false", "1:false", "2:false")
	}

	run(t, conn, "XA START "+xid("c"), "INSERT INTO t VALUES (3, 'c')", "XA END "+xid("c"), "XA PREPARE "+xid("c"), "XA ROLLBACK "+xid("c"))
	caughtUp(t, db, s)
	expectKeys(t, "rolled back after prepare", sink, 3)
	expectPresent(t, "rolled back after prepare", sink, "3:false")

	run(t, conn, "INSERT INTO t VALUES (4, 'd')")
	caughtUp(t, db, s)
	expectKeys(t, "after", sink, 4)
	expectPresent(t, "after", sink, "4:true")
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
}

// expectPresent checks the presences the sink received since the last call.
func expectPresent(t *testing.T, what string, sink *collector, want ...string) {
	t.Helper()
	if got := sink.takePresent(); !slices.Equal(got, want) {
		t.Errorf("%s: presence %v, want %v", what, got, want)
	}
}
