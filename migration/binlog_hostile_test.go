package migration_test

// Hostile cases, end to end: a change the binlog shows without naming the
// table, made after the checksum (while the cut-over is postponed): the run
// stops, or the new table has it.

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/sluicedb/sluice/internal/testdb"
	"github.com/sluicedb/sluice/migration"
)

// hrMigrate runs cfg with write run in a separate session once the
// cut-over is postponed (after the checksum), then lets it cut over.
func hrMigrate(t *testing.T, db *testdb.DB, cfg migration.Config, setup []string, write ...string) error {
	t.Helper()
	cfg.PostponeCutover = true
	cfg.OnPhase = func(phase string) {
		if phase != "postponed" {
			return
		}
		c, err := db.Conn(context.Background())
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close()
		for _, q := range append(setup, write...) {
			if _, err := c.ExecContext(context.Background(), q); err != nil {
				t.Errorf("%q: %v", q, err)
			}
		}
		db.MustExec(t, "DROP TABLE _t_cutover")
	}
	r, err := migration.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Run(context.Background())
	return err
}

// TestHostileViewWriteAfterChecksumLost: a statement-format write through a
// view of t, through another table's trigger, or by a stored function (any
// of which the binlog shows without naming t), after the checksum: the run
// stops, or the new table has the write.
func TestHostileViewWriteAfterChecksumLost(t *testing.T) {
	for _, tc := range []struct{ name, object, write string }{
		{"view", "CREATE VIEW vw AS SELECT id, v FROM t", "UPDATE vw SET v = -1 WHERE id = 7"},
		{"trigger", "CREATE TABLE audit (id INT PRIMARY KEY)", "INSERT INTO audit VALUES (7)"},
		{"function", "CREATE FUNCTION touch() RETURNS INT DETERMINISTIC MODIFIES SQL DATA BEGIN UPDATE t SET v = -1 WHERE id = 7; RETURN 1; END", "SELECT touch()"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := tableT(t, 100)
			db.MustExec(t, tc.object)
			if tc.name == "trigger" {
				db.MustExec(t, "CREATE TRIGGER audit_ai AFTER INSERT ON audit FOR EACH ROW UPDATE t SET v = -1 WHERE id = NEW.id")
			}
			err := hrMigrate(t, db, config(t, db, "t", "ADD COLUMN x INT"),
				[]string{db.Dialect("SET SESSION transaction_isolation = 'REPEATABLE-READ'"), "SET SESSION binlog_format = 'STATEMENT'"},
				tc.write)
			var v int
			if err := db.QueryRow("SELECT v FROM t WHERE id = 7").Scan(&v); err != nil {
				t.Fatal(err)
			}
			if err != nil {
				t.Logf("the run stopped: %v", err)
			} else if v != -1 {
				t.Errorf("after the swap row 7 has v = %d; the application set it to -1 (%s) after the checksum: the update is lost, and the run succeeded", v, tc.write)
			}
			if v != -1 {
				t.Errorf("row 7 has v = %d, want the application's -1", v)
			}
		})
	}
}

// TestHostileWriterMadeAfterTheStart: the same writers made after the run
// started (after the checksum): the run knew only the writers of its start,
// and the statement-format write through a new one was lost with exit 0.
// Their CREATE, in the binlog, is read: the write now stops the run.
func TestHostileWriterMadeAfterTheStart(t *testing.T) {
	for _, tc := range []struct {
		name  string
		made  []string
		write string
	}{
		{"view", []string{"CREATE VIEW vw AS SELECT id, v FROM t"}, "UPDATE vw SET v = -1 WHERE id = 7"},
		{"trigger", []string{"CREATE TABLE audit (id INT PRIMARY KEY)", "CREATE TRIGGER audit_ai AFTER INSERT ON audit FOR EACH ROW UPDATE t SET v = -1 WHERE id = NEW.id"}, "INSERT INTO audit VALUES (7)"},
		{"procedure", []string{"CREATE PROCEDURE touch() UPDATE t SET v = -1 WHERE id = 7"}, "CALL touch()"},
		{"renamed view", []string{"CREATE VIEW vwq_a AS SELECT id, v FROM t", "RENAME TABLE vwq_a TO vwq_b"}, "UPDATE vwq_b SET v = -1 WHERE id = 7"},
		{"renamed trigger table", []string{"CREATE TABLE src (id INT PRIMARY KEY)", "CREATE TRIGGER src_ai AFTER INSERT ON src FOR EACH ROW UPDATE t SET v = -1 WHERE id = NEW.id",
			"ALTER TABLE src RENAME TO src2"}, "INSERT INTO src2 VALUES (7)"},
		{"trigger whose body says view", []string{"CREATE TABLE srcq (id INT PRIMARY KEY)",
			"CREATE TRIGGER srcq_ai AFTER INSERT ON srcq FOR EACH ROW UPDATE t SET v = -1 WHERE id = NEW.id AND 'page view x' <> ''"}, "INSERT INTO srcq VALUES (7)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := tableT(t, 100)
			setup := append(tc.made, db.Dialect("SET SESSION transaction_isolation = 'REPEATABLE-READ'"), "SET SESSION binlog_format = 'STATEMENT'")
			err := hrMigrate(t, db, config(t, db, "t", "ADD COLUMN x INT"), setup, tc.write)
			var v int
			if qerr := db.QueryRow("SELECT v FROM t WHERE id = 7").Scan(&v); qerr != nil {
				t.Fatal(qerr)
			}
			if err == nil && v != -1 {
				t.Errorf("after the swap row 7 has v = %d; the application set it to -1 (%s) after the checksum: the update is lost, and the run succeeded", v, tc.write)
			}
			if err != nil && !strings.Contains(err.Error(), "changed under the migration") {
				t.Errorf("the run stopped, but not on the write: %v", err)
			}
		})
	}
}

