package ddl

import (
	"errors"
	"strings"
	"testing"
)

// TestDefaultExpressions: a DEFAULT (expression) with operators, which the
// parser alone stops at, is read: the clause sent to the server is the
// user's, Text prints the expression, a volatile function inside is still
// found, and parentheses or DEFAULT inside quotes do not mislead the reading.
// A DEFAULT expression the server would not take either is still refused.
func TestDefaultExpressions(t *testing.T) {
	for clause, want := range map[string]struct {
		text     string
		volatile string
	}{
		"ADD COLUMN n INT DEFAULT (a + 1)":                                                 {"DEFAULT ((`a`+1))", ""},
		"ADD COLUMN n INT DEFAULT (RAND() * 7)":                                            {"DEFAULT ((RAND()*7))", "RAND()"},
		"ADD COLUMN n DATETIME DEFAULT (NOW() + INTERVAL 1 DAY)":                           {"INTERVAL 1 DAY", "NOW()"},
		"ADD COLUMN c VARCHAR(9) COMMENT 'default (x' DEFAULT (a / 7)":                     {"DEFAULT ((`a`/7))", ""},
		"ADD COLUMN `default` INT DEFAULT ((1) + (2)), ADD COLUMN m INT":                   {"DEFAULT (((1)+(2)))", ""},
		"ADD COLUMN s VARCHAR(9) DEFAULT (CONCAT(')', a) ), ADD INDEX (s)":                 {"DEFAULT (CONCAT(')', `a`))", ""},
		"ADD COLUMN n INT NOT NULL DEFAULT (CASE WHEN a > 0 THEN 1 ELSE UUID_SHORT() END)": {"CASE", "UUID_SHORT()"},
	} {
		a, err := Parse(clause)
		if err != nil {
			t.Errorf("%q: %v", clause, err)
			continue
		}
		if a.Clause != clause {
			t.Errorf("%q: the server would get %q", clause, a.Clause)
		}
		if got := Text(a.Specs[0]); !strings.Contains(got, want.text) || strings.Contains(strings.ToLower(got), defaultExprFunc) {
			t.Errorf("%q: printed %q, want it to hold %q", clause, got, want.text)
		}
		var causes []string
		for _, v := range a.NonDeterministic {
			causes = append(causes, v.Cause)
		}
		if strings.Join(causes, " ") != want.volatile {
			t.Errorf("%q: volatile %v, want %q", clause, causes, want.volatile)
		}
	}
	for _, clause := range []string{"ADD COLUMN n INT DEFAULT (a +)", "ADD COLUMN n INT DEFAULT 1 + 1", "ADD COLUMN n INT DEFAULT (a + 1"} {
		if _, err := Parse(clause); !errors.Is(err, ErrInvalid) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: %v, want one line refusing it", clause, err)
		}
	}
}
