package schema

import (
	"strings"
)

// SecondaryKeys returns the definitions of the plain (non-unique, non-fulltext,
// non-spatial) secondary indexes in a SHOW CREATE TABLE text, e.g.
// "KEY `k_1` (`k`)", and their names. These can be dropped before a bulk copy
// and added afterwards with a sorted parallel build; unique indexes stay, so
// a duplicate shows as soon as it is copied.
func SecondaryKeys(createTable string) (defs, names []string) {
	for _, line := range strings.Split(createTable, "\n") {
		l := strings.TrimSpace(line)
		if !strings.HasPrefix(l, "KEY `") {
			continue
		}
		l = strings.TrimSuffix(l, ",")
		name, ok := backquoted(l[len("KEY "):])
		if !ok {
			continue
		}
		defs = append(defs, l)
		names = append(names, name)
	}
	return defs, names
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
