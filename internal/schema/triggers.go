package schema

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/sluicedb/sluice/internal/dbconn"
)

// Trigger is one trigger of a table, as the server keeps it.
type Trigger struct {
	Name          string
	Timing, Event string // BEFORE|AFTER, INSERT|UPDATE|DELETE
	Order         int    // ACTION_ORDER: its place among those of its timing and event
	Definer       string // user@host, as information_schema shows it
	SQLMode       string
	CharsetClient string // character_set_client when it was created: Body's encoding
	CollationConn string // collation_connection when it was created
	DBCollation   string // the database's default collation when it was created
	DefinerClause []byte // the definer as the server quotes it: `user`@`host`
	Body          []byte // the body's bytes as they were sent, in CharsetClient
}

// LoadTriggers lists the triggers of database.table in the order they fire
// (by event, timing, then ACTION_ORDER), bodies not read (see ReadBodies).
// information_schema lists them only to an account with TRIGGER on the table.
func LoadTriggers(ctx context.Context, db *sql.DB, database, table string) ([]Trigger, error) {
	rows, err := db.QueryContext(ctx, `SELECT TRIGGER_NAME, ACTION_TIMING, EVENT_MANIPULATION, ACTION_ORDER, DEFINER,
			SQL_MODE, CHARACTER_SET_CLIENT, COLLATION_CONNECTION, DATABASE_COLLATION
		FROM information_schema.TRIGGERS WHERE EVENT_OBJECT_SCHEMA = ? AND EVENT_OBJECT_TABLE = ?
		ORDER BY EVENT_MANIPULATION, ACTION_TIMING, ACTION_ORDER`, database, table)
	if err != nil {
		return nil, fmt.Errorf("read triggers of %s.%s: %w", database, table, err)
	}
	defer rows.Close()
	var out []Trigger
	for rows.Next() {
		var t Trigger
		if err := rows.Scan(&t.Name, &t.Timing, &t.Event, &t.Order, &t.Definer, &t.SQLMode, &t.CharsetClient, &t.CollationConn, &t.DBCollation); err != nil {
			return nil, fmt.Errorf("read triggers of %s.%s: %w", database, table, err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read triggers of %s.%s: %w", database, table, err)
	}
	return out, nil
}

// TriggerNames are the names of ts.
func TriggerNames(ts []Trigger) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Name
	}
	return out
}

// ReadBodies reads each trigger's definition with SHOW CREATE TRIGGER on
// conn, the bytes exactly as they were sent (character_set_results = binary:
// information_schema converts the body to utf8mb3 and loses what that cannot
// hold), and splits it into definer and body (SplitTriggerDefinition).
// conn's character_set_results is restored after.
func ReadBodies(ctx context.Context, conn *sql.Conn, database, table string, ts []Trigger) (err error) {
	var results sql.NullString
	if err := conn.QueryRowContext(ctx, "SELECT @@SESSION.character_set_results").Scan(&results); err != nil {
		return err
	}
	if _, err := conn.ExecContext(ctx, "SET SESSION character_set_results = binary"); err != nil {
		return err
	}
	defer func() {
		restore := "SET SESSION character_set_results = NULL"
		if results.Valid {
			restore = "SET SESSION character_set_results = " + results.String
		}
		if _, rerr := conn.ExecContext(context.WithoutCancel(ctx), restore); rerr != nil && err == nil {
			err = rerr
		}
	}()
	for i := range ts {
		t := &ts[i]
		rows, err := conn.QueryContext(ctx, "SHOW CREATE TRIGGER "+dbconn.QuoteIdent(database)+"."+dbconn.QuoteIdent(t.Name))
		if err != nil {
			return fmt.Errorf("read trigger %s: %w", t.Name, err)
		}
		cols, _ := rows.Columns()
		var stmt []byte
		if rows.Next() {
			vals := make([]sql.RawBytes, len(cols))
			ptrs := make([]any, len(cols))
			for j := range vals {
				ptrs[j] = &vals[j]
			}
			if err := rows.Scan(ptrs...); err == nil {
				for j, c := range cols {
					if c == "SQL Original Statement" {
						stmt = bytes.Clone(vals[j])
					}
				}
			}
		}
		rows.Close()
		if stmt == nil {
			return fmt.Errorf("read trigger %s: SHOW CREATE TRIGGER returned no statement (was it dropped?)", t.Name)
		}
		if t.DefinerClause, t.Body, err = SplitTriggerDefinition(stmt, *t, table); err != nil {
			return err
		}
	}
	return nil
}

