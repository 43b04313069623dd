package migration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/schema"
)

// Existing triggers. RENAME TABLE moves a table's triggers with it: the
// original's would end on the old table and the new one would have none. So
// the cut-over moves them, under the lock that stops every write to both
// tables, after the last change is applied to the new table (a trigger there
// any earlier would fire for sluice's own writes) and before the RENAME: each
// is dropped from the original and created on the new table, in the order
// they fire. No application write runs in between, none without its
// triggers and none through them twice. They are read under that lock, so a
// trigger dropped or changed during the migration is moved as it is then.
//
// Should a step fail, every trigger is put back on the original. Should
// sluice die in the middle, its lock goes with its connection: the checkpoint
// holds the definitions, and the next run puts them back on the original
// before anything else (repairTriggers). MySQL only: MariaDB's cut-over
// renames from a second connection (sentry.go), which would leave the
// original without its triggers while writes wait on it.

// errTriggers: the triggers could not be moved, or put back.
var errTriggers = errors.New("the original's triggers")

// checkTriggers refuses, before anything is created, a table with triggers
// on MariaDB, and remembers them for probeTriggers.
func (r *Runner) checkTriggers(ctx context.Context) error {
	trs, err := schema.LoadTriggers(ctx, r.db, r.cfg.Database, r.cfg.Table)
	if err != nil || len(trs) == 0 {
		return err
	}
	if !r.renameUnderLock() {
		return preflightErr("table %s has triggers; sluice carries them to the new table on MySQL only (on MariaDB the swap leaves a moment without them): run the ALTER natively, or drop them first", r.orig.Name)
	}
	r.triggers = trs
	r.log.Info("the table's triggers move to the new table at the swap", "triggers", len(trs))
	return nil
}

// probeTriggers proves, on the new table before anything is written to it,
// that the account can create the triggers there as their definers, as the
// cut-over will (the privileges involved are many: TRIGGER, SET_ANY_DEFINER
// for another definer, SUPER while the binlog is on unless
// log_bin_trust_function_creators): a trigger of each definer is created
// and dropped at once.
func (r *Runner) probeTriggers(ctx context.Context) error {
	if len(r.triggers) == 0 {
		return nil
	}
	conn, err := r.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	shadowQ := dbconn.QuoteTable(r.cfg.Database, r.names.Shadow)
	seen := map[string]bool{}
	for _, t := range r.triggers {
		if seen[t.Definer] {
			continue
		}
		seen[t.Definer] = true
		probe := schema.Trigger{Name: "_sluice_probe_" + r.cfg.Conn.RunID, Timing: "BEFORE", Event: "INSERT", Statement: "SET @sluice_probe = 1",
			Definer: t.Definer, SQLMode: t.SQLMode, Collation: t.Collation}
		if err := r.createTrigger(ctx, conn, probe, shadowQ, false); err != nil {
			return preflightErr("table %s has triggers, which sluice creates again on the new table at the swap, and the account cannot create one as %s there (%v): grant what the error names (TRIGGER; SET_ANY_DEFINER for another definer; SUPER, or log_bin_trust_function_creators=ON, while the binlog is on), or run the ALTER natively",
				r.orig.Name, t.Definer, err)
		}
		if _, err := conn.ExecContext(ctx, "DROP TRIGGER "+dbconn.QuoteTable(r.cfg.Database, probe.Name)); err != nil {
			return fmt.Errorf("drop the probe trigger %s: %w", probe.Name, err)
		}
	}
	return nil
}

// moveTriggers moves the original's triggers to the shadow on lock, which
// holds both tables; on failure it puts every one back on the original.
func (r *Runner) moveTriggers(ctx context.Context, lock *sql.Conn) error {
	trs, err := schema.LoadTriggers(ctx, r.db, r.cfg.Database, r.cfg.Table)
	if err != nil || len(trs) == 0 {
		return err
	}
	// The definitions first, for a run that dies in the middle.
	r.ckptMu.Lock()
	r.ckpt.Triggers = trs
	r.ckptMu.Unlock()
	if err := r.saveCheckpoint(ctx, r.ckpt); err != nil {
		return fmt.Errorf("record the triggers before moving them: %w", err)
	}
	r.trgMoving.Store(true)
	shadowQ := dbconn.QuoteTable(r.cfg.Database, r.names.Shadow)
	for _, t := range trs {
		if err := r.createTrigger(ctx, lock, t, shadowQ, true); err != nil {
			return errors.Join(fmt.Errorf("%w: moving trigger %s: %w", errTriggers, t.Name, err), r.putBackTriggers(ctx, lock, trs))
		}
	}
	r.log.Info("triggers moved to the new table", "triggers", len(trs))
	return nil
}

