package migration

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/sluicedb/sluice/internal/capture"
	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/schema"
)

// requiredPrivileges are needed on the database (or globally), replication
// ones globally.
var (
	requiredDB     = []string{"SELECT", "INSERT", "DELETE", "CREATE", "DROP", "ALTER", "LOCK TABLES"}
	requiredGlobal = []string{"REPLICATION SLAVE", "REPLICATION CLIENT"}
	// requiredOnOriginal: information_schema lists a table's triggers only
	// to an account with TRIGGER on it, and the swap must carry them.
	requiredOnOriginal = "TRIGGER"
)

// Grants is what SHOW GRANTS gives the account, as far as sluice asks: the
// privileges on every database (ON *.*), on the migration's database (ON
// `db`.*) and on single tables of it (ON `db`.`t`, by table name).
type Grants struct {
	Global, OnDB []string
	OnTable      map[string][]string
}

// MissingPrivileges returns the required privileges the grants lack, sorted:
// replication ones are global; LOCK TABLES is granted on a database or
// globally; the others are needed on each of tables (the original and the
// tables sluice makes beside it), which grants on the database or on each
// table give. Privileges missing on some tables only are named with them:
// "CREATE, DROP on _t_new, _t_old". "ALL PRIVILEGES" grants everything.
func MissingPrivileges(g Grants, tables []string) []string {
	return missingPrivileges(g, tables, requiredGlobal)
}

// missingPrivileges is MissingPrivileges with the global privileges needed
// given: capture by triggers reads no binlog, but the server's list of
// InnoDB tables, which needs PROCESS (capture.go).
func missingPrivileges(g Grants, tables, global []string) []string {
	has := func(list []string, p string) bool {
		for _, x := range list {
			if strings.EqualFold(x, p) || strings.EqualFold(x, "ALL PRIVILEGES") || strings.EqualFold(x, "ALL") {
				return true
			}
		}
		return false
	}
	var missing []string
	for _, p := range global {
		// MariaDB 10.5+ calls REPLICATION CLIENT BINLOG MONITOR (and
		// takes the old name in a GRANT).
		if !has(g.Global, p) && !(p == "REPLICATION CLIENT" && has(g.Global, "BINLOG MONITOR")) {
			missing = append(missing, p)
		}
	}
	onSome := map[string][]string{} // the tables lacking them -> privileges
	for _, p := range requiredDB {
		if has(g.Global, p) || has(g.OnDB, p) {
			continue
		}
		if p == "LOCK TABLES" {
			missing = append(missing, p)
			continue
		}
		var lack []string
		for _, t := range tables {
			if !has(g.OnTable[t], p) {
				lack = append(lack, t)
			}
		}
		switch {
		case len(lack) == 0:
		case len(lack) == len(tables):
			missing = append(missing, p)
		default:
			k := strings.Join(lack, ", ")
			onSome[k] = append(onSome[k], p)
		}
	}
	if len(tables) > 0 && !has(g.Global, requiredOnOriginal) && !has(g.OnDB, requiredOnOriginal) && !has(g.OnTable[tables[0]], requiredOnOriginal) {
		onSome[tables[0]] = append(onSome[tables[0]], requiredOnOriginal)
	}
	for t, ps := range onSome {
		sort.Strings(ps)
		missing = append(missing, strings.Join(ps, ", ")+" on "+t)
	}
	sort.Strings(missing)
	return missing
}

