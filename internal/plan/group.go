package plan

import (
	"fmt"
	"strings"

	"github.com/sluicedb/sluice/internal/schema"
)

// GroupRefusal says why table t cannot be one of several tables swapped
// together on srv (sluice migrate with several --table/--alter pairs), or
// "". The group's cut-over renames every table in one RENAME TABLE under
// one LOCK TABLES, which MariaDB does not allow; foreign keys and triggers,
// which the single-table cut-over carries, are not carried by a group's yet.
func GroupRefusal(t *schema.Table, srv Server) string {
	switch {
	case srv.MariaDB:
		return "several tables in one cut-over need RENAME TABLE under LOCK TABLES, which MariaDB does not allow: migrate the tables one by one"
	case len(t.ForeignKeys) > 0 || len(t.Children) > 0:
		return fmt.Sprintf("table %s has foreign keys; several tables in one cut-over do not carry foreign keys yet: migrate it on its own", t.Name)
	}
	return ""
}

// GroupPart says what being one of a group means for table t: its refusal,
// or how it is swapped.
func GroupPart(t *schema.Table, srv Server) string {
	if why := GroupRefusal(t, srv); why != "" {
		return "refused: " + why
	}
	return "copied beside the group's other tables and swapped with them in one RENAME TABLE, under one lock of every table; if any table's migration fails, none is swapped"
}

// GroupNote is the last line of the plans of several tables swapped
// together.
func GroupNote(tables []string) string {
	return fmt.Sprintf("the %d tables %s are copied side by side, each with its own workers, and swapped together in one RENAME TABLE: the application sees all of them changed, or none; the cut-over locks every one of them at once for about a second",
		len(tables), strings.Join(tables, ", "))
}
