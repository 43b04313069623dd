package migration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/schema"
)

// A postponed cut-over waits on a small table beside the original,
// _T_cutover: while it exists, sluice keeps applying the application's changes
// to the shadow and does not swap. Dropping it (TriggerCutover, or DROP TABLE
// by hand) lets the cut-over go ahead; a row saying "cancel" in it
// (CancelCutover) ends the migration with the original untouched. A table is
// the control because the operator may be on another host than sluice: every
// client that can reach the database can drop it.

// ErrCancelled means the operator cancelled a postponed cut-over.
var ErrCancelled = errors.New("the operator cancelled the cut-over; the original table is unchanged")

// errNoPostponed means no migration of the table waits for a cut-over.
var errNoPostponed = errors.New("no migration of this table is waiting for a cut-over")

// createPostpone creates the control table of a postponed cut-over.
func (r *Runner) createPostpone(ctx context.Context) error {
	comment := postponeComment(r.orig.Name)
	q := fmt.Sprintf("CREATE TABLE %s (action VARCHAR(16) NOT NULL, at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)) COMMENT=%s",
		dbconn.QuoteTable(r.cfg.Database, r.names.Postpone), dbconn.QuoteString(comment))
	err := r.execToEnd(ctx, q)
	if dbconn.ErrorNumber(err) == dbconn.ErrTableExists {
		// One an earlier run left (stopped before it knew it had made it,
		// or killed): this run holds the table's run lock, so no other
		// waits on it. A table of that name that is not sluice's is left.
		if r.leftPostpone(ctx) {
			r.log.Info("dropping the postponed cut-over's table an earlier run left", "table", r.names.Postpone)
			if err = r.dropGuarded(ctx, r.names.Postpone); err == nil {
				err = r.execToEnd(ctx, q)
			}
		}
	}
	if err != nil {
		return fmt.Errorf("create the postponed cut-over's table %s: %w", r.names.Postpone, err)
	}
	r.postponeCreated = true
	r.log.Info("cut-over postponed: after the checksum sluice keeps the new table in sync until told to swap",
		"cut_over", fmt.Sprintf("sluice cutover --database %s --table %s (or DROP TABLE %s)", r.cfg.Database, r.orig.Name,
			dbconn.QuoteTable(r.cfg.Database, r.names.Postpone)),
		"cancel", fmt.Sprintf("sluice cutover --cancel --database %s --table %s", r.cfg.Database, r.orig.Name))
	return nil
}

// postponeComment marks the postponed cut-over's table of table as sluice's.
func postponeComment(table string) string {
	return fmt.Sprintf("sluice waits to cut over %s while this table exists: drop it to cut over", table)
}

// leftPostpone reports whether the postponed cut-over's table exists and is
// sluice's (its comment): one an earlier run left, since this run holds the
// table's run lock.
func (r *Runner) leftPostpone(ctx context.Context) bool {
	var have string
	err := r.db.QueryRowContext(ctx, "SELECT TABLE_COMMENT FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?",
		r.cfg.Database, r.names.Postpone).Scan(&have)
	return err == nil && have == postponeComment(r.orig.Name)
}

// waitForCutover keeps the shadow in sync (the apply workers go on) until
// the control table is dropped or a cancel is written to it.
func (r *Runner) waitForCutover(ctx context.Context) error {
	if !r.postponeCreated {
		// Postponed by the operator during the run (operator.go).
		if err := r.createPostpone(ctx); err != nil {
			return err
		}
	}
	start := time.Now()
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	logged, verified := time.Now(), time.Now()
	for {
		state, err := postponeState(ctx, r.db, r.cfg.Database, r.names.Postpone)
		switch {
		case err != nil:
			return err
		case state == stateGo || r.released():
			r.log.Info("cut-over triggered", "waited", time.Since(start).Round(time.Second))
			return nil
		case state == stateCancel:
			return ErrCancelled
		}
		if time.Since(verified) >= 5*time.Second {
			// Keep the final guard's list short (verify.go).
			verified = time.Now()
			if err := r.verifyChanged(ctx); err != nil {
				return err
			}
		}
		if time.Since(logged) >= time.Minute {
			logged = time.Now()
			r.log.Info("waiting for the operator to trigger the cut-over; changes are applied meanwhile",
				"waited", time.Since(start).Round(time.Second), "backlog", r.sched.Backlog(), "applied", r.applier.Applied())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

type postponed int

const (
	stateWait postponed = iota
	stateGo
	stateCancel
)

// postponeState reads the control table: gone means go, a cancel row means
// cancel.
func postponeState(ctx context.Context, db *sql.DB, database, name string) (postponed, error) {
	var n int
	err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+dbconn.QuoteTable(database, name)+" WHERE action = 'cancel'").Scan(&n)
	switch {
	case dbconn.ErrorNumber(err) == dbconn.ErrNoSuchTable:
		return stateGo, nil
	case err != nil:
		return stateWait, fmt.Errorf("read the postponed cut-over's table %s: %w", name, err)
	case n > 0:
		return stateCancel, nil
	}
	return stateWait, nil
}

// TriggerCutover lets a postponed cut-over of database.table go ahead: it
// drops the control table the waiting migration watches.
func TriggerCutover(ctx context.Context, db *sql.DB, database, table string) error {
	name := schema.NamesFor(table).Postpone
	if _, err := db.ExecContext(ctx, "DROP TABLE "+dbconn.QuoteTable(database, name)); err != nil {
		if dbconn.ErrorNumber(err) == dbconn.ErrUnknownTable {
			return fmt.Errorf("%w (%s.%s does not exist): start one with sluice migrate --postpone-cutover", errNoPostponed, database, name)
		}
		return err
	}
	return nil
}

// CancelCutover tells a postponed migration of database.table to stop
// without swapping; it drops its shadow table and leaves the original as it
// was.
func CancelCutover(ctx context.Context, db *sql.DB, database, table string) error {
	name := schema.NamesFor(table).Postpone
	if _, err := db.ExecContext(ctx, "INSERT INTO "+dbconn.QuoteTable(database, name)+" (action) VALUES ('cancel')"); err != nil {
		if dbconn.ErrorNumber(err) == dbconn.ErrNoSuchTable {
			return fmt.Errorf("%w (%s.%s does not exist)", errNoPostponed, database, name)
		}
		return err
	}
	return nil
}