// SplitTriggerDefinition splits the statement SHOW CREATE TRIGGER shows for
// t on table into the definer, as the server quotes it, and the body. MySQL
// writes the statement's head itself:
//
//	CREATE DEFINER=`u`@`h` TRIGGER `name` BEFORE INSERT ON `table` FOR EACH ROW body
//
// MariaDB writes CREATE DEFINER=`u`@`h` and then the user's text from TRIGGER
// on, as it was typed (qualified names, any case, comments), without its
// FOLLOWS or PRECEDES. The head is read token by token, each checked against
// what information_schema says of the trigger; anything else is an error
// rather than a guess.
func SplitTriggerDefinition(stmt []byte, t Trigger, table string) (definer, body []byte, err error) {
	sc := &headScanner{b: stmt, ansi: strings.Contains(t.SQLMode, "ANSI_QUOTES")}
	fail := func(what string) error {
		return fmt.Errorf("trigger %s: its definition does not read as sluice expects (%s): %.120q", t.Name, what, stmt)
	}
	if !sc.word("CREATE") {
		return nil, nil, fail("CREATE")
	}
	if sc.word("OR") && !sc.word("REPLACE") {
		return nil, nil, fail("OR REPLACE")
	}
	if !sc.word("DEFINER") || !sc.punct('=') {
		return nil, nil, fail("DEFINER=")
	}
	sc.space()
	from := sc.pos
	if _, ok := sc.ident(); !ok || !sc.punct('@') {
		return nil, nil, fail("the definer")
	}
	if _, ok := sc.ident(); !ok {
		return nil, nil, fail("the definer's host")
	}
	definer = bytes.TrimSpace(stmt[from:sc.pos])
	if unquoteAccount(string(definer)) != t.Definer {
		return nil, nil, fail("definer " + t.Definer)
	}
	if !sc.word("TRIGGER") {
		return nil, nil, fail("TRIGGER")
	}
	if sc.word("IF") && !(sc.word("NOT") && sc.word("EXISTS")) {
		return nil, nil, fail("IF NOT EXISTS")
	}
	if name, ok := sc.qualified(); !ok || !strings.EqualFold(name, t.Name) {
		return nil, nil, fail("the name " + t.Name)
	}
	if !sc.word(t.Timing) || !sc.word(t.Event) || !sc.word("ON") {
		return nil, nil, fail(t.Timing + " " + t.Event + " ON")
	}
	if name, ok := sc.qualified(); !ok || !strings.EqualFold(name, table) {
		return nil, nil, fail("the table " + table)
	}
	if !sc.word("FOR") || !sc.word("EACH") || !sc.word("ROW") {
		return nil, nil, fail("FOR EACH ROW")
	}
	if sc.word("FOLLOWS") || sc.word("PRECEDES") {
		if _, ok := sc.ident(); !ok {
			return nil, nil, fail("FOLLOWS or PRECEDES")
		}
	}
	sc.space()
	body = stmt[sc.pos:]
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, nil, fail("a body")
	}
	return bytes.Clone(definer), bytes.Clone(body), nil
}

// headScanner reads the head of a CREATE TRIGGER statement.
type headScanner struct {
	b    []byte
	pos  int
	ansi bool // ANSI_QUOTES: "x" is an identifier
}