// createTrigger (after dropping it from wherever it is, with drop) creates t
// on table, in its own sql_mode and connection collation.
func (r *Runner) createTrigger(ctx context.Context, conn *sql.Conn, t schema.Trigger, table string, drop bool) error {
	if drop {
		if _, err := conn.ExecContext(ctx, "DROP TRIGGER IF EXISTS "+dbconn.QuoteTable(r.cfg.Database, t.Name)); err != nil {
			return err
		}
	}
	var mode, coll string
	if err := conn.QueryRowContext(ctx, "SELECT @@SESSION.sql_mode, @@SESSION.collation_connection").Scan(&mode, &coll); err != nil {
		return err
	}
	if _, err := conn.ExecContext(ctx, "SET SESSION sql_mode = ?, collation_connection = ?", t.SQLMode, t.Collation); err != nil {
		return err
	}
	_, err := conn.ExecContext(ctx, createTriggerSQL(t, table))
	if _, rerr := conn.ExecContext(ctx, "SET SESSION sql_mode = ?, collation_connection = ?", mode, coll); err == nil {
		err = rerr
	}
	return err
}

// putBackTriggers drops every one of trs wherever it is and creates them all
// again on the original, in their order.
func (r *Runner) putBackTriggers(ctx context.Context, conn *sql.Conn, trs []schema.Trigger) error {
	ctx = context.WithoutCancel(ctx)
	for _, t := range trs {
		if _, err := conn.ExecContext(ctx, "DROP TRIGGER IF EXISTS "+dbconn.QuoteTable(r.cfg.Database, t.Name)); err != nil {
			return fmt.Errorf("%w could not be put back (run sluice again to restore them): %w", errTriggers, err)
		}
	}
	for _, t := range trs {
		if err := r.createTrigger(ctx, conn, t, r.orig.Quoted(), false); err != nil {
			return fmt.Errorf("%w could not be put back (run sluice again to restore them): trigger %s: %w", errTriggers, t.Name, err)
		}
	}
	r.trgMoving.Store(false)
	r.log.Warn("triggers put back on the original", "triggers", len(trs))
	return nil
}

// repairTriggers, when a run died while moving the triggers of the
// checkpoint it takes up, puts them all back on the original.
func (r *Runner) repairTriggers(ctx context.Context) error {
	trs := r.resume.Triggers
	if len(trs) == 0 {
		return nil
	}
	now, err := schema.LoadTriggers(ctx, r.db, r.cfg.Database, r.cfg.Table)
	if err != nil {
		return err
	}
	on, err := schema.LoadTriggers(ctx, r.db, r.cfg.Database, r.names.Shadow)
	if err != nil {
		return err
	}
	names := func(ts []schema.Trigger) []string {
		out := make([]string, len(ts))
		for i, t := range ts {
			out[i] = t.Name
		}
		return out
	}
	if len(on) == 0 && slices.Equal(names(now), names(trs)) {
		return nil
	}
	conn, err := r.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	r.log.Warn("an earlier run died while moving the triggers: putting them back on the original", "triggers", len(trs))
	if err := r.putBackTriggers(ctx, conn, trs); err != nil {
		return err
	}
	// The original as preflight read it lacked them: it is read again once
	// the capture runs, and must match.
	r.triggers = trs
	if r.orig != nil {
		r.orig.Triggers = len(trs)
	}
	return nil
}

// createTriggerSQL is the statement that creates t on table (quoted).
func createTriggerSQL(t schema.Trigger, table string) string {
	return "CREATE DEFINER=" + quoteAccount(t.Definer) + " TRIGGER " + dbconn.QuoteIdent(t.Name) + " " + t.Timing + " " + t.Event +
		" ON " + table + " FOR EACH ROW " + t.Statement
}

// quoteAccount quotes user@host as 'user'@'host'.
func quoteAccount(a string) string {
	user, host := a, "%"
	if i := strings.LastIndex(a, "@"); i >= 0 {
		user, host = a[:i], a[i+1:]
	}
	q := func(s string) string {
		return "'" + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), "'", "''") + "'"
	}
	return q(user) + "@" + q(host)
}
