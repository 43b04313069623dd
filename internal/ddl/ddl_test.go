package ddl

import (
	"errors"
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
	if a.Clause != "ADD INDEX k (c)" {
		t.Errorf("clause = %q", a.Clause)
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
	for _, c := range []string{"", "ADD COLUMN", "ADD COLUMN x INT; DROP TABLE t", "RENAME TO other", "SELECT 1"} {
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