// space skips blanks and comments.
func (s *headScanner) space() {
	for s.pos < len(s.b) {
		rest := s.b[s.pos:]
		switch {
		case rest[0] == ' ' || rest[0] == '\t' || rest[0] == '\n' || rest[0] == '\r' || rest[0] == '\f':
			s.pos++
		case bytes.HasPrefix(rest, []byte("/*")) && !bytes.HasPrefix(rest, []byte("/*!")) && !bytes.HasPrefix(rest, []byte("/*M!")):
			end := bytes.Index(rest[2:], []byte("*/"))
			if end < 0 {
				return
			}
			s.pos += end + 4
		case rest[0] == '#' || bytes.HasPrefix(rest, []byte("-- ")) || bytes.HasPrefix(rest, []byte("--\t")) || bytes.HasPrefix(rest, []byte("--\n")):
			end := bytes.IndexByte(rest, '\n')
			if end < 0 {
				s.pos = len(s.b)
				return
			}
			s.pos += end + 1
		default:
			return
		}
	}
}

func identByte(c byte) bool {
	return c == '_' || c == '$' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

// word reads the keyword w (any case), not followed by an identifier byte.
func (s *headScanner) word(w string) bool {
	s.space()
	end := s.pos + len(w)
	if end > len(s.b) || !strings.EqualFold(string(s.b[s.pos:end]), w) || end < len(s.b) && identByte(s.b[end]) {
		return false
	}
	s.pos = end
	return true
}

func (s *headScanner) punct(c byte) bool {
	s.space()
	if s.pos < len(s.b) && s.b[s.pos] == c {
		s.pos++
		return true
	}
	return false
}

// ident reads an identifier, quoted (`x`, or "x" under ANSI_QUOTES, the
// quote doubled inside) or not, and returns its name.
func (s *headScanner) ident() (string, bool) {
	s.space()
	if s.pos >= len(s.b) {
		return "", false
	}
	if q := s.b[s.pos]; q == '`' || q == '"' && s.ansi || q == '\'' {
		var name []byte
		for i := s.pos + 1; i < len(s.b); i++ {
			switch {
			case s.b[i] == q && i+1 < len(s.b) && s.b[i+1] == q:
				name = append(name, q)
				i++
			case s.b[i] == q:
				s.pos = i + 1
				return string(name), true
			default:
				name = append(name, s.b[i])
			}
		}
		return "", false
	}
	start := s.pos
	for s.pos < len(s.b) && identByte(s.b[s.pos]) {
		s.pos++
	}
	return string(s.b[start:s.pos]), s.pos > start
}

// qualified reads [schema.]name and returns name.
func (s *headScanner) qualified() (string, bool) {
	name, ok := s.ident()
	if ok && s.pos < len(s.b) && s.b[s.pos] == '.' {
		s.pos++
		name, ok = s.ident()
	}
	return name, ok
}

// unquoteAccount turns `u`@`h` into u@h.
func unquoteAccount(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '`' && i+1 < len(s) && s[i+1] == '`':
			b.WriteByte('`')
			i++
		case s[i] == '`':
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// CreateTriggerSQL is the statement that creates t, named name, on table
// (quoted): the bytes of its definer and body as SplitTriggerDefinition
// took them, to be sent with character_set_client = t.CharsetClient.
func CreateTriggerSQL(t Trigger, name, table string) string {
	return "CREATE DEFINER=" + string(t.DefinerClause) + " TRIGGER " + dbconn.QuoteIdent(name) + " " + t.Timing + " " + t.Event +
		" ON " + table + " FOR EACH ROW " + string(t.Body)
}

// HeadWritable reports whether the head of t's copy, named name, on
// database.table, can be sent in t's client character set: the body is in
// that character set, the names sluice writes in the head in UTF-8 (and
// MySQL's SHOW CREATE TRIGGER gives the whole head in UTF-8), so both agree
// only where the head is ASCII or the character set is UTF-8.
func HeadWritable(t Trigger, name, database, table string) bool {
	if strings.HasPrefix(strings.ToLower(t.CharsetClient), "utf8") {
		return true
	}
	for _, s := range []string{t.Definer, t.Name, name, database, table} {
		for i := 0; i < len(s); i++ {
			if s[i] >= 0x80 {
				return false
			}
		}
	}
	return true
}
