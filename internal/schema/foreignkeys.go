package schema

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/sluicedb/sluice/internal/dbconn"
)

// ForeignKey is one foreign key of a table (the table is its child).
type ForeignKey struct {
	Name       string
	Columns    []string // the child's columns, in key order
	RefSchema  string
	RefTable   string
	RefColumns []string
	OnUpdate   string // RESTRICT, CASCADE, SET NULL, NO ACTION, SET DEFAULT
	OnDelete   string
}

// Cascades reports whether a change to the parent changes this table's rows
// (CASCADE, SET NULL, SET DEFAULT), rather than only being refused.
func (fk ForeignKey) Cascades() bool {
	quiet := func(rule string) bool { return rule == "" || rule == "RESTRICT" || rule == "NO ACTION" }
	return !quiet(fk.OnUpdate) || !quiet(fk.OnDelete)
}

// Definition is the constraint's SQL, under name, as ADD CONSTRAINT takes it.
// The parent is named with its database, so the text holds from any.
func (fk ForeignKey) Definition(name string) string {
	quote := func(cols []string) string {
		q := make([]string, len(cols))
		for i, c := range cols {
			q[i] = dbconn.QuoteIdent(c)
		}
		return strings.Join(q, ", ")
	}
	s := fmt.Sprintf("CONSTRAINT %s FOREIGN KEY (%s) REFERENCES %s (%s)", dbconn.QuoteIdent(name), quote(fk.Columns),
		dbconn.QuoteTable(fk.RefSchema, fk.RefTable), quote(fk.RefColumns))
	if fk.OnDelete != "" {
		s += " ON DELETE " + fk.OnDelete
	}
	if fk.OnUpdate != "" {
		s += " ON UPDATE " + fk.OnUpdate
	}
	return s
}

// Parent names the referenced table, database-qualified.
func (fk ForeignKey) Parent() string { return fk.RefSchema + "." + fk.RefTable }

// loadForeignKeys reads t's own foreign keys and counts those of other
// tables (or of t itself) that reference it.
func loadForeignKeys(ctx context.Context, db *sql.DB, t *Table) error {
	rows, err := db.QueryContext(ctx, `SELECT k.CONSTRAINT_NAME, k.COLUMN_NAME, k.REFERENCED_TABLE_SCHEMA,
			k.REFERENCED_TABLE_NAME, k.REFERENCED_COLUMN_NAME, r.UPDATE_RULE, r.DELETE_RULE
		FROM information_schema.KEY_COLUMN_USAGE k
		JOIN information_schema.REFERENTIAL_CONSTRAINTS r
			ON r.CONSTRAINT_SCHEMA = k.CONSTRAINT_SCHEMA AND r.CONSTRAINT_NAME = k.CONSTRAINT_NAME AND r.TABLE_NAME = k.TABLE_NAME
		WHERE k.TABLE_SCHEMA = ? AND k.TABLE_NAME = ? AND k.REFERENCED_TABLE_NAME IS NOT NULL
		ORDER BY k.CONSTRAINT_NAME, k.ORDINAL_POSITION`, t.Database, t.Name)
	if err != nil {
		return fmt.Errorf("read foreign keys of %s.%s: %w", t.Database, t.Name, err)
	}
	defer rows.Close()
	for rows.Next() {
		var name, col, rs, rt, rc, upd, del string
		if err := rows.Scan(&name, &col, &rs, &rt, &rc, &upd, &del); err != nil {
			return fmt.Errorf("read foreign keys of %s.%s: %w", t.Database, t.Name, err)
		}
		n := len(t.ForeignKeys)
		if n == 0 || t.ForeignKeys[n-1].Name != name {
			t.ForeignKeys = append(t.ForeignKeys, ForeignKey{Name: name, RefSchema: rs, RefTable: rt,
				OnUpdate: strings.ToUpper(upd), OnDelete: strings.ToUpper(del)})
			n++
		}
		fk := &t.ForeignKeys[n-1]
		fk.Columns = append(fk.Columns, col)
		fk.RefColumns = append(fk.RefColumns, rc)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read foreign keys of %s.%s: %w", t.Database, t.Name, err)
	}
	children, err := db.QueryContext(ctx, `SELECT DISTINCT CONCAT(TABLE_SCHEMA, '.', TABLE_NAME, ' (', CONSTRAINT_NAME, ')')
		FROM information_schema.KEY_COLUMN_USAGE
		WHERE REFERENCED_TABLE_SCHEMA = ? AND REFERENCED_TABLE_NAME = ? ORDER BY 1`, t.Database, t.Name)
	if err != nil {
		return fmt.Errorf("read the foreign keys referencing %s.%s: %w", t.Database, t.Name, err)
	}
	defer children.Close()
	for children.Next() {
		var c string
		if err := children.Scan(&c); err != nil {
			return err
		}
		t.ReferencedBy = append(t.ReferencedBy, c)
	}
	return children.Err()
}

// ForeignKeyFor returns the name a foreign key of the original table takes
// on the shadow (a constraint name is unique in a database, and the
// original holds it until the swap), and the name it has once the swap is
// done. A name the server generated, <table>_ibfk_<n>, takes the shadow's
// <shadow>_ibfk_<n>, which RENAME TABLE turns back into <table>_ibfk_<n>:
// the name is kept. Another name is mapped as pt-online-schema-change maps
// it: a leading underscore added, or removed when there is one.
func ForeignKeyFor(table, shadow, name string) (onShadow, after string) {
	prefix := table + "_ibfk_"
	if len(name) > len(prefix) && strings.EqualFold(name[:len(prefix)], prefix) && digits(name[len(prefix):]) {
		return shadow + "_ibfk_" + name[len(prefix):], name
	}
	if strings.HasPrefix(name, "_") {
		return name[1:], name[1:]
	}
	return "_" + name, "_" + name
}

func digits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != ""
}
