package schema

import (
	"slices"
	"testing"
)

func TestMembers(t *testing.T) {
	for ct, want := range map[string][]string{
		"set('a','b')":           {"a", "b"},
		"set('a,b','it''s','c')": {"a,b", "it's", "c"},
		"enum('')":               {""},
		`set('x\'y','z')`:        {"x'y", "z"},
		"enum('s0','s1','s2')":   {"s0", "s1", "s2"},
	} {
		if got := Members(ct); !slices.Equal(got, want) {
			t.Errorf("Members(%q) = %q, want %q", ct, got, want)
		}
	}
}

func TestImplicitDefault(t *testing.T) {
	for _, c := range []struct {
		col  Column
		want string
		ok   bool
	}{
		{Column{DataType: "int"}, "0", true},
		{Column{DataType: "decimal"}, "0", true},
		{Column{DataType: "varchar"}, "''", true},
		{Column{DataType: "blob"}, "''", true},
		{Column{DataType: "enum", ColumnType: "enum('p','q')"}, "'p'", true},
		{Column{DataType: "set", ColumnType: "set('p','q')"}, "''", true},
		{Column{DataType: "date"}, "'0000-00-00'", true},
		{Column{DataType: "timestamp"}, "'0000-00-00 00:00:00'", true},
		{Column{DataType: "time"}, "'00:00:00'", true},
		{Column{DataType: "json"}, "CAST('null' AS JSON)", true},
		{Column{DataType: "point"}, "", false},
		{Column{DataType: "geometry"}, "", false},
	} {
		got, ok := ImplicitDefault(c.col)
		if got != c.want || ok != c.ok {
			t.Errorf("%s: got %q, %v; want %q, %v", c.col.DataType, got, ok, c.want, c.ok)
		}
	}
}
