package migration_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/testdb"
	"github.com/sluicedb/sluice/migration"
)

// migrate runs one migration of table and fails the test on error.
func migrate(t *testing.T, cfg migration.Config) migration.Result {
	t.Helper()
	r, err := migration.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Run(context.Background())
	if err != nil {
		t.Fatalf("migrate %s: %v", cfg.Table, err)
	}
	return res
}

// TestAutoIncrementCarriedOver: ids handed out and then deleted lie above the
// largest row; the new table must not issue them again.
func TestAutoIncrementCarriedOver(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE t (id BIGINT AUTO_INCREMENT PRIMARY KEY, x INT)")
	db.Fill(t, "t", 10, "NULL, n")
	db.MustExec(t, "DELETE FROM t WHERE id > 5")
	// The application takes and deletes ids while the cut-over is postponed.
	cfg := config(t, db, "t", "MODIFY x BIGINT")
	cfg.PostponeCutover = true
	var next uint64 // the original's counter just before the cut-over
	cfg.OnPhase = func(phase string) {
		if phase == "postponed" {
			// In one transaction: ids the apply never sees as rows, so
			// only the carry can raise the new table's counter past them.
			tx, err := db.Begin()
			if err != nil {
				t.Fatal(err)
			}
			for _, q := range []string{"INSERT INTO t (x) VALUES (1), (2)", "DELETE FROM t WHERE id > 5"} {
				if _, err := tx.Exec(q); err != nil {
					t.Fatal(err)
				}
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			var name, create string
			db.QueryRow("SHOW CREATE TABLE t").Scan(&name, &create)
			if next, err = migration.AutoIncrement(create); err != nil || next <= 7 {
				t.Errorf("counter %d (%v) in %s", next, err, create)
			}
			db.MustExec(t, "DROP TABLE _t_cutover")
		}
	}
	res := migrate(t, cfg)
	db.MustExec(t, "INSERT INTO t (x) VALUES (99)")
	var id int64
	if err := db.QueryRow("SELECT id FROM t WHERE x = 99").Scan(&id); err != nil {
		t.Fatal(err)
	}
	if uint64(id) != next {
		t.Fatalf("the new table issued id %d; the original would have issued %d (ids below it were handed out)", id, next)
	}
	if res.AutoIncrement != next {
		t.Errorf("Result.AutoIncrement = %d, want %d", res.AutoIncrement, next)
	}
}

// TestAutoIncrementAsked: an AUTO_INCREMENT = N in the ALTER sets the new
// table's counter as the server's own ALTER sets it (N, or past the largest
// row), below the original's counter too; the carry of the original's
// counter is for the ALTERs that do not ask.
func TestAutoIncrementAsked(t *testing.T) {
	for _, n := range []int{3, 8, 1000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			db := testdb.New(t)
			db.MustExec(t, "CREATE TABLE t (id BIGINT AUTO_INCREMENT PRIMARY KEY, x INT)")
			db.Fill(t, "t", 19, "NULL, n")
			db.MustExec(t, "DELETE FROM t WHERE id > 5", "ALTER TABLE t AUTO_INCREMENT = 20",
				"CREATE TABLE ref LIKE t", "INSERT INTO ref SELECT * FROM t", "ALTER TABLE ref AUTO_INCREMENT = 20")
			clause := fmt.Sprintf("MODIFY x BIGINT, AUTO_INCREMENT = %d", n)
			db.MustExec(t, "ALTER TABLE ref "+clause+", ALGORITHM=COPY")
			counter := func(table string) uint64 {
				var name, create string
				if err := db.QueryRow("SHOW CREATE TABLE "+table).Scan(&name, &create); err != nil {
					t.Fatal(err)
				}
				v, err := migration.AutoIncrement(create)
				if err != nil {
					t.Fatal(err)
				}
				return v
			}
			if before := counter("t"); before != 20 {
				t.Fatalf("the original's counter is %d before the migration, want 20", before)
			}
			migrate(t, config(t, db, "t", clause))
			if got, want := counter("t"), counter("ref"); got != want {
				t.Fatalf("AUTO_INCREMENT = %d: the new table's counter is %d, the server's own ALTER gives %d", n, got, want)
			}
		})
	}
}

