// Package ddl parses the ALTER clause a user gives sluice and says what it does
// to columns and keys: which columns it renames, drops or adds, which added
// columns take a value that changes at each insert, and whether it touches the
// primary key or renames the table. It refuses a clause with comments, which
// the parser and the server may read differently. It uses the TiDB SQL parser
// and needs no server; the server's own word on the ALTER comes later, when
// sluice applies it to an empty copy of the table.
package ddl

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/format"
	_ "github.com/pingcap/tidb/pkg/parser/test_driver" // value expressions in DEFAULT clauses
	"github.com/sluicedb/sluice/internal/dbconn"
)

// Alter is a parsed ALTER clause.
type Alter struct {
	// Clause is the user's text with any leading "ALTER TABLE name" removed.
	Clause string
	// Database and Table are the names a whole ALTER TABLE statement gave
	// (Database "" when it named none); both "" for a clause alone.
	Database, Table string
	// Renames maps an old column name (lower case) to its new name.
	Renames map[string]string
	// Dropped holds the lower-case names of dropped columns.
	Dropped map[string]bool
	// Added holds the lower-case names of added columns.
	Added map[string]bool
	// ChangesPrimaryKey is true when the clause drops or adds the primary key.
	ChangesPrimaryKey bool
	// AddsForeignKey is true when the clause adds a foreign key (ADD
	// FOREIGN KEY, or a column defined with REFERENCES).
	AddsForeignKey bool
	// DropsForeignKeys names the foreign keys the clause drops.
	DropsForeignKeys []string
	// RenamesTable is true for RENAME [TO|AS] other.
	RenamesTable bool
	// Specs are the clause's parts, as the parser sees them.
	Specs []*ast.AlterTableSpec
	// NonDeterministic lists the added columns whose value the server
	// computes anew at each insert (see Volatile), in the order written, once
	// per column and cause. A later ALTER COLUMN ... SET DEFAULT of an added
	// column adds its causes and removes none. Parse does not refuse these
	// columns: the copy path should, unless it accepts the kind
	// (VolatileTime, perhaps).
	NonDeterministic []Volatile
	// AutoIncrementRedefined holds the lower-case original names of existing
	// columns that MODIFY or CHANGE declares AUTO_INCREMENT, whether or not
	// they already were (only the table's schema tells). Their values are
	// copied, but an insert replaces a copied NULL, and a copied 0 unless
	// sql_mode has NO_AUTO_VALUE_ON_ZERO, with a new number, drawn again each
	// time the row is copied.
	AutoIncrementRedefined map[string]bool
	// SetsAutoIncrement is true when the clause sets the table's
	// AUTO_INCREMENT counter (AUTO_INCREMENT = N).
	SetsAutoIncrement bool
}

// Text returns one part of the clause as SQL text.
func Text(spec *ast.AlterTableSpec) string {
	if spec.Tp == ast.AlterTableForce {
		return "FORCE" // the parser restores it as a comment that it is not supported
	}
	if v := SetVisibility(spec); v != "" {
		return "ALTER COLUMN " + dbconn.QuoteIdent(spec.NewColumns[0].Name.Name.O) + " SET " + v
	}
	var b strings.Builder
	if err := spec.Restore(format.NewRestoreCtx(format.DefaultRestoreFlags|format.RestoreStringWithoutCharset, &b)); err != nil {
		return fmt.Sprintf("(clause %d)", spec.Tp)
	}
	// DEFAULT (a + 1) as written, not as read (defaultexpr.go).
	return strings.ReplaceAll(b.String(), strings.ToUpper(defaultExprFunc)+"(", "(")
}

// statementHead matches the head of a whole ALTER TABLE statement, up to
// the table's name; its second group is IGNORE.
var statementHead = regexp.MustCompile(`(?is)^ALTER\s+(ONLINE\s+)?(IGNORE\s+)?TABLE\s+(IF\s+EXISTS\s+)?`)

// ErrInvalid wraps every reason Parse refuses a clause.
var ErrInvalid = errors.New("invalid ALTER")

