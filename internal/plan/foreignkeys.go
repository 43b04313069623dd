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
			keys = append(keys, fmt.Sprintf("%s.%s %s -> %s", c.Schema, c.Table, c.Name, schema.Toggled(c.Name)))
			if !slices.Contains(tables, c.Table) {
				tables = append(tables, c.Table)
			}
		}
		notes = append(notes, fmt.Sprintf("children's keys %s: re-pointed to the new table in the swap by one ALTER of each child that reads no row, "+
			"under the other name (one statement cannot drop and re-add a name); the cut-over also write-locks %s",
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
			k += " -> " + after
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
	s := fmt.Sprintf("own keys %s: added to the new table in the swap without reading a row (the rows are the original's, as the server checked them); "+
		"the cut-over also write-locks %s", strings.Join(keys, ", "), strings.Join(parents, ", "))
	if len(cascades) > 0 {
		s += fmt.Sprintf("; %s cascade into this table, which sluice sees only where the binlog holds cascades (MySQL 9, innodb_native_foreign_keys=OFF): refused elsewhere", strings.Join(cascades, ", "))
	}
	return s
}
