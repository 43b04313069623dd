package checksum

import (
	"testing"

	"github.com/sluicedb/sluice/internal/schema"
)

func TestComparable(t *testing.T) {
	c := func(dt, ct, cs string) schema.Column {
		return schema.Column{DataType: dt, ColumnType: ct, Charset: cs, Collation: cs + "_x"}
	}
	cases := []struct {
		from, to schema.Column
		want     bool
	}{
		{c("int", "int", ""), c("bigint", "bigint", ""), true},
		{c("varchar", "varchar(10)", "utf8mb4"), c("varchar", "varchar(20)", "utf8mb4"), true},
		{c("varchar", "varchar(10)", "latin1"), c("varchar", "varchar(10)", "utf8mb4"), false},
		{c("datetime", "datetime", ""), c("datetime", "datetime(6)", ""), false},
		{c("decimal", "decimal(10,2)", ""), c("decimal", "decimal(10,2)", ""), true},
	}
	for i, tc := range cases {
		if got := Comparable(tc.from, tc.to); got != tc.want {
			t.Errorf("case %d: got %v", i, got)
		}
	}
}

func TestRowHash(t *testing.T) {
	cases := []struct {
		cols []Col
		cast bool
		want string
	}{
		// A nullable column: the NULL flags lead the string (constant in
		// the CONCAT form, which only a row without NULL takes); a framed
		// column is prefixed with its length; a cast reads text as bytes.
		{[]Col{{Name: "a", Nullable: true}, {Name: "b", Text: true, Framed: true}}, true,
			"COALESCE(CRC32(CONCAT('0', '#', `a`, '#', LENGTH(CAST(`b` AS BINARY)), ':', CAST(`b` AS BINARY))), " +
				"CRC32(CONCAT_WS('#', CONCAT(ISNULL(`a`)), `a`, CONCAT(LENGTH(CAST(`b` AS BINARY)), ':', CAST(`b` AS BINARY)))), " +
				"CRC32(CONCAT_WS('#', 'x', CONCAT(ISNULL(`a`)), CRC32(`a`), COALESCE(CRC32(CAST(`b` AS BINARY)), CRC32(`b`))))) * 2654435761"},
		// No nullable column: CONCAT, and the columns' CRC32s for a row
		// longer than max_allowed_packet; no cast: the column as it is.
		{[]Col{{Name: "a"}, {Name: "b", Text: true, Framed: true}}, false,
			"COALESCE(CRC32(CONCAT(`a`, '#', LENGTH(`b`), ':', `b`)), CRC32(CONCAT_WS('#', 'x', CRC32(`a`), CRC32(`b`)))) * 2654435761"},
		// A FLOAT is read as its exact DOUBLE.
		{[]Col{{Name: "f", Float: true}}, false,
			"COALESCE(CRC32(CONCAT((`f` * 1e0))), CRC32(CONCAT_WS('#', 'x', COALESCE(CRC32((`f` * 1e0)), CRC32(`f`))))) * 2654435761"},
	}
	for i, tc := range cases {
		if got := rowHash(tc.cols, tc.cast); got != tc.want {
			t.Errorf("case %d:\n got  %s\n want %s", i, got, tc.want)
		}
	}
}

func TestMixedText(t *testing.T) {
	u := func(coll string) Col { return Col{Name: "x", Text: true, Collation: coll} }
	num := Col{Name: "n"}
	if mixedText([]Col{u("utf8mb4_bin"), num, u("utf8mb4_bin")}) {
		t.Error("one collation reported as mixed")
	}
	if !mixedText([]Col{u("utf8mb4_bin"), num, u("latin1_swedish_ci")}) {
		t.Error("two collations not reported as mixed")
	}
	if mixedText([]Col{num, num}) {
		t.Error("no character column reported as mixed")
	}
}