// Parse parses clause, the part after "ALTER TABLE name" (a full
// "ALTER TABLE name ..." statement is accepted too, and its name ignored).
// Trailing semicolons are dropped. A clause that holds a comment outside
// quoted strings and identifiers is refused: sluice appends to the clause,
// and sluice's parser and the server need not read a comment alike.
func Parse(clause string) (*Alter, error) {
	c := strings.TrimRightFunc(clause, func(r rune) bool { return r == ';' || unicode.IsSpace(r) })
	c = strings.TrimSpace(c)
	if c == "" {
		return nil, fmt.Errorf("%w: the ALTER clause is empty: pass --alter \"ADD COLUMN ...\"", ErrInvalid)
	}
	if err := checkComments(c); err != nil {
		return nil, err
	}
	var named *ast.TableName
	if m := statementHead.FindStringSubmatch(c); m != nil {
		if m[2] != "" {
			return nil, fmt.Errorf("%w: ALTER IGNORE TABLE drops the rows that collide under a new unique key, and sluice never drops a row: remove IGNORE (the run then stops on such rows, the table as it was)", ErrInvalid)
		}
		// A whole statement: check it parses, then keep what follows the
		// name. ONLINE (MariaDB: refuse to block writes, which sluice never
		// does) and IF EXISTS (the table must exist) change nothing here.
		c = "ALTER TABLE " + c[len(m[0]):]
		stmt, _, err := parseReadingMariaDBTypes(c)
		if err != nil {
			return nil, err
		}
		if at, ok := stmt.(*ast.AlterTableStmt); ok {
			named = at.Table
		}
		idx := indexAfterTableName(c)
		if idx < 0 {
			return nil, fmt.Errorf("%w: cannot find the clause after ALTER TABLE name", ErrInvalid)
		}
		c = strings.TrimSpace(c[idx:])
	}
	stmt, stood, err := parseReadingMariaDBTypes("ALTER TABLE `t` " + c)
	if err != nil {
		return nil, err
	}
	at, ok := stmt.(*ast.AlterTableStmt)
	if !ok {
		return nil, fmt.Errorf("%w: %q is not an ALTER TABLE clause", ErrInvalid, c)
	}
	if stood && !onlyAdded(at.Specs) {
		return nil, fmt.Errorf("%w: sluice reads MariaDB's UUID, INET6 and INET4 types and PERSISTENT only in ADD COLUMN so far, and this clause redefines a column (MODIFY, CHANGE or ALTER COLUMN): run it with the server's own ALTER TABLE", ErrInvalid)
	}
	out := &Alter{Clause: c, Renames: map[string]string{}, Dropped: map[string]bool{}, Added: map[string]bool{},
		Specs: at.Specs, AutoIncrementRedefined: map[string]bool{}}
	if named != nil {
		out.Database, out.Table = named.Schema.O, named.Name.O
	}
	for _, spec := range at.Specs {
		if what, ok := rowChanging[spec.Tp]; ok {
			return nil, fmt.Errorf("%w: %s changes the table's rows, not only its definition, which a copy into a new table would not do: run it with the server's own ALTER TABLE, which needs no copy for it", ErrInvalid, what)
		}
		if what, ok := maintenance[spec.Tp]; ok {
			return nil, fmt.Errorf("%w: %s is upkeep of the table, not a change of its schema: run it with the server's own ALTER TABLE", ErrInvalid, what)
		}
		switch spec.Tp {
		case ast.AlterTableChangeColumn:
			old := dbconn.NameKey(spec.OldColumnName.Name.O)
			if len(spec.NewColumns) == 1 {
				nw := spec.NewColumns[0].Name.Name.O
				if !dbconn.SameName(old, nw) {
					out.Renames[old] = nw
				}
			}
			out.redefined(old, spec.NewColumns)
			if hasPKOption(spec.NewColumns) {
				out.ChangesPrimaryKey = true
			}
		case ast.AlterTableRenameColumn:
			out.Renames[dbconn.NameKey(spec.OldColumnName.Name.O)] = spec.NewColumnName.Name.O
		case ast.AlterTableDropColumn:
			out.Dropped[dbconn.NameKey(spec.OldColumnName.Name.O)] = true
		case ast.AlterTableAddColumns:
			for _, col := range spec.NewColumns {
				out.Added[dbconn.NameKey(col.Name.Name.O)] = true
				out.noteVolatile(col)
			}
			if hasPKOption(spec.NewColumns) {
				out.ChangesPrimaryKey = true
			}
		case ast.AlterTableModifyColumn:
			if len(spec.NewColumns) == 1 {
				out.redefined(dbconn.NameKey(spec.NewColumns[0].Name.Name.O), spec.NewColumns)
			}
			if hasPKOption(spec.NewColumns) {
				out.ChangesPrimaryKey = true
			}
		case ast.AlterTableDropPrimaryKey:
			out.ChangesPrimaryKey = true
		case ast.AlterTableAddConstraint:
			if spec.Constraint != nil && spec.Constraint.Tp == ast.ConstraintPrimaryKey {
				out.ChangesPrimaryKey = true
			}
			if spec.Constraint != nil && spec.Constraint.Tp == ast.ConstraintForeignKey {
				out.AddsForeignKey = true
			}
		case ast.AlterTableAlterColumn:
			// SET DEFAULT on a column added earlier in the clause.
			if len(spec.NewColumns) == 1 && out.Added[dbconn.NameKey(spec.NewColumns[0].Name.Name.O)] {
				out.noteVolatile(spec.NewColumns[0])
			}
		case ast.AlterTableRenameTable:
			out.RenamesTable = true
		case ast.AlterTableDropForeignKey:
			out.DropsForeignKeys = append(out.DropsForeignKeys, spec.Name)
		case ast.AlterTableOption:
			for _, o := range spec.Options {
				if o.Tp == ast.TableOptionAutoIncrement {
					out.SetsAutoIncrement = true
				}
			}
		}
	}
	for _, spec := range at.Specs {
		for _, col := range spec.NewColumns {
			for _, o := range col.Options {
				if o.Tp == ast.ColumnOptionReference {
					out.AddsForeignKey = true
				}
			}
		}
	}
	if out.RenamesTable {
		return nil, fmt.Errorf("%w: the clause renames the table; use RENAME TABLE for that, not sluice", ErrInvalid)
	}
	return out, nil
}

