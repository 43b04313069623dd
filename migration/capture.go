package migration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sluicedb/sluice/internal/capture"
	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/plan"
)

// Capture by triggers (--capture=triggers), for a server whose binlog sluice
// may not read. Three triggers on the original record each changed key in a
// queue table inside the application's transaction (internal/capture); a
// poller feeds them to the same scheduler as the binlog would. What the
// binlog tells and the triggers do not is checked another way:
//
//   - a TRUNCATE fires no trigger, and an ALTER of the original by someone
//     else is no row event: every drain under a lock compares the original's
//     InnoDB id (which a TRUNCATE changes) and its definition with those the
//     triggers were made on, and stops the run if they differ;
//   - a foreign key's cascade fires no trigger: a table with foreign keys is
//     refused;
//   - a run that dies leaves the triggers, which go on filling the queue:
//     the next run of the same table drops them first (it holds the table's
//     run lock, so no live run owns them).
//
// The run does not resume: its checkpoint records no progress, so the next
// run starts over.

// triggerCapture reports whether the run captures changes by triggers.
func (r *Runner) triggerCapture() bool { return r.cfg.Capture == CaptureTriggers }

// dropLeftoverCapture drops the capture triggers and queue an earlier run of
// this table left behind (it died, or lost its connection), in either
// capture mode: such triggers would otherwise go on firing, and be taken for
// the table's own. They may be on the original or, after a swap, on the old
// table. A trigger of that name that does not write to the queue is not
// sluice's: the run stops and names it. Called in preflight with the table's
// run lock held, so that no live run owns them.
func (r *Runner) dropLeftoverCapture(ctx context.Context) error {
	table, names := capture.Names(r.orig.Name)
	rows, err := r.db.QueryContext(ctx, `SELECT TRIGGER_NAME, EVENT_OBJECT_TABLE, ACTION_STATEMENT FROM information_schema.TRIGGERS
		WHERE TRIGGER_SCHEMA = ? AND TRIGGER_NAME IN (?, ?, ?)`, r.cfg.Database, names[0], names[1], names[2])
	if err != nil {
		return fmt.Errorf("%w: %w", ErrPreflight, err)
	}
	type found struct{ name, on string }
	var left []found
	for rows.Next() {
		var f found
		var body string
		if err := rows.Scan(&f.name, &f.on, &body); err != nil {
			rows.Close()
			return fmt.Errorf("%w: %w", ErrPreflight, err)
		}
		if !strings.Contains(body, dbconn.QuoteIdent(table)) {
			rows.Close()
			return preflightErr("trigger %s of %s has the name of sluice's change capture, but does not write to %s: rename it", f.name, f.on, table)
		}
		left = append(left, f)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrPreflight, err)
	}
	queue, err := r.tableExists(ctx, table)
	if err != nil || (len(left) == 0 && !queue) {
		return err
	}
	r.log.Warn("an earlier run's change-capture triggers and queue are left; dropping them", "triggers", len(left), "queue", table)
	for _, f := range left {
		err := r.lockGuard(f.on).Run(ctx, "DROP TRIGGER "+f.name, func(ctx context.Context, conn *sql.Conn) error {
			_, err := conn.ExecContext(ctx, "DROP TRIGGER IF EXISTS "+dbconn.QuoteTable(r.cfg.Database, f.name))
			return err
		})
		if err != nil {
			return fmt.Errorf("%w: drop the change-capture trigger %s of %s: %w", ErrPreflight, f.name, f.on, err)
		}
		if sameName(f.on, r.orig.Name, r.vars) {
			r.orig.Triggers = slicesWithout(r.orig.Triggers, []string{f.name})
		}
	}
	if err := r.dropGuarded(ctx, table); err != nil {
		return fmt.Errorf("%w: drop %s: %w", ErrPreflight, table, err)
	}
	return nil
}

// captureRefusal refuses, in preflight, the tables capture by triggers does
// not handle yet: with triggers of their own, or foreign keys (whose cascades
// fire no trigger).
func (r *Runner) captureRefusal() error {
	switch {
	case !r.triggerCapture():
		return nil
	case r.resume != nil:
		return preflightErr("an earlier run of this migration read the binlog and left a checkpoint; resume it with --capture=binlog, or start over with --restart")
	}
	if why := plan.CaptureRefusal(r.orig); why != "" {
		return preflightErr("%s", why)
	}
	return nil
}

