package checksum

import (
	"strings"
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

func TestRowExprSeparatesNulls(t *testing.T) {
	e := rowExpr([]Col{{Name: "a"}, {Name: "b", Text: true}})
	want := "CONCAT_WS('#', `a`, CAST(`b` AS BINARY), CONCAT(ISNULL(`a`), ISNULL(`b`)))"
	if e != want {
		t.Errorf("got  %s\nwant %s", e, want)
	}
	if !strings.Contains(e, "ISNULL") {
		t.Error("NULL flags missing")
	}
}
