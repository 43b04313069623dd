package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/testdb"
)

// TestGroupCommand: sluice plan and sluice migrate with two --table/--alter
// pairs: the plans say the tables are swapped together (the INSTANT one on
// the copy path), and the migration changes both, keeps their rows and says
// they were swapped together.
func TestGroupCommand(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE a (id INT PRIMARY KEY, v INT)", "CREATE TABLE b (id BIGINT PRIMARY KEY, s VARCHAR(20))",
		"INSERT INTO a VALUES (1, 1), (2, 2), (3, 3)", "INSERT INTO b VALUES (1, 'x'), (2, 'y')")
	rowsA, rowsB := db.Dump(t, "a", "id, v", "id"), db.Dump(t, "b", "id, s", "id")
	pairs := []string{"--table", "a", "--alter", "ADD COLUMN x INT", "--table", "b", "--alter", "MODIFY s VARCHAR(40)"}
	conn := []string{"--host", db.Server.Host, "--port", fmt.Sprint(db.Server.Port), "--user", db.Server.User, "--database", db.Name}

	r := sluice(t, nil, append(append([]string{"plan"}, conn...), pairs...)...)
	if r.code != 0 {
		t.Fatalf("plan: exit %d: %s", r.code, r.stderr)
	}
	want := []string{"the 2 tables a, b are copied side by side", "with the others: copied beside", "alone, this ALTER would take the instant path"}
	if db.Flavor == dbconn.MariaDB {
		want = []string{"with the others: refused: several tables in one cut-over need RENAME TABLE under LOCK TABLES"}
	}
	for _, w := range want {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("plan lacks %q:\n%s", w, r.stdout)
		}
	}
	r = sluice(t, nil, append(append([]string{"plan", "--format", "json"}, conn...), pairs...)...)
	var plans []struct{ Table, Path, Group string }
	if err := json.Unmarshal([]byte(r.stdout), &plans); err != nil || len(plans) != 2 || plans[0].Table != "a" || plans[1].Table != "b" || plans[0].Group == "" {
		t.Errorf("json plan of two tables: %v, %+v\n%s", err, plans, r.stdout)
	}

	r = sluice(t, nil, append(append([]string{"migrate", "--quiet"}, conn...), pairs...)...)
	if db.Flavor == dbconn.MariaDB {
		if r.code != 1 || !strings.Contains(lastLine(r.stderr), "MariaDB does not allow") {
			t.Errorf("a group on MariaDB: exit %d, %q", r.code, lastLine(r.stderr))
		}
		if tables := db.Tables(t); !slices.Equal(tables, []string{"a", "b"}) {
			t.Errorf("tables after the refusal: %v", tables)
		}
		return
	}
	if r.code != 0 {
		t.Fatalf("migrate: exit %d: %s", r.code, r.stderr)
	}
	for _, w := range []string{"a, b swapped together in one RENAME TABLE", ".a migrated in", ".b migrated in"} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("migrate's output lacks %q:\n%s", w, r.stdout)
		}
	}
	if got := db.Dump(t, "a", "id, v", "id"); !slices.EqualFunc(got, rowsA, slices.Equal) {
		t.Errorf("a: %v, want %v", got, rowsA)
	}
	if got := db.Dump(t, "b", "id, s", "id"); !slices.EqualFunc(got, rowsB, slices.Equal) {
		t.Errorf("b: %v, want %v", got, rowsB)
	}
	var x, s int
	db.QueryRow("SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 'a' AND COLUMN_NAME = 'x'", db.Name).Scan(&x)
	db.QueryRow("SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 'b' AND COLUMN_NAME = 's' AND CHARACTER_MAXIMUM_LENGTH = 40", db.Name).Scan(&s)
	if x != 1 || s != 1 {
		t.Errorf("the ALTERs were not both applied: a.x %d, b.s VARCHAR(40) %d", x, s)
	}
	if tables := db.Tables(t); !slices.Equal(tables, []string{"_a_old", "_b_old", "a", "b"}) {
		t.Errorf("tables after the group: %v", tables)
	}
}
