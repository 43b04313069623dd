package migration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/mdl"
	"github.com/sluicedb/sluice/internal/schema"
	"github.com/sluicedb/sluice/internal/throttle"
)

// cutover swaps the tables: under LOCK TABLES on both, it drains the last
// changes and renames original -> old and shadow -> original, then unlocks.
func (r *Runner) cutover(ctx context.Context) error {
	if err := r.compareAgainIfRebuilt(ctx); err != nil { // intact.go
		return fmt.Errorf("cut-over: %w", err)
	}
	if r.group != nil {
		// One swap for the whole group, made by its last run to get here.
		if err := r.group.arrive(ctx, r); err != nil {
			return err
		}
		return r.afterSwap(ctx)
	}
	shadowQ := dbconn.QuoteTable(r.cfg.Database, r.names.Shadow)
	spec := r.orig.Quoted() + " WRITE, " + shadowQ + " WRITE"
	for _, p := range r.relatedTables() {
		// The foreign keys added to the shadow, the children's re-pointed
		// and the RENAME take the parents' and the children's metadata
		// locks: held from the start, nothing can come between them
		// (foreignkeys.go, children.go, swapproc.go).
		spec += ", " + dbconn.QuoteTable(r.cfg.Database, p) + " WRITE"
	}
	// The triggers' queue, which the drain reads on the locking connection
	// (capture.go); MySQL locks it anyway for the triggers.
	spec += r.queueLock("WRITE")
	if !r.renameUnderLock() {
		// Writes stop, the shadow stays free for the RENAME (sentry.go).
		spec = r.orig.Quoted() + " READ, " + dbconn.QuoteTable(r.cfg.Database, sentryName(r.orig.Name)) + " WRITE"
	}
	if err := r.waitReplicas(ctx); err != nil {
		return fmt.Errorf("cut-over: %w", err)
	}
	// The panic file once more, not a tick later: one the operator made
	// while the last chunks were copied stops the run before the swap.
	if why := r.throttle.Panicked(); why != "" {
		return fmt.Errorf("cut-over: %w: %s", throttle.ErrAbort, why)
	}
	if err := r.noteOldChild(ctx); err != nil {
		return err
	}
	if r.cfg.DropOld {
		// A run that dies between the swap and the drop leaves it to the
		// next run, which finds the swap done (resume.go).
		if err := r.addArtifact(ctx, r.names.Old); err != nil {
			return err
		}
	}
	before := func(ctx context.Context) error {
		if !r.renameUnderLock() {
			if err := r.makeSentry(ctx); err != nil {
				return err
			}
		}
		if err := r.waitBacklog(ctx, 200); err != nil {
			return err
		}
		// Compare the rows changed since the checksum now, so that few are
		// left for the lock: a pass takes time, in which more change.
		for pass := 0; pass < 3 && (pass == 0 || r.tracker.Len() > verifyBatch); pass++ {
			if err := r.verifyChanged(ctx); err != nil {
				return err
			}
		}
		if err := r.prepareSwap(ctx); err != nil {
			return err
		}
		r.waitQuietParents(ctx)
		return r.pauseApply(ctx)
	}
	release := func() {
		if !r.shadowTriggers.Load() {
			r.sched.Hold(false)
		}
	}
	err := r.withTableLock(ctx, "cut-over", spec, before, release, func(ctx context.Context, lock *sql.Conn) error {
		start := time.Now()
		err := r.finishLocked(ctx, lock)
		r.res.CutoverVerify = time.Since(start) - r.res.CutoverDrain
		if err == nil {
			err = r.swap(ctx, lock)
		}
		if err == nil {
			r.res.CutoverLock = time.Since(start)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("cut-over: %w", r.afterFailedCutover(ctx, err))
	}
	return r.afterSwap(ctx)
}

// afterSwap reports the swap and drops the old table if asked to.
func (r *Runner) afterSwap(ctx context.Context) error {
	r.log.Info("tables swapped", "lock_held", r.res.CutoverLock.Round(time.Millisecond), "drain", r.res.CutoverDrain.Round(time.Millisecond),
		"verify", r.res.CutoverVerify.Round(time.Millisecond), "old_table", r.names.Old)
	r.res.OldTable = r.names.Old
	r.res.KeysApplied = r.applier.Applied()
	if r.cfg.DropOld {
		// The swap is done: finish even if the run is being cancelled. A query
		// that began before the swap still holds the old table; the guard
		// waits it out rather than queue behind it.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.LockDeadline)
		defer cancel()
		if err := r.dropGuarded(dctx, r.names.Old); err != nil {
			return fmt.Errorf("the migration is done but dropping %s failed (drop it by hand): %w", r.names.Old, err)
		}
		r.res.OldTable = ""
	}
	return nil
}

// swap renames original -> old and shadow -> original on lock, which holds
// the cut-over's locks. On MySQL, where foreign keys are involved, that is
// one CALL of the procedure prepareSwap made (swapproc.go): the original's
// keys added to the shadow, its children's re-pointed to it, the RENAME, the
// old table's keys dropped; a failure before the RENAME is done is undone.
func (r *Runner) swap(ctx context.Context, lock *sql.Conn) error {
	if r.renameUnderLock() {
		// Each statement here is quick (metadata only, every lock held),
		// and one cut short by a cancellation would go on in the server
		// without its locks: they run to their end.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
	}
	shadowQ := dbconn.QuoteTable(r.cfg.Database, r.names.Shadow)
	oldQ := dbconn.QuoteTable(r.cfg.Database, r.names.Old)
	if err := r.carryTriggers(ctx, lock); err != nil { // triggers.go
		return r.triggersOff(ctx, lock, err)
	}
	if !r.beginRename() { // operator.go
		return r.triggersOff(ctx, lock, ErrAborted)
	}
	err := beforeRename(r.cfg.Database) // a test's failed RENAME (export_test.go)
	switch {
	case err != nil:
	case r.swapPlan.proc != "":
		err = r.callSwap(ctx, lock) // swapproc.go
	case r.renameUnderLock():
		// No key was related to the table when the attempt began; one
		// added since would follow the RENAME to the old table.
		if children, cerr := schema.ChildrenOf(ctx, r.db, r.cfg.Database, r.orig.Name); cerr != nil || len(children) > 0 {
			err = cerr
			if err == nil {
				err = fmt.Errorf("foreign key %s, towards %s, was added during the migration, and the cut-over did not lock its table; run the same command again", children[0], r.orig.Name)
			}
			break
		}
		_, err = lock.ExecContext(ctx, "RENAME TABLE "+r.orig.Quoted()+" TO "+oldQ+", "+shadowQ+" TO "+r.orig.Quoted())
	default:
		err = r.renameBySentry(ctx, lock)
	}
	if err != nil && r.renamed(ctx) {
		err = nil // the rename committed; only its reply was lost, or a later step failed
	}
	if err != nil {
		// Whatever the procedure did before its failure is undone.
		r.renaming.Store(false)
		if r.swapPlan.proc != "" {
			r.childrenBack(ctx, lock)
			r.dropShadowForeignKeys(ctx, lock)
		}
		return r.triggersOff(ctx, lock, err)
	}
	r.swapped.Store(true)
	failpoint("renamed")
	r.releaseOld(ctx, lock)
	return nil
}

// failpoint marks a point of the cut-over at which the kill tests make the
// process die (export_test.go); it does nothing otherwise.
var failpoint = func(string) {}

// beforeRename stands, in tests, for a RENAME that fails (export_test.go);
// it does nothing otherwise.
var beforeRename = func(database string) error { return nil }

// finishLocked applies the last changes, checks the rows changed since the
// checksum and carries the AUTO_INCREMENT counter, while lock holds the
// cut-over's locks: on lock itself, or, where the shadow is not among them
// (MariaDB, sentry.go), on a connection of its own, whose statements the
// READ lock on the original lets through, closed before the RENAME.
func (r *Runner) finishLocked(ctx context.Context, lock *sql.Conn) error {
	work := lock
	if !r.renameUnderLock() {
		c, err := r.db.Conn(ctx)
		if err != nil {
			return err
		}
		defer c.Close()
		work = c
	}
	start := time.Now()
	err := r.drainLocked(ctx, work, time.Second)
	r.res.CutoverDrain = time.Since(start)
	if err == nil {
		err = r.verifyLocked(ctx, work)
	}
	if err == nil {
		err = r.carryAutoIncrement(ctx, work)
	}
	return err
}

// dropGuarded drops a table sluice created, through the metadata-lock guard.
func (r *Runner) dropGuarded(ctx context.Context, name string) error {
	tables := []string{name}
	if name == r.names.Shadow || name == r.names.Old {
		// It may have foreign keys, whose drop takes the related tables'
		// locks (r.related is not read yet when an earlier run's tables
		// are dropped).
		tables = r.distinct(append(append(tables, r.relatedTables()...), r.related...)...)
	}
	return r.lockGuard(tables...).Run(ctx, "DROP TABLE "+name, func(ctx context.Context, conn *sql.Conn) error {
		_, err := conn.ExecContext(ctx, "DROP TABLE IF EXISTS "+dbconn.QuoteTable(r.cfg.Database, name))
		return err
	})
}

// settling reports whether the RENAME was sent: errors of the binlog reader
// and the apply workers no longer matter then.
func (r *Runner) settling() bool { return r.renaming.Load() || r.swapped.Load() }

// renamed reports whether the swap is visible: the old name exists and the
// shadow name does not.
func (r *Runner) renamed(ctx context.Context) bool {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	var old, shadow int
	err := r.db.QueryRowContext(cctx, `SELECT COALESCE(SUM(TABLE_NAME = ?), 0), COALESCE(SUM(TABLE_NAME = ?), 0)
		FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME IN (?, ?)`,
		r.names.Old, r.names.Shadow, r.cfg.Database, r.names.Old, r.names.Shadow).Scan(&old, &shadow)
	return err == nil && old == 1 && shadow == 0
}

// withTableLock runs fn on a connection holding "LOCK TABLES spec", taken
// through the metadata-lock guard (bounded waits, pile-up watcher, blockers
// named and killed by policy, retries to the deadline); before and after run
// around every attempt. The tables are unlocked before it returns: by UNLOCK
// TABLES, or by discarding the connection.
func (r *Runner) withTableLock(ctx context.Context, what, spec string, before func(context.Context) error, after func(),
	fn func(ctx context.Context, lock *sql.Conn) error) error {
	return r.withLocks(ctx, what, append([]string{r.orig.Name, r.names.Shadow}, r.related...), spec, before, after, fn)
}

// withLocks is withTableLock with the guard watching tables (a group's
// cut-over locks the tables of every run: group.go).
func (r *Runner) withLocks(ctx context.Context, what string, tables []string, spec string, before func(context.Context) error, after func(),
	fn func(ctx context.Context, lock *sql.Conn) error) error {
	for {
		// A pause stops the attempts; they start again, with a fresh
		// deadline, once the operator resumes (operator.go).
		if err := r.waitResumed(ctx, ""); err != nil {
			return err
		}
		err := r.lockAttemptsOf(ctx, what, tables, spec, before, after, fn)
		if !errors.Is(err, errPausedAttempt) {
			return err
		}
	}
}

func (r *Runner) lockAttemptsOf(ctx context.Context, what string, tables []string, spec string, before func(context.Context) error, after func(),
	fn func(ctx context.Context, lock *sql.Conn) error) error {
	g := r.lockGuard(tables...)
	// The guard runs After once an attempt's Before has run, whatever it
	// returned: after runs only if before did, and each attemptBegin has
	// its attemptEnd.
	var calledBefore bool
	g.Before = func(ctx context.Context) error {
		calledBefore = false
		if err := r.attemptBegin(); err != nil {
			return err
		}
		if before == nil {
			return nil
		}
		calledBefore = true
		return before(ctx)
	}
	g.After = func() {
		r.attemptEnd()
		if after != nil && calledBefore {
			after()
		}
	}
	if r.cfg.CutoverLockTimeout > 0 {
		g.Policy.Budget = r.cfg.CutoverLockTimeout
	}
	err := g.Run(ctx, what, func(ctx context.Context, lock *sql.Conn) (err error) {
		r.lockAttempts.Add(1)
		asked := time.Now()
		if _, err := lock.ExecContext(ctx, "LOCK TABLES "+spec); err != nil {
			r.lockWait.record(time.Since(asked))
			return err
		}
		r.lockWait.record(time.Since(asked))
		defer func() {
			// Unlock even if ctx is done; if that fails, the error makes the
			// guard discard the connection, which releases the locks.
			uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if _, uerr := lock.ExecContext(uctx, "UNLOCK TABLES"); uerr != nil && err == nil {
				err = fmt.Errorf("unlock tables: %w", uerr)
			}
		}()
		return fn(ctx, lock)
	})
	if errors.Is(err, mdl.ErrDeadline) {
		return fmt.Errorf("%w; the original table is unchanged", err)
	}
	return err
}
