// Package plan decides how sluice carries out an ALTER: INSTANT, in place
// without a table rebuild (secondary-index work, metadata), or a shadow-table
// copy. The rules live in a table of pure functions over the parsed clause and
// the table's definition, so every one is unit-tested without a server and
// checked against a live one (plan_server_test.go).
package plan

import (
	"fmt"
	"slices"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/mysql"
	"github.com/pingcap/tidb/pkg/parser/types"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/ddl"
	"github.com/sluicedb/sluice/internal/schema"
)

// Algorithm is the cheapest way the server can carry out one clause while
// reads and writes go on.
type Algorithm int

const (
	// Instant changes only metadata (ALGORITHM=INSTANT).
	Instant Algorithm = iota
	// Inplace works in place without rebuilding the table (ALGORITHM=INPLACE,
	// LOCK=NONE): secondary-index builds and metadata-only changes.
	Inplace
	// Rebuild works in place but rebuilds the whole table.
	Rebuild
	// Copy needs ALGORITHM=COPY or blocks writes: only a shadow copy keeps
	// the table writable.
	Copy
)

func (a Algorithm) String() string {
	switch a {
	case Instant:
		return "instant"
	case Inplace:
		return "in-place"
	case Rebuild:
		return "in-place rebuild"
	default:
		return "copy"
	}
}

// MarshalText makes Algorithm print as its name in JSON.
func (a Algorithm) MarshalText() ([]byte, error) { return []byte(a.String()), nil }

// Server is what the rules need to know about the server.
type Server struct {
	Major, Minor, Patch int
	MariaDB             bool
}

// AtLeast reports whether the server's version is maj.min.patch or later.
func (s Server) AtLeast(maj, min, patch int) bool {
	if s.Major != maj {
		return s.Major > maj
	}
	if s.Minor != min {
		return s.Minor > min
	}
	return s.Patch >= patch
}

// Step is one clause of the ALTER and how it can be done.
type Step struct {
	Clause    string    `json:"clause"`
	Algorithm Algorithm `json:"algorithm"`
	Rule      string    `json:"rule"`
	Why       string    `json:"why"`
	// BuildsIndex is true when the step sorts the table into a new secondary
	// index: the costly part of in-place work.
	BuildsIndex bool `json:"builds_index,omitempty"`
}

// clause is what a rule looks at: one part of the ALTER, with the table.
type clause struct {
	kind   string // add-column, drop-column, rename-column, modify-column, set-default, add-index, ...
	spec   *ast.AlterTableSpec
	col    *ast.ColumnDef // the new definition (add/modify)
	old    schema.Column  // the column before (drop/modify/rename)
	hasOld bool
	table  *schema.Table
	srv    Server
	alone  bool // the ALTER's only clause
	addsPK bool // the ALTER adds a primary key
}

// rule is one row of the rule table: the first rule whose kind and test match
// a clause decides its algorithm.
type rule struct {
	name  string
	kind  string
	test  func(c clause) bool
	algo  Algorithm
	why   string
	index bool
}

func always(clause) bool { return true }

