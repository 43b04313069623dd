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
// t on table into the definer, as the server quotes it, and the body. The
// server writes the statement's head itself:
//
//	CREATE DEFINER=`u`@`h` TRIGGER `name` BEFORE INSERT ON `table` FOR EACH ROW body
//
// A head of any other shape is an error rather than a guess.
func SplitTriggerDefinition(stmt []byte, t Trigger, table string) (definer, body []byte, err error) {
	const lead = "CREATE DEFINER="
	mid := " TRIGGER " + dbconn.QuoteIdent(t.Name) + " " + t.Timing + " " + t.Event + " ON " + dbconn.QuoteIdent(table) + " FOR EACH ROW "
	i := bytes.Index(stmt, []byte(mid))
	if !bytes.HasPrefix(stmt, []byte(lead)) || i < 0 {
		return nil, nil, fmt.Errorf("trigger %s: its definition does not begin as sluice expects (%q): %.120q", t.Name, lead+"..."+mid, stmt)
	}
	definer, body = stmt[len(lead):i], stmt[i+len(mid):]
	if unquoteAccount(string(definer)) != t.Definer || len(bytes.TrimSpace(body)) == 0 {
		return nil, nil, fmt.Errorf("trigger %s: its definition names definer %s, information_schema %s", t.Name, definer, t.Definer)
	}
	return bytes.Clone(definer), bytes.Clone(body), nil
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
