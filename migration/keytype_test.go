package migration_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/testdb"
)

// TestKeyTypeChanges: an ALTER that changes the type of a primary-key
// column. sluice finds a row of the new table by the original's key value,
// so a type that stores a key otherwise (BINARY pads it, CHAR strips a NO
// PAD VARCHAR's trailing space, DATETIME rounds it, an ENUM reordered
// renumbers it) lost writes made after the checksum: the delete missed the
// row in the new table, which came back (or, for the ENUM, another row went).
// Those are refused before anything is made; the types that keep every key
// as it is migrate, and the writes made while the cut-over is postponed land
// as the server's own ALTER of a twin that took the same writes gives them.
func TestKeyTypeChanges(t *testing.T) {
	db := testdb.New(t)
	nopad := "utf8mb4_0900_bin"
	if db.Flavor == dbconn.MariaDB {
		nopad = "utf8mb4_nopad_bin"
	}
	cases := []struct {
		key, alter string
		values     []string // key values as SQL literals; the first is deleted, the second updated
		kept       bool     // every key is stored as it is
		fill       string   // more rows, many ranges: the key as an expression of n
	}{
		{"VARBINARY(4)", "MODIFY k BINARY(4) NOT NULL", []string{"'cd'", "'ab'", "'ef'"}, false, ""},
		{"VARCHAR(4) COLLATE " + nopad, "MODIFY k CHAR(4) COLLATE " + nopad + " NOT NULL", []string{"'a '", "'b'", "'c'"}, false, ""},
		{"ENUM('a','b','c')", "MODIFY k ENUM('c','b','a') NOT NULL", []string{"'a'", "'b'", "'c'"}, false, ""},
		{"DATETIME(3)", "MODIFY k DATETIME NOT NULL", []string{"'2020-01-01 10:00:10.200'", "'2020-01-01 10:00:11'", "'2020-01-01 10:00:12.700'"}, false, ""},
		{"DECIMAL(6,2)", "MODIFY k DECIMAL(6,1) NOT NULL", []string{"1.25", "2.5", "3.75"}, false, ""},
		{"INT", "MODIFY k BIGINT NOT NULL", []string{"5", "-7", "2147483647"}, true, "n + 100"},
		{"VARCHAR(4) COLLATE utf8mb4_bin", "MODIFY k VARCHAR(8) COLLATE utf8mb4_bin NOT NULL", []string{"'a '", "'b'", "'c'"}, true, ""},
		{"CHAR(4)", "MODIFY k VARCHAR(6) NOT NULL", []string{"'a'", "'bb'", "'c'"}, true, ""},
		{"ENUM('a','b','c')", "MODIFY k ENUM('a','b','c','d') NOT NULL", []string{"'a'", "'b'", "'c'"}, true, ""},
		{"DATETIME", "MODIFY k DATETIME(3) NOT NULL", []string{"'2020-01-01 10:00:10'", "'2020-01-01 10:00:11'", "'2021-01-01'"}, true, ""},
		{"DECIMAL(6,2)", "MODIFY k DECIMAL(8,3) NOT NULL", []string{"1.25", "2.5", "-3.75"}, true, ""},
		// Another character set (not on MariaDB: keyCharsetChange) or collation.
		{"VARCHAR(8) CHARACTER SET latin1", "MODIFY k VARCHAR(8) CHARACTER SET utf8mb4 NOT NULL", []string{"'é'", "'F'", "'a '"}, db.Flavor != dbconn.MariaDB, "CONCAT('z', n)"},
		{"VARCHAR(8) CHARACTER SET utf8mb4", "MODIFY k VARCHAR(8) CHARACTER SET latin1 NOT NULL", []string{"'é'", "'F'", "'a '"}, db.Flavor != dbconn.MariaDB, "CONCAT('z', n)"},
		{"VARCHAR(10) CHARACTER SET latin1", "CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci", []string{"'é'", "'F'", "'a '"}, db.Flavor != dbconn.MariaDB, "CONCAT(ELT(1 + n % 4, 'é', 'ü', 'a', 'ß'), n)"},
		{"VARCHAR(8) COLLATE utf8mb4_bin", "MODIFY k VARCHAR(8) COLLATE utf8mb4_general_ci NOT NULL", []string{"'a'", "'B'", "'c '"}, true, "CONCAT('z', n)"},
		{"VARCHAR(8) COLLATE utf8mb4_general_ci", "MODIFY k VARCHAR(8) COLLATE utf8mb4_bin NOT NULL", []string{"'a'", "'B'", "'c '"}, true, "CONCAT('z', n)"},
	}
	for i, c := range cases {
		t.Run(fmt.Sprintf("%s_%d", strings.Fields(c.key)[0], i), func(t *testing.T) {
			table, twin := fmt.Sprintf("t%d", i), fmt.Sprintf("n%d", i)
			var rows []string
			for j, v := range c.values {
				rows = append(rows, fmt.Sprintf("(%s, %d)", v, j))
			}
			for _, name := range []string{table, twin} {
				db.MustExec(t, "CREATE TABLE "+name+" (k "+c.key+" NOT NULL PRIMARY KEY, x INT)", "INSERT INTO "+name+" VALUES "+strings.Join(rows, ", "))
				if c.fill != "" {
					db.Fill(t, name, 3000, c.fill+", n")
				}
			}
			writes := func(name string) []string {
				return []string{"DELETE FROM " + name + " WHERE k = " + c.values[0], "UPDATE " + name + " SET x = 100 WHERE k = " + c.values[1]}
			}
			db.MustExec(t, writes(twin)...)
			db.MustExec(t, "ALTER TABLE "+twin+" "+c.alter)
			before := snapshot(t, db, table)
			cfg := config(t, db, table, c.alter)
			cfg.PostponeCutover, cfg.ChunkTime = true, time.Millisecond
			cfg.OnPhase = func(phase string) {
				if phase == "postponed" {
					db.MustExec(t, append(writes(table), "DROP TABLE `_"+table+"_cutover`")...)
				}
			}
			_, err := mustRunner(t, cfg).Run(context.Background())
			if !c.kept {
				if err == nil || !strings.Contains(err.Error(), "primary-key column k") {
					t.Errorf("%s on a %s key: %v, want a refusal", c.alter, c.key, err)
				}
				if err != nil && strings.Contains(err.Error(), "primary-key column k") && snapshot(t, db, table) != before {
					t.Error("the refused run changed the table")
				}
				if slices.ContainsFunc(db.Tables(t), func(n string) bool { return strings.HasPrefix(n, "_"+table+"_") }) {
					t.Errorf("leftovers: %v", db.Tables(t))
				}
			} else if err != nil {
				t.Fatal(err)
			}
			got, want := db.Dump(t, table, "HEX(k), x", "k"), db.Dump(t, twin, "HEX(k), x", "k")
			n := len(c.values) - 1
			if c.fill != "" {
				n += 3000
			}
			if err == nil && (len(want) != n || !slices.EqualFunc(got, want, slices.Equal)) {
				t.Errorf("%s: %v, the server's own ALTER gives %v", c.alter, got, want)
			}
		})
	}
}