// TestZeroAutoIncrementValueKept: a row whose AUTO_INCREMENT key is 0 keeps
// it (without NO_AUTO_VALUE_ON_ZERO the copy would renumber it).
func TestZeroAutoIncrementValueKept(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE t (id INT AUTO_INCREMENT PRIMARY KEY, x INT)",
		"SET SESSION sql_mode = 'NO_AUTO_VALUE_ON_ZERO'")
	c, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"SET SESSION sql_mode = 'NO_AUTO_VALUE_ON_ZERO'", "INSERT INTO t VALUES (0, 100), (1, 101), (2, 102)"} {
		if _, err := c.ExecContext(context.Background(), q); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	before := db.Dump(t, "t", "id, x", "id")
	migrate(t, config(t, db, "t", "MODIFY x BIGINT"))
	if after := db.Dump(t, "t", "id, x", "id"); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("rows changed: %v -> %v", before, after)
	}
}

// TestKeptOldTableDoesNotBlock: the old table an earlier migration kept does
// not stop the next migration of the same table.
func TestKeptOldTableDoesNotBlock(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE t (id INT PRIMARY KEY, x INT)")
	db.Fill(t, "t", 100, "n, n")
	first := migrate(t, config(t, db, "t", "MODIFY x BIGINT"))
	second := migrate(t, config(t, db, "t", "MODIFY x INT"))
	if first.OldTable != "_t_old" || !strings.HasPrefix(second.OldTable, "_t_old_") {
		t.Fatalf("old tables %q and %q", first.OldTable, second.OldTable)
	}
	var n int
	db.QueryRow("SELECT COUNT(*) FROM t").Scan(&n)
	if n != 100 {
		t.Fatalf("%d rows after two migrations, want 100", n)
	}
}

// TestQuotesInTableName: a name with a quote and a backtick goes through the
// postponed cut-over (its control table's comment names it) and the swap.
func TestQuotesInTableName(t *testing.T) {
	db := testdb.New(t)
	name := "it's `q`"
	db.MustExec(t, "CREATE TABLE `it's ``q``` (id INT PRIMARY KEY, x INT)")
	db.Fill(t, name, 50, "n, n")
	cfg := config(t, db, name, "MODIFY x BIGINT")
	cfg.PostponeCutover = true
	cfg.OnPhase = func(phase string) {
		if phase == "postponed" {
			go func() {
				if err := migration.TriggerCutover(context.Background(), db.DB, db.Name, name); err != nil {
					t.Error(err)
				}
			}()
		}
	}
	migrate(t, cfg)
	var typ string
	db.QueryRow("SELECT DATA_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND COLUMN_NAME = 'x'", db.Name, name).Scan(&typ)
	if typ != "bigint" {
		t.Fatalf("x is %q after the migration", typ)
	}
}