// rules is the classification, most specific first within each kind.
var rules = []rule{
	// ADD COLUMN
	{"add-column-auto-increment", "add-column", func(c clause) bool { return colOpt(c.col, ast.ColumnOptionAutoIncrement) }, Copy,
		"adding an AUTO_INCREMENT column blocks writes in place", false},
	{"add-column-with-key", "add-column", func(c clause) bool {
		return colOpt(c.col, ast.ColumnOptionPrimaryKey) || colOpt(c.col, ast.ColumnOptionUniqKey)
	}, Rebuild, "a column added with a key rebuilds the table", true},
	{"add-column-stored", "add-column", func(c clause) bool { return storedGenerated(c.col) }, Copy,
		"a STORED generated column is computed for every row by a table copy", false},
	{"add-column-expression-default", "add-column", func(c clause) bool {
		expr, readsRow, calls := ddl.DefaultExpression(c.col)
		return expr && (readsRow || !c.srv.MariaDB || slices.ContainsFunc(calls, func(f string) bool { return mariadbCopyDefault[f] }))
	}, Copy, "a column whose DEFAULT is an expression is added only by a table copy (MariaDB adds one INSTANT that reads no column and calls none of UUID(), UUID_SHORT(), SYSDATE())", false},
	{"add-column-virtual", "add-column", func(c clause) bool { return generated(c.col) }, Instant,
		"a VIRTUAL column is only metadata", false},
	{"add-column-fulltext-table", "add-column", func(c clause) bool { return c.table.HasIndexKind("FULLTEXT") }, Copy,
		"a table with a FULLTEXT index gets no INSTANT column and cannot be rebuilt while writes go on", false},
	{"add-column-compressed", "add-column", func(c clause) bool { return compressed(c.table) }, Rebuild,
		"INSTANT ADD COLUMN is not possible with ROW_FORMAT=COMPRESSED", false},
	{"add-column-row-versions", "add-column", func(c clause) bool { return c.table.RowVersions >= c.srv.MaxRowVersions() }, Rebuild,
		"the table used up its INSTANT row versions (64, or 255 from MySQL 9.1)", false},
	{"add-column-old-server", "add-column", func(c clause) bool { return !c.srv.AtLeast(8, 0, 29) }, Rebuild,
		"INSTANT ADD COLUMN at any position needs MySQL 8.0.29", false},
	{"add-column", "add-column", always, Instant, "a new column is only metadata (INSTANT: MySQL 8.0.29+, MariaDB)", false},

	// DROP COLUMN
	{"drop-column-generated", "drop-column", func(c clause) bool { return c.old.Generated && !c.table.Indexed(c.old.Name) }, Instant,
		"dropping a generated column is only metadata", false},
	{"drop-column-indexed", "drop-column", func(c clause) bool { return c.table.Indexed(c.old.Name) }, Rebuild,
		"the column is part of an index, so dropping it rebuilds the table", false},
	{"drop-column-fulltext-table", "drop-column", func(c clause) bool { return c.table.HasIndexKind("FULLTEXT") }, Copy,
		"a table with a FULLTEXT index gets no INSTANT column change and cannot be rebuilt while writes go on", false},
	{"drop-column-compressed", "drop-column", func(c clause) bool { return compressed(c.table) }, Rebuild,
		"INSTANT DROP COLUMN is not possible with ROW_FORMAT=COMPRESSED", false},
	{"drop-column-row-versions", "drop-column", func(c clause) bool { return c.table.RowVersions >= c.srv.MaxRowVersions() }, Rebuild,
		"the table used up its INSTANT row versions (64, or 255 from MySQL 9.1)", false},
	{"drop-column-old-server", "drop-column", func(c clause) bool { return !c.srv.AtLeast(8, 0, 29) }, Rebuild,
		"INSTANT DROP COLUMN needs MySQL 8.0.29", false},
	{"drop-column", "drop-column", always, Instant, "dropping a column is only metadata (INSTANT: MySQL 8.0.29+, MariaDB)", false},

	// RENAME COLUMN, or CHANGE that only renames
	{"rename-column-old-server", "rename-column", func(c clause) bool { return !c.srv.AtLeast(8, 0, 28) }, Inplace,
		"INSTANT RENAME COLUMN needs MySQL 8.0.28", false},
	{"rename-column", "rename-column", always, Instant, "renaming a column is only metadata", false},

	// ALTER COLUMN SET/DROP DEFAULT
	{"set-default", "set-default", always, Instant, "a column default is only metadata", false},
	{"set-visibility", "set-visibility", always, Instant, "a column's visibility is only metadata", false},

	// MODIFY / CHANGE COLUMN
	{"modify-same", "modify-column", func(c clause) bool { return sameType(c) && sameNull(c) && !moved(c) }, Instant,
		"only the default or the comment changes", false},
	{"modify-collation-indexed", "modify-column", func(c clause) bool { return collationOnly(c) && c.table.InAnyKey(c.old.Name) }, Copy,
		"the collation of an indexed column changes, which the server does only by a table copy", false},
	{"modify-collation", "modify-column", collationOnly, Inplace,
		"only the collation of an unindexed column changes: metadata, in place", false},
	{"modify-enum-append", "modify-column", func(c clause) bool { return enumAppend(c) && sameNull(c) && !moved(c) }, Instant,
		"ENUM/SET values appended at the end, same storage size", false},
	{"modify-varchar-widen", "modify-column", func(c clause) bool { return varcharWiden(c) && sameNull(c) && !moved(c) }, Inplace,
		"VARCHAR widened within its length-prefix size (both under, or both over, 255 bytes)", false},
	{"modify-varchar-prefix", "modify-column", func(c clause) bool { return varcharGrows(c) }, Copy,
		"the VARCHAR crosses 255 bytes, which changes its length prefix", false},
	{"modify-null", "modify-column", func(c clause) bool { return sameType(c) && !sameNull(c) && !moved(c) && !c.old.Generated }, Rebuild,
		"changing NULL / NOT NULL rebuilds the table", false},
	{"modify-reorder", "modify-column", func(c clause) bool { return sameType(c) && sameNull(c) && moved(c) && !c.old.Generated }, Rebuild,
		"moving a column rebuilds the table", false},
	{"modify-type", "modify-column", always, Copy, "the column's type changes, which only a table copy does", false},

	// Indexes
	{"add-index-fulltext", "add-index", func(c clause) bool { return c.spec.Constraint.Tp == ast.ConstraintFulltext }, Copy,
		"a FULLTEXT index blocks writes while it builds", true},
	{"add-index-functional", "add-index", func(c clause) bool { return functional(c.spec.Constraint) }, Copy,
		"a functional index adds a hidden column, which the server does not do while writes go on", true},
	{"add-index", "add-index", always, Inplace, "a secondary index builds in place while writes go on", true},
	{"add-primary-key", "add-primary-key", always, Rebuild, "a new primary key rebuilds the table", false},
	{"drop-primary-key-replaced", "drop-primary-key", func(c clause) bool { return c.addsPK }, Rebuild,
		"dropping the primary key and adding another in the same ALTER rebuilds the table in place", false},
	{"drop-primary-key", "drop-primary-key", always, Copy, "dropping the primary key without adding one needs a copy", false},
	{"drop-index", "drop-index", always, Inplace, "dropping a secondary index is only metadata", false},
	{"rename-index", "rename-index", always, Inplace, "renaming an index is only metadata", false},
	{"index-visibility", "index-visibility", always, Inplace, "index visibility is only metadata", false},
	{"add-foreign-key", "add-foreign-key", always, Copy, "a foreign key is checked against every row", false},
	{"add-check", "add-check", always, Copy, "a CHECK constraint is checked against every row by a copy", false},
	{"drop-check", "drop-check", always, Instant, "dropping a CHECK constraint is only metadata", false},

	// Table options
	{"engine-same", "engine", func(c clause) bool {
		return strings.EqualFold(optString(c.spec, ast.TableOptionEngine), c.table.Engine)
	}, Rebuild,
		"ENGINE set to the same engine rebuilds the table", false},
	{"engine-other", "engine", always, Copy, "changing the storage engine copies the table", false},
	{"force", "force", always, Rebuild, "FORCE rebuilds the table", false},
	{"row-format", "row-format", always, Rebuild, "ROW_FORMAT / KEY_BLOCK_SIZE rebuild the table", false},
	{"convert-charset", "convert-charset", always, Copy, "CONVERT TO CHARACTER SET rewrites every text column", false},
	{"table-comment", "table-comment", always, Inplace, "the table comment is only metadata", false},
	{"table-metadata", "table-metadata", always, Inplace,
		"AUTO_INCREMENT, the default character set and statistics options are only metadata", false},

	{"other", "other", always, Copy, "sluice has no rule for this clause, so it assumes a copy", false},
}

