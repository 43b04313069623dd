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
// without a pair (added, or generated) take their defaults or are computed.
type Mapping struct {
	Source *Table
	Target *Table
	Pairs  []Pair
}

// NewMapping pairs each writable Target column with the Source column that
// source reports for it (its old name, or false for a new column).
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
		if !ok || from.Generated {
			continue
		}
		m.Pairs = append(m.Pairs, Pair{From: from, To: to})
	}
	return m
}

// InsertColumns is the quoted target column list for INSERT.
func (m *Mapping) InsertColumns() string {
	parts := make([]string, len(m.Pairs))
	for i, p := range m.Pairs {
		parts[i] = dbconn.QuoteIdent(p.To.Name)
	}
	return strings.Join(parts, ", ")
}

// SelectColumns is the quoted source column list for the matching SELECT.
func (m *Mapping) SelectColumns() string {
	parts := make([]string, len(m.Pairs))
	for i, p := range m.Pairs {
		parts[i] = dbconn.QuoteIdent(p.From.Name)
	}
	return strings.Join(parts, ", ")
}

// CopySQL returns "INSERT INTO target (...) SELECT ... FROM source FORCE
// INDEX (PRIMARY) WHERE " ready for a predicate (and, for the apply's read,
// a locking clause) to be appended.
func (m *Mapping) CopySQL() string {
	return "INSERT INTO " + m.Target.Quoted() + " (" + m.InsertColumns() + ") SELECT " + m.SelectColumns() +
		" FROM " + m.Source.Quoted() + " FORCE INDEX (PRIMARY) WHERE "
}
