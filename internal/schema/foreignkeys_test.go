package schema

import "testing"

func TestForeignKeyFor(t *testing.T) {
	cases := []struct{ table, shadow, name, onShadow, after string }{
		{"c", "_c_new", "c_ibfk_1", "_c_new_ibfk_1", "c_ibfk_1"},    // generated: kept through RENAME
		{"c", "_c_new", "C_IBFK_12", "_c_new_ibfk_12", "C_IBFK_12"}, // names are case-insensitive
		{"c", "_c_new", "fk_parent", "_fk_parent", "_fk_parent"},    // a user's name: pt-osc's underscore
		{"c", "_c_new", "_fk_parent", "fk_parent", "fk_parent"},     // and back
		{"c", "_c_new", "c_ibfk_", "_c_ibfk_", "_c_ibfk_"},          // not generated: no number
		{"c", "_c_new", "c_ibfk_1a", "_c_ibfk_1a", "_c_ibfk_1a"},
		{"c", "_c_new", "other_ibfk_1", "_other_ibfk_1", "_other_ibfk_1"}, // another table's pattern
	}
	for _, c := range cases {
		on, after := ForeignKeyFor(c.table, c.shadow, c.name)
		if on != c.onShadow || after != c.after {
			t.Errorf("ForeignKeyFor(%q, %q, %q) = %q, %q; want %q, %q", c.table, c.shadow, c.name, on, after, c.onShadow, c.after)
		}
	}
}

func TestForeignKeyDefinition(t *testing.T) {
	fk := ForeignKey{Name: "x", Columns: []string{"a", "b`c"}, RefSchema: "db", RefTable: "p", RefColumns: []string{"id", "k"}, OnDelete: "CASCADE", OnUpdate: "RESTRICT"}
	want := "CONSTRAINT `y` FOREIGN KEY (`a`, `b``c`) REFERENCES `db`.`p` (`id`, `k`) ON DELETE CASCADE ON UPDATE RESTRICT"
	if got := fk.Definition("y"); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if !fk.Cascades() {
		t.Error("ON DELETE CASCADE cascades")
	}
	for _, rule := range []string{"RESTRICT", "NO ACTION", ""} {
		if (ForeignKey{OnDelete: rule, OnUpdate: "NO ACTION"}).Cascades() {
			t.Errorf("%q does not cascade", rule)
		}
	}
	if !(ForeignKey{OnDelete: "RESTRICT", OnUpdate: "SET NULL"}).Cascades() {
		t.Error("ON UPDATE SET NULL changes the child")
	}
}
