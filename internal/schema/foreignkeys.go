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
	t.Children, err = ChildrenOf(ctx, db, t.Database, t.Name)
	return err
}

// ChildKey is a foreign key of another table (or of the table itself) that
// references the table: the table is its parent.
type ChildKey struct {
	Schema, Table string // the child
	ForeignKey
}

// Child names the child table, database-qualified, and the constraint.
func (c ChildKey) String() string { return c.Schema + "." + c.Table + " (" + c.Name + ")" }

// ChildrenOf reads the foreign keys that reference database.table.
func ChildrenOf(ctx context.Context, db *sql.DB, database, table string) ([]ChildKey, error) {
	var out []ChildKey
	rows, err := db.QueryContext(ctx, `SELECT k.TABLE_SCHEMA, k.TABLE_NAME, k.CONSTRAINT_NAME, k.COLUMN_NAME,
			k.REFERENCED_COLUMN_NAME, r.UPDATE_RULE, r.DELETE_RULE
		FROM information_schema.KEY_COLUMN_USAGE k
		JOIN information_schema.REFERENTIAL_CONSTRAINTS r
			ON r.CONSTRAINT_SCHEMA = k.CONSTRAINT_SCHEMA AND r.CONSTRAINT_NAME = k.CONSTRAINT_NAME AND r.TABLE_NAME = k.TABLE_NAME
		WHERE k.REFERENCED_TABLE_SCHEMA = ? AND k.REFERENCED_TABLE_NAME = ?
		ORDER BY k.TABLE_SCHEMA, k.TABLE_NAME, k.CONSTRAINT_NAME, k.ORDINAL_POSITION`, database, table)
	if err != nil {
		return nil, fmt.Errorf("read the foreign keys referencing %s.%s: %w", database, table, err)
	}
	defer rows.Close()
	for rows.Next() {
		var cs, ct, name, col, rc, upd, del string
		if err := rows.Scan(&cs, &ct, &name, &col, &rc, &upd, &del); err != nil {
			return nil, fmt.Errorf("read the foreign keys referencing %s.%s: %w", database, table, err)
		}
		n := len(out)
		if n == 0 || out[n-1].Schema != cs || out[n-1].Table != ct || out[n-1].Name != name {
			out = append(out, ChildKey{Schema: cs, Table: ct, ForeignKey: ForeignKey{Name: name,
				RefSchema: database, RefTable: table, OnUpdate: strings.ToUpper(upd), OnDelete: strings.ToUpper(del)}})
			n++
		}
		c := &out[n-1]
		c.Columns = append(c.Columns, col)
		c.RefColumns = append(c.RefColumns, rc)
	}
	return out, rows.Err()
}

// ReferencedBy names the foreign keys that reference t, as "db.child (name)".
func (t *Table) ReferencedBy() []string {
	var out []string
	for _, c := range t.Children {
		out = append(out, c.String())
	}
	return out
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
	return Toggled(name), Toggled(name)
}

// Toggled is the name a constraint takes when it is re-made beside itself,
// as pt-online-schema-change names it: a leading underscore added, or
// removed when there is one.
func Toggled(name string) string {
	if strings.HasPrefix(name, "_") {
		return name[1:]
	}
	return "_" + name
}

func digits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != ""
}
