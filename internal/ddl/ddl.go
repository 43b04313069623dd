// Package ddl parses the ALTER clause a user gives sluice and says what it does
// to columns and keys: which columns it renames, drops or adds, and whether it
// touches the primary key or renames the table. It uses the TiDB SQL parser and
// needs no server; the server's own word on the ALTER comes later, when sluice
// applies it to an empty copy of the table.
package ddl

import (
	"errors"
	"fmt"
	"strings"

	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/format"
	_ "github.com/pingcap/tidb/pkg/parser/test_driver" // value expressions in DEFAULT clauses
)

// Alter is a parsed ALTER clause.
type Alter struct {
	// Clause is the user's text with any leading "ALTER TABLE name" removed.
	Clause string
	// Renames maps an old column name (lower case) to its new name.
	Renames map[string]string
	// Dropped holds the lower-case names of dropped columns.
	Dropped map[string]bool
	// Added holds the lower-case names of added columns.
	Added map[string]bool
	// ChangesPrimaryKey is true when the clause drops or adds the primary key.
	ChangesPrimaryKey bool
	// RenamesTable is true for RENAME [TO|AS] other.
	RenamesTable bool
	// Specs are the clause's parts, as the parser sees them.
	Specs []*ast.AlterTableSpec
}

// Text returns one part of the clause as SQL text.
func Text(spec *ast.AlterTableSpec) string {
	var b strings.Builder
	if err := spec.Restore(format.NewRestoreCtx(format.DefaultRestoreFlags|format.RestoreStringWithoutCharset, &b)); err != nil {
		return fmt.Sprintf("(clause %d)", spec.Tp)
	}
	return b.String()
}

// ErrInvalid wraps every reason Parse refuses a clause.
var ErrInvalid = errors.New("invalid ALTER")

// Parse parses clause, the part after "ALTER TABLE name" (a full
// "ALTER TABLE name ..." statement is accepted too, and its name ignored).
func Parse(clause string) (*Alter, error) {
	c := strings.TrimSpace(clause)
	c = strings.TrimRight(c, "; \t\n")
	if c == "" {
		return nil, fmt.Errorf("%w: the ALTER clause is empty: pass --alter \"ADD COLUMN ...\"", ErrInvalid)
	}
	if strings.HasPrefix(strings.ToUpper(c), "ALTER TABLE") {
		// A whole statement: check it parses, then keep what follows the name.
		if _, err := parseOne(c); err != nil {
			return nil, err
		}
		idx := indexAfterTableName(c)
		if idx < 0 {
			return nil, fmt.Errorf("%w: cannot find the clause after ALTER TABLE name", ErrInvalid)
		}
		c = strings.TrimSpace(c[idx:])
	}
	stmt, err := parseOne("ALTER TABLE `t` " + c)
	if err != nil {
		return nil, err
	}
	at, ok := stmt.(*ast.AlterTableStmt)
	if !ok {
		return nil, fmt.Errorf("%w: %q is not an ALTER TABLE clause", ErrInvalid, c)
	}
	out := &Alter{Clause: c, Renames: map[string]string{}, Dropped: map[string]bool{}, Added: map[string]bool{}, Specs: at.Specs}
	for _, spec := range at.Specs {
		switch spec.Tp {
		case ast.AlterTableChangeColumn:
			old := spec.OldColumnName.Name.L
			if len(spec.NewColumns) == 1 {
				nw := spec.NewColumns[0].Name.Name.O
				if !strings.EqualFold(old, nw) {
					out.Renames[old] = nw
				}
			}
			if hasPKOption(spec.NewColumns) {
				out.ChangesPrimaryKey = true
			}
		case ast.AlterTableRenameColumn:
			out.Renames[spec.OldColumnName.Name.L] = spec.NewColumnName.Name.O
		case ast.AlterTableDropColumn:
			out.Dropped[spec.OldColumnName.Name.L] = true
		case ast.AlterTableAddColumns:
			for _, col := range spec.NewColumns {
				out.Added[col.Name.Name.L] = true
			}
			if hasPKOption(spec.NewColumns) {
				out.ChangesPrimaryKey = true
			}
		case ast.AlterTableModifyColumn:
			if hasPKOption(spec.NewColumns) {
				out.ChangesPrimaryKey = true
			}
		case ast.AlterTableDropPrimaryKey:
			out.ChangesPrimaryKey = true
		case ast.AlterTableAddConstraint:
			if spec.Constraint != nil && spec.Constraint.Tp == ast.ConstraintPrimaryKey {
				out.ChangesPrimaryKey = true
			}
		case ast.AlterTableRenameTable:
			out.RenamesTable = true
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
	lower := strings.ToLower(newName)
	for old, nw := range a.Renames {
		if strings.EqualFold(nw, newName) {
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

func parseOne(sql string) (ast.StmtNode, error) {
	p := parser.New()
	stmts, _, err := p.Parse(sql, "", "")
	if err != nil {
		msg := err.Error()
		if i := strings.Index(msg, "\n"); i > 0 {
			msg = msg[:i]
		}
		return nil, fmt.Errorf("%w: cannot parse the ALTER clause: %s", ErrInvalid, msg)
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
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n') {
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
			for i < len(s) && s[i] != ' ' && s[i] != '.' && s[i] != '\t' && s[i] != '\n' {
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
