package migration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sluicedb/sluice/internal/binlog"
	"github.com/sluicedb/sluice/internal/copier"
	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/mdl"
)

// catchUp releases the changes held during the copy and waits until the
// backlog is small.
func (r *Runner) catchUp(ctx context.Context) error {
	r.releaseCopyHold()
	return r.waitBacklog(ctx, 1000)
}

// releaseCopyHold lifts the hold placed on the apply for the copy, if any.
func (r *Runner) releaseCopyHold() {
	if r.copyHeld {
		r.copyHeld = false
		r.sched.Hold(false)
	}
}

// backlogSettle is how long waitBacklog waits for the backlog to fall under
// its limit before it is content with backlogSlack times the limit.
const (
	backlogSettle = 30 * time.Second
	backlogSlack  = 10
)

// waitBacklog waits until the binlog is read up to the current end and at
// most limit keys wait to be applied. Writes the apply cannot outrun (the
// writers and the apply workers taking each other's row locks) can hold the
// backlog above limit for good: past backlogSettle, backlogSlack times limit
// will do, and what is left is applied under the cut-over's lock, where no
// write competes: measured on MariaDB 11.8, 2,000 keys in 28 ms, 10,000 in
// 351 ms (the drain under the lock is not bounded in time). Above that it
// waits on, saying so every backlogSettle. If the apply workers have
// stopped, it returns their error rather than wait for them.
func (r *Runner) waitBacklog(ctx context.Context, limit int) error {
	if r.poller != nil {
		if _, err := r.poller.Poll(ctx, r.db); err != nil {
			return err
		}
	} else {
		pos, err := binlog.CurrentPosition(ctx, r.db)
		if err != nil {
			return err
		}
		if err := r.streamer.WaitFor(ctx, pos); err != nil {
			return err
		}
	}
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	start, said := time.Now(), time.Now()
	for {
		n := r.sched.Backlog()
		waited := time.Since(start)
		if n <= limit || (waited >= backlogSettle && n <= backlogSlack*limit) {
			if n > limit {
				r.log.Info("the backlog stays above its mark under the writes; the rest is applied under the cut-over's lock",
					"backlog", n, "mark", limit, "waited", waited.Round(time.Second))
			}
			break
		}
		if time.Since(said) >= backlogSettle {
			said = time.Now()
			r.log.Warn("the apply does not catch up with the writes", "backlog", n, "waited", waited.Round(time.Second),
				"hint", "lower the write load, or add --apply-threads")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-r.applyDone:
			return r.applyStopped()
		case <-t.C:
		}
	}
	if r.poller != nil {
		// Few rows left for the drain under the lock to read.
		return r.trimQueue(ctx)
	}
	return nil
}

// applyStopped is the error of apply workers that stopped (applyDone is
// closed). They stop only on an error, or when the run ends; one that came
// while the RENAME was sent did not stop the run then, but the swap failed
// since, and nothing would apply the changes.
func (r *Runner) applyStopped() error {
	err := r.applyErr
	if err == nil {
		err = errors.New("the run is ending")
	}
	return fmt.Errorf("the apply workers stopped: %w", err)
}

// pauseApply holds the scheduler and waits for batches in flight to finish.
// A batch takes milliseconds; one still in flight after a minute is a bug,
// reported rather than waited on forever.
func (r *Runner) pauseApply(ctx context.Context) error {
	r.sched.Hold(true)
	deadline := time.Now().Add(time.Minute)
	for r.sched.InFlight() > 0 {
		if time.Now().After(deadline) {
			return fmt.Errorf("the apply workers did not pause within a minute (%d keys in flight)", r.sched.InFlight())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-r.applyDone:
			return r.applyStopped()
		case <-time.After(2 * time.Millisecond):
		}
	}
	return nil
}

// settleCopyCollisionIf is settleCopyCollision when the new table has a
// unique key during the copy and the scheduler follows the copy, else nil (a
// collision is then a duplicate in the original, or cannot be settled).
func (r *Runner) settleCopyCollisionIf(unique bool) func(context.Context, int, copier.CopyRange) (int64, bool, error) {
	if !unique || !r.sched.Tracking() {
		return nil
	}
	return r.settleCopyCollision
}

