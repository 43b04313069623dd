package plan

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/ddl"
	"github.com/sluicedb/sluice/internal/schema"
)

// Type families of the conversions, by the server's DATA_TYPE.
func numeric(t string) bool {
	return schema.IntegerTypes[t] || t == "decimal" || t == "float" || t == "double" || t == "year" || t == "bit"
}
func stringType(t string) bool { return schema.TextTypes[t] || schema.BinaryTypes[t] }
func integer(t string) bool    { return schema.IntegerTypes[t] || t == "year" }

// numericMember reports whether an ENUM or SET column type has a member
// that reads as a number ('1', ' 2.5').
func numericMember(columnType string) bool {
	for _, m := range schema.Members(columnType) {
		if _, err := strconv.ParseFloat(strings.TrimSpace(m), 64); err == nil {
			return true
		}
	}
	return false
}

// ConversionRefusal says why the copy cannot convert column from into to as
// the server's own ALTER TABLE does, or "". The copy assigns each value as an
// INSERT ... SELECT does; the ALTER converts some types another way, so the
// two give other values (or the ALTER refuses a value the copy stores).
// Measured on MySQL 9.7 and MariaDB 11.8 (TestConversionsMatchNativeAlter):
// a number into an ENUM or SET (the ALTER takes it as the member of that
// text where there is one, the copy as its position: an integer is refused
// only where a member reads as a number) or into a date or time; a FLOAT into a string (the
// ALTER writes its 6 significant digits, 0.1; the copy its double,
// 0.10000000149011612); a FLOAT or DOUBLE into a BIT or YEAR (rounded by the
// ALTER, cut by the copy); a YEAR into a string (0000 against 0); a date into
// a YEAR; JSON into anything but JSON or a string (rounded by the ALTER, cut
// by the copy); a string, JSON or a time into a BIT (the ALTER reads a
// number, the copy stores the bytes). It is pure.
func ConversionRefusal(from, to schema.Column) string {
	f, t := from.DataType, to.DataType
	why := ""
	switch {
	case f == t:
	case integer(f) && schema.MemberTypes[t] && !numericMember(to.ColumnType):
		// Both take the number as a position in the list.
	case numeric(f) && schema.MemberTypes[t]:
		why = "the server's own ALTER takes a number as the member of that text where there is one, a copy as its position in the list"
	case numeric(f) && schema.TemporalTypes[t]:
		why = "the server's own ALTER and a copy read a number as a date or time differently"
	case f == "float" && stringType(t):
		why = "the server's own ALTER writes a FLOAT's 6 significant digits (0.1), a copy the DOUBLE it holds (0.10000000149011612)"
	case (f == "float" || f == "double") && (t == "bit" || t == "year"):
		why = "the server's own ALTER rounds the number, a copy cuts it"
	case f == "year" && stringType(t):
		why = "the server's own ALTER writes a YEAR with four digits (0000), a copy as a number (0)"
	case schema.TemporalTypes[f] && t == "year":
		why = "the server's own ALTER refuses a date as a YEAR, a copy keeps its year"
	case (stringType(f) || f == "json" || schema.TemporalTypes[f]) && t == "bit":
		why = "the server's own ALTER reads the value as a number ('1' is 1), a copy stores its bytes ('1' is 49)"
	case f == "json" && t != "json" && !stringType(t):
		why = "the server's own ALTER rounds a JSON number, a copy cuts it"
	}
	if why == "" {
		return ""
	}
	return fmt.Sprintf("column %s changes from %s to %s, which a copy cannot convert as the server's own ALTER TABLE does (%s): run this change with the server's own ALTER TABLE, or convert the column in two steps through a type both convert alike (a string or a DECIMAL)",
		to.Name, from.ColumnType, to.ColumnType, why)
}

// ConversionNote says, for the copy path, which column the copy would refuse
// to convert (ConversionRefusal), as "refused: why", or "". It reads the
// ALTER's MODIFY and CHANGE clauses against t as srv would type them (MariaDB
// makes JSON a LONGTEXT); the run checks again on the new table the server
// made. It is pure.
func ConversionNote(t *schema.Table, a *ddl.Alter, srv Server) string {
	for _, spec := range a.Specs {
		name, col, ok := redefinedColumn(spec)
		if !ok {
			continue
		}
		from, ok := t.Column(name)
		if !ok || from.Generated || generated(col) || a.Dropped[dbconn.NameKey(name)] {
			continue
		}
		to := schema.Column{Name: col.Name.Name.O, DataType: NewType(col).Name, ColumnType: ddl.TypeText(col)}
		if srv.MariaDB && to.DataType == "json" {
			to.DataType, to.ColumnType = "longtext", "longtext"
		}
		if why := ConversionRefusal(from, to); why != "" {
			return "refused: " + why
		}
		if slices.Contains(t.PrimaryKey, from.Name) {
			if why := KeyChangeRefusal(from, to); why != "" {
				return "refused: " + why
			}
		}
	}
	return ""
}

// redefinedColumn returns, for a MODIFY or CHANGE of one column, the name
// the column has in the table and its new definition.
func redefinedColumn(spec *ast.AlterTableSpec) (string, *ast.ColumnDef, bool) {
	if (spec.Tp != ast.AlterTableModifyColumn && spec.Tp != ast.AlterTableChangeColumn) || len(spec.NewColumns) != 1 {
		return "", nil, false
	}
	col := spec.NewColumns[0]
	if spec.OldColumnName != nil {
		return spec.OldColumnName.Name.O, col, true
	}
	return col.Name.Name.O, col, true
}