// SourceColumn returns the name a new-table column had in the original table,
// and false when the column is new (added, or re-added after a drop) and so
// takes its default instead of copied data. orig reports whether the original
// table has a column of a given name.
func (a *Alter) SourceColumn(newName string, orig func(string) bool) (string, bool) {
	lower := dbconn.NameKey(newName)
	for old, nw := range a.Renames {
		if dbconn.SameName(nw, newName) {
			return old, orig(old)
		}
	}
	if a.Added[lower] || a.Dropped[lower] {
		return "", false
	}
	if _, renamedAway := a.Renames[lower]; renamedAway {
		return "", false
	}
	return newName, orig(newName)
}

// redefined notes what MODIFY or CHANGE of column old (lower case) makes
// volatile: all of its volatile causes when the clause added the column
// earlier, its AUTO_INCREMENT when the column exists in the table.
func (a *Alter) redefined(old string, cols []*ast.ColumnDef) {
	if len(cols) != 1 {
		return
	}
	if a.Added[old] {
		a.noteVolatile(cols[0])
		return
	}
	if hasAutoIncrement(cols[0]) {
		a.AutoIncrementRedefined[old] = true
	}
}

// noteVolatile adds col's volatile causes to NonDeterministic, each column
// and cause once.
func (a *Alter) noteVolatile(col *ast.ColumnDef) {
next:
	for _, v := range volatiles(col) {
		for _, w := range a.NonDeterministic {
			if dbconn.SameName(v.Column, w.Column) && v.Cause == w.Cause {
				continue next
			}
		}
		a.NonDeterministic = append(a.NonDeterministic, v)
	}
}

