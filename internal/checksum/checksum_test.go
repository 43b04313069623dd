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
		// A nullable column: rows with a NULL take the form with the NULL
		// flags; a cast reads text as bytes.
		{[]Col{{Name: "a", Nullable: true}, {Name: "b", Text: true}}, true,
			"COALESCE(CRC32(CONCAT(`a`, '#', CAST(`b` AS BINARY))), CRC32(CONCAT_WS('#', `a`, CAST(`b` AS BINARY), CONCAT(ISNULL(`a`)))))"},
		// No nullable column: CONCAT only; no cast: the column as it is.
		{[]Col{{Name: "a"}, {Name: "b", Text: true}}, false, "CRC32(CONCAT(`a`, '#', `b`))"},
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
