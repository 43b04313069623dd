package plan

import (
	"strings"
	"testing"

	"github.com/sluicedb/sluice/internal/schema"
)

func TestForeignKeysNote(t *testing.T) {
	if got := ForeignKeysNote(&schema.Table{Name: "t"}); got != "" {
		t.Errorf("a table without foreign keys: %q", got)
	}
	parent := &schema.Table{Name: "t", Children: []schema.ChildKey{{Schema: "shop", Table: "c", ForeignKey: schema.ForeignKey{Name: "c_ibfk_1"}}}}
	if got := ForeignKeysNote(parent); !strings.Contains(got, "children's keys shop.c c_ibfk_1 -> _c_ibfk_1: re-pointed") || !strings.Contains(got, "write-locks c") {
		t.Errorf("a parent: %q", got)
	}
	child := &schema.Table{Name: "t", ForeignKeys: []schema.ForeignKey{
		{Name: "t_ibfk_1", RefTable: "p", OnDelete: "CASCADE", OnUpdate: "RESTRICT"},
		{Name: "fk_q", RefTable: "q", OnDelete: "RESTRICT", OnUpdate: "RESTRICT"},
		{Name: "fk_p2", RefTable: "p", OnDelete: "NO ACTION", OnUpdate: "NO ACTION"},
	}}
	got := ForeignKeysNote(child)
	for _, want := range []string{"own keys t_ibfk_1, fk_q -> _fk_q, fk_p2 -> _fk_p2: added", "write-locks p, q", "t_ibfk_1 cascade into this table"} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in %q", want, got)
		}
	}
}
