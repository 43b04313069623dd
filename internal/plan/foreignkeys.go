package plan

import (
	"fmt"
	"slices"
	"strings"

	"github.com/sluicedb/sluice/internal/schema"
)

// ForeignKeysNote says what the copy path does with t's foreign keys: a
// parent table is refused; the table's own keys are added to the new table
// under the cut-over's lock, which then holds the parents too. "" for a
// table without any.
func ForeignKeysNote(t *schema.Table) string {
	var notes []string
	if len(t.Children) > 0 {
		var keys, tables []string
		for _, c := range t.Children {
			keys = append(keys, fmt.Sprintf("%s (renamed %s)", c, schema.Toggled(c.Name)))
			if !slices.Contains(tables, c.Table) {
				tables = append(tables, c.Table)
			}
		}
		notes = append(notes, fmt.Sprintf("referenced by %s: each is re-pointed to the new table under the cut-over's lock by one ALTER of its table that reads no row "+
			"(a constraint name cannot be dropped and re-added in one statement, so each takes the other name), and the cut-over also write-locks %s for its sub-second length",
			strings.Join(keys, ", "), strings.Join(tables, ", ")))
	}
	if own := ownKeysNote(t); own != "" {
		notes = append(notes, own)
	}
	return strings.Join(notes, "; ")
}

func ownKeysNote(t *schema.Table) string {
	if len(t.ForeignKeys) == 0 {
		return ""
	}
	var keys, parents, cascades []string
	seen := map[string]bool{}
	for _, fk := range t.ForeignKeys {
		_, after := schema.ForeignKeyFor(t.Name, schema.NamesFor(t.Name).Shadow, fk.Name)
		k := fk.Name
		if after != fk.Name {
			k += " (renamed " + after + ")"
		}
		keys = append(keys, k)
		if !seen[strings.ToLower(fk.RefTable)] {
			seen[strings.ToLower(fk.RefTable)] = true
			parents = append(parents, fk.RefTable)
		}
		if fk.Cascades() {
			cascades = append(cascades, fk.Name)
		}
	}
	s := fmt.Sprintf("%s kept: added to the new table under the cut-over's lock, without reading rows (they are the original's, as the server checked them), "+
		"so the cut-over also write-locks %s for its sub-second length; nothing is unchecked at any time", strings.Join(keys, ", "), strings.Join(parents, ", "))
	if len(cascades) > 0 {
		s += fmt.Sprintf("; %s change this table's rows when the parent's change, which only MySQL with SQL-layer foreign keys (9.x, innodb_native_foreign_keys=OFF) writes to the binlog: refused elsewhere", strings.Join(cascades, ", "))
	}
	return s
}
