package plan

import (
	"testing"

	"github.com/sluicedb/sluice/internal/schema"
)

func TestKeyChangeRefusal(t *testing.T) {
	col := func(dataType, columnType string) schema.Column {
		return schema.Column{Name: "k", DataType: dataType, ColumnType: columnType}
	}
	gen := func(expr string) schema.Column {
		c := col("int", "int")
		c.Generated, c.Expression = true, expr
		return c
	}
	cases := []struct {
		from, to schema.Column
		kept     bool
	}{
		{col("int", "int"), col("int", "int"), true},
		{col("int", "int"), col("bigint", "bigint unsigned"), true},
		{col("bigint", "bigint(20)"), col("tinyint", "tinyint(4)"), true}, // fits or fails
		{col("varchar", "varchar(4)"), col("varchar", "varchar(8)"), true},
		{col("varchar", "varchar(8)"), col("varchar", "varchar(4)"), false}, // a trailing space is cut with a note
		{col("char", "char(4)"), col("varchar", "varchar(4)"), true},
		{col("varchar", "varchar(4)"), col("char", "char(4)"), false},
		{col("varbinary", "varbinary(4)"), col("binary", "binary(4)"), false},
		{col("binary", "binary(4)"), col("binary", "binary(8)"), false},
		{col("binary", "binary(4)"), col("varbinary", "varbinary(4)"), false},
		{col("decimal", "decimal(6,2)"), col("decimal", "decimal(8,3)"), true},
		{col("decimal", "decimal(6,2)"), col("decimal", "decimal(6,1)"), false},
		{col("decimal", "decimal(6,2)"), col("decimal", "decimal(6,3)"), false},
		{col("datetime", "datetime"), col("datetime", "datetime(3)"), true},
		{col("datetime", "datetime(3)"), col("datetime", "datetime"), false},
		{col("datetime", "datetime"), col("timestamp", "timestamp"), false},
		{col("date", "date"), col("datetime", "datetime"), false},
		{col("enum", "enum('a','b')"), col("enum", "enum('a','b','c')"), true},
		{col("enum", "enum('a','b')"), col("enum", "enum('b','a')"), false},
		{col("enum", "enum('a','b')"), col("enum", "enum('a')"), false},
		{col("set", "set('a','b')"), col("set", "set('a','b','c')"), true},
		{col("float", "float"), col("double", "double"), false},
		{col("int", "int"), col("varchar", "varchar(20)"), false},
		{col("varchar", "varchar(20)"), col("int", "int"), false},
		{gen("(`a` + 1)"), gen("(`a` + 1)"), true},
		{gen("(`a` + 1)"), gen("(`a` + 2)"), false},
		{col("int", "int"), gen("(`a` + 1)"), false},
		{gen("(`a` + 1)"), col("int", "int"), true}, // made plain: copied
	}
	for _, c := range cases {
		why := KeyChangeRefusal(c.from, c.to)
		if (why == "") != c.kept {
			t.Errorf("%s%s -> %s%s: %q, want kept=%v", c.from.ColumnType, c.from.Expression, c.to.ColumnType, c.to.Expression, why, c.kept)
		}
	}
}