// instantOnly are the rules whose change is INSTANT alone, and rebuilds the
// table when the server has to do the statement in place (a statement is
// INSTANT only when every clause is).
var instantOnly = map[string]bool{"add-column": true, "drop-column": true}

// Classify returns one Step for every part of the ALTER.
func Classify(t *schema.Table, a *ddl.Alter, srv Server) []Step {
	var cs []clause
	for _, spec := range a.Specs {
		cs = append(cs, clausesOf(spec, t, srv)...)
	}
	addsPK := slices.ContainsFunc(cs, func(c clause) bool { return c.kind == "add-primary-key" })
	var out []Step
	for _, c := range cs {
		c.alone, c.addsPK = len(cs) == 1, addsPK
		out = append(out, classify(c))
	}
	if Worst(out) > Instant {
		for i := range out {
			if instantOnly[out[i].Rule] {
				out[i].Algorithm = Rebuild
				out[i].Why += "; with clauses that are not INSTANT, the server rebuilds the table for it"
			}
		}
	}
	return out
}

func classify(c clause) Step {
	text := ddl.Text(c.spec)
	if c.kind == "add-column" && len(c.spec.NewColumns) > 1 {
		text = "ADD COLUMN " + c.col.Name.Name.O
	}
	table := rules
	if c.srv.MariaDB {
		table = append(mariadbRules[:len(mariadbRules):len(mariadbRules)], rules...)
	}
	for _, r := range table {
		if r.kind == c.kind && r.test(c) {
			return Step{Clause: text, Algorithm: r.algo, Rule: r.name, Why: r.why, BuildsIndex: r.index}
		}
	}
	return Step{Clause: text, Algorithm: Copy, Rule: "other", Why: "sluice has no rule for this clause, so it assumes a copy"}
}

