package ddl

import (
	"strings"
	"unicode"
)

// The parser takes a column default in parentheses only when it is a column,
// a literal or a function call: DEFAULT (a + 1), which MySQL 8.0.13+ and
// MariaDB 10.2+ accept, stops it at the operator. Such a group is read
// wrapped in a call of defaultExprFunc, which the parser takes with any
// expression inside, so the function calls within are still seen (a volatile
// default is still found, volatile.go) and Text prints the group as written.
// The server gets the user's text.
const defaultExprFunc = "sluice_default_expr"

// wrapDefaultExpr returns sql with the parenthesized DEFAULT expression that
// holds byte offset at wrapped in defaultExprFunc, or false if none holds it
// (or it is wrapped already).
func wrapDefaultExpr(sql string, at int) (string, bool) {
	for i := 0; i < len(sql); {
		if q := sql[i]; q == '\'' || q == '"' || q == '`' {
			i, _ = skipQuoted(sql, i, q != '`')
			continue
		}
		if !hasWordAt(sql, i, "default") {
			i++
			continue
		}
		j := i + len("default")
		for j < len(sql) && unicode.IsSpace(rune(sql[j])) {
			j++
		}
		if j >= len(sql) || sql[j] != '(' {
			i = j
			continue
		}
		end := matchParen(sql, j)
		if end < 0 {
			return "", false
		}
		if j < at && at <= end {
			inner := sql[j+1 : end]
			if strings.HasPrefix(strings.ToLower(strings.TrimSpace(inner)), defaultExprFunc) {
				return "", false
			}
			return sql[:j+1] + defaultExprFunc + "(" + inner + ")" + sql[end:], true
		}
		i = end + 1
	}
	return "", false
}

// hasWordAt reports whether sql holds the keyword w (any case) at i, as a
// whole word.
func hasWordAt(sql string, i int, w string) bool {
	if i+len(w) > len(sql) || !strings.EqualFold(sql[i:i+len(w)], w) {
		return false
	}
	if i > 0 && (isIdentByte(sql[i-1]) || sql[i-1] == '$' || sql[i-1] >= 0x80) {
		return false
	}
	k := i + len(w)
	return k == len(sql) || !(isIdentByte(sql[k]) || sql[k] == '$' || sql[k] >= 0x80)
}

// matchParen returns the offset of the parenthesis that closes the one at
// open, or -1.
func matchParen(sql string, open int) int {
	depth := 0
	for k := open; k < len(sql); {
		switch c := sql[k]; {
		case c == '\'' || c == '"' || c == '`':
			k, _ = skipQuoted(sql, k, c != '`')
			continue
		case c == '(':
			depth++
		case c == ')':
			depth--
			if depth == 0 {
				return k
			}
		}
		k++
	}
	return -1
}
