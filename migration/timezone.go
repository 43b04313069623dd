package migration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/schema"
)

// ZoneIsUTC reports whether a server's time_zone (with system, its
// system_time_zone, for "SYSTEM") is UTC.
func ZoneIsUTC(zone, system string) bool {
	utc := func(z string) bool {
		return slices.Contains([]string{"+00:00", "-00:00", "UTC", "ETC/UTC", "GMT", "ETC/GMT", "Z", "UCT"}, strings.ToUpper(z))
	}
	if strings.EqualFold(zone, "SYSTEM") {
		return utc(system)
	}
	return utc(zone)
}

// SessionZone returns the time zone sluice's sessions use: the server's own
// (what the session of a native ALTER would use, so that a DATETIME <->
// TIMESTAMP conversion or a CURRENT_TIMESTAMP default gets the values the
// server itself would give), except that a table whose primary key holds a
// TIMESTAMP column is read in UTC, where every key value names one instant
// (in a zone with daylight saving time one hour of local times names two).
// "" means UTC. It is pure.
func SessionZone(serverZone, systemZone string, key []schema.Column) string {
	if ZoneIsUTC(serverZone, systemZone) {
		return ""
	}
	for _, c := range key {
		if c.DataType == "timestamp" {
			return ""
		}
	}
	return serverZone
}

// ZoneDependent names the new table's columns whose copied value depends on
// the session's time zone: a TIMESTAMP converted to or from another type, an
// added column whose default is the current time in the session's zone (a
// DATETIME, a DATE of CURDATE()...; not a TIMESTAMP, an instant), and an
// added column's DEFAULT expression or a generated column's expression that
// reads a TIMESTAMP column or converts from Unix time (computed again at each insert; in an index, when the index is
// built). It is pure.
func ZoneDependent(m *schema.Mapping) []string {
	var out []string
	paired := map[string]bool{}
	for _, p := range m.Pairs {
		paired[p.To.Name] = true
		if (p.From.DataType == "timestamp") != (p.To.DataType == "timestamp") {
			out = append(out, p.To.Name)
		}
	}
	for _, c := range m.Target.Columns {
		if !paired[c.Name] && !c.Generated && c.DataType != "timestamp" && c.DefaultNow ||
			!paired[c.Name] && !c.Generated && c.DefaultExpr != "" && readsZone(c.DefaultExpr, m.Target) ||
			c.Generated && readsZone(c.Expression, m.Target) {
			out = append(out, c.Name)
		}
	}
	return out
}

// readsZone reports whether a generated column's expression may give
// another value in another time zone: it names a TIMESTAMP column of t (as a
// word, any case, quoted or not), or a function converting Unix time, or
// holds a character beyond ASCII (a name the server may take for a
// TIMESTAMP column's). It errs towards true.
func readsZone(expr string, t *schema.Table) bool {
	e := strings.ToLower(expr)
	if strings.Contains(e, "unixtime") || strings.Contains(e, "unix_timestamp") || strings.Contains(e, "convert_tz") {
		return true
	}
	if !slices.ContainsFunc(t.Columns, func(c schema.Column) bool { return c.DataType == "timestamp" }) {
		return false
	}
	for _, r := range expr {
		if r >= utf8.RuneSelf {
			return true
		}
	}
	for _, c := range t.Columns {
		if c.DataType == "timestamp" && containsWord(e, strings.ToLower(c.Name)) {
			return true
		}
	}
	return false
}

// containsWord reports whether w occurs in s with no identifier character
// on either side.
func containsWord(s, w string) bool {
	ident := func(r rune) bool { return r == '_' || r == '$' || unicode.IsLetter(r) || unicode.IsDigit(r) }
	for i := 0; ; {
		j := strings.Index(s[i:], w)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(w)
		before, _ := utf8.DecodeLastRuneInString(s[:start])
		after, _ := utf8.DecodeRuneInString(s[end:])
		if (start == 0 || !ident(before)) && (end == len(s) || !ident(after)) {
			return true
		}
		i = start + 1
	}
}

// checkZone refuses a copy whose converted values depend on the time zone
// when sluice must run in UTC (a TIMESTAMP key) on a server that does not.
func (r *Runner) checkZone() error {
	if r.cfg.Conn.TimeZone != "" || ZoneIsUTC(r.vars.TimeZone, r.vars.SystemZone) {
		return nil
	}
	if cols := ZoneDependent(r.mapping); len(cols) > 0 {
		return preflightErr("the ALTER converts %s between time zones, the server's is %s, and the primary key has a TIMESTAMP column, which sluice reads in UTC; run the conversion in a separate migration of a table keyed otherwise, or set the server's time_zone to UTC",
			strings.Join(cols, ", "), r.vars.TimeZone)
	}
	return nil
}

// useServerZone reopens the pool in the server's time zone when SessionZone
// says so (see SessionZone).
func (r *Runner) useServerZone(ctx context.Context, pk []schema.Column) error {
	zone := SessionZone(r.vars.TimeZone, r.vars.SystemZone, pk)
	if zone == "" {
		return nil
	}
	r.cfg.Conn.TimeZone = zone
	db, err := dbconn.Open(ctx, r.cfg.Conn, r.cfg.Database, r.poolSize())
	if err != nil {
		return fmt.Errorf("%w: %w", ErrPreflight, err)
	}
	r.db.Close()
	r.db = db
	r.log.Info("sessions use the server's time zone", "time_zone", zone)
	return nil
}