// clausesOf splits one parser spec into what the rules look at.
func clausesOf(spec *ast.AlterTableSpec, t *schema.Table, srv Server) []clause {
	base := clause{spec: spec, table: t, srv: srv}
	with := func(kind string) clause { c := base; c.kind = kind; return c }
	oldCol := func(c clause, name string) clause {
		c.old, c.hasOld = t.Column(name)
		return c
	}
	switch spec.Tp {
	case ast.AlterTableAddColumns:
		var out []clause
		for _, col := range spec.NewColumns {
			c := with("add-column")
			c.col = col
			out = append(out, c)
		}
		return out
	case ast.AlterTableDropColumn:
		c := oldCol(with("drop-column"), spec.OldColumnName.Name.O)
		if c.hasOld && isPK(t, c.old.Name) {
			return []clause{with("drop-primary-key")}
		}
		return []clause{c}
	case ast.AlterTableRenameColumn:
		return []clause{oldCol(with("rename-column"), spec.OldColumnName.Name.O)}
	case ast.AlterTableModifyColumn, ast.AlterTableChangeColumn:
		if len(spec.NewColumns) != 1 {
			return []clause{with("other")}
		}
		name := spec.NewColumns[0].Name.Name.O
		if spec.Tp == ast.AlterTableChangeColumn && spec.OldColumnName != nil {
			name = spec.OldColumnName.Name.O
		}
		c := oldCol(with("modify-column"), name)
		c.col = spec.NewColumns[0]
		if !c.hasOld {
			return []clause{with("other")}
		}
		if spec.Tp == ast.AlterTableChangeColumn && !dbconn.SameName(c.col.Name.Name.O, c.old.Name) &&
			sameType(c) && sameNull(c) && !moved(c) && !hasDefaultOrComment(c.col) {
			c.kind = "rename-column"
		}
		return []clause{c}
	case ast.AlterTableAlterColumn:
		if ddl.SetVisibility(spec) != "" {
			return []clause{with("set-visibility")}
		}
		return []clause{with("set-default")}
	case ast.AlterTableAddConstraint:
		switch spec.Constraint.Tp {
		case ast.ConstraintPrimaryKey:
			return []clause{with("add-primary-key")}
		case ast.ConstraintForeignKey:
			return []clause{with("add-foreign-key")}
		case ast.ConstraintCheck:
			return []clause{with("add-check")}
		case ast.ConstraintKey, ast.ConstraintIndex, ast.ConstraintUniq, ast.ConstraintUniqKey, ast.ConstraintUniqIndex, ast.ConstraintFulltext:
			return []clause{with("add-index")}
		}
		return []clause{with("other")}
	case ast.AlterTableDropPrimaryKey:
		return []clause{with("drop-primary-key")}
	case ast.AlterTableDropIndex:
		return []clause{with("drop-index")}
	case ast.AlterTableRenameIndex:
		return []clause{with("rename-index")}
	case ast.AlterTableIndexInvisible:
		return []clause{with("index-visibility")}
	case ast.AlterTableDropCheck:
		return []clause{with("drop-check")}
	case ast.AlterTableForce:
		return []clause{with("force")}
	case ast.AlterTableOption:
		var out []clause
		for _, o := range spec.Options {
			c := with(optionKind(o))
			one := *spec
			one.Options = []*ast.TableOption{o}
			c.spec = &one
			out = append(out, c)
		}
		return out
	}
	return []clause{with("other")}
}