func TestConvert(t *testing.T) {
	c := func(name, dt, ct, cs string) schema.Column {
		col := schema.Column{Name: name, DataType: dt, ColumnType: ct, Charset: cs}
		if cs != "" {
			col.Collation = cs + "_general_ci"
		}
		return col
	}
	unsigned := func(c schema.Column) schema.Column { c.Unsigned = true; return c }
	cases := []struct {
		from, to schema.Column
		want     string // "" when not comparable
	}{
		{c("n", "int", "int", ""), c("n", "bigint", "bigint", ""), "`n`"},
		{c("n", "int", "int", ""), c("n", "decimal", "decimal(12,2)", ""), "CAST(`n` AS DECIMAL(12,2))"},
		{c("n", "decimal", "decimal(10,2)", ""), c("n", "decimal", "decimal(14,4)", ""), "CAST(`n` AS DECIMAL(14,4))"},
		{c("n", "decimal", "decimal(10,2)", ""), unsigned(c("n", "bigint", "bigint unsigned", "")), "CAST(`n` AS UNSIGNED)"},
		{c("n", "decimal", "decimal(10,2)", ""), c("n", "bigint", "bigint", ""), "CAST(`n` AS SIGNED)"},
		{c("t", "datetime", "datetime(3)", ""), c("t", "datetime", "datetime(6)", ""), "CAST(`t` AS DATETIME(6))"},
		{c("t", "datetime", "datetime", ""), c("t", "timestamp", "timestamp(2)", ""), "CAST(`t` AS DATETIME(2))"},
		{c("t", "timestamp", "timestamp", ""), c("t", "date", "date", ""), "CAST(`t` AS DATE)"},
		{c("t", "time", "time", ""), c("t", "datetime", "datetime", ""), ""},
		{c("s", "varchar", "varchar(10)", "latin1"), c("s", "varchar", "varchar(10)", "utf8mb4"), "CONVERT(`s` USING utf8mb4)"},
		{c("s", "varchar", "varchar(10)", "utf8mb4"), c("s", "char", "char(10)", "utf8mb4"), "TRIM(TRAILING ' ' FROM CONVERT(`s` USING utf8mb4))"},
		{c("s", "char", "char(10)", "utf8mb4"), c("s", "char", "char(20)", "utf8mb4"), "`s`"},
		{c("e", "enum", "enum('a','b')", "utf8mb4"), c("e", "enum", "enum('b','a','c')", "utf8mb4"), "`e`"},
		{c("s", "set", "set('x','y')", "utf8mb4"), c("s", "set", "set('x','y','z')", "utf8mb4"), "`s`"},
		{c("s", "set", "set('x','y')", "utf8mb4"), c("s", "set", "set('y','x','z')", "utf8mb4"), ""}, // 'x,y' reads 'y,x'`
		{c("e", "enum", "enum('a','b')", "utf8mb4"), c("e", "varchar", "varchar(5)", "utf8mb4"), "CONVERT(`e` USING utf8mb4)"},
		{c("e", "varchar", "varchar(5)", "utf8mb4"), c("e", "enum", "enum('a','b')", "utf8mb4"), ""},
		{c("n", "int", "int", ""), c("n", "varchar", "varchar(20)", "utf8mb4"), "CONVERT(CAST(`n` AS CHAR) USING utf8mb4)"},
		{c("f", "float", "float", ""), c("f", "double", "double", ""), toDouble("f")},
		{c("n", "bigint", "bigint", ""), c("n", "double", "double", ""), toDouble("n")},
		{c("n", "decimal", "decimal(10,2)", ""), c("n", "double", "double", ""), toDouble("n")},
		{c("d", "double", "double", ""), c("d", "float", "float", ""), ""},
		{c("b", "varbinary", "varbinary(8)", ""), c("b", "varbinary", "varbinary(16)", ""), "`b`"},
		{c("b", "blob", "blob", ""), c("b", "mediumblob", "mediumblob", ""), "`b`"},
		{c("b", "binary", "binary(4)", ""), c("b", "varbinary", "varbinary(8)", ""), "`b`"},
		{c("b", "varbinary", "varbinary(4)", ""), c("b", "binary", "binary(8)", ""), "CAST(`b` AS BINARY(8))"},
		{c("b", "bit", "bit(8)", ""), c("b", "bit", "bit(16)", ""), ""}, // read as numbers on both sides (bothSides)
		{c("b", "varbinary", "varbinary(8)", ""), c("b", "varchar", "varchar(8)", "utf8mb4"), ""},
		{c("j", "json", "json", ""), c("j", "text", "text", "utf8mb4"), ""},
	}
	for _, tc := range cases {
		got, ok := Convert(tc.from, tc.to)
		if !ok {
			got = ""
		}
		if got != tc.want {
			t.Errorf("%s -> %s: got %q, want %q", tc.from.ColumnType, tc.to.ColumnType, got, tc.want)
		}
	}
}