// checkTriggerCapture refuses, in preflight, what capture by triggers cannot
// see, and describes the queue (once the row key is known).
func (r *Runner) checkTriggerCapture(ctx context.Context) error {
	if !r.triggerCapture() {
		return nil
	}
	t := r.orig
	q, err := capture.New(t, r.key, t.Name)
	if err != nil {
		return preflightErr("%v; --capture=triggers cannot record this key: use the binlog", err)
	}
	if _, err := capture.Identity(ctx, r.db, r.vars.Flavor, t.Database, t.Name); err != nil {
		return preflightErr("%v; --capture=triggers compares it at the cut-over to see a TRUNCATE, which fires no trigger: use the binlog, or rename the table", err)
	}
	if exists, err := r.tableExists(ctx, q.Table); err != nil {
		return fmt.Errorf("%w: %w", ErrPreflight, err)
	} else if exists {
		return preflightErr("table %s.%s already exists; drop it if it is stale", r.cfg.Database, q.Table)
	}
	r.queue = q
	return nil
}

// startTriggerCapture makes the queue and its triggers (through the
// metadata-lock guard: CREATE TRIGGER waits for every transaction on the
// table), records what the cut-over compares, and starts the poller.
func (r *Runner) startTriggerCapture(ctx context.Context, cancel context.CancelCauseFunc) error {
	// The checkpoint says so before anything is made: a run that dies is
	// not resumed, and one that dies after its swap is known to be done.
	r.ckptMu.Lock()
	r.ckpt.Capture = CaptureTriggers
	r.ckpt.Artifacts = append(r.ckpt.Artifacts, r.queue.Table)
	err := r.saveCheckpoint(ctx, r.ckpt)
	r.ckptMu.Unlock()
	if err != nil {
		return err
	}
	stmts := r.queue.CreateSQL()
	if _, err := r.db.ExecContext(ctx, stmts[0]); err != nil {
		return fmt.Errorf("create the change queue %s: %w", r.queue.Table, err)
	}
	r.queueMade = true
	if err := r.recheckOriginal(ctx); err != nil {
		return err
	}
	for i, stmt := range stmts[1:] {
		name := r.queue.Triggers[i]
		err := r.lockGuard(r.orig.Name).Run(ctx, "CREATE TRIGGER "+name, func(ctx context.Context, conn *sql.Conn) error {
			r.captureTriggers.Store(true) // from the first attempt: one may succeed without its reply
			_, err := conn.ExecContext(ctx, stmt)
			return err
		})
		if err != nil {
			return fmt.Errorf("create the change-capture trigger %s: %w", name, err)
		}
	}
	failpoint("capture-started")
	// What the cut-over compares, read once every trigger exists: a change
	// before it would have been seen when the copy read the rows.
	if r.tableID, err = capture.Identity(ctx, r.db, r.vars.Flavor, r.orig.Database, r.orig.Name); err != nil {
		return err
	}
	if r.origDef, err = r.definitionOn(ctx, r.db); err != nil {
		return err
	}
	if err := r.recheckOriginal(ctx); err != nil {
		return err
	}
	r.poller = capture.NewPoller(r.queue, sinks{sched: r.sched, tracker: r.tracker})
	r.sched.SetClock(r.poller.Round)
	r.log.Info("changes are captured by triggers", "queue", r.queue.Table, "triggers", strings.Join(r.queue.Triggers[:], ", "))
	go r.pollQueue(ctx, cancel)
	return nil
}

// pollQueue reads the queue every 20 ms, and every second deletes the rows
// whose keys are all applied, until ctx ends; an error stops the run.
func (r *Runner) pollQueue(ctx context.Context, cancel context.CancelCauseFunc) {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := r.poller.Poll(ctx, r.db); err != nil {
			if ctx.Err() == nil && !r.settling() {
				cancel(err)
			}
			return
		}
		if time.Since(last) < time.Second {
			continue
		}
		last = time.Now()
		// The round first: every key marked before it is in the scheduler
		// when Progress looks (as for a checkpoint).
		since := r.poller.Round()
		if p := r.sched.Progress(); p.HasSince && p.Since.Compare(since) < 0 {
			since = p.Since
		}
		if _, err := r.poller.Forget(ctx, r.db, since); err != nil && ctx.Err() == nil {
			r.log.Warn("could not trim the change queue; trying again", "queue", r.queue.Table, "error", err)
		}
	}
}

