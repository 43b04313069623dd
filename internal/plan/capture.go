package plan

import (
	"fmt"
	"strings"

	"github.com/sluicedb/sluice/internal/capture"
	"github.com/sluicedb/sluice/internal/schema"
)

// CaptureRefusal says why capture by triggers (--capture=triggers) cannot
// migrate t on the copy path, or "" if it can: a trigger of its own named
// like one of the capture's, or whose copy on the new table would be (a
// trigger's name is unique in its database), foreign keys (a cascade fires
// no trigger), a TIMESTAMP key column (a trigger copies it through the
// session's time zone), or a name InnoDB stores encoded (the cut-over finds
// the table's InnoDB id by name, to see a TRUNCATE). The table's other
// triggers fire beside the capture's, which come last (they are made after
// them), and are carried as on the binlog path. Pure.
func CaptureRefusal(t *schema.Table) string {
	_, names := capture.Names(t.Name)
	for _, own := range t.Triggers {
		for _, n := range names {
			if strings.EqualFold(own, n) || strings.EqualFold(schema.Toggled(own), n) {
				return fmt.Sprintf("table %s has trigger %s, and capture by triggers makes a trigger %s (a trigger's name is unique in its database, and the new table's copy of %s is named %s): rename that trigger, or use the binlog",
					t.Name, own, n, own, schema.Toggled(own))
			}
		}
	}
	switch {
	case len(t.ForeignKeys) > 0 || len(t.Children) > 0:
		return fmt.Sprintf("table %s has foreign keys, whose cascades change rows without firing a trigger; --capture=triggers cannot see them: use the binlog", t.Name)
	case !capture.PlainName(t.Database) || !capture.PlainName(t.Name):
		return fmt.Sprintf("%s.%s: the table's InnoDB id, which the cut-over compares to see a TRUNCATE (it fires no trigger), is found only for names of ASCII letters, digits and _; use the binlog, or rename the table",
			t.Database, t.Name)
	}
	for _, c := range t.PKColumns() {
		if c.DataType == "timestamp" {
			return fmt.Sprintf("key column %s is a TIMESTAMP, which a trigger copies through the session's time zone; --capture=triggers cannot record it: use the binlog", c.Name)
		}
	}
	return ""
}

// CaptureNote says, on the copy path with capture by triggers, what sluice
// will do, or why it refuses.
func CaptureNote(t *schema.Table) string {
	if why := CaptureRefusal(t); why != "" {
		return "refused: " + why
	}
	queue, trs := capture.Names(t.Name)
	own := ""
	if len(t.Triggers) > 0 {
		own = fmt.Sprintf(" (after the table's own %s, which go on firing)", strings.Join(t.Triggers, ", "))
	}
	return fmt.Sprintf("by triggers %s (AFTER INSERT, UPDATE, DELETE)%s, made through the metadata-lock guard before the copy, which record each changed key in the queue table %s "+
		"inside the application's transaction (its writes write one more row each, two for an update that moves a key); a TRUNCATE or ALTER of the table during the run "+
		"stops it before the swap; triggers and queue are dropped when the run ends; a run that stops starts over", strings.Join(trs[:], ", "), own, queue)
}
