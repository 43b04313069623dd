package ddl

import (
	"regexp"
	"strconv"
	"strings"
	"unicode"

	"github.com/pingcap/tidb/pkg/parser/ast"
)

// MariaDB's UUID, INET6 and INET4 types are unknown to the parser. In an ADD
// COLUMN they are read as a binary string of the same size: what sluice
// takes from an added column's definition (its name, its default, its key
// options) does not depend on its type, which the copy reads from the new
// table the server made. A redefined column's type is compared with its old
// one (conversions, lossy changes, key changes): there such a type is still
// refused, with a line that says so.
var mariadbTypes = map[string]string{"uuid": "BINARY(16)", "inet6": "BINARY(16)", "inet4": "BINARY(4)",
	"persistent": "STORED"} // and MariaDB's word for a stored generated column

// parseErrAt reads where the parser stopped: the line, and the column just
// past the token it could not take.
var parseErrAt = regexp.MustCompile(`^line (\d+) column (\d+) near "`)

// parseReadingMariaDBTypes is parseOne, taking each of mariadbTypes where
// the parser stops at it for its stand-in. stood is true when one was.
func parseReadingMariaDBTypes(sql string) (stmt ast.StmtNode, stood bool, err error) {
	first := sql
	for range 512 { // each round reads one stand-in
		stmts, perr := ParseSQL(sql, 0)
		if perr == nil {
			if len(stmts) != 1 {
				break // parseOne says so
			}
			return stmts[0], stood, nil
		}
		next, typ, ok := standInType(sql, perr.Error())
		if !ok {
			break
		}
		sql, stood = next, stood || typ
	}
	// The parser's own word on the user's text.
	stmt, err = parseOne(first)
	return stmt, false, err
}

// standInType returns sql with the MariaDB type name the parser stopped at
// (msg is its error) read as its stand-in, or false if it stopped elsewhere.
//
// A column's visibility (INVISIBLE, VISIBLE; MySQL's ALTER COLUMN ... SET
// INVISIBLE) is unknown to the parser too. sluice takes nothing from it: the
// copy and the checksum name every column, hidden or not. The word is left
// out of what is parsed (SET [IN]VISIBLE is read as a SET DEFAULT of a mark,
// an ALTER COLUMN that changes only metadata, as it does, and Text prints it
// back); typ is false then.
func standInType(sql, msg string) (next string, typ, ok bool) {
	m := parseErrAt.FindStringSubmatch(msg)
	if m == nil {
		return "", false, false
	}
	line, _ := strconv.Atoi(m[1])
	col, _ := strconv.Atoi(m[2])
	start := 0
	for l := 1; l < line; l++ {
		i := strings.IndexByte(sql[start:], '\n')
		if i < 0 {
			return "", false, false
		}
		start += i + 1
	}
	end := start + col
	if line > 1 {
		end-- // past the first line the parser counts from the newline
	}
	if end > len(sql) {
		return "", false, false
	}
	begin := end
	for begin > start && isIdentByte(sql[begin-1]) {
		begin--
	}
	if next, ok := wrapDefaultExpr(sql, end); ok {
		return next, false, true
	}
	word := strings.ToLower(sql[begin:end])
	// A type name follows a space or an opening parenthesis, never a dot or
	// a quote; the error's text begins with it.
	if begin == 0 || !strings.ContainsRune(" \t\r\n(", rune(sql[begin-1])) ||
		!strings.HasPrefix(strings.ToLower(msg[len(m[0]):]), word) {
		return "", false, false
	}
	if standIn, ok := mariadbTypes[word]; ok {
		return sql[:begin] + standIn + sql[end:], true, true
	}
	if word != "invisible" && word != "visible" {
		return "", false, false
	}
	if before := strings.TrimRightFunc(sql[:begin], unicode.IsSpace); len(before) >= 4 &&
		strings.EqualFold(before[len(before)-3:], "set") && !isIdentByte(before[len(before)-4]) {
		return sql[:begin] + "DEFAULT '" + visibilityMark + word + "'" + sql[end:], false, true
	}
	return sql[:begin] + sql[end:], false, true
}

// visibilityMark begins the default that stands in for SET [IN]VISIBLE.
const visibilityMark = "sluice-column-visibility:"

// SetVisibility returns INVISIBLE or VISIBLE for an ALTER COLUMN read from
// SET [IN]VISIBLE, or "".
func SetVisibility(spec *ast.AlterTableSpec) string {
	if spec.Tp != ast.AlterTableAlterColumn || len(spec.NewColumns) != 1 || len(spec.NewColumns[0].Options) != 1 {
		return ""
	}
	o := spec.NewColumns[0].Options[0]
	v, ok := o.Expr.(interface{ GetString() string })
	if !ok || !strings.HasPrefix(v.GetString(), visibilityMark) {
		return ""
	}
	return strings.ToUpper(strings.TrimPrefix(v.GetString(), visibilityMark))
}

func isIdentByte(b byte) bool {
	return b == '_' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
}

// onlyAdded reports whether the clause's specs redefine no column: where a
// MariaDB type was read as its stand-in, it can only be an added column's.
func onlyAdded(specs []*ast.AlterTableSpec) bool {
	for _, s := range specs {
		switch s.Tp {
		case ast.AlterTableModifyColumn, ast.AlterTableChangeColumn, ast.AlterTableAlterColumn:
			return false
		}
	}
	return true
}
