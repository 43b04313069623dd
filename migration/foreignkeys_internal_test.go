package migration

import (
	"strings"
	"testing"

	"github.com/sluicedb/sluice/internal/ddl"
	"github.com/sluicedb/sluice/internal/schema"
)

func TestForeignKeyRefusal(t *testing.T) {
	restrict := schema.ForeignKey{Name: "f", Columns: []string{"p"}, RefSchema: "shop", RefTable: "parent", RefColumns: []string{"id"}, OnDelete: "RESTRICT", OnUpdate: "NO ACTION"}
	cascade := restrict
	cascade.OnDelete = "CASCADE"
	elsewhere := restrict
	elsewhere.RefSchema = "other"
	// overlap: a on (p) and b on (col, p2), both to parent, with these ON DELETE actions.
	overlap := func(a, b, col string) (schema.ForeignKey, schema.ForeignKey) {
		x, y := restrict, restrict
		x.Name, x.OnDelete = "a", a
		y.Name, y.OnDelete, y.Columns, y.RefColumns = "b", b, []string{col, "p2"}, []string{"id", "x"}
		return x, y
	}
	child := func(fks ...schema.ForeignKey) *schema.Table {
		return &schema.Table{Database: "shop", Name: "t", ForeignKeys: fks}
	}
	parent := func(db, child string) *schema.Table {
		return &schema.Table{Database: "shop", Name: "t", Children: []schema.ChildKey{{Schema: db, Table: child, ForeignKey: schema.ForeignKey{Name: "fk"}}}}
	}
	alter := func(clause string) *ddl.Alter {
		a, err := ddl.Parse(clause)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	logged, unlogged := ServerVars{CascadesLogged: true}, ServerVars{}
	cases := []struct {
		name      string
		t         *schema.Table
		a         *ddl.Alter
		v         ServerVars
		underLock bool
		want      string // "" = accepted
	}{
		{"no keys", child(), alter("ADD x INT"), unlogged, false, ""},
		{"restrict, unlogged", child(restrict), alter("ADD x INT"), unlogged, true, ""},
		{"cascade, logged", child(cascade), alter("ADD x INT"), logged, true, ""},
		{"cascade, unlogged", child(cascade), alter("ADD x INT"), unlogged, true, "does not write the changes"},
		{"sentry cut-over", child(restrict), alter("ADD x INT"), logged, false, "only on MySQL so far"},
		{"another database", child(elsewhere), alter("ADD x INT"), logged, true, "another database"},
		{"drops one", child(restrict), alter("DROP FOREIGN KEY f, ADD x INT"), logged, true, "drop it first"},
		{"adds one", child(), alter("ADD FOREIGN KEY (x) REFERENCES parent (id)"), logged, true, "adds a foreign key"},
		{"a parent", parent("shop", "c"), alter("ADD x INT"), unlogged, true, ""},
		{"a parent, sentry cut-over", parent("shop", "c"), alter("ADD x INT"), logged, false, "referenced by foreign keys (shop.c (fk)); sluice re-points them to the new table only on MySQL"},
		{"a parent of another database's table", parent("other", "c"), alter("ADD x INT"), logged, true, "from another database"},
		{"its own parent", parent("shop", "t"), alter("ADD x INT"), logged, true, "references itself"},
		{"shared column, cascade and set null", child(overlap("CASCADE", "SET NULL", "p")), alter("ADD x INT"), logged, true, "foreign keys a and b of t reference one table on shared columns"},
		{"shared column, restrict and cascade", child(overlap("NO ACTION", "CASCADE", "p")), alter("ADD x INT"), logged, true, "which the server applies first"},
		{"shared column, same actions", child(overlap("RESTRICT", "NO ACTION", "p")), alter("ADD x INT"), logged, true, ""},
		{"no shared column", child(overlap("CASCADE", "SET NULL", "other")), alter("ADD x INT"), logged, true, ""},
		{"no shared column, cascade and restrict", child(overlap("CASCADE", "NO ACTION", "other")), alter("ADD x INT"), logged, true, "which the server applies first"},
		{"no shared column, set null and restrict", child(overlap("SET NULL", "RESTRICT", "other")), alter("ADD x INT"), logged, true, ""},
		{"overlapping columns, both set null", child(overlap("SET NULL", "SET NULL", "p")), alter("ADD x INT"), logged, true, "which the server applies first"},
		{"one column set, both set null", child(func() (schema.ForeignKey, schema.ForeignKey) {
			_, b := overlap("SET NULL", "SET NULL", "p")
			c := b
			c.Name, c.Columns = "c", []string{"P", "p2"}
			return b, c
		}()), alter("ADD x INT"), logged, true, ""},
		{"a parent of two clashing keys of one child", &schema.Table{Database: "shop", Name: "t", Children: []schema.ChildKey{
			{Schema: "shop", Table: "c", ForeignKey: schema.ForeignKey{Name: "a", Columns: []string{"P"}, RefSchema: "shop", RefTable: "t", OnDelete: "CASCADE"}},
			{Schema: "shop", Table: "d", ForeignKey: schema.ForeignKey{Name: "x", Columns: []string{"p"}, RefSchema: "shop", RefTable: "t", OnDelete: "SET NULL"}},
			{Schema: "shop", Table: "c", ForeignKey: schema.ForeignKey{Name: "b", Columns: []string{"q", "p"}, RefSchema: "shop", RefTable: "t", OnDelete: "SET NULL"}}}},
			alter("ADD x INT"), logged, true, "referenced by foreign keys shop.c (a) and b"},
		{"a parent of keys of two children", &schema.Table{Database: "shop", Name: "t", Children: []schema.ChildKey{
			{Schema: "shop", Table: "c", ForeignKey: schema.ForeignKey{Name: "a", Columns: []string{"p"}, RefSchema: "shop", RefTable: "t", OnDelete: "CASCADE"}},
			{Schema: "shop", Table: "d", ForeignKey: schema.ForeignKey{Name: "b", Columns: []string{"p"}, RefSchema: "shop", RefTable: "t", OnDelete: "SET NULL"}}}},
			alter("ADD x INT"), logged, true, ""},
		{"its own parent and another's, sentry cut-over", &schema.Table{Database: "shop", Name: "t", Children: []schema.ChildKey{
			{Schema: "shop", Table: "c", ForeignKey: schema.ForeignKey{Name: "fk"}}, {Schema: "shop", Table: "t", ForeignKey: schema.ForeignKey{Name: "up"}}}},
			alter("ADD x INT"), logged, false, "references itself"},
	}
	for _, c := range cases {
		err := foreignKeyRefusal(c.t, c.a, c.v, c.underLock)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: refused: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		}
	}
}

