package migration

// The apply under a table lock: the cut-over, the checksum's snapshot and
// the unique-conflict check stop the original's writes, bring the new table
// level with it on the locking connection, then act.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"time"

	"github.com/sluicedb/sluice/internal/apply"
	"github.com/sluicedb/sluice/internal/binlog"
	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/mdl"
)

// drainLocked, on a connection holding locks that stop all writes to the
// original, reads the binlog end, waits until the streamer has seen it, and
// applies every pending key on that connection. Past maxWait it gives up with
// mdl.ErrRetry so the lock is released.
func (r *Runner) drainLocked(ctx context.Context, conn *sql.Conn, maxWait time.Duration) error {
	if r.poller != nil {
		if err := r.drainQueue(ctx, conn); err != nil {
			return err
		}
		return r.applyLocked(ctx, conn)
	}
	if err := r.readBinlogToNow(ctx, conn, maxWait); err != nil {
		return err
	}
	if err := r.originalIntact(ctx, conn); err != nil {
		return err
	}
	return r.applyLocked(ctx, conn)
}

// applyLocked applies every pending key on conn, which holds locks that stop
// all writes to the original.
func (r *Runner) applyLocked(ctx context.Context, conn *sql.Conn) error {
	err := withShortRowLockWait(ctx, conn, func() error { return r.applier.ApplyLocked(ctx, conn) })
	switch n := dbconn.ErrorNumber(err); {
	case err == nil:
		return nil
	case errors.Is(err, apply.ErrDuplicate):
		return fmt.Errorf("%w: %w", errCollision, err)
	case n == dbconn.ErrLockWaitTimeout || n == dbconn.ErrLockDeadlock:
		return fmt.Errorf("%w: a changed row of %s is locked by a transaction that has not ended (a prepared XA transaction, which XA RECOVER lists, or on MariaDB a parent's foreign-key cascade), so the table locks are released and taken again later: %v", mdl.ErrRetry, r.orig.Name, err)
	}
	return err
}

// readBinlogToNow reads the binlog's current end on q and waits until the
// streamer has read up to it; past limit it gives up with mdl.ErrRetry.
func (r *Runner) readBinlogToNow(ctx context.Context, q dbconn.Querier, limit time.Duration) error {
	pos, err := binlog.CurrentPosition(ctx, q)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	if err := r.streamer.WaitFor(wctx, pos); err != nil {
		if ctx.Err() == nil && wctx.Err() != nil {
			return fmt.Errorf("%w: binlog not read up to %s within %s", mdl.ErrRetry, pos, limit)
		}
		return err
	}
	return nil
}

// withShortRowLockWait runs fn on conn, which holds table locks that stop
// all writes to the original, with innodb_lock_wait_timeout at 1 s: the only
// row locks left to wait for are prepared XA transactions' (ApplyLocked),
// and the table locks are not held waiting for one.
func withShortRowLockWait(ctx context.Context, conn *sql.Conn, fn func() error) error {
	if _, err := conn.ExecContext(ctx, "SET SESSION innodb_lock_wait_timeout = 1"); err != nil {
		return err
	}
	err := fn()
	if _, rerr := conn.ExecContext(context.WithoutCancel(ctx), "SET SESSION innodb_lock_wait_timeout = "+dbconn.SessionSettings["innodb_lock_wait_timeout"]); rerr != nil && err == nil {
		err = rerr
	}
	return err
}

// readLockSpec is the LOCK TABLES list that stops every write to the
// original and lets only this connection write the new table (and read the
// trigger capture's queue).
func (r *Runner) readLockSpec() string {
	return r.orig.Quoted() + " READ, " + dbconn.QuoteTable(r.cfg.Database, r.names.Shadow) + " WRITE" + r.queueLock("READ") + r.sequenceLocks()
}

// sequenceLocks locks, for writing, the sequences whose next value a
// default of the new table takes (MariaDB's DEFAULT NEXT VALUE FOR s, shown
// as nextval(`db`.`s`)): MariaDB opens them for every write to the table,
// the value given or not, and refuses that write under LOCK TABLES unless
// they are locked for writing too.
func (r *Runner) sequenceLocks() string {
	if r.shadow == nil {
		return ""
	}
	var seqs []string
	for _, c := range r.shadow.Columns {
		for _, m := range sequenceRef.FindAllStringSubmatch(c.DefaultExpr, -1) {
			if !slices.Contains(seqs, m[1]) { // a table is named once in LOCK TABLES
				seqs = append(seqs, m[1])
			}
		}
	}
	var s string
	for _, q := range seqs {
		s += ", " + q + " WRITE"
	}
	return s
}

// sequenceRef matches a sequence function's argument as the server prints
// it: a quoted name, qualified or not.
var sequenceRef = regexp.MustCompile("(?i)\\b(?:nextval|lastval|setval)\\(\\s*((?:`(?:[^`]|``)+`\\.)?`(?:[^`]|``)+`)")

// errCollision is a unique-key collision found with the shadow equal to the
// original: one the original really holds.
var errCollision = errors.New("a change made two rows collide under a unique key of the new table, so the migration stops (no row was dropped)")

// settleConflict decides a unique-key conflict the apply workers could not
// resolve: under a brief read lock on the original it applies every change, so
// that the shadow equals the original. A collision then is real (errCollision);
// otherwise it was a change not yet read from the binlog, now applied.
func (r *Runner) settleConflict(ctx context.Context) error {
	r.log.Info("a unique-key conflict outlived applying every pending change; checking it under a lock on the original")
	return r.drainUnderReadLock(ctx, "unique-conflict check", false, nil)
}

// drainUnderReadLock takes LOCK TABLES original READ, shadow WRITE through
// the metadata-lock guard, applies every change on the locking connection so
// that the shadow equals the original, then runs then (if set) before
// unlocking. With keepHeld, the apply stays held after a successful drain, so
// the shadow keeps that state until the caller releases it.
func (r *Runner) drainUnderReadLock(ctx context.Context, what string, keepHeld bool, then func(ctx context.Context, lock *sql.Conn) error) error {
	settled := false
	spec := r.readLockSpec()
	release := func() {
		if !(keepHeld && settled) {
			r.sched.Hold(false)
		}
	}
	return r.withTableLock(ctx, what, spec, r.pauseApply, release, func(ctx context.Context, lock *sql.Conn) error {
		if err := r.drainLocked(ctx, lock, time.Second); err != nil {
			return err
		}
		if then != nil {
			if err := then(ctx, lock); err != nil {
				return err
			}
		}
		settled = true
		return nil
	})
}
