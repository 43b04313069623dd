package schema

import (
	"context"
	"database/sql"
	"fmt"
)

// Trigger is one trigger of a table, as information_schema.TRIGGERS has it.
type Trigger struct {
	Name      string `json:"name"`
	Timing    string `json:"timing"`    // BEFORE or AFTER
	Event     string `json:"event"`     // INSERT, UPDATE or DELETE
	Statement string `json:"statement"` // the body
	Definer   string `json:"definer"`   // user@host
	SQLMode   string `json:"sql_mode"`
	Collation string `json:"collation_connection"`
	Order     int    `json:"order"` // among the triggers of its timing and event
}

// LoadTriggers returns the triggers of database.table, in the order they
// fire within each timing and event.
func LoadTriggers(ctx context.Context, db *sql.DB, database, table string) ([]Trigger, error) {
	rows, err := db.QueryContext(ctx, `SELECT TRIGGER_NAME, ACTION_TIMING, EVENT_MANIPULATION, ACTION_STATEMENT, DEFINER,
		SQL_MODE, COLLATION_CONNECTION, ACTION_ORDER FROM information_schema.TRIGGERS
		WHERE EVENT_OBJECT_SCHEMA = ? AND EVENT_OBJECT_TABLE = ? ORDER BY ACTION_TIMING, EVENT_MANIPULATION, ACTION_ORDER`, database, table)
	if err != nil {
		return nil, fmt.Errorf("read the triggers of %s.%s: %w", database, table, err)
	}
	defer rows.Close()
	var out []Trigger
	for rows.Next() {
		var t Trigger
		if err := rows.Scan(&t.Name, &t.Timing, &t.Event, &t.Statement, &t.Definer, &t.SQLMode, &t.Collation, &t.Order); err != nil {
			return nil, fmt.Errorf("read the triggers of %s.%s: %w", database, table, err)
		}
		out = append(out, t)
	}
	return out, rows.Err()
}
