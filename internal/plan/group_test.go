package plan

import (
	"strings"
	"testing"

	"github.com/sluicedb/sluice/internal/ddl"
	"github.com/sluicedb/sluice/internal/schema"
)

// TestGroupPlan: a table of a group takes the copy path even when its ALTER
// alone would be INSTANT, its plan says it is swapped with the others, and
// each shape a group cannot handle is named as refused.
func TestGroupPlan(t *testing.T) {
	plain := func() *schema.Table {
		return &schema.Table{Database: "shop", Name: "orders", PrimaryKey: []string{"id"}, Engine: "InnoDB", EstimatedRows: 1000,
			Columns: []schema.Column{{Name: "id", DataType: "bigint"}, {Name: "v", DataType: "int", Nullable: true}}}
	}
	a, err := ddl.Parse("ADD COLUMN x INT")
	if err != nil {
		t.Fatal(err)
	}
	srv := Server{Major: 9, Minor: 7}
	alone := Decide(plain(), a, srv, Options{CPUs: 2})
	if alone.Path != PathInstant || alone.Group != "" {
		t.Fatalf("alone: path %s, group %q; want instant and no group note", alone.Path, alone.Group)
	}
	p := Decide(plain(), a, srv, Options{CPUs: 2, Group: true})
	if p.Path != PathCopy {
		t.Errorf("in a group: path %s, want copy", p.Path)
	}
	for _, want := range []string{"alone, this ALTER would take the instant path", "no table changes before the others"} {
		if !strings.Contains(p.Why, want) {
			t.Errorf("why %q lacks %q", p.Why, want)
		}
	}
	if !strings.Contains(p.Group, "one RENAME TABLE") || !strings.Contains(p.Text(), "with the others: copied beside") {
		t.Errorf("the plan does not say the table is swapped with the others: %q\n%s", p.Group, p.Text())
	}
	cases := []struct {
		name string
		edit func(*schema.Table, *Server)
		want string
	}{
		{"MariaDB", func(_ *schema.Table, s *Server) { s.MariaDB = true }, "MariaDB does not allow"},
		{"child", func(t *schema.Table, _ *Server) { t.ForeignKeys = []schema.ForeignKey{{Name: "fk"}} }, "has foreign keys"},
		{"parent", func(t *schema.Table, _ *Server) { t.Children = []schema.ChildKey{{Table: "items"}} }, "has foreign keys"},
	}
	for _, c := range cases {
		tb, s := plain(), srv
		c.edit(tb, &s)
		if why := GroupRefusal(tb, s); !strings.Contains(why, c.want) {
			t.Errorf("%s: refusal %q, want %q", c.name, why, c.want)
		}
		if part := GroupPart(tb, s); !strings.HasPrefix(part, "refused: ") {
			t.Errorf("%s: %q does not say it is refused", c.name, part)
		}
	}
	if note := GroupNote([]string{"a", "b"}); !strings.Contains(note, "the 2 tables a, b") {
		t.Errorf("group note %q", note)
	}
}