// TestFinalGuardStopsWrongApply: a row changed after the checksum and then
// wrong in the new table (as a faulty apply would leave it) must stop the
// cut-over; the guard compares every such row under the cut-over's lock.
func TestFinalGuardStopsWrongApply(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE t (id INT PRIMARY KEY, x INT)")
	db.Fill(t, "t", 1000, "n, n")
	before := ""
	cfg := config(t, db, "t", "MODIFY x BIGINT")
	cfg.PostponeCutover = true
	cfg.OnPhase = func(phase string) {
		if phase != "postponed" {
			return
		}
		db.MustExec(t, "UPDATE t SET x = -5 WHERE id = 5", "UPDATE t SET x = -6 WHERE id = 6")
		// Wait until the apply has copied both changes, then spoil one.
		deadline := time.Now().Add(20 * time.Second)
		for {
			var n int
			db.QueryRow("SELECT COUNT(*) FROM _t_new WHERE x < 0").Scan(&n)
			if n == 2 {
				break
			}
			if time.Now().After(deadline) {
				t.Error("the changes never reached the new table")
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		db.MustExec(t, "UPDATE _t_new SET x = 55 WHERE id = 5")
		before = snapshot(t, db, "t")
		db.MustExec(t, "DROP TABLE _t_cutover")
	}
	r, err := migration.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "changed after the checksum differs") {
		t.Fatalf("want the final guard to stop the cut-over, got %v (%d changed rows compared)", err, res.ChangedRowsVerified)
	}
	untouched(t, db, "t", before)
}

// TestFinalGuardCountsChangedRows: without damage, the rows changed after
// the checksum are compared under the lock (or before it) and the swap goes
// ahead.
func TestFinalGuardCountsChangedRows(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE t (id INT PRIMARY KEY, x INT)")
	db.Fill(t, "t", 1000, "n, n")
	cfg := config(t, db, "t", "MODIFY x BIGINT")
	cfg.PostponeCutover = true
	cfg.OnPhase = func(phase string) {
		if phase == "postponed" {
			db.MustExec(t, "UPDATE t SET x = -x WHERE id <= 300", "DELETE FROM t WHERE id > 990", "DROP TABLE _t_cutover")
		}
	}
	res := migrate(t, cfg)
	var neg, all int
	db.QueryRow("SELECT SUM(x < 0), COUNT(*) FROM t").Scan(&neg, &all)
	if neg != 300 || all != 990 {
		t.Fatalf("%d negative of %d rows, want 300 of 990", neg, all)
	}
	if res.ChangedRowsVerified < 310 {
		t.Fatalf("the final guard compared %d changed rows, want at least 310", res.ChangedRowsVerified)
	}
}

// TestAlterBeforeCaptureStops: a DDL made after preflight but before the
// binlog reader starts is not in the binlog it reads; sluice reads the table
// again once the reader runs, and stops.
func TestAlterBeforeCaptureStops(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE t (id INT PRIMARY KEY, x INT)")
	db.Fill(t, "t", 100, "n, n")
	cfg := config(t, db, "t", "MODIFY x BIGINT")
	before := ""
	cfg.OnPhase = func(phase string) {
		if phase == "capture" {
			db.MustExec(t, "ALTER TABLE t ADD COLUMN y INT")
			before = snapshot(t, db, "t")
		}
	}
	r, err := migration.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "altered while sluice prepared") {
		t.Fatalf("want a stop, got %v", err)
	}
	untouched(t, db, "t", before)
	var cols int
	db.QueryRow("SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 't'", db.Name).Scan(&cols)
	if cols != 3 {
		t.Fatalf("t has %d columns", cols)
	}
}

// TestNamedCheckReported: a CHECK constraint the user named keeps its
// condition in the new table under a generated name, and the run says so.
func TestNamedCheckReported(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE t (id INT PRIMARY KEY, v INT, CONSTRAINT v_positive CHECK (v >= 0), CHECK (v < 1000))")
	db.Fill(t, "t", 100, "n, n")
	res := migrate(t, config(t, db, "t", "MODIFY v BIGINT"))
	want := "v_positive"
	if db.Flavor == dbconn.MariaDB {
		// Names are the table's own there: the new table keeps them.
		want = ""
		var n int
		if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.CHECK_CONSTRAINTS WHERE CONSTRAINT_SCHEMA = ? AND TABLE_NAME = 't' AND CONSTRAINT_NAME = 'v_positive'", db.Name).Scan(&n); err != nil || n != 1 {
			t.Fatalf("the new table has %d CHECK constraints named v_positive (%v), want 1", n, err)
		}
	}
	if strings.Join(res.RenamedChecks, ",") != want {
		t.Fatalf("RenamedChecks = %v, want [%s]", res.RenamedChecks, want)
	}
	if _, err := db.Exec("INSERT INTO t VALUES (1000, -1)"); err == nil {
		t.Fatal("the new table lost the condition of v_positive")
	}
}

