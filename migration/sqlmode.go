package migration

import (
	"regexp"
	"strings"
)

// sqlModeSafe are the sql_mode flags under which the ALTER means, and the
// copy gives, what it does in sluice's own sessions (STRICT_ALL_TABLES,
// ERROR_FOR_DIVISION_BY_ZERO, NO_ENGINE_SUBSTITUTION, NO_AUTO_VALUE_ON_ZERO):
// strictness and zero dates only make the server's own ALTER refuse more.
var sqlModeSafe = map[string]bool{
	"STRICT_TRANS_TABLES": true, "STRICT_ALL_TABLES": true, "NO_ZERO_IN_DATE": true, "NO_ZERO_DATE": true,
	"ERROR_FOR_DIVISION_BY_ZERO": true, "NO_ENGINE_SUBSTITUTION": true, "ONLY_FULL_GROUP_BY": true,
	"NO_AUTO_CREATE_USER": true, "NO_AUTO_VALUE_ON_ZERO": true, "TRADITIONAL": true, "ALLOW_INVALID_DATES": true,
	"NO_DIR_IN_CREATE": true, "NO_UNSIGNED_SUBTRACTION": true, "SIMULTANEOUS_ASSIGNMENT": true,
	"IGNORE_BAD_TABLE_OPTIONS": true,
}

// sqlModeReading are flags that change only how some text of the ALTER
// reads; each is refused only when the ALTER holds that text.
var sqlModeReading = map[string]func(string) bool{
	"ANSI_QUOTES":          regexp.MustCompile(`"`).MatchString,
	"PIPES_AS_CONCAT":      regexp.MustCompile(`\|\|`).MatchString,
	"NO_BACKSLASH_ESCAPES": regexp.MustCompile(`\\`).MatchString,
	"HIGH_NOT_PRECEDENCE":  notBeforeOtherThanNull,
	"IGNORE_SPACE":         regexp.MustCompile(`\w\s+\(`).MatchString,
	"REAL_AS_FLOAT":        regexp.MustCompile(`(?i)\bREAL\b`).MatchString,
	"EMPTY_STRING_IS_NULL": regexp.MustCompile(`''`).MatchString,
}

// SQLModeRefusal says why the server's global sql_mode (what the session of
// the server's own ALTER TABLE would run under) would make that ALTER give
// another table or other values than sluice's copy, or "": a flag that
// changes how the ALTER reads, where the ALTER holds the text it changes
// (ANSI_QUOTES and a double quote), or one that changes values (fractional
// seconds rounded or cut, an empty string read as NULL, CHAR read padded,
// the compatibility modes). It is pure.
func SQLModeRefusal(mode, clause string) string {
	for _, f := range strings.Split(strings.ToUpper(mode), ",") {
		f = strings.TrimSpace(f)
		if f == "" || sqlModeSafe[f] {
			continue
		}
		if re, ok := sqlModeReading[f]; ok {
			if !re(clause) {
				continue
			}
			return "the server's sql_mode has " + f + ", which changes how the ALTER reads, and sluice applies it in its own sql_mode: write the ALTER without what that mode reads otherwise, or run it with the server's own ALTER TABLE"
		}
		return "the server's sql_mode has " + f + ", under which the server's own ALTER TABLE gives other values or another table than sluice's copy: run the change with the server's own ALTER TABLE, or remove " + f + " from the global sql_mode for it"
	}
	return ""
}

var notWord = regexp.MustCompile(`(?i)\bNOT\s+(\w+)`)

// notBeforeOtherThanNull reports whether a NOT in clause comes before
// anything but NULL (NOT NULL reads alike under HIGH_NOT_PRECEDENCE).
func notBeforeOtherThanNull(clause string) bool {
	for _, m := range notWord.FindAllStringSubmatch(clause, -1) {
		if !strings.EqualFold(m[1], "NULL") {
			return true
		}
	}
	return false
}
