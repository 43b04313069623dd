package plan

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/sluicedb/sluice/internal/schema"
)

// maxName is the longest identifier the servers accept.
const maxName = 64

// TriggerRefusal says why the copy path cannot carry triggers named names
// ("" when it can). A trigger's name is unique in its database, and RENAME
// moves a table's triggers with it: the new table gets copies of them, made
// under the cut-over's lock right before the RENAME, under the other name
// (schema.Toggled), which the operator must accept with --carry-triggers.
// Keeping the names would need the originals dropped first, and a run that
// died between the drop and the RENAME would leave the table without them.
func TriggerRefusal(table string, names []string, carry bool) string {
	if len(names) == 0 {
		return ""
	}
	list := strings.Join(names, ", ")
	if !carry {
		return fmt.Sprintf("table %s has triggers (%s), which the swap would leave on the old table; a trigger's name is unique in its database, so their copies on the new table take the other name (%s): pass --carry-triggers to accept that",
			table, list, strings.Join(CarriedTriggerNames(names), ", "))
	}
	seen := map[string]string{} // trigger names are not case-sensitive
	for _, n := range names {
		seen[strings.ToLower(n)] = n
	}
	for i, n := range CarriedTriggerNames(names) {
		switch {
		case n == "" || utf8.RuneCountInString(n) > maxName:
			return fmt.Sprintf("trigger %s of %s: its copy's name %q is not a valid name; rename the trigger first", names[i], table, n)
		case seen[strings.ToLower(n)] != "":
			return fmt.Sprintf("triggers %s and %s of %s: the copy of the one takes the other's name; rename one first", names[i], seen[strings.ToLower(n)], table)
		}
	}
	return ""
}

// CarriedTriggerNames are the names the copies of the triggers named names
// take on the new table.
func CarriedTriggerNames(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = schema.Toggled(n)
	}
	return out
}

// TriggersNote says what the copy path does with t's triggers ("" for a
// table without any).
func TriggersNote(t *schema.Table, carry bool) string {
	if len(t.Triggers) == 0 {
		return ""
	}
	if why := TriggerRefusal(t.Name, t.Triggers, carry); why != "" {
		return "refused: " + why
	}
	var pairs []string
	for i, n := range CarriedTriggerNames(t.Triggers) {
		pairs = append(pairs, t.Triggers[i]+" -> "+n)
	}
	return fmt.Sprintf("%s: copied to the new table under the cut-over's lock, after the last change and right before the RENAME, in their order, "+
		"with their definer, sql_mode and character set; no write runs without them or through them twice; the old table keeps the originals",
		strings.Join(pairs, ", "))
}