func optionKind(o *ast.TableOption) string {
	switch o.Tp {
	case ast.TableOptionEngine:
		return "engine"
	case ast.TableOptionRowFormat, ast.TableOptionKeyBlockSize:
		return "row-format"
	case ast.TableOptionComment:
		return "table-comment"
	case ast.TableOptionCharset, ast.TableOptionCollate:
		if o.UintValue == ast.TableOptionCharsetWithConvertTo {
			return "convert-charset"
		}
		return "table-metadata"
	case ast.TableOptionAutoIncrement, ast.TableOptionStatsPersistent, ast.TableOptionStatsAutoRecalc, ast.TableOptionStatsSamplePages:
		return "table-metadata"
	}
	return "other"
}

func optString(spec *ast.AlterTableSpec, tp ast.TableOptionType) string {
	for _, o := range spec.Options {
		if o.Tp == tp {
			return o.StrValue
		}
	}
	return ""
}

func isPK(t *schema.Table, col string) bool {
	for _, k := range t.PrimaryKey {
		if dbconn.SameName(k, col) {
			return true
		}
	}
	return false
}

func colOpt(col *ast.ColumnDef, tp ast.ColumnOptionType) bool {
	if col == nil {
		return false
	}
	for _, o := range col.Options {
		if o.Tp == tp {
			return true
		}
	}
	return false
}

func generated(col *ast.ColumnDef) bool { return colOpt(col, ast.ColumnOptionGenerated) }

func storedGenerated(col *ast.ColumnDef) bool {
	for _, o := range col.Options {
		if o.Tp == ast.ColumnOptionGenerated && o.Stored {
			return true
		}
	}
	return false
}

func hasDefaultOrComment(col *ast.ColumnDef) bool {
	return colOpt(col, ast.ColumnOptionDefaultValue) || colOpt(col, ast.ColumnOptionComment)
}

func compressed(t *schema.Table) bool { return strings.EqualFold(t.RowFormat, "Compressed") }

func functional(c *ast.Constraint) bool {
	for _, k := range c.Keys {
		if k.Expr != nil {
			return true
		}
	}
	return false
}

// moved reports whether a MODIFY/CHANGE gives the column a new position.
func moved(c clause) bool {
	return c.spec.Position != nil && c.spec.Position.Tp != ast.ColumnPositionNone
}

// newNullable reports whether the new definition allows NULL (the default
// for every type but TIMESTAMP with explicit_defaults_for_timestamp off).
func newNullable(col *ast.ColumnDef) bool {
	nullable := true
	for _, o := range col.Options {
		switch o.Tp {
		case ast.ColumnOptionNotNull, ast.ColumnOptionPrimaryKey:
			nullable = false
		case ast.ColumnOptionNull:
			nullable = true
		}
	}
	return nullable
}

func sameNull(c clause) bool { return newNullable(c.col) == c.old.Nullable }

// ColType is a column type reduced to what decides storage.
type ColType struct {
	Name     string // lower-case type name: int, varchar, decimal, enum, ...
	Length   int    // characters or display digits; -1 when not given
	Scale    int    // DECIMAL scale, fractional-second digits; -1 when not given
	Unsigned bool
	Elems    []string
	Charset  string // empty when not given
	// Collation is empty when not given (NewType) and for types without one.
	Collation string
}

