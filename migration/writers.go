package migration

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// tableWriters returns the names of the views, of the tables with triggers
// and of the stored routines whose definitions name the table, or name one
// of those in turn (in any database the account can read, but the server's
// own). A write through one of them in a session with binlog_format=STATEMENT
// is logged as a statement that never names the table, and its row changes
// are not in the binlog: the reader stops the run on a statement that names
// one (binlog.Config.Writers). Definitions are matched by the names as words,
// which errs towards more writers; objects made after this reading are not
// known.
func (r *Runner) tableWriters(ctx context.Context) ([]string, error) {
	names := []string{strings.ToLower(r.orig.Name)}
	var out []string
	for { // each round finds one more, or ends: the definitions are finite
		found, err := r.definitionsNaming(ctx, names)
		if err != nil {
			return nil, err
		}
		grew := false
		for _, n := range found {
			if n = strings.ToLower(n); !slices.Contains(names, n) {
				names, out, grew = append(names, n), append(out, n), true
			}
		}
		if !grew {
			break
		}
	}
	return out, nil
}

// systemSchemas hold the server's own views and routines.
const systemSchemas = "('mysql', 'sys', 'performance_schema', 'information_schema')"

// definitionsNaming returns the objects whose definitions hold one of names
// (lower case) as a word: views, tables by their triggers, routines.
func (r *Runner) definitionsNaming(ctx context.Context, names []string) ([]string, error) {
	words := make([]string, len(names))
	for i, n := range names {
		words[i] = regexp.QuoteMeta(n)
	}
	pattern := "(^|[^a-z0-9_$])(" + strings.Join(words, "|") + ")([^a-z0-9_$]|$)"
	var out []string
	for _, q := range []string{
		"SELECT TABLE_NAME FROM information_schema.VIEWS WHERE TABLE_SCHEMA NOT IN " + systemSchemas + " AND LOWER(VIEW_DEFINITION) REGEXP ?",
		"SELECT EVENT_OBJECT_TABLE FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA NOT IN " + systemSchemas + " AND LOWER(ACTION_STATEMENT) REGEXP ?",
		"SELECT ROUTINE_NAME FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA NOT IN " + systemSchemas + " AND LOWER(ROUTINE_DEFINITION) REGEXP ?",
	} {
		rows, err := r.db.QueryContext(ctx, q, pattern)
		if err != nil {
			return nil, fmt.Errorf("read the definitions that name %s: %w", r.orig.Name, err)
		}
		for rows.Next() {
			var name string
			if err := rows.Scan(&name); err != nil {
				rows.Close()
				return nil, err
			}
			if !strings.EqualFold(name, r.orig.Name) && !slices.Contains(out, name) {
				out = append(out, name)
			}
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}