// checkPrivileges reads the account's privileges from SHOW GRANTS, which
// holds those of its active roles too (MySQL lists them with the account's;
// on MariaDB the current role's are read apart), and refuses the run if one
// it needs is missing. information_schema's privilege tables would not do:
// they leave out what a role grants.
func (r *Runner) checkPrivileges(ctx context.Context) error {
	var user string
	if err := r.db.QueryRowContext(ctx, "SELECT CURRENT_USER()").Scan(&user); err != nil {
		return fmt.Errorf("%w: %w", ErrPreflight, err)
	}
	lines, err := showGrants(ctx, r.db, "SHOW GRANTS")
	if err != nil {
		return fmt.Errorf("%w: read privileges: %w", ErrPreflight, err)
	}
	if r.vars.Flavor == dbconn.MariaDB {
		var role sql.NullString
		if err := r.db.QueryRowContext(ctx, "SELECT CURRENT_ROLE()").Scan(&role); err == nil && role.Valid && role.String != "" {
			more, err := showGrants(ctx, r.db, "SHOW GRANTS FOR "+dbconn.QuoteIdent(role.String))
			if err != nil {
				return fmt.Errorf("%w: read the privileges of role %s: %w", ErrPreflight, role.String, err)
			}
			lines = append(lines, more...)
		}
	}
	fold := r.vars.LowerCaseNames != 0
	tables := r.tablesTouched()
	if fold {
		for i := range tables {
			tables[i] = strings.ToLower(tables[i])
		}
	}
	r.grants = ParseGrants(lines, r.cfg.Database, fold)
	global := requiredGlobal
	switch {
	case r.triggerCapture():
		global = []string{"PROCESS"}
	case r.vars.Flavor == dbconn.MariaDB:
		// The cut-over lists every session before its RENAME (sentry.go).
		global = append(slices.Clone(requiredGlobal), "PROCESS")
	}
	if missing := missingPrivileges(r.grants, tables, global); len(missing) > 0 {
		return preflightErr("user %s lacks %s; GRANT them (%s ON *.*, LOCK TABLES and the others ON %s.*, or the others on each of %s)",
			user, strings.Join(missing, "; "), globalWord(global), dbconn.QuoteIdent(r.cfg.Database), strings.Join(tables, ", "))
	}
	return nil
}

// MissingOn returns what the grants lack of need, which maps a table to the
// privileges needed on it, as "SELECT, REFERENCES on p", sorted. Tables are
// lower-case when names are folded.
func MissingOn(g Grants, need map[string][]string) []string {
	has := func(list []string, p string) bool {
		return slices.ContainsFunc(list, func(x string) bool {
			return strings.EqualFold(x, p) || strings.EqualFold(x, "ALL PRIVILEGES") || strings.EqualFold(x, "ALL")
		})
	}
	var missing []string
	for t, privs := range need {
		var lack []string
		for _, p := range privs {
			if !has(g.Global, p) && !has(g.OnDB, p) && !has(g.OnTable[t], p) && !slices.Contains(lack, p) {
				lack = append(lack, p)
			}
		}
		if len(lack) > 0 {
			sort.Strings(lack)
			missing = append(missing, strings.Join(lack, ", ")+" on "+t)
		}
	}
	sort.Strings(missing)
	return missing
}

// tablesTouched names the tables of the database sluice reads or makes: the
// original, the new table, the name the original takes at the swap, the
// postponed cut-over's table, the checkpoint, the replica heartbeat and, on
// MariaDB, the cut-over's sentry. (A kept old table of an earlier run moves
// the swap to a time-stamped name, which only a grant on the database
// covers.)
func (r *Runner) tablesTouched() []string {
	n := schema.NamesFor(r.cfg.Table)
	ts := []string{r.cfg.Table, n.Shadow, n.Old, n.Postpone, n.Checkpoint, n.Heartbeat}
	if r.triggerCapture() {
		queue, _ := capture.Names(r.cfg.Table)
		ts = append(ts, queue)
	}
	if r.vars.Flavor == dbconn.MariaDB {
		ts = append(ts, sentryName(r.cfg.Table))
	}
	return ts
}

func showGrants(ctx context.Context, db *sql.DB, q string) ([]string, error) {
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return nil, err
		}
		out = append(out, line)
	}
	return out, rows.Err()
}

// ParseGrants reads SHOW GRANTS lines into the privileges granted on every
// database (ON *.*), on database (ON `db`.*, the name a LIKE pattern as the
// server reads it) and on its tables (ON `db`.`t`); a privilege on some
// columns only is left out; fold: names compared without case, tables
// keyed in lower case. Grants of roles (no ON) and on routines are left
// out, and a partial revoke on the database (REVOKE ... ON `db`.*, with
// partial_revokes) takes its privileges out of the global and database
// lists.
func ParseGrants(lines []string, database string, fold bool) Grants {
	if fold {
		database = strings.ToLower(database)
	}
	var global, onDB, revoked []string
	onTable := map[string][]string{}
	for _, line := range lines {
		verb, rest, ok := strings.Cut(line, " ")
		if !ok || (verb != "GRANT" && verb != "REVOKE") {
			continue
		}
		privs, after, ok := cutOutsideQuotes(rest, " ON ")
		if !ok {
			continue // GRANT role TO user
		}
		sep := " TO "
		if verb == "REVOKE" {
			sep = " FROM "
		}
		level, _, ok := cutOutsideQuotes(after, sep)
		if !ok {
			continue
		}
		list := splitPrivileges(privs)
		db, table, ok := grantLevel(level)
		if fold {
			db = strings.ToLower(db)
		}
		switch {
		case !ok:
		case verb == "REVOKE":
			if table == "*" && db == database {
				revoked = append(revoked, list...)
			}
		case db == "*" && table == "*":
			global = append(global, list...)
		case table == "*" && likeMatch(db, database):
			onDB = append(onDB, list...)
		case table != "*" && db == database:
			if fold {
				table = strings.ToLower(table)
			}
			onTable[table] = append(onTable[table], list...)
		}
	}
	if len(revoked) > 0 {
		global, onDB = withoutPrivileges(global, revoked), withoutPrivileges(onDB, revoked)
	}
	return Grants{Global: global, OnDB: onDB, OnTable: onTable}
}

