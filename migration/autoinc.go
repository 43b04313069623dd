package migration

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"slices"
	"strconv"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/schema"
)

var autoIncRE = regexp.MustCompile(`(?m)^\) .*\bAUTO_INCREMENT=([0-9]+)\b`)

// AutoIncrement reads the next AUTO_INCREMENT value from a SHOW CREATE TABLE
// text (the table options after the closing parenthesis), or 0 when the text
// shows none (the counter was never moved). It is pure.
func AutoIncrement(createTable string) (uint64, error) {
	m := autoIncRE.FindStringSubmatch(createTable)
	if m == nil {
		return 0, nil
	}
	return strconv.ParseUint(m[1], 10, 64)
}

// carryAutoIncrement, on the cut-over's connection while it holds both tables
// locked, moves the shadow's AUTO_INCREMENT counter up to the original's, so
// that no id the application was already given is issued again (the copy
// only raises the shadow's counter to its largest row, and ids of deleted
// rows lie above it). SHOW CREATE TABLE reads the live counter, where
// information_schema may show a cached one. An ALTER that sets the counter
// itself (AUTO_INCREMENT = N) gave it to the shadow when it was made, and
// the copy raised it past the largest row, as the server's own ALTER does:
// nothing is carried then.
func (r *Runner) carryAutoIncrement(ctx context.Context, lock *sql.Conn) error {
	if r.alter.SetsAutoIncrement || !slices.ContainsFunc(r.shadow.Columns, func(c schema.Column) bool { return c.AutoInc }) {
		return nil
	}
	read := func(table string) (uint64, error) {
		var name, text string
		if err := lock.QueryRowContext(ctx, "SHOW CREATE TABLE "+table).Scan(&name, &text); err != nil {
			return 0, err
		}
		return AutoIncrement(text)
	}
	shadowQ := dbconn.QuoteTable(r.cfg.Database, r.names.Shadow)
	orig, err := read(r.orig.Quoted())
	if err != nil {
		return fmt.Errorf("read the AUTO_INCREMENT counter of %s: %w", r.orig.Name, err)
	}
	cur, err := read(shadowQ)
	if err != nil {
		return fmt.Errorf("read the AUTO_INCREMENT counter of %s: %w", r.names.Shadow, err)
	}
	if orig <= cur {
		return nil
	}
	if _, err := lock.ExecContext(ctx, fmt.Sprintf("ALTER TABLE %s AUTO_INCREMENT = %d", shadowQ, orig)); err != nil {
		return fmt.Errorf("carry the AUTO_INCREMENT counter (%d) to %s: %w", orig, r.names.Shadow, err)
	}
	r.res.AutoIncrement = orig
	return nil
}