// TestNamedCheckDroppedOnCopyPath: an ALTER that drops or alters a CHECK
// constraint by name beside a clause that needs the copy. On MySQL the new
// table holds the constraint under a generated name: refused in one line
// saying what to run first, nothing changed. On MariaDB the names are kept:
// the run does it.
func TestNamedCheckDroppedOnCopyPath(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE t (id INT PRIMARY KEY, v INT, CONSTRAINT v_positive CHECK (v >= 0), CHECK (v < 1000), UNIQUE KEY uv (v))")
	db.Fill(t, "t", 100, "n, n")
	for _, alter := range []string{"DROP CHECK v_positive, MODIFY v BIGINT", "DROP CONSTRAINT v_positive, MODIFY v BIGINT", "ALTER CHECK t_chk_1 NOT ENFORCED, MODIFY v BIGINT",
		// The parser reads both as DROP CHECK; the server drops the
		// unique key, and the line names the CHECK it cannot find.
		"DROP CONSTRAINT uv, DROP CHECK v_positive, MODIFY v BIGINT"} {
		t.Run(alter, func(t *testing.T) {
			if db.Flavor == dbconn.MariaDB {
				if !strings.HasPrefix(alter, "DROP CONSTRAINT") || strings.Contains(alter, "DROP CHECK") {
					t.Skip("MariaDB has neither DROP CHECK nor ALTER CHECK")
				}
				migrate(t, config(t, db, "t", alter))
				if _, err := db.Exec("INSERT INTO t VALUES (1000, -1)"); err != nil {
					t.Fatalf("the new table kept v_positive: %v", err)
				}
				db.MustExec(t, "DELETE FROM t WHERE id = 1000", "ALTER TABLE t ADD CONSTRAINT v_positive CHECK (v >= 0)")
				return
			}
			before := snapshot(t, db, "t")
			_, err := mustRunner(t, config(t, db, "t", alter)).Run(context.Background())
			if err == nil || !strings.Contains(err.Error(), "holds under a generated name") || !strings.Contains(err.Error(), "run ALTER TABLE `t` ") || strings.Contains(err.Error(), "\n") {
				t.Fatalf("want a one-line refusal, got %v", err)
			}
			if strings.Contains(alter, "uv") && !strings.Contains(err.Error(), "DROP CHECK `v_positive`") {
				t.Errorf("the refusal names another clause than the one that failed: %v", err)
			}
			untouched(t, db, "t", before)
		})
	}
}

// TestCharNoPadKeyWithControlCharacters: a CHAR primary key in a NO PAD
// binary collation, each key with a twin that ends in a tab. MariaDB keeps
// CHAR values padded with spaces in the index ('k0050' sorts after
// 'k0050\t') while its range comparison strips them ('k0050' < 'k0050\t'),
// so a range bound at one twin leaves the other in no range: there the
// preflight refuses the key in one line and changes nothing. MySQL orders
// and compares them alike: every row is copied.
func TestCharNoPadKeyWithControlCharacters(t *testing.T) {
	db := testdb.New(t)
	coll := "utf8mb4_0900_bin"
	if db.Flavor == dbconn.MariaDB {
		coll = "utf8mb4_nopad_bin"
	}
	db.MustExec(t, "CREATE TABLE c (id CHAR(8) CHARACTER SET utf8mb4 COLLATE "+coll+" NOT NULL PRIMARY KEY, v INT NOT NULL)")
	db.Fill(t, "c", 5000, "CONCAT('k', LPAD(n, 4, '0')), n")
	db.Fill(t, "c", 5000, "CONCAT('k', LPAD(n, 4, '0'), CHAR(9)), -n")
	before := db.Dump(t, "c", "HEX(id), v", "v")
	if len(before) != 10000 {
		t.Fatalf("the table holds %d rows, want 10000", len(before))
	}
	cfg := config(t, db, "c", "ADD COLUMN x INT")
	cfg.ChunkTime = time.Millisecond // many ranges, many bounds at a twin
	cfg.DropOld = true
	res, err := mustRunner(t, cfg).Run(context.Background())
	if db.Flavor == dbconn.MariaDB {
		if !errors.Is(err, migration.ErrPreflight) || !strings.Contains(err.Error(), "NO PAD collation "+coll) {
			t.Fatalf("migrate: %v, want the preflight's refusal of the NO PAD CHAR key", err)
		}
	} else if err != nil {
		t.Fatal(err)
	} else if res.RowsCopied != 10000 {
		t.Errorf("copied %d rows, want 10000", res.RowsCopied)
	}
	if after := db.Dump(t, "c", "HEX(id), v", "v"); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Error("the table's rows changed")
	}
	if tables := db.Tables(t); !slices.Equal(tables, []string{"c"}) {
		t.Errorf("tables left: %v", tables)
	}
}
