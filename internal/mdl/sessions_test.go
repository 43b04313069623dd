package mdl

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/testdb"
)

// TestSessionsSeeFreshWriter: the server serves INNODB_TRX from a cache up to
// 100ms old, so a transaction that has just written may not be listed yet.
// Such a writer must never look like a session that wrote nothing (it would
// be killed under --kill-max-rows, its rows rolled back): its writes are
// either counted or unknown. Each round fills the cache just before the
// write, so that the read right after it finds the cache stale.
func TestSessionsSeeFreshWriter(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE t (id INT PRIMARY KEY, v INT)")
	db.Fill(t, "t", 3000, "n, n")
	ctx := context.Background()
	unknown := 0
	for round := 0; round < 5; round++ {
		tx, err := db.Begin()
		if err != nil {
			t.Fatal(err)
		}
		var n int
		if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.INNODB_TRX").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec("UPDATE t SET v = v + 1"); err != nil {
			t.Fatal(err)
		}
		ss, err := Sessions(ctx, db.DB, db.Name, []string{"t"}, "")
		tx.Rollback()
		if err != nil {
			t.Fatal(err)
		}
		if len(ss) != 1 {
			t.Fatalf("round %d: %d sessions, want the writer: %v", round, len(ss), ss)
		}
		s := ss[0]
		if !s.Wrote() {
			t.Errorf("round %d: the writer of 3000 rows looks like it wrote nothing: %s", round, s)
		}
		if s.TrxUnknown {
			unknown++
		} else if s.RowsModified != 3000 {
			t.Errorf("round %d: %d rows modified, want 3000", round, s.RowsModified)
		}
	}
	t.Logf("%d of 5 rounds read the transaction before INNODB_TRX listed it", unknown)
}

// TestHeldFor: a session is in the way for its running statement's time, its
// transaction's age, or, idle inside a transaction InnoDB does not list
// (MariaDB's read-only ones), its idle time.
func TestHeldFor(t *testing.T) {
	for _, c := range []struct {
		s    Session
		want time.Duration
	}{
		{Session{Command: "Query", Time: 5 * time.Second}, 4 * time.Second},
		{Session{Command: "Sleep", Time: 5 * time.Second}, 0},
		{Session{Command: "Sleep", Time: 5 * time.Second, InTrx: true}, 4 * time.Second},
		{Session{Command: "Sleep", Time: 2 * time.Second, TrxAge: 9 * time.Second, InTrx: true}, 8 * time.Second},
	} {
		if got := c.s.HeldFor(); got != c.want {
			t.Errorf("%+v: HeldFor = %s, want %s", c.s, got, c.want)
		}
		if c.s.InTrx && !strings.Contains(c.s.String(), "transaction open") {
			t.Errorf("%+v: %q does not say the transaction is open", c.s, c.s.String())
		}
	}
}
