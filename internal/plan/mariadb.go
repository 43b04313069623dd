package plan

import (
	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/sluicedb/sluice/internal/dbconn"
)

// MariaDB's INSTANT and NOCOPY rules differ from MySQL's in a few places,
// each checked against MariaDB 10.11 and 11.8 by TestRulesAgreeWithServer:
//
//   - metadata changes (index renames, table comment and options, VARCHAR
//     widening) are INSTANT where MySQL does them in place;
//   - a column moves INSTANT (MySQL rebuilds);
//   - a column that is the only part of each index it is in is dropped
//     without a rebuild (NOCOPY);
//   - a VARCHAR keeps its length bytes when its old maximum is under 128
//     bytes, so it widens INSTANT past 255 bytes from there;
//   - on a table with VIRTUAL columns, a change that moves a virtual column's
//     position (adding or moving a column before it) needs a copy, and so
//     does dropping a column before one together with any other clause
//     ("INPLACE ADD or DROP of virtual columns cannot be combined with other
//     ALTER TABLE actions");
//   - on such a table MariaDB refuses some NULL / NOT NULL changes in place
//     (an unindexed column before a virtual one, an indexed one after it,
//     while it rebuilds for an indexed one before it): sluice, not knowing
//     the rule, takes them all for copies, which is never wrong, only slower
//     where the server could have rebuilt in place.

// mariadbRules are looked at, on MariaDB only, before the rules of the same
// kind (rules).
var mariadbRules = []rule{
	{"mariadb-add-column-before-virtual", "add-column", func(c clause) bool {
		return !generated(c.col) && addedBeforeVirtual(c)
	}, Copy, "MariaDB adds a column before a VIRTUAL column only by a table copy", false},
	{"mariadb-drop-column-before-virtual", "drop-column", func(c clause) bool {
		return !c.alone && c.hasOld && !c.old.Generated && beforeVirtual(c, c.old.Name)
	}, Copy, "MariaDB drops a column before a VIRTUAL column together with other changes only by a table copy", false},
	{"mariadb-drop-column-own-index", "drop-column", func(c clause) bool {
		return c.hasOld && !c.old.Generated && c.table.Indexed(c.old.Name) && onlyPartOfItsIndexes(c)
	}, Inplace, "MariaDB drops the column and the indexes on it alone without rebuilding the table (NOCOPY)", false},
	{"mariadb-modify-null-virtual", "modify-column", func(c clause) bool {
		return sameType(c) && !sameNull(c) && !moved(c) && !c.old.Generated && lastVirtual(c) >= 0
	}, Copy, "MariaDB changes NULL / NOT NULL on a table with VIRTUAL columns in place only in some cases; sluice copies", false},
	{"mariadb-modify-move-virtual", "modify-column", func(c clause) bool { return moved(c) && movesVirtual(c) }, Copy,
		"MariaDB moves a column across a VIRTUAL column only by a table copy", false},
	{"mariadb-modify-reorder", "modify-column", func(c clause) bool { return sameType(c) && sameNull(c) && moved(c) && !c.old.Generated }, Instant,
		"moving a column is only metadata on MariaDB", false},
	{"mariadb-modify-varchar-widen", "modify-column", func(c clause) bool { return mariadbVarcharInstant(c) && sameNull(c) && !moved(c) }, Instant,
		"a VARCHAR widened within its length-prefix size, or from under 128 bytes, is only metadata on MariaDB", false},
	{"mariadb-modify-collation-key", "modify-column", func(c clause) bool { return collationOnly(c) && c.table.InPrimaryKey(c.old.Name) }, Copy,
		"the collation of a primary-key column changes, which MariaDB does only by a table copy", false},
	{"mariadb-modify-collation-indexed", "modify-column", func(c clause) bool { return collationOnly(c) && c.table.Indexed(c.old.Name) }, Inplace,
		"the collation of an indexed column changes: MariaDB rebuilds only the indexes on it (NOCOPY)", false},
	{"mariadb-modify-collation", "modify-column", collationOnly, Instant,
		"only the collation of an unindexed column changes, which is only metadata on MariaDB", false},
	{"mariadb-rename-index", "rename-index", always, Instant, "renaming an index is only metadata", false},
	{"mariadb-table-comment", "table-comment", always, Instant, "the table comment is only metadata", false},
	{"mariadb-table-metadata", "table-metadata", always, Instant,
		"AUTO_INCREMENT, the default character set and statistics options are only metadata", false},
}

// columnIndex is the ordinal of a column, or -1.
func columnIndex(c clause, name string) int {
	for i, col := range c.table.Columns {
		if dbconn.SameName(col.Name, name) {
			return i
		}
	}
	return -1
}

// lastVirtual is the ordinal of the table's last VIRTUAL column, or -1.
func lastVirtual(c clause) int {
	last := -1
	for i, col := range c.table.Columns {
		if col.Generated && !col.Stored {
			last = i
		}
	}
	return last
}

// beforeVirtual reports whether a VIRTUAL column follows the named column.
func beforeVirtual(c clause, name string) bool {
	i := columnIndex(c, name)
	return i >= 0 && i < lastVirtual(c)
}

// position is where a clause puts its column: the ordinal it takes among
// the table's columns as they are (len for the end).
func position(c clause) int {
	p := c.spec.Position
	switch {
	case p == nil || p.Tp == ast.ColumnPositionNone:
		return len(c.table.Columns)
	case p.Tp == ast.ColumnPositionFirst:
		return 0
	default:
		if i := columnIndex(c, p.RelativeColumn.Name.O); i >= 0 {
			return i + 1
		}
		return len(c.table.Columns)
	}
}

// addedBeforeVirtual: the new column goes before the last VIRTUAL column.
func addedBeforeVirtual(c clause) bool {
	return position(c) <= lastVirtual(c)
}

// movesVirtual: the moved column crosses a VIRTUAL column, or is one.
func movesVirtual(c clause) bool {
	from, to := columnIndex(c, c.old.Name), position(c)
	if from < 0 {
		return true
	}
	if c.old.Generated && !c.old.Stored {
		return true
	}
	lo, hi := min(from, to), max(from, to)
	for i := lo; i < hi && i < len(c.table.Columns); i++ {
		col := c.table.Columns[i]
		if i != from && col.Generated && !col.Stored {
			return true
		}
	}
	return false
}

// onlyPartOfItsIndexes: every index on the dropped column has no other part.
func onlyPartOfItsIndexes(c clause) bool {
	for _, ix := range c.table.Indexes {
		has := false
		for _, col := range ix.Columns {
			if dbconn.SameName(col, c.old.Name) {
				has = true
			}
		}
		if has && len(ix.Columns) != 1 {
			return false
		}
	}
	return true
}

// mariadbVarcharInstant: a VARCHAR grows in its character set, and its
// stored length keeps its size: both maxima under 256 bytes, both over 255,
// or the old one under 128 (InnoDB writes a length under 128 in one byte
// whatever the maximum).
func mariadbVarcharInstant(c clause) bool {
	if !varcharGrows(c) {
		return false
	}
	o, n := OldType(c.old), NewType(c.col)
	b := charsetBytes(o.Charset)
	return o.Length*b < 128 || (o.Length*b < 256) == (n.Length*b < 256)
}