// withoutPrivileges drops from list what revoked names, ALL PRIVILEGES
// read as every privilege sluice needs.
func withoutPrivileges(list, revoked []string) []string {
	var out []string
	for _, p := range list {
		if p == "ALL PRIVILEGES" || p == "ALL" {
			out = append(out, withoutPrivileges(append(append(slices.Clone(requiredDB), requiredGlobal...), requiredOnOriginal), revoked)...)
			continue
		}
		if !slices.Contains(revoked, p) {
			out = append(out, p)
		}
	}
	return out
}

// cutOutsideQuotes is strings.Cut that skips sep inside `quoted` names.
func cutOutsideQuotes(s, sep string) (before, after string, ok bool) {
	quoted := false
	for i := 0; i < len(s); i++ {
		if s[i] == '`' {
			quoted = !quoted
			continue
		}
		if !quoted && strings.HasPrefix(s[i:], sep) {
			return s[:i], s[i+len(sep):], true
		}
	}
	return s, "", false
}

// splitPrivileges splits "SELECT, INSERT (a, b), BINLOG MONITOR" at the
// commas outside parentheses, leaving out a privilege granted on some
// columns only (it does not grant the table).
func splitPrivileges(s string) []string {
	var out []string
	depth, start, cols := 0, 0, false
	add := func(p string) {
		if p = strings.ToUpper(strings.TrimSpace(p)); p != "" && !cols {
			out = append(out, p)
		}
		cols = false
	}
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(':
			depth++
			cols = true
		case ')':
			depth--
		case ',':
			if depth == 0 {
				add(s[start:i])
				start = i + 1
			}
		}
	}
	add(s[start:])
	return out
}

// grantLevel reads "*.*", "`db`.*", "db.*" or "`db`.`t`" into its two names
// (unquoted; "*" for a wildcard). ok is false for a routine's level.
func grantLevel(level string) (db, table string, ok bool) {
	level = strings.TrimSpace(level)
	if strings.HasPrefix(level, "PROCEDURE ") || strings.HasPrefix(level, "FUNCTION ") {
		return "", "", false
	}
	var parts []string
	for level != "" {
		var name string
		if level[0] == '`' {
			i := 1
			var b strings.Builder
			for ; i < len(level); i++ {
				if level[i] == '`' {
					if i+1 < len(level) && level[i+1] == '`' {
						b.WriteByte('`')
						i++
						continue
					}
					break
				}
				b.WriteByte(level[i])
			}
			name, level = b.String(), level[min(i+1, len(level)):]
		} else {
			i := strings.IndexByte(level, '.')
			if i < 0 {
				i = len(level)
			}
			name, level = level[:i], level[i:]
		}
		parts = append(parts, name)
		level = strings.TrimPrefix(level, ".")
	}
	if len(parts) != 2 {
		return "", "", false
	}
	return parts[0], parts[1], true
}

// likeMatch matches s against a grant's database name, a LIKE pattern: _ and
// % are wildcards unless escaped with a backslash.
func likeMatch(pattern, s string) bool {
	if pattern == "" {
		return s == ""
	}
	switch c := pattern[0]; {
	case c == '\\' && len(pattern) > 1:
		return s != "" && s[0] == pattern[1] && likeMatch(pattern[2:], s[1:])
	case c == '%':
		for i := 0; i <= len(s); i++ {
			if likeMatch(pattern[1:], s[i:]) {
				return true
			}
		}
		return false
	case c == '_':
		return s != "" && likeMatch(pattern[1:], s[1:])
	default:
		return s != "" && s[0] == c && likeMatch(pattern[1:], s[1:])
	}
}

// globalWord names the global privileges in the hint of a refusal.
func globalWord(global []string) string {
	switch {
	case len(global) > 0 && global[0] == "PROCESS":
		return "PROCESS"
	case slices.Contains(global, "PROCESS"):
		return "replication ones and PROCESS"
	}
	return "replication ones"
}
