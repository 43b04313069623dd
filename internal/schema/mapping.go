package schema

import (
	"strings"

	"github.com/sluicedb/sluice/internal/dbconn"
)

// Pair maps a column of the original table to the column of the new table that
// takes its data.
type Pair struct {
	From Column
	To   Column
}

// Mapping says how rows of Source become rows of Target. Columns of Target
// without a pair (added, or generated) take their defaults or are computed;
// Fills are the added NOT NULL columns without a DEFAULT, which an INSERT
// must name (strict mode refuses to leave them out); Unfilled are those of
// them that have no implicit value (spatial types), which no copy can fill.
type Mapping struct {
	Source   *Table
	Target   *Table
	Pairs    []Pair
	Fills    []Fill
	Unfilled []Column
}

// Fill gives an added column the value a native ALTER gives existing rows:
// its type's implicit default.
type Fill struct {
	To   Column
	Expr string
}

// ImplicitDefault returns the value the server's own ALTER gives existing
// rows for a column added NOT NULL without a DEFAULT (0, the empty string,
// an ENUM's first member, a zero time or date, JSON null), as SQL, and false
// for the spatial types, which have none (the server's ALTER refuses them).
// A zero date is one the server's sql_mode may refuse (ZeroDate). It is
// pure.
func ImplicitDefault(c Column) (string, bool) {
	switch c.DataType {
	case "tinyint", "smallint", "mediumint", "int", "integer", "bigint", "decimal", "float", "double", "bit", "year":
		return "0", true
	case "time":
		return "'00:00:00'", true
	case "date":
		return "'0000-00-00'", true
	case "datetime", "timestamp":
		return "'0000-00-00 00:00:00'", true
	case "json": // MySQL's; MariaDB's JSON is a LONGTEXT
		return "CAST('null' AS JSON)", true
	case "char", "varchar", "binary", "varbinary", "tinytext", "text", "mediumtext", "longtext",
		"tinyblob", "blob", "mediumblob", "longblob", "set":
		return "''", true
	case "uuid": // MariaDB's, like the two below
		return "'00000000-0000-0000-0000-000000000000'", true
	case "inet6":
		return "'::'", true
	case "inet4":
		return "'0.0.0.0'", true
	case "enum":
		if m := Members(c.ColumnType); len(m) > 0 {
			return dbconn.QuoteString(m[0]), true
		}
	}
	return "", false
}

// NewMapping pairs each writable Target column with the Source column that
// source reports for it (its old name, or false for a new column). A
// generated column the ALTER makes plain is paired too: the server's own
// ALTER keeps its values, and so does the copy, which reads them.
func NewMapping(src, dst *Table, source func(newName string) (string, bool)) *Mapping {
	m := &Mapping{Source: src, Target: dst}
	for _, to := range dst.Columns {
		if to.Generated {
			continue
		}
		old, ok := source(to.Name)
		if !ok {
			continue
		}
		from, ok := src.Column(old)
		if !ok {
			continue
		}
		m.Pairs = append(m.Pairs, Pair{From: from, To: to})
	}
	paired := map[string]bool{}
	for _, p := range m.Pairs {
		paired[p.To.Name] = true
	}
	for _, to := range dst.Columns {
		if paired[to.Name] || to.Generated || to.AutoInc || to.Nullable || to.HasDefault {
			continue
		}
		if expr, ok := ImplicitDefault(to); ok {
			m.Fills = append(m.Fills, Fill{To: to, Expr: expr})
		} else {
			m.Unfilled = append(m.Unfilled, to)
		}
	}
	return m
}

// InsertColumns is the quoted target column list for INSERT.
func (m *Mapping) InsertColumns() string {
	parts := make([]string, 0, len(m.Pairs)+len(m.Fills))
	for _, p := range m.Pairs {
		parts = append(parts, dbconn.QuoteIdent(p.To.Name))
	}
	for _, f := range m.Fills {
		parts = append(parts, dbconn.QuoteIdent(f.To.Name))
	}
	return strings.Join(parts, ", ")
}

// SelectColumns is the quoted source column list for the matching SELECT.
func (m *Mapping) SelectColumns() string {
	parts := make([]string, 0, len(m.Pairs)+len(m.Fills))
	for _, p := range m.Pairs {
		parts = append(parts, dbconn.QuoteIdent(p.From.Name))
	}
	for _, f := range m.Fills {
		parts = append(parts, f.Expr)
	}
	return strings.Join(parts, ", ")
}

// CopySQL returns "INSERT INTO target (...) SELECT ... FROM source FORCE
// INDEX (its row key) WHERE " ready for a predicate (and, for the apply's
// read, a locking clause) to be appended.
func (m *Mapping) CopySQL() string {
	return "INSERT INTO " + m.Target.Quoted() + " (" + m.InsertColumns() + ") SELECT " + m.SelectColumns() +
		" FROM " + m.Source.Quoted() + m.Source.KeyHint() + " WHERE "
}

// ZeroDate reports whether the fill writes a zero date, which a server whose
// sql_mode has NO_ZERO_DATE refuses in its own ALTER.
func (f Fill) ZeroDate() bool {
	switch f.To.DataType {
	case "date", "datetime", "timestamp":
		return true
	}
	return false
}
