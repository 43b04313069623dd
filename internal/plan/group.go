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
	if srv.MariaDB {
		// MariaDB refuses RENAME TABLE under LOCK TABLES (migration/groupsentry.go).
		return "copied beside the group's other tables and swapped with them in one RENAME TABLE, sent while every table is read-locked and let go one table at a time as the RENAME takes it; if any table's migration fails, none is swapped"
	}
	return "copied beside the group's other tables and swapped with them in one RENAME TABLE, under one lock of every table; if any table's migration fails, none is swapped"
}

// GroupNote is the last line of the plans of several tables swapped
// together.
func GroupNote(tables []string) string {
	return fmt.Sprintf("the %d tables %s are copied side by side, each with its own workers, and swapped together in one RENAME TABLE: the application sees all of them changed, or none; the cut-over locks every one of them at once for about a second",
		len(tables), strings.Join(tables, ", "))
}
