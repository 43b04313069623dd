package plan

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/sluicedb/sluice/internal/schema"
)

// KeyChangeRefusal says why the new table would hold a row-key column's
// values otherwise than the original holds them, or "". sluice finds a row
// of the new table by the original's key value (the apply deletes it there
// before it copies it again, the final checks read it there), so each value
// must be stored as it was: a key the conversion pads (BINARY), strips (a
// VARCHAR made CHAR in a NO PAD collation), rounds (DECIMAL, fractional
// seconds), renumbers (ENUM, SET) or computes anew (a generated column)
// would be missed there, or another row found in its place. Allowed: the
// same type (another collation or character set: lookups bind the
// original's), any integer into any integer (a value fits and is stored as
// it is, or the copy fails), and types that hold every old value as it is
// (longer strings, wider DECIMALs, more fractional digits, members added at
// the end of an ENUM or SET). It is pure.
func KeyChangeRefusal(from, to schema.Column) string {
	if keyValuesKept(from, to) {
		return ""
	}
	what := fmt.Sprintf("changes from %s to %s", from.ColumnType, to.ColumnType)
	if to.Generated {
		what = "becomes a generated column, or another one"
	}
	return fmt.Sprintf("primary-key column %s %s, so the new table may hold some keys otherwise than the original (padded, stripped, rounded, renumbered or computed), while sluice finds each row there by the original's key: run this change with the server's own ALTER TABLE",
		from.Name, what)
}

func keyValuesKept(from, to schema.Column) bool {
	f, t := from.DataType, to.DataType
	ft, tt := strings.ToLower(from.ColumnType), strings.ToLower(to.ColumnType)
	if to.Generated { // computed anew in the new table (one made plain is copied)
		return from.Generated && ft == tt && from.Expression == to.Expression
	}
	switch {
	case ft == tt:
		return true
	case schema.IntegerTypes[f] && schema.IntegerTypes[t]:
		return true
	case f == "decimal" && t == "decimal":
		fa, ta := typeArgs(ft), typeArgs(tt)
		fs, ts := at(fa, 1), at(ta, 1)
		return ts >= fs && at(ta, 0)-ts >= at(fa, 0)-fs
	case (f == t && (f == "varchar" || f == "varbinary" || f == "char")) || (f == "char" && t == "varchar"):
		return at(typeArgs(tt), 0) >= at(typeArgs(ft), 0)
	case f == t && (f == "datetime" || f == "timestamp" || f == "time"):
		return at(typeArgs(tt), 0) >= at(typeArgs(ft), 0)
	case f == t && (f == "enum" || f == "set"):
		old, now := schema.Members(from.ColumnType), schema.Members(to.ColumnType)
		return len(now) >= len(old) && slices.Equal(now[:len(old)], old)
	}
	return false
}

// typeArgs returns the numbers in a column type's parentheses: 10 and 2 of
// "decimal(10,2) unsigned", 3 of "datetime(3)", none of "int".
func typeArgs(columnType string) []int {
	open, end := strings.IndexByte(columnType, '('), strings.IndexByte(columnType, ')')
	if open < 0 || end < open {
		return nil
	}
	var out []int
	for _, s := range strings.Split(columnType[open+1:end], ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return nil
		}
		out = append(out, n)
	}
	return out
}

// at is args[i], or 0.
func at(args []int, i int) int {
	if i < len(args) {
		return args[i]
	}
	return 0
}