// TestCompositeKeyCollationChange: a composite primary key whose string part
// changes collation (case-insensitive to binary and back). Rows of the new
// table are looked up by the original's key with a list of (a, b) tuples,
// which compares b in the new column's collation whatever COLLATE its values
// carry: keys re-cased after the checksum can stop the run on a false
// collision or a final-check mismatch. (Equalities joined by OR keep the
// COLLATE, but the new table's key cannot serve them: each lookup scanned
// and locked the table, and the cut-over held writes for half a minute.)
// Whatever the outcome, nothing is lost: a run that succeeds gives the rows
// the server's own ALTER of a twin that took the same writes gives; one that
// stops leaves the original as the writes left it.
func TestCompositeKeyCollationChange(t *testing.T) {
	db := testdb.New(t)
	for i, c := range []struct{ from, to string }{
		{"utf8mb4_general_ci", "utf8mb4_bin"},
		{"utf8mb4_bin", "utf8mb4_general_ci"},
	} {
		t.Run(c.from, func(t *testing.T) {
			table, twin := fmt.Sprintf("t%d", i), fmt.Sprintf("n%d", i)
			for _, name := range []string{table, twin} {
				db.MustExec(t, "CREATE TABLE "+name+" (a INT NOT NULL, b VARCHAR(12) COLLATE "+c.from+" NOT NULL, x INT, PRIMARY KEY (a, b))")
				db.Fill(t, name, 3000, "n % 7, CONCAT(ELT(1 + n % 3, 'k', 'K', 'é'), n), n")
			}
			writes := func(name string) []string {
				return []string{
					"UPDATE " + name + " SET b = 'K3' WHERE a = 3 AND b = 'k3'",
					"UPDATE " + name + " SET b = 'K10' WHERE a = 3 AND b = 'k10'", "UPDATE " + name + " SET b = 'k10' WHERE a = 3 AND b = 'K10'",
					"UPDATE " + name + " SET b = UPPER(b) WHERE a = 4",
					"UPDATE " + name + " SET b = LOWER(b) WHERE a = 0 AND x < 1500",
					"DELETE FROM " + name + " WHERE a = 1 AND b = 'K1'",
					"UPDATE " + name + " SET x = -1 WHERE a = 5 AND b = 'é5'",
					"UPDATE " + name + " SET b = CONCAT(b, ' ') WHERE a = 6 AND b = 'k6'",
					"INSERT INTO " + name + " VALUES (2, 'new', 7)",
				}
			}
			alter := "MODIFY b VARCHAR(12) COLLATE " + c.to + " NOT NULL"
			db.MustExec(t, writes(twin)...)
			db.MustExec(t, "ALTER TABLE "+twin+" "+alter)
			cfg := config(t, db, table, alter)
			cfg.PostponeCutover, cfg.ChunkTime = true, time.Millisecond
			cfg.LockDeadline = 20 * time.Second
			cfg.OnPhase = func(phase string) {
				if phase == "postponed" {
					db.MustExec(t, append(writes(table), "DROP TABLE `_"+table+"_cutover`")...)
				}
			}
			res, err := mustRunner(t, cfg).Run(context.Background())
			t.Logf("swapped %v: %v", res.Swapped, err)
			if err != nil && res.Swapped {
				t.Fatalf("the run failed after the swap: %v", err)
			}
			got, want := db.Dump(t, table, "a, HEX(b), x", "a, HEX(b)"), db.Dump(t, twin, "a, HEX(b), x", "a, HEX(b)")
			if len(want) != 3000 || !slices.EqualFunc(got, want, slices.Equal) {
				t.Errorf("%s (swapped %v): %d rows, the server's own ALTER gives %d (or they differ)", alter, res.Swapped, len(got), len(want))
			}
		})
	}
}
