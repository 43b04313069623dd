package ddl

import (
	"errors"
	"strings"
	"testing"
)

func TestParseColumns(t *testing.T) {
	a, err := Parse("CHANGE COLUMN a b INT, RENAME COLUMN c TO d, DROP COLUMN e, ADD COLUMN f INT DEFAULT 3, MODIFY g BIGINT")
	if err != nil {
		t.Fatal(err)
	}
	if a.Renames["a"] != "b" || a.Renames["c"] != "d" || len(a.Renames) != 2 {
		t.Errorf("renames = %v", a.Renames)
	}
	if !a.Dropped["e"] || !a.Added["f"] || a.ChangesPrimaryKey {
		t.Errorf("dropped=%v added=%v pk=%v", a.Dropped, a.Added, a.ChangesPrimaryKey)
	}
	orig := func(n string) bool { return map[string]bool{"a": true, "c": true, "e": true, "g": true, "h": true}[n] }
	cases := []struct {
		newName, want string
		ok            bool
	}{{"b", "a", true}, {"d", "c", true}, {"f", "", false}, {"g", "g", true}, {"h", "h", true}, {"a", "", false}, {"zz", "zz", false}}
	for _, c := range cases {
		got, ok := a.SourceColumn(c.newName, orig)
		if got != c.want || ok != c.ok {
			t.Errorf("SourceColumn(%q) = %q,%v want %q,%v", c.newName, got, ok, c.want, c.ok)
		}
	}
}

func TestParseDropAndReAdd(t *testing.T) {
	a, err := Parse("DROP COLUMN x, ADD COLUMN x INT")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := a.SourceColumn("x", func(string) bool { return true }); ok {
		t.Error("a dropped and re-added column must not be copied from the old one")
	}
}

func TestParseFullStatement(t *testing.T) {
	a, err := Parse("ALTER TABLE `my``db`.t1 ADD INDEX k (c)")
	if err != nil {
		t.Fatal(err)
	}
	if a.Clause != "ADD INDEX k (c)" || a.Database != "my`db" || a.Table != "t1" {
		t.Errorf("clause = %q, database %q, table %q", a.Clause, a.Database, a.Table)
	}
}

// TestNamesOther: a whole statement must name the table it is run on.
func TestNamesOther(t *testing.T) {
	for _, c := range []struct {
		alter       string
		db, table   string
		fold, other bool
	}{
		{"ADD INDEX k (c)", "d", "t", false, false},
		{"ALTER TABLE t ADD INDEX k (c)", "d", "t", false, false},
		{"ALTER TABLE d.t ADD INDEX k (c)", "d", "t", false, false},
		{"ALTER TABLE u DROP COLUMN a", "d", "t", false, true},
		{"ALTER TABLE other.t MODIFY a BIGINT", "d", "t", false, true},
		{"ALTER TABLE T ADD INDEX k (c)", "d", "t", false, true},
		{"ALTER TABLE D.T ADD INDEX k (c)", "d", "t", true, false},
		{"ALTER TABLE `t u` ADD INDEX k (c)", "d", "t u", false, false},
		{"ALTER TABLE `ſ` ADD COLUMN x INT", "d", "s", true, true}, // two tables to the server
		{"ALTER TABLE `Σ` ADD COLUMN x INT", "d", "σ", true, false},
		// Heads the server takes: IF EXISTS, MariaDB's ONLINE, any spacing.
		{"ALTER TABLE IF EXISTS t ADD INDEX k (c)", "d", "t", false, false},
		{"ALTER ONLINE TABLE d.t ADD INDEX k (c)", "d", "t", false, false},
		{"alter  online\ttable if  exists u add index k (c)", "d", "t", false, true},
		{"ALTER TABLE `if` ADD COLUMN x INT", "d", "if", false, false},
		{"ALTER TABLE t\rADD INDEX k (c)", "d", "t", false, false},
	} {
		a, err := Parse(c.alter)
		if err != nil {
			t.Fatalf("%s: %v", c.alter, err)
		}
		err = a.NamesOther(c.db, c.table, c.fold)
		if (err != nil) != c.other || err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("%q on %s.%s (fold %v): %v, want another table: %v", c.alter, c.db, c.table, c.fold, err, c.other)
		}
	}
}

