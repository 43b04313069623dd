package schema

import (
	"strings"

	"github.com/sluicedb/sluice/internal/dbconn"
)

// KeyDef is a secondary index as SHOW CREATE TABLE prints it, e.g.
// "KEY `k_1` (`k`)" or "UNIQUE KEY `u` (`email`)".
type KeyDef struct {
	Name, Def string
	Unique    bool
	// Functional: a key part is an expression, or the key is MariaDB's
	// long unique key (USING HASH). The server builds such an index with
	// ALGORITHM=COPY only (it adds a hidden virtual column).
	Functional bool `json:",omitempty"`
}

// SecondaryKeys returns the B-tree secondary indexes (plain and unique on
// columns, and unique functional ones; not fulltext, spatial, plain
// functional or the primary key) of a SHOW CREATE TABLE text. These are
// dropped before a bulk copy and added afterwards: the plain ones because a
// sorted parallel build is cheaper, the unique ones because during the copy
// a row moved to another primary key can collide with itself. A plain
// functional index stays: the server cannot build it online.
func SecondaryKeys(createTable string) []KeyDef {
	var keys []KeyDef
	for _, line := range strings.Split(createTable, "\n") {
		l := strings.TrimSuffix(strings.TrimSpace(line), ",")
		rest, unique := strings.CutPrefix(l, "UNIQUE ")
		if !strings.HasPrefix(rest, "KEY `") {
			continue
		}
		name, ok := backquoted(rest[len("KEY "):])
		if !ok {
			continue
		}
		fn := functional(rest[len("KEY ")+len(dbconn.QuoteIdent(name)):]) || unique && strings.HasSuffix(l, " USING HASH")
		if fn && !unique {
			continue
		}
		keys = append(keys, KeyDef{Name: name, Def: l, Unique: unique, Functional: fn})
	}
	return keys
}

// backquoted reads a `quoted` identifier at the start of s.
func backquoted(s string) (string, bool) {
	if !strings.HasPrefix(s, "`") {
		return "", false
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		if s[i] == '`' {
			if i+1 < len(s) && s[i+1] == '`' {
				b.WriteByte('`')
				i++
				continue
			}
			return b.String(), true
		}
		b.WriteByte(s[i])
	}
	return "", false
}

// functional reports whether an index's key part list, " (`a`,(expr)) ...",
// has an expression part: a part that opens with a parenthesis.
func functional(parts string) bool {
	s := strings.TrimSpace(parts)
	if !strings.HasPrefix(s, "(") {
		return false
	}
	depth, quoted := 0, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '`':
			quoted = !quoted // a doubled `` toggles twice
		case quoted:
		case c == '(':
			depth++
			if depth == 2 && (i == 1 || s[i-1] == ',') {
				return true
			}
		case c == ')':
			depth--
			if depth == 0 {
				return false
			}
		}
	}
	return false
}

// PrimaryKeyColumns returns the columns of the PRIMARY KEY line of a SHOW
// CREATE TABLE text, and for each whether the key holds only a prefix of it
// (`c`(10)); none when the table has no primary key.
func PrimaryKeyColumns(createTable string) (cols []string, prefixed []bool) {
	for _, line := range strings.Split(createTable, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "PRIMARY KEY (")
		if !ok {
			continue
		}
		for {
			name, ok := backquoted(rest)
			if !ok {
				return cols, prefixed
			}
			rest = rest[len(dbconn.QuoteIdent(name)):]
			cols = append(cols, name)
			prefixed = append(prefixed, strings.HasPrefix(rest, "("))
			if strings.HasPrefix(rest, "(") {
				_, rest, _ = strings.Cut(rest, ")")
			}
			rest = strings.TrimPrefix(strings.TrimPrefix(rest, " DESC"), " ASC")
			if !strings.HasPrefix(rest, ",") {
				return cols, prefixed
			}
			rest = rest[1:]
		}
	}
	return nil, nil
}