// TestHostileViewChainWrite: a statement-format write through the last of
// seven views, each over the one before (the first over t), made before the
// run: the writers are followed however deep (five levels were, and the
// write through the sixth was lost).
func TestHostileViewChainWrite(t *testing.T) {
	db := tableT(t, 100)
	db.MustExec(t, "CREATE VIEW w1 AS SELECT * FROM t")
	for i := 2; i <= 7; i++ {
		db.MustExec(t, fmt.Sprintf("CREATE VIEW w%d AS SELECT * FROM w%d", i, i-1))
	}
	setup := []string{db.Dialect("SET SESSION transaction_isolation = 'REPEATABLE-READ'"), "SET SESSION binlog_format = 'STATEMENT'"}
	err := hrMigrate(t, db, config(t, db, "t", "ADD COLUMN x INT"), setup, "UPDATE w7 SET v = -1 WHERE id = 7")
	var v int
	if qerr := db.QueryRow("SELECT v FROM t WHERE id = 7").Scan(&v); qerr != nil {
		t.Fatal(qerr)
	}
	if err == nil && v != -1 {
		t.Errorf("after the swap row 7 has v = %d; the application set it to -1 through w7 after the checksum: the update is lost, and the run succeeded", v)
	}
	if err != nil && !strings.Contains(err.Error(), "changed under the migration") {
		t.Errorf("the run stopped, but not on the write: %v", err)
	}
}

// TestHostileMariaDBCommentTruncateAfterChecksum: /*M! TRUNCATE TABLE t */
// after the checksum empties the original; the new table keeps every row.
func TestHostileMariaDBCommentTruncateAfterChecksum(t *testing.T) {
	db := tableT(t, 100)
	if db.Flavor != "mariadb" {
		t.Skip("MariaDB syntax")
	}
	err := hrMigrate(t, db, config(t, db, "t", "ADD COLUMN x INT"), nil, "/*M!100000 TRUNCATE TABLE t */")
	if err != nil {
		t.Logf("the run stopped: %v", err)
		return
	}
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM t").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("after the swap t holds %d rows; the application truncated it after the checksum: the deleted rows are back, and the run succeeded", n)
	}
}

// TestHostileBinlogFiltersAcceptedButDropDDL: with binlog-do-db=shop (or
// binlog-ignore-db=other) the server logs a DDL, which is always logged as a
// statement, only when the session's default database passes the filter:
// "USE other; TRUNCATE TABLE shop.orders" (or a session with no default
// database) never reaches the binlog, so the reader cannot stop the run.
// Preflight accepts both settings.
func TestHostileBinlogFiltersAcceptedButDropDDL(t *testing.T) {
	ok := migration.ServerVars{Version: "11.8.9-MariaDB-1", LogBin: "1", Format: "ROW", RowImage: "FULL", SessionFormat: "ROW", SessionImage: "FULL", Database: "shop"}
	for _, v := range []migration.ServerVars{
		func() migration.ServerVars { v := ok; v.BinlogDoDB = []string{"shop"}; return v }(),
		func() migration.ServerVars { v := ok; v.BinlogIgnoreDB = []string{"other"}; return v }(),
	} {
		if err := migration.CheckServer(v); err != nil {
			t.Logf("do=%v ignore=%v: %v", v.BinlogDoDB, v.BinlogIgnoreDB, err)
		} else {
			t.Errorf("binlog-do-db=%v binlog-ignore-db=%v accepted: a DDL on shop's table run from another default database is not logged", v.BinlogDoDB, v.BinlogIgnoreDB)
		}
	}
}