// TestProcName: the cut-over's procedure has a name of its own for each
// table, even for names a routine name cannot tell apart (case, accents),
// within MySQL's 64 characters.
func TestProcName(t *testing.T) {
	name := func(table string) string {
		r := &Runner{cfg: Config{Database: "shop"}, orig: &schema.Table{Name: table}}
		return r.procName()
	}
	seen := map[string]string{}
	for _, table := range []string{"orders", "Orders", "café", "cafe", strings.Repeat("x", 64), strings.Repeat("x", 63) + "y"} {
		n := name(table)
		if len([]rune(n)) > 64 {
			t.Errorf("%q: %q is longer than 64 characters", table, n)
		}
		if other, ok := seen[strings.ToLower(n)]; ok {
			t.Errorf("%q and %q share the procedure %q", table, other, n)
		}
		seen[strings.ToLower(n)] = table
	}
}

// TestStatementCapture: capture by triggers is refused where every session
// writes in statement format and a binlog is written; MIXED logs the
// capture's writes in row format.
func TestStatementCapture(t *testing.T) {
	for _, c := range []struct {
		logBin, format string
		refused        bool
	}{{"1", "STATEMENT", true}, {"ON", "statement", true}, {"1", "MIXED", false}, {"1", "ROW", false}, {"0", "STATEMENT", false}} {
		if got := statementCapture(ServerVars{LogBin: c.logBin, Format: c.format}) != ""; got != c.refused {
			t.Errorf("log_bin=%s binlog_format=%s: refused %v, want %v", c.logBin, c.format, got, c.refused)
		}
	}
}
