package migration_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/testdb"
)

// TestOtherEnginesRefused: an ALTER that moves the table to another engine is
// refused before anything is made, on every path. Into a non-transactional
// engine the trial copy's rollback kept its rows, and the copy then stopped
// on a duplicate key it had made itself.
func TestOtherEnginesRefused(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE t (id INT PRIMARY KEY, a INT)", "INSERT INTO t VALUES (1, 1), (2, 2)")
	before := snapshot(t, db, "t")
	engines := []string{"MyISAM", "MEMORY"}
	if db.Flavor == dbconn.MariaDB {
		engines = append(engines, "Aria")
	}
	for _, e := range engines {
		for _, method := range []string{"copy", "auto"} {
			cfg := config(t, db, "t", "ADD COLUMN c INT, ENGINE = "+e)
			cfg.Method = method
			_, err := mustRunner(t, cfg).Run(context.Background())
			if err == nil || !strings.Contains(err.Error(), "InnoDB tables only") {
				t.Errorf("ENGINE=%s (%s): %v", e, method, err)
			}
			untouched(t, db, "t", before)
		}
	}
}

// TestNotABaseTable: a view, or a MariaDB system-versioned table (whose
// history rows a copy would lose), is named for what it is.
func TestNotABaseTable(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE t (id INT PRIMARY KEY, a INT)", "INSERT INTO t VALUES (1, 1)", "CREATE VIEW v AS SELECT * FROM t")
	want := map[string]string{"v": "is a view"}
	if db.Flavor == dbconn.MariaDB {
		db.MustExec(t, "CREATE TABLE h (id INT PRIMARY KEY, a INT) WITH SYSTEM VERSIONING", "INSERT INTO h VALUES (1, 1)", "UPDATE h SET a = 2")
		want["h"] = "system-versioned table"
	}
	for table, says := range want {
		_, err := mustRunner(t, config(t, db, table, "ADD COLUMN c INT")).Run(context.Background())
		if err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("%s: %v, want %q", table, err, says)
		}
	}
	if got := db.Tables(t); len(got) != len(want)+1 {
		t.Errorf("tables left: %v", got)
	}
}

// TestTextIntoBitRefused: the server's own ALTER reads a string as a number
// when it converts it into a BIT ('1' is 1); a copy stored its bytes ('1'
// became 49) with exit 0, and the checksum, which compares such a column
// only as NULL or not, agreed. Refused before anything is made.
func TestTextIntoBitRefused(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE t (id INT PRIMARY KEY, c VARCHAR(10), d TIME)", "INSERT INTO t VALUES (1, '1', '00:00:01'), (2, '0', '00:00:00'), (3, '5', '00:00:05')",
		"CREATE TABLE n LIKE t", "INSERT INTO n SELECT * FROM t", "ALTER TABLE n MODIFY c BIT(8), ALGORITHM=COPY")
	if got := column(t, db, "SELECT CONCAT(id, ':', c + 0) FROM n"); strings.Join(got, ",") != "1:1,2:0,3:5" {
		t.Fatalf("the server's own ALTER gives %v", got)
	}
	for _, alter := range []string{"MODIFY c BIT(8)", "MODIFY d BIT(64)"} {
		before := snapshot(t, db, "t")
		_, err := mustRunner(t, config(t, db, "t", alter)).Run(context.Background())
		if err == nil || !strings.Contains(err.Error(), "stores its bytes") {
			t.Errorf("%s: %v, want a refusal", alter, err)
		}
		if snapshot(t, db, "t") != before {
			t.Errorf("%s: the refused run changed the table", alter)
		}
	}
}
