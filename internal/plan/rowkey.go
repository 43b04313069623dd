package plan

import (
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/ddl"
	"github.com/sluicedb/sluice/internal/schema"
)

// RowKeyNote says, for an ALTER that changes the primary key of t, by which
// index of the new table the copy path will find the original's rows (one
// whose first columns are the old key's), or that it will refuse for want of
// one; "" when the primary key does not change.
func RowKeyNote(t *schema.Table, a *ddl.Alter) string {
	if !a.ChangesPrimaryKey || !t.HasPrimaryKey() {
		return ""
	}
	old := strings.Join(t.PrimaryKey, ", ")
	led := func(cols []string) bool { return schema.LedBy(cols, t.PrimaryKey) }
	dropped := map[string]bool{}
	var added []schema.Index
	for _, spec := range a.Specs {
		switch spec.Tp {
		case ast.AlterTableDropIndex:
			dropped[dbconn.NameKey(spec.Name)] = true
		case ast.AlterTableAddConstraint:
			var cols []string
			for _, k := range spec.Constraint.Keys {
				if k.Column == nil || k.Length > 0 {
					break // an expression or a prefix ends what the index can be looked up by
				}
				cols = append(cols, k.Column.Name.O)
			}
			switch tp := spec.Constraint.Tp; {
			case tp == ast.ConstraintPrimaryKey:
				if led(cols) {
					return "by the new primary key, which begins with the old one's columns (" + old + ")"
				}
			case tp == ast.ConstraintKey || tp == ast.ConstraintIndex || isUnique(tp):
				added = append(added, schema.Index{Name: spec.Constraint.Name, Columns: cols})
			}
		}
	}
	for _, ix := range append(added, t.Indexes...) {
		if led(ix.Columns) && !dropped[dbconn.NameKey(ix.Name)] {
			name := "index " + ix.Name
			if ix.Name == "" {
				name = "the index the ALTER adds"
			}
			return "by " + name + ", which begins with the old primary key's columns (" + old + ")"
		}
	}
	return "refused: the new table would have no index that begins with the old primary key's columns (" + old + "), by which sluice finds rows; add one (ADD KEY (" + old + "))"
}