// TestAlterIgnoreRefused: ALTER IGNORE TABLE drops colliding rows; sluice
// refuses it in one line whatever the spelling.
func TestAlterIgnoreRefused(t *testing.T) {
	for _, c := range []string{"ALTER IGNORE TABLE t ADD UNIQUE (a)", "alter online ignore table d.t add unique (a)", "ALTER\nIGNORE TABLE t FORCE"} {
		_, err := Parse(c)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "never drops a row") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: %v", c, err)
		}
	}
}

func TestParsePrimaryKey(t *testing.T) {
	for _, c := range []string{"DROP PRIMARY KEY, ADD PRIMARY KEY (a, b)", "ADD PRIMARY KEY (a)", "MODIFY a INT PRIMARY KEY"} {
		a, err := Parse(c)
		if err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		if !a.ChangesPrimaryKey {
			t.Errorf("%s: ChangesPrimaryKey = false", c)
		}
	}
}

func TestParseRefused(t *testing.T) {
	for _, c := range []string{"", "ADD COLUMN", "ADD COLUMN x INT; DROP TABLE t", "RENAME TO other", "SELECT 1",
		// They change rows, which a copy would not.
		"EXCHANGE PARTITION p0 WITH TABLE x", "DROP PARTITION p0", "TRUNCATE PARTITION p0", "TRUNCATE PARTITION ALL",
		"DISCARD TABLESPACE", "IMPORT TABLESPACE", "DISCARD PARTITION p0 TABLESPACE", "ADD COLUMN z INT, DROP PARTITION p1",
		// Upkeep, not a schema change.
		"OPTIMIZE PARTITION p0", "REBUILD PARTITION p0", "CHECK PARTITION p0", "REPAIR PARTITION p0"} {
		if _, err := Parse(c); !errors.Is(err, ErrInvalid) {
			t.Errorf("Parse(%q) err = %v, want ErrInvalid", c, err)
		}
	}
}

func TestAddsForeignKey(t *testing.T) {
	for clause, want := range map[string]bool{
		"ADD FOREIGN KEY (pid) REFERENCES p (id)":                    true,
		"ADD CONSTRAINT fk FOREIGN KEY (pid) REFERENCES p (id)":      true,
		"ADD COLUMN pid INT REFERENCES p (id)":                       true,
		"ADD COLUMN pid INT, ADD KEY (pid)":                          false,
		"ADD CONSTRAINT c CHECK (pid > 0)":                           false,
		"MODIFY pid BIGINT, ADD UNIQUE KEY u (pid), DROP COLUMN old": false,
	} {
		a, err := Parse(clause)
		if err != nil {
			t.Fatalf("%s: %v", clause, err)
		}
		if a.AddsForeignKey != want {
			t.Errorf("%s: AddsForeignKey = %v, want %v", clause, a.AddsForeignKey, want)
		}
	}
}

func TestSetsAutoIncrement(t *testing.T) {
	for clause, want := range map[string]bool{
		"MODIFY x BIGINT, AUTO_INCREMENT = 1000":              true,
		"AUTO_INCREMENT 7, ADD COLUMN y INT":                  true,
		"ENGINE=InnoDB, AUTO_INCREMENT=5":                     true,
		"MODIFY id BIGINT AUTO_INCREMENT":                     false,
		"ADD COLUMN c VARCHAR(20) DEFAULT 'AUTO_INCREMENT=5'": false,
		"ENGINE=InnoDB, ROW_FORMAT=DYNAMIC":                   false,
	} {
		a, err := Parse(clause)
		if err != nil {
			t.Fatalf("%s: %v", clause, err)
		}
		if a.SetsAutoIncrement != want {
			t.Errorf("%s: SetsAutoIncrement = %v, want %v", clause, a.SetsAutoIncrement, want)
		}
	}
}

// TestTextOfEachClause: each part of a clause reads back as SQL a person
// recognises (the parser restores FORCE as a comment that it lacks support).
func TestTextOfEachClause(t *testing.T) {
	a, err := Parse("ADD COLUMN x INT, FORCE, DROP INDEX k")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range a.Specs {
		got = append(got, Text(s))
	}
	if want := []string{"ADD COLUMN `x` INT", "FORCE", "DROP INDEX `k`"}; strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("got %q, want %q", got, want)
	}
}