// settleCopyCollision brings the new table up to date for a range whose
// copy collided under a unique key of the new table. With such a key during
// the copy (uniqueInCopy) the apply is held, so a row the application moved
// into the range after it was copied at its old key is still there under
// that key, and the copy collides with it. Each time, once the changes made
// until now are read, every change whose key's range is copied (the
// scheduler follows the copy) is applied as the workers apply them (no table
// lock, rows the application holds and keys that still collide left for
// later), and the range is copied again. Writers may keep moving rows into
// the range (the open range above the last key takes every new one), so from
// the third time on the same is done on a connection that holds the original
// READ and the new table WRITE (a brief stop of the writes), which then copies
// the range itself. A collision can remain where the stale row's change
// waits for an earlier range of its lane (the frontier): after
// copier.MaxDuplicates attempts the run stops as before, nothing dropped.
func (r *Runner) settleCopyCollision(ctx context.Context, attempt int, copyRange copier.CopyRange) (int64, bool, error) {
	if attempt == 1 {
		r.log.Info("a range copied collides under a unique key of the new table: applying the changes made since, then copying it again")
	}
	r.copySettle.Lock()
	defer r.copySettle.Unlock()
	if r.copySettle.spent > settleBudget {
		return 0, false, fmt.Errorf("%w: the collisions were settled for %s already", copier.ErrDuplicate, settleBudget)
	}
	began := time.Now()
	defer func() { r.copySettle.spent += time.Since(began) }()
	if err := r.applyCopiedChanges(ctx, nil); err != nil || attempt < 3 {
		return 0, false, err
	}
	var n int64
	copied := false
	spec := r.readLockSpec()
	// Bounded: the copy stops on the collision rather than wait long for
	// these locks.
	lctx, cancel := context.WithTimeout(ctx, settleLockFor)
	defer cancel()
	err := r.withTableLock(lctx, "copy collision settle", spec, r.pauseApply, func() { r.sched.Hold(false) }, func(ctx context.Context, lock *sql.Conn) error {
		if r.poller != nil {
			if err := r.drainQueue(ctx, lock); err != nil {
				return err
			}
		}
		err := withShortRowLockWait(ctx, lock, func() error { return r.applyCopiedChanges(ctx, lock) })
		if n := dbconn.ErrorNumber(err); n == dbconn.ErrLockWaitTimeout || n == dbconn.ErrLockDeadlock {
			return errNotSettled
		} else if err != nil {
			return err
		}
		m, err := copyRange(ctx, lock)
		if dbconn.ErrorNumber(err) == dbconn.ErrDupEntry {
			return errNotSettled
		}
		n, copied = m, err == nil
		return err
	})
	switch {
	case errors.Is(err, errNotSettled):
		return 0, false, nil // the next attempt, or the stop
	case err != nil && ctx.Err() == nil && lctx.Err() != nil:
		r.log.Info("the locks to settle a copy collision were not had in time", "within", settleLockFor)
		return 0, false, nil
	}
	return n, copied, err
}

// errNotSettled: a locked attempt of settleCopyCollision met a row lock or
// the collision again; the locks are released.
var errNotSettled = errors.New("copy collision not settled")

// settleLockFor bounds one locked attempt of settleCopyCollision, and
// settleBudget the time a run spends settling collisions: past it, a
// collision stops the run (writers that keep moving rows across a copy
// this busy would otherwise hold it, and its locks, for long).
const (
	settleLockFor = 10 * time.Second
	settleBudget  = 30 * time.Second
)

// copySettle serialises settleCopyCollision and counts its time.
type copySettle struct {
	sync.Mutex
	spent time.Duration
}

// applyCopiedChanges reads the changes made until now (the binlog up to its
// current end, or the trigger queue) and applies every one whose key's range
// is copied (on lock, if set: Applier.ApplyPending). r.copySettle must be
// held.
func (r *Runner) applyCopiedChanges(ctx context.Context, lock *sql.Conn) error {
	switch {
	case r.streamer != nil && lock != nil:
		if err := r.readBinlogToNow(ctx, lock, time.Second); err != nil { // the writes wait meanwhile
			return err
		}
	case r.streamer != nil:
		err := r.readBinlogToNow(ctx, r.db, 10*time.Second)
		if !errors.Is(err, mdl.ErrRetry) && err != nil {
			return err
		} else if err != nil {
			r.log.Warn("the binlog was not read up to its end within 10s; applying what was read", "error", err.Error())
		}
	case r.poller != nil && lock == nil:
		if _, err := r.poller.Poll(ctx, r.db); err != nil {
			return err
		}
	}
	return r.applier.ApplyPending(ctx, lock)
}