// rowChanging names the clauses that add, remove or swap rows.
var rowChanging = map[ast.AlterTableType]string{
	ast.AlterTableExchangePartition:          "EXCHANGE PARTITION",
	ast.AlterTableDropPartition:              "DROP PARTITION",
	ast.AlterTableDropFirstPartition:         "DROP FIRST PARTITION",
	ast.AlterTableTruncatePartition:          "TRUNCATE PARTITION",
	ast.AlterTableDiscardPartitionTablespace: "DISCARD PARTITION ... TABLESPACE",
	ast.AlterTableImportPartitionTablespace:  "IMPORT PARTITION ... TABLESPACE",
	ast.AlterTableDiscardTablespace:          "DISCARD TABLESPACE",
	ast.AlterTableImportTablespace:           "IMPORT TABLESPACE",
}

// maintenance names the clauses that leave the schema as it is.
var maintenance = map[ast.AlterTableType]string{
	ast.AlterTableCheckPartitions:   "CHECK PARTITION",
	ast.AlterTableOptimizePartition: "OPTIMIZE PARTITION",
	ast.AlterTableRepairPartition:   "REPAIR PARTITION",
	ast.AlterTableRebuildPartition:  "REBUILD PARTITION",
}

// NamesOther returns a line saying so when the ALTER was a whole statement
// naming a table other than database.table; fold compares names without
// case (lower_case_table_names other than 0).
func (a *Alter) NamesOther(database, table string, fold bool) error {
	same := func(x, y string) bool { return x == y || fold && dbconn.SameName(x, y) }
	if a.Table != "" && !same(a.Table, table) || a.Database != "" && !same(a.Database, database) {
		name := a.Table
		if a.Database != "" {
			name = a.Database + "." + a.Table
		}
		return fmt.Errorf("%w: the ALTER names table %s, and --table is %s.%s: give the clause alone (\"ADD COLUMN ...\"), or the table it names", ErrInvalid, name, database, table)
	}
	return nil
}

func parseOne(sql string) (ast.StmtNode, error) {
	stmts, err := ParseSQL(sql, 0)
	if err != nil {
		msg := err.Error()
		if i := strings.Index(msg, "\n"); i > 0 {
			msg = msg[:i]
		}
		msg = strings.TrimSpace(msg)
		cause := errors.New(msg)
		if errors.Is(err, ErrUnknownName) {
			cause = nameErr{msg}
		}
		return nil, fmt.Errorf("%w: cannot parse the ALTER clause: %w (if it is not a typo, it is syntax sluice cannot read yet: run that change with the server's own ALTER TABLE)", ErrInvalid, cause)
	}
	if len(stmts) != 1 {
		return nil, fmt.Errorf("%w: the ALTER clause must be a single statement, found %d", ErrInvalid, len(stmts))
	}
	return stmts[0], nil
}

func hasPKOption(cols []*ast.ColumnDef) bool {
	for _, col := range cols {
		for _, o := range col.Options {
			if o.Tp == ast.ColumnOptionPrimaryKey {
				return true
			}
		}
	}
	return false
}

// indexAfterTableName returns the offset just past the table name in a
// statement that starts with ALTER TABLE, or -1.
func indexAfterTableName(s string) int {
	i := len("ALTER TABLE")
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	// name, possibly db.name, possibly quoted parts
	for i < len(s) {
		if s[i] == '`' {
			i++
			for i < len(s) {
				if s[i] == '`' {
					if i+1 < len(s) && s[i+1] == '`' {
						i += 2
						continue
					}
					i++
					break
				}
				i++
			}
		} else {
			for i < len(s) && s[i] != ' ' && s[i] != '.' && s[i] != '\t' && s[i] != '\n' && s[i] != '\r' {
				i++
			}
		}
		if i < len(s) && s[i] == '.' {
			i++
			continue
		}
		return i
	}
	return -1
}

// TypeText is a column definition's type as SQL, e.g. "varchar(20)".
func TypeText(col *ast.ColumnDef) string {
	return strings.ToLower(col.Tp.CompactStr())
}