// drainQueue, on a connection that sees every change committed (writes to
// the original are stopped by a lock), reads the whole queue into the
// scheduler and checks that the original is the table the triggers were made
// on, with the same definition.
func (r *Runner) drainQueue(ctx context.Context, conn *sql.Conn) error {
	if _, err := r.poller.Drain(ctx, conn); err != nil {
		return err
	}
	id, err := capture.Identity(ctx, conn, r.vars.Flavor, r.orig.Database, r.orig.Name)
	if err != nil {
		return err
	}
	def, err := r.definitionOn(ctx, conn)
	if err != nil {
		return err
	}
	switch {
	case id != r.tableID:
		return fmt.Errorf("%w: %s was truncated, or dropped and made again, during the migration (no trigger fires for that); run sluice again", errOriginalChanged, r.orig.Name)
	case def != r.origDef:
		return fmt.Errorf("%w: %s was altered during the migration; run sluice again", errOriginalChanged, r.orig.Name)
	}
	return nil
}

// errOriginalChanged: the original was truncated or altered behind the
// triggers' back; the run stops before the swap.
var errOriginalChanged = errors.New("the table changed in a way its triggers do not record")

// definitionOn hashes the original's definition as SHOW CREATE TABLE gives
// it on q (a connection holding a lock on it may be the only one that can).
func (r *Runner) definitionOn(ctx context.Context, q dbconn.Querier) (string, error) {
	rows, err := q.QueryContext(ctx, "SHOW CREATE TABLE "+r.orig.Quoted())
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var name, ddl string
	if rows.Next() {
		if err := rows.Scan(&name, &ddl); err != nil {
			return "", err
		}
	}
	if err := rows.Err(); err != nil {
		return "", err
	}
	if ddl == "" {
		return "", fmt.Errorf("SHOW CREATE TABLE %s returned nothing", r.orig.Name)
	}
	return hashDefinition(ddl, false), nil
}

// queueLock is the LOCK TABLES clause that lets the locking connection read
// the queue ("" without capture by triggers).
func (r *Runner) queueLock(mode string) string {
	if r.poller == nil {
		return ""
	}
	return ", " + dbconn.QuoteTable(r.cfg.Database, r.queue.Table) + " " + mode
}

// dropCapture drops the capture triggers, then the queue (never the queue
// first: the application's writes would fail on the missing table). After
// the swap the triggers are on the old table, which they followed.
func (r *Runner) dropCapture(ctx context.Context) error {
	if r.captureTriggers.Load() {
		if err := r.dropCaptureTriggers(ctx, r.queue.Triggers[:]); err != nil {
			return fmt.Errorf("%w (drop the triggers %s by hand, then the table %s)", err, strings.Join(r.queue.Triggers[:], ", "), r.queue.Table)
		}
		r.captureTriggers.Store(false)
	}
	if r.queueMade {
		if err := r.dropGuarded(ctx, r.queue.Table); err != nil {
			return fmt.Errorf("drop the change queue %s: %w (drop it by hand)", r.queue.Table, err)
		}
		r.queueMade = false
	}
	return nil
}

// dropCaptureTriggers drops the triggers named, each through the guard
// (DROP TRIGGER waits for every transaction on its table).
func (r *Runner) dropCaptureTriggers(ctx context.Context, names []string) error {
	on := r.orig.Name
	if r.swapped.Load() {
		on = r.names.Old
	}
	for _, n := range names {
		err := r.lockGuard(on).Run(ctx, "DROP TRIGGER "+n, func(ctx context.Context, conn *sql.Conn) error {
			_, err := conn.ExecContext(ctx, "DROP TRIGGER IF EXISTS "+dbconn.QuoteTable(r.cfg.Database, n))
			return err
		})
		if err != nil {
			return fmt.Errorf("drop the change-capture trigger %s: %w", n, err)
		}
	}
	return nil
}

// queueProgress is the progress log's word on the queue.
func (r *Runner) queueProgress() []any {
	if r.poller == nil {
		return []any{"binlog_lag", r.streamer.Lag()}
	}
	return []any{"queue_read", r.poller.Held()}
}

// slicesWithout returns the names of all that are not in drop.
func slicesWithout(all, drop []string) []string {
	var out []string
	for _, a := range all {
		keep := true
		for _, d := range drop {
			keep = keep && a != d
		}
		if keep {
			out = append(out, a)
		}
	}
	return out
}