// NewType reduces a parsed column definition's type.
func NewType(col *ast.ColumnDef) ColType {
	ft := col.Tp
	ct := ColType{Name: typeName(ft), Length: ft.GetFlen(), Scale: ft.GetDecimal(), Unsigned: mysql.HasUnsignedFlag(ft.GetFlag()),
		Elems: ft.GetElems(), Charset: strings.ToLower(ft.GetCharset()), Collation: strings.ToLower(ft.GetCollate())}
	for _, o := range col.Options {
		if o.Tp == ast.ColumnOptionCollate {
			ct.Collation = strings.ToLower(o.StrValue)
		}
	}
	if ct.Length == types.UnspecifiedLength {
		ct.Length = -1
	}
	if ct.Scale == types.UnspecifiedLength {
		ct.Scale = -1
	}
	return ct
}

// OldType reduces an existing column's type (information_schema's COLUMN_TYPE).
func OldType(c schema.Column) ColType {
	ct := ColType{Name: c.DataType, Length: -1, Scale: -1, Unsigned: c.Unsigned, Charset: strings.ToLower(c.Charset),
		Collation: strings.ToLower(c.Collation)}
	s := strings.ToLower(c.ColumnType)
	if i := strings.IndexByte(s, '('); i >= 0 {
		j := strings.LastIndexByte(s, ')')
		inner := s[i+1 : j]
		if ct.Name == "enum" || ct.Name == "set" {
			ct.Elems = schema.Members(c.ColumnType)
		} else {
			parts := strings.Split(inner, ",")
			fmt.Sscan(parts[0], &ct.Length)
			if len(parts) > 1 {
				fmt.Sscan(parts[1], &ct.Scale)
			}
		}
	}
	switch ct.Name {
	case "datetime", "timestamp", "time":
		ct.Scale, ct.Length = max(ct.Length, 0), -1
	case "decimal":
		if ct.Scale < 0 {
			ct.Scale = 0
		}
	}
	return ct
}

func typeName(ft *types.FieldType) string {
	return types.TypeToStr(ft.GetType(), ft.GetCharset())
}

// sameType reports whether the new definition keeps the column's type,
// its collation included.
func sameType(c clause) bool { return sameTypeButCollation(c) && !collationChanges(c) }

// collationOnly: the new definition changes the column's collation and
// nothing else.
func collationOnly(c clause) bool {
	return collationChanges(c) && sameTypeButCollation(c) && sameNull(c) && !moved(c) && !c.old.Generated
}

// collationChanges reports whether a text column's collation may change:
// one named that differs, or the default one a column takes without COLLATE
// (its character set's, or the table's without CHARACTER SET) when it
// differs or sluice does not know it.
func collationChanges(c clause) bool {
	o, n := OldType(c.old), NewType(c.col)
	if o.Charset == "" || o.Charset == "binary" || o.Collation == "" {
		return false // no collation to keep; a change of type is seen elsewhere
	}
	coll := n.Collation
	switch {
	case coll != "":
	case n.Charset != "":
		coll = c.table.CharsetDefaults[n.Charset]
	default:
		coll = c.table.Collation
	}
	return coll != o.Collation
}

func sameTypeButCollation(c clause) bool {
	o, n := OldType(c.old), NewType(c.col)
	if o.Name != n.Name || o.Unsigned != n.Unsigned {
		return false
	}
	if n.Charset != "" && n.Charset != "binary" && n.Charset != o.Charset {
		return false
	}
	if n.Charset == "" && o.Charset != "" && c.table.Charset != "" && o.Charset != c.table.Charset {
		return false // the new definition takes the table's default character set
	}
	switch n.Name {
	case "enum", "set":
		return equalStrings(o.Elems, n.Elems)
	case "decimal":
		return lenOr(n.Length, 10) == o.Length && max(n.Scale, 0) == o.Scale
	case "datetime", "timestamp", "time":
		return max(n.Scale, 0) == o.Scale
	case "char", "varchar", "binary", "varbinary", "bit":
		return lenOr(n.Length, 1) == o.Length
	}
	return true
}

