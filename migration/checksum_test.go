package migration_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/sluicedb/sluice/internal/testdb"
	"github.com/sluicedb/sluice/migration"
)

// TestChecksumCatchesDamage damages the shadow table behind sluice's back
// just before the checksum (a write the binlog never carries to the apply) and
// expects the run to stop before the cut-over, the original untouched.
func TestChecksumCatchesDamage(t *testing.T) {
	db := testdb.New(t)
	// one: a single collation (hashed without casts); mixed: two character
	// sets (hashed as bytes).
	db.MustExec(t,
		`CREATE TABLE one (id INT PRIMARY KEY, a VARCHAR(20) NOT NULL, b VARCHAR(20) NULL, n INT NULL)`,
		`CREATE TABLE mixed (id INT PRIMARY KEY, a VARCHAR(20) CHARACTER SET latin1 NOT NULL,
			b VARCHAR(20) CHARACTER SET utf8mb4 NULL, n INT NULL)`)
	// notnull: no column may be NULL (every row hashed by the CONCAT form).
	db.MustExec(t, `CREATE TABLE notnull (id INT PRIMARY KEY, a VARCHAR(20) NOT NULL, b VARCHAR(20) NOT NULL, n INT NOT NULL)`)
	// indexed: a secondary index, so the checksum runs beside its build
	// (damaged as the index phase starts, before the checksum's snapshot).
	db.MustExec(t, `CREATE TABLE indexed (id INT PRIMARY KEY, a VARCHAR(20) NOT NULL, b VARCHAR(20) NULL, n INT NULL, KEY by_a (a))`)
	for _, tb := range []string{"one", "mixed", "indexed", "notnull"} {
		rows, n := 5000, "IF(n % 5 = 0, NULL, n)"
		if tb == "indexed" {
			rows = 100000 // a build long enough to be seen running
		}
		if tb == "notnull" {
			n = "n"
		}
		db.Fill(t, tb, rows, "n, CONCAT('a', n), IF(n % 3 = 0, '', CONCAT('b', n)), "+n)
	}
	cases := []struct{ table, damage string }{
		{"one", "UPDATE _one_new SET a = 'changed' WHERE id = 17"},
		{"one", "DELETE FROM _one_new WHERE id = 4321"},
		{"one", "INSERT INTO _one_new (id, a, b, n) VALUES (9999, 'x', 'y', 1)"},
		{"one", "UPDATE _one_new SET b = NULL WHERE id = 3"},              // '' -> NULL
		{"one", "UPDATE _one_new SET n = 0 WHERE id = 5"},                 // NULL -> 0
		{"one", "UPDATE _one_new SET a = 'a12', b = 'b11' WHERE id = 11"}, // row 12's value in row 11
		{"mixed", "UPDATE _mixed_new SET b = 'changed' WHERE id = 17"},
		{"mixed", "UPDATE _mixed_new SET b = NULL WHERE id = 3"},
		{"notnull", "UPDATE _notnull_new SET a = 'changed' WHERE id = 17"},
		{"notnull", "UPDATE _notnull_new SET n = 6 WHERE id = 5"},
		{"notnull", "UPDATE _notnull_new SET a = 'a12', b = 'b11' WHERE id = 11"},
		{"notnull", "DELETE FROM _notnull_new WHERE id = 4321"},
		{"indexed", "UPDATE _indexed_new SET a = 'changed' WHERE id = 77777"},
		{"indexed", "DELETE FROM _indexed_new WHERE id = 4321"},
	}
	for i, tc := range cases {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			before := db.Dump(t, tc.table, "id, a, b, n", "id")
			alter := "MODIFY COLUMN n BIGINT NULL"
			if tc.table == "notnull" {
				alter = "MODIFY COLUMN n BIGINT NOT NULL"
			}
			cfg := config(t, db, tc.table, alter)
			damaged := false
			at := "checksum"
			if tc.table == "indexed" {
				at = "index"
			}
			cfg.OnPhase = func(name string) {
				if name == at {
					db.MustExec(t, tc.damage)
					damaged = true
				}
			}
			r, err := migration.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			res, err := r.Run(context.Background())
			if !damaged {
				t.Fatalf("the %s phase never started", at)
			}
			if err == nil || !strings.Contains(err.Error(), "does not match") {
				t.Fatalf("%s: want a checksum mismatch, got %v", tc.damage, err)
			}
			if tc.table == "indexed" && !res.ChecksumWithIndex {
				t.Error("the checksum did not run beside the index build")
			}
			if after := db.Dump(t, tc.table, "id, a, b, n", "id"); fmt.Sprint(after) != fmt.Sprint(before) {
				t.Error("the original table changed")
			}
			if tables := db.Tables(t); !slices.Equal(tables, []string{"indexed", "mixed", "notnull", "one"}) {
				t.Errorf("leftovers: %v", tables)
			}
			// The index build was stopped: no ALTER of sluice's is left running.
			if alters := db.Processes(t, "INFO LIKE 'ALTER TABLE%_new%'"); alters != 0 {
				t.Errorf("%d ALTERs still running after the run", alters)
			}
		})
	}
}
