package ddl

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestMariaDBTypesInAddColumn: MariaDB's UUID, INET6 and INET4, unknown to
// the parser, are read in ADD COLUMN (in any case, on several lines, in a
// list, in a whole statement); a column named like one of them is a name;
// a clause that also redefines a column is refused in one line, and so is
// what the parser stops at for another reason.
func TestMariaDBTypesInAddColumn(t *testing.T) {
	for clause, added := range map[string]string{
		"ADD COLUMN u UUID": "u",
		"ADD COLUMN u uuid NULL DEFAULT UUID(), ADD COLUMN i INET6":             "i u",
		"ADD COLUMN (a Inet4 NOT NULL DEFAULT '10.0.0.1', b INT)":               "a b",
		"ADD COLUMN x\nINET6\nNOT NULL AFTER y, ADD INDEX (x)":                  "x",
		"ADD COLUMN a INT,\nADD COLUMN b INT,\n  ADD COLUMN u UUID":             "a b u",
		"ADD COLUMN g BIGINT AS (n * 3) PERSISTENT, ADD COLUMN persistent INT":  "g persistent",
		"ALTER TABLE db.t ADD COLUMN u UUID FIRST":                              "u",
		"ADD COLUMN uuid INT, ADD COLUMN inet6 UUID":                            "inet6 uuid",
		"ADD COLUMN `uuid` UUID DEFAULT '00000000-0000-0000-0000-000000000001'": "uuid",
	} {
		a, got, err := parseAdded(clause)
		if err != nil {
			t.Errorf("%q: %v", clause, err)
			continue
		}
		if strings.Join(got, " ") != added {
			t.Errorf("%q: added %v, want %s", clause, got, added)
		}
		if l := strings.ToLower(a.Clause); !strings.Contains(l, "uuid") && !strings.Contains(l, "inet") && !strings.Contains(l, "persistent") {
			t.Errorf("%q: the clause sent to the server lost its type: %q", clause, a.Clause)
		}
	}
	if a, _ := Parse("ADD COLUMN u UUID DEFAULT UUID()"); a == nil || len(a.NonDeterministic) != 1 {
		t.Errorf("DEFAULT UUID() of an added UUID column not taken for a value computed at each insert: %+v", a)
	}
	for clause, want := range map[string]string{
		"MODIFY i INET6 NOT NULL":            "only in ADD COLUMN so far",
		"ADD COLUMN u UUID, MODIFY v BIGINT": "only in ADD COLUMN so far",
		"CHANGE c d INET4":                   "only in ADD COLUMN so far",
		"MODIFY g INT AS (n) PERSISTENT":     "only in ADD COLUMN so far",
		"ADD COLUMN u UUIDX":                 "cannot parse",
		"ADD COLUMN u INT DEFAULT t.uuid":    "cannot parse",
		"ADD COLUMN u UUID GARBAGE":          "cannot parse",
	} {
		_, err := Parse(clause)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: %v, want one line with %q", clause, err, want)
		}
	}
}

// parseAdded parses clause and returns the added columns' names, sorted.
func parseAdded(clause string) (*Alter, []string, error) {
	a, err := Parse(clause)
	if err != nil {
		return nil, nil, err
	}
	var got []string
	for n := range a.Added {
		got = append(got, n)
	}
	return a, sorted(got), nil
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// TestColumnVisibility: INVISIBLE and VISIBLE columns (MySQL 8.0.23+,
// MariaDB 10.3+) and MySQL's ALTER COLUMN ... SET [IN]VISIBLE, unknown to the
// parser, are read, in MODIFY and CHANGE too, and the clause sent to the
// server keeps them; a word the parser stops at for another reason is still
// refused.
func TestColumnVisibility(t *testing.T) {
	for clause, want := range map[string]string{
		"ADD COLUMN m INT INVISIBLE":                               "added m",
		"ADD COLUMN m INT INVISIBLE DEFAULT 5, ADD INDEX (m)":      "added m",
		"ADD COLUMN (m INT NOT NULL INVISIBLE, n INT VISIBLE)":     "added m n",
		"MODIFY b INT INVISIBLE":                                   "spec 1",
		"CHANGE b c INT\nVISIBLE":                                  "renamed b c",
		"ALTER COLUMN b SET INVISIBLE, ALTER COLUMN a SET VISIBLE": "spec 2",
		"ALTER TABLE db.t ALTER COLUMN b set invisible":            "spec 1",
		"ADD COLUMN u UUID INVISIBLE":                              "added u",
	} {
		a, got, err := parseAdded(clause)
		if err != nil {
			t.Errorf("%q: %v", clause, err)
			continue
		}
		switch {
		case strings.HasPrefix(want, "added "):
			if strings.Join(got, " ") != strings.TrimPrefix(want, "added ") {
				t.Errorf("%q: added %v, want %s", clause, got, want)
			}
		case strings.HasPrefix(want, "renamed "):
			if a.Renames["b"] != "c" {
				t.Errorf("%q: renames %v", clause, a.Renames)
			}
		default:
			if fmt.Sprintf("spec %d", len(a.Specs)) != want {
				t.Errorf("%q: %d parts, want %s", clause, len(a.Specs), want)
			}
		}
		if strings.HasPrefix(clause, "ALTER") && !strings.Contains(Text(a.Specs[0]), "SET INVISIBLE") {
			t.Errorf("%q: printed as %q", clause, Text(a.Specs[0]))
		}
		if !strings.Contains(strings.ToLower(a.Clause), "visible") {
			t.Errorf("%q: the clause sent to the server lost the visibility: %q", clause, a.Clause)
		}
	}
	many := make([]string, 40)
	for i := range many {
		many[i] = fmt.Sprintf("ADD COLUMN c%d INT INVISIBLE DEFAULT (%d + 1)", i, i)
	}
	if _, got, err := parseAdded(strings.Join(many, ", ")); err != nil || len(got) != 40 {
		t.Errorf("40 hidden columns with expression defaults: %d read, %v", len(got), err)
	}
	for _, clause := range []string{"ADD COLUMN m INT INVISIBLEX", "ADD COLUMN m INVISIBLE"} {
		if _, err := Parse(clause); !errors.Is(err, ErrInvalid) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: %v, want one line refusing it", clause, err)
		}
	}
}