func lenOr(n, def int) int {
	if n < 0 {
		return def
	}
	return n
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// enumAppend: the new ENUM/SET lists the old values in order and more after
// them, and needs the same storage size.
func enumAppend(c clause) bool {
	o, n := OldType(c.old), NewType(c.col)
	if o.Name != n.Name || (o.Name != "enum" && o.Name != "set") || len(n.Elems) <= len(o.Elems) {
		return false
	}
	if (n.Charset != "" && n.Charset != o.Charset) || collationChanges(c) {
		return false
	}
	if !equalStrings(o.Elems, n.Elems[:len(o.Elems)]) {
		return false
	}
	return enumBytes(o.Name, len(o.Elems)) == enumBytes(n.Name, len(n.Elems))
}

func enumBytes(name string, n int) int {
	if name == "enum" {
		if n <= 255 {
			return 1
		}
		return 2
	}
	return (n + 7) / 8
}

// charsetBytes is the most bytes a character takes in a character set.
func charsetBytes(cs string) int {
	switch strings.ToLower(cs) {
	case "latin1", "ascii", "binary", "latin2", "cp1250", "cp1251", "cp1252", "":
		return 1
	case "utf8mb3", "utf8":
		return 3
	case "ucs2":
		return 2
	case "utf16", "utf16le", "utf32":
		return 4
	}
	return 4
}

// varcharGrows: a VARCHAR/VARBINARY keeps its character set and gets longer.
func varcharGrows(c clause) bool {
	o, n := OldType(c.old), NewType(c.col)
	if o.Name != n.Name || (o.Name != "varchar" && o.Name != "varbinary") || n.Length <= o.Length {
		return false
	}
	if n.Charset != "" && n.Charset != "binary" && n.Charset != o.Charset {
		return false
	}
	if n.Charset == "" && o.Charset != "" && c.table.Charset != "" && o.Charset != c.table.Charset {
		return false
	}
	return !collationChanges(c)
}

// varcharWiden: a VARCHAR grows without crossing the 255-byte boundary that
// decides whether its length takes one byte or two.
func varcharWiden(c clause) bool {
	if !varcharGrows(c) {
		return false
	}
	o, n := OldType(c.old), NewType(c.col)
	b := charsetBytes(o.Charset)
	return (o.Length*b < 256) == (n.Length*b < 256)
}

// mariadbCopyDefault are the functions in a DEFAULT expression for which
// MariaDB adds the column only by a copy (checked on 10.11 and 11.8; RAND(),
// NOW(), CURDATE(), CONNECTION_ID(), USER() are INSTANT: one value for every
// row).
var mariadbCopyDefault = map[string]bool{"uuid": true, "uuid_short": true, "sysdate": true, "uuid_v4": true, "uuid_v7": true}

// Worst returns the costliest algorithm among steps (Instant for none).
func Worst(steps []Step) Algorithm {
	w := Instant
	for _, s := range steps {
		w = max(w, s.Algorithm)
	}
	return w
}

// RuleNames lists every rule, in order.
func RuleNames() []string {
	out := make([]string, 0, len(rules)+len(mariadbRules))
	for _, r := range append(mariadbRules[:len(mariadbRules):len(mariadbRules)], rules...) {
		out = append(out, r.name)
	}
	return out
}

// MaxRowVersions is how many INSTANT column changes a table takes before the
// server wants it rebuilt.
func (s Server) MaxRowVersions() int {
	if s.AtLeast(9, 1, 0) {
		return 255
	}
	return 64
}

// ParseServer reads a version string such as "9.7.4-2" or "8.0.36-log".
func ParseServer(version string) Server {
	var s Server
	fmt.Sscanf(version, "%d.%d.%d", &s.Major, &s.Minor, &s.Patch)
	s.MariaDB = dbconn.FlavorOf(version, "") == dbconn.MariaDB
	return s
}
