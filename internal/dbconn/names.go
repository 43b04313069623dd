package dbconn

import "unicode"

// SameName reports whether two identifiers (columns, indexes, constraints,
// and tables and databases under lower_case_table_names) name the same
// thing to the server. The server compares such names by the lower case of
// each character. Unicode case folding (strings.EqualFold) also joins s and
// ſ, σ and ς, µ and μ, which the server keeps apart as two columns, so it
// must not be used for names. Letters are compared without case only in the
// scripts whose lower case the server and Go have read alike since Unicode
// 1.1 (Latin, Greek and Cyrillic capitals); any other character must be the
// same. A pair the server takes for one name and SameName does not makes
// sluice miss a name and refuse; the other way round, it would take one
// column's values for another's.
func SameName(a, b string) bool {
	if a == b {
		return true
	}
	ra, rb := []rune(a), []rune(b)
	if len(ra) != len(rb) {
		return false
	}
	for i := range ra {
		if ra[i] != rb[i] && nameLower(ra[i]) != nameLower(rb[i]) {
			return false
		}
	}
	return true
}

// nameLower is the lower case of r where the server surely reads it alike,
// else r. A character beyond the Basic Multilingual Plane, which an
// identifier (utf8mb3) cannot hold, is ? as MySQL stores it (a column
// named with an emoji is named ?; MariaDB refuses such names).
func nameLower(r rune) rune {
	switch {
	case r > 0xFFFF:
		return '?'
	case r >= 'A' && r <= 'Z':
		return r + ('a' - 'A')
	case r >= 0xC0 && r <= 0xDE && r != 0xD7, // Latin-1 capitals
		r >= 0x100 && r <= 0x17F && r != 0x17F, // Latin Extended-A, not the long s
		r >= 0x386 && r <= 0x3AB,               // Greek capitals
		r >= 0x400 && r <= 0x42F:               // Cyrillic capitals
		return unicode.ToLower(r)
	}
	return r
}

// NameKey is a map key under which names that SameName joins meet.
func NameKey(name string) string {
	r := []rune(name)
	for i := range r {
		r[i] = nameLower(r[i])
	}
	return string(r)
}
