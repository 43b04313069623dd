package migration

import (
	"context"
	"strings"

	"github.com/sluicedb/sluice/internal/dbconn"
)

// checkFills refuses, before a row is copied, an ALTER whose copy could only
// fail once rows are copied: an added NOT NULL column without a DEFAULT and
// without an implicit value (a spatial one), or whose implicit value is a
// zero DATE or DATETIME the server's sql_mode refuses, both of which the server's own
// ALTER refuses too; then it copies the first rows into the fresh shadow in
// a transaction it rolls back, so that a value the new table refuses (a
// CHECK constraint, a conversion strict mode rejects) stops the run here, in
// one line, rather than in the middle of the copy.
func (r *Runner) checkFills(ctx context.Context) error {
	if len(r.mapping.Unfilled) > 0 {
		c := r.mapping.Unfilled[0]
		why := "the server's own ALTER refuses it too"
		if c.DataType == "vector" {
			why = "the server's own ALTER gives them an empty vector, which no write can store"
		}
		return preflightErr("column %s (%s) is added NOT NULL without a DEFAULT, and its type has no value sluice can give the rows the table holds (%s): add it NULL, or give it a DEFAULT",
			c.Name, c.ColumnType, why)
	}
	for _, f := range r.mapping.Fills {
		// A TIMESTAMP takes its zero even under strict NO_ZERO_DATE in the
		// server's own ALTER (MySQL 9.7, MariaDB 10.11 and 11.8), which
		// refuses a DATE's or a DATETIME's; sluice's sessions write it.
		if !f.ZeroDate() || f.To.DataType == "timestamp" {
			continue
		}
		if mode := r.vars.SQLMode; strings.Contains(mode, "NO_ZERO_DATE") && strings.Contains(mode, "STRICT_") {
			return preflightErr("column %s (%s) is added NOT NULL without a DEFAULT: the rows the table holds would get a zero date, which the server's sql_mode (%s) refuses in writes; give it a DEFAULT, or add it NULL",
				f.To.Name, f.To.ColumnType, mode)
		}
		break
	}
	if r.resume != nil {
		return nil // the shadow holds the earlier run's rows
	}
	return r.trialCopy(ctx)
}

// trialCopy copies the original's first rows into the empty shadow in a
// transaction it rolls back.
func (r *Runner) trialCopy(ctx context.Context) error {
	tx, err := r.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, r.mapping.CopySQL()+"1 LIMIT 20"); err != nil {
		if ctx.Err() != nil {
			return err // cancelled, not refused
		}
		if dbconn.ErrorNumber(err) == dbconn.ErrDupEntry {
			return nil // rows that collide under a new key: the run's own checks say so, in their words
		}
		return preflightErr("copying the first rows of %s into the new table fails, so no row is copied (nothing changed): %v; check the ALTER with sluice plan", r.orig.Name, err)
	}
	return tx.Rollback()
}
