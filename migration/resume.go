package migration

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sluicedb/sluice/internal/capture"
	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/mdl"
	"github.com/sluicedb/sluice/internal/ranges"
	"github.com/sluicedb/sluice/internal/schema"
)

// Resume: a run holds a named lock for its whole life, so that two runs of
// one table cannot both work on its shadow; the lock goes with the
// connection when sluice dies. A run that finds a checkpoint of the same
// work takes it up (checkpoint.go); one that does not match says why and
// changes nothing.

// runLockName is the named lock of the migration of database.table.
func runLockName(database, table string) string {
	sum := sha256.Sum256([]byte(database + "\x00" + table))
	return "sluice:" + hex.EncodeToString(sum[:16])
}

// runLockWait is how long, in seconds, a run waits for the table's named lock.
const runLockWait = 5

// takeRunLock takes the table's named lock, or says another run holds it.
func (r *Runner) takeRunLock(ctx context.Context) error {
	// A few seconds' wait: the session of a run killed a moment ago holds
	// the lock until the server has seen its connection close.
	conn, id, got, err := r.lockOn(ctx, runLockWait)
	if err != nil {
		return fmt.Errorf("%w: take the migration's lock: %w", ErrPreflight, err)
	}
	if !got {
		return preflightErr("another migration of %s.%s is running (a sluice run holds its lock); wait for it to end, or stop it first", r.cfg.Database, r.cfg.Table)
	}
	r.runLock, r.runLockID = conn, id
	r.live.mu.Lock()
	stop := r.live.cancel
	r.live.mu.Unlock()
	// Not ended by the run's own cancellation: teardown still works under
	// the lock, and ends the watch itself (releaseRunLock).
	wctx, quit := context.WithCancel(context.WithoutCancel(ctx))
	r.runLockQuit, r.runLockDone = quit, make(chan struct{})
	go r.watchRunLock(wctx, stop)
	return nil
}

// lockOn takes the table's named lock on a new connection, waiting up to
// wait seconds, and returns that connection and its id if it got it. The
// connection has no idle timeout: a run of hours waits on it far longer than
// the server's wait_timeout (8 hours by default), and the lock would go with
// it.
func (r *Runner) lockOn(ctx context.Context, wait int) (*sql.Conn, int64, bool, error) {
	conn, err := r.db.Conn(ctx)
	if err != nil {
		return nil, 0, false, err
	}
	var got sql.NullInt64
	var id int64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, ?), CONNECTION_ID()", runLockName(r.cfg.Database, r.cfg.Table), wait).Scan(&got, &id); err != nil {
		discard(conn)
		return nil, 0, false, err
	}
	if got.Int64 != 1 {
		discard(conn)
		return nil, 0, false, nil
	}
	conn.ExecContext(ctx, "SET SESSION wait_timeout = 31536000") // the most the server takes; a refusal leaves it to the watch
	return conn, id, true, nil
}

// runLockCheck is how often a run checks that it still holds its lock.
const runLockCheck = time.Second

// watchRunLock checks, every runLockCheck until ctx ends (releaseRunLock),
// from a connection of the pool, which session holds the run's lock. Its
// own: nothing to do, however slow the check (a check that fails tells
// nothing, and no other run can take the lock from a server it cannot
// reach). None: the lock's session is gone (killed, cut, timed out), and the
// run takes the lock again on a new connection. Another: a second run may be
// taking up this one's work; stop ends the run, and teardown leaves every
// table as it is.
func (r *Runner) watchRunLock(ctx context.Context, stop context.CancelCauseFunc) {
	defer close(r.runLockDone)
	name := runLockName(r.cfg.Database, r.cfg.Table)
	t := time.NewTicker(runLockCheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var holder sql.NullInt64
		qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := r.db.QueryRowContext(qctx, "SELECT IS_USED_LOCK(?)", name).Scan(&holder)
		cancel()
		if err != nil || holder.Valid && holder.Int64 == r.runLockID {
			continue
		}
		if !holder.Valid {
			if r.runLock != nil {
				discard(r.runLock)
				r.runLock = nil
			}
			conn, id, got, err := r.lockOn(ctx, runLockWait)
			switch {
			case err != nil:
				continue // the next check tries again
			case got:
				r.log.Warn("the migration's lock went with its connection; taken again")
				r.runLock, r.runLockID = conn, id
				continue
			}
			if err := r.db.QueryRowContext(ctx, "SELECT IS_USED_LOCK(?)", name).Scan(&holder); err != nil {
				continue
			}
		}
		r.lockLost.Store(true)
		err = fmt.Errorf("the migration's lock on %s.%s is held by another session (%d): another run may be taking up this one's work, so this one stops and leaves every table as it is; once no other sluice works on the table, run the same command again",
			r.cfg.Database, r.cfg.Table, holder.Int64)
		r.log.Error(err.Error())
		stop(err)
		return
	}
}

// releaseRunLock ends the run's hold on the table (teardown), once its
// watch has stopped.
func (r *Runner) releaseRunLock(ctx context.Context) {
	if r.runLockDone != nil {
		r.runLockQuit()
		<-r.runLockDone
		r.runLockDone = nil
	}
	if r.runLock == nil {
		return
	}
	r.runLock.ExecContext(ctx, "DO RELEASE_LOCK(?)", runLockName(r.cfg.Database, r.cfg.Table))
	discard(r.runLock)
	r.runLock = nil
}

// discard closes a connection without returning it to the pool.
func discard(conn *sql.Conn) {
	conn.Raw(func(any) error { return driver.ErrBadConn })
	conn.Close()
}

// restartHint ends every message about a checkpoint that cannot be resumed.
const restartHint = "run with --restart to drop it and start over"

// previousRun looks for the work of an earlier run of this migration
// (preflight, with the run lock held). It sets r.resume to a checkpoint to
// take up, or r.res.AlreadyDone when that run had swapped the tables, or
// refuses with one line saying what does not match.
func (r *Runner) previousRun(ctx context.Context) (err error) {
	cp, found, err := loadCheckpoint(ctx, r.db, r.cfg.Database, r.names.Checkpoint)
	if err != nil {
		if r.cfg.Restart && !errors.Is(err, errNotCheckpoint) {
			// An unreadable checkpoint names no run to end; its capture
			// triggers and queue go all the same, before anything reads
			// the table's triggers as the user's.
			if err := r.dropLeftoverCapture(ctx); err != nil {
				return err
			}
			return r.dropPrevious(ctx, nil)
		}
		return fmt.Errorf("%w: %w", ErrPreflight, err)
	}
	if cp != nil {
		if err := r.endEarlierRun(ctx, cp.Run); err != nil {
			return err
		}
	}
	// Once the earlier run's statements have ended (a CREATE TRIGGER of its
	// own could land after this otherwise), and before its queue goes with
	// its other tables: capture.go. A run that captured by triggers keeps
	// them if it is taken up (its queue holds the changes it has not
	// applied); they go as soon as it is not.
	if keep := found && cp != nil && !r.cfg.Restart && cp.Capture == CaptureTriggers && cp.resumable(); keep {
		defer func() {
			// A server error says nothing of them: they stay for the
			// next run, as they do for the run a refusal names.
			if r.resume == nil && !r.keptCapture && (err == nil || errors.Is(err, ErrPreflight)) {
				err = errors.Join(err, r.dropLeftoverCapture(ctx))
			}
		}()
	} else if err := r.dropLeftoverCapture(ctx); err != nil {
		return err
	}
	if !found {
		return nil // no earlier run; copyPreflight refuses a stray shadow
	}
	// Foreign keys a run that died in its cut-over left pointing at its
	// shadow go back to the original first, whatever this run does next
	// (children.go).
	if err := r.restoreChildren(ctx); err != nil {
		return err
	}
	if cp == nil || r.cfg.Restart {
		// A run that died before recording anything left nothing to keep.
		if cp == nil {
			r.log.Info("an earlier run left no progress; starting over", "checkpoint", r.names.Checkpoint)
		} else {
			r.log.Info("--restart: dropping the earlier run's work", "shadow", r.names.Shadow, "checkpoint", r.names.Checkpoint)
		}
		return r.dropPrevious(ctx, cp)
	}
	if err := r.dropSentry(ctx, cp.Sentry); err != nil {
		return fmt.Errorf("%w: drop the cut-over sentry %s: %w", ErrPreflight, cp.Sentry, err)
	}
	where := r.cfg.Database + "." + r.names.Checkpoint
	kept := ""
	if cp.Capture == CaptureTriggers {
		// That run takes them up: they stay, and say so.
		r.keptCapture = true
		kept = " (its change-capture triggers stay on " + r.cfg.Table + ", recording every write, for that run)"
	}
	switch {
	case cp.Format != checkpointFormat || cp.Version != r.cfg.Version:
		return preflightErr("the checkpoint in %s was written by sluice %s (this is %s): finish it with that version%s, or %s", where, cp.Version, r.cfg.Version, kept, restartHint)
	case strings.TrimSpace(cp.Alter) != strings.TrimSpace(r.cfg.Alter):
		return preflightErr("the checkpoint in %s is of another ALTER (%s): run that ALTER to resume it%s, or %s", where, cp.Alter, kept, restartHint)
	}
	r.keptCapture = false
	shadow, err := r.tableExists(ctx, r.names.Shadow)
	if err != nil {
		return err
	}
	if !shadow {
		// Swapped already? Then the table is the shadow under its name.
		h, err := definitionHash(ctx, r.db, r.cfg.Database, r.cfg.Table, true)
		if err != nil {
			return err
		}
		if h == cp.Shadow {
			r.log.Info("an earlier run of this migration swapped the tables before it stopped; cleaning up after it")
			r.res.AlreadyDone = true
			if err := r.releaseOldChild(ctx, cp.OldChild); err != nil {
				return err
			}
			return r.dropPrevious(ctx, cp)
		}
		return preflightErr("the checkpoint in %s has no shadow table %s to resume: %s", where, r.names.Shadow, restartHint)
	}
	if !cp.resumable() {
		// Its triggers and queue are gone already (dropLeftoverCapture).
		r.log.Info("the earlier run died while it made its change-capture triggers; starting over", "shadow", r.names.Shadow)
		return r.dropPrevious(ctx, cp)
	}
	if h, err := definitionHash(ctx, r.db, r.cfg.Database, r.cfg.Table, false); err != nil {
		return err
	} else if h != cp.Original {
		return preflightErr("table %s changed since the checkpoint in %s was written: %s", r.cfg.Table, where, restartHint)
	}
	ddl, err := schema.ShowCreate(ctx, r.db, r.cfg.Database, r.names.Shadow)
	if err != nil {
		return err
	}
	if hashDefinition(ddl, true) != cp.Shadow || !builtSubset(schema.SecondaryKeys(ddl), cp.Indexes) {
		return preflightErr("the shadow table %s changed since the checkpoint in %s was written: %s", r.names.Shadow, where, restartHint)
	}
	uuid, err := dbconn.ServerIdentity(ctx, r.db)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrPreflight, err)
	}
	if uuid != cp.Server {
		return preflightErr("the checkpoint in %s was written on another server (%s, this is %s): %s", where, cp.Server, uuid, restartHint)
	}
	if cp.Capture == CaptureTriggers {
		if err := r.takeUpCapture(ctx, cp); err != nil { // capture.go
			return err
		}
	} else if ok, err := r.binlogHas(ctx, cp.File); err != nil {
		return err
	} else if !ok {
		return preflightErr("binlog %s, from which the checkpoint in %s resumes, has been purged: %s", cp.File, where, restartHint)
	}
	// This run's id goes in before it sends anything to the shadow: should
	// it die before its first checkpoint, the next run must find and end
	// its statements (an index build goes on without its client), not
	// those of the run before it, which ended above.
	taken := *cp // cp keeps the time it was written, for the log
	if err := r.saveCheckpoint(ctx, &taken); err != nil {
		return err
	}
	r.resume = cp
	return nil
}

// builtSubset reports whether every secondary index the shadow has is one of
// the new table's.
func builtSubset(have, want []schema.KeyDef) bool {
	for _, k := range have {
		if !slices.ContainsFunc(want, func(w schema.KeyDef) bool { return w.Def == k.Def }) {
			return false
		}
	}
	return true
}

// binlogHas reports whether the server still has binlog file.
func (r *Runner) binlogHas(ctx context.Context, file string) (bool, error) {
	rows, err := r.db.QueryContext(ctx, "SHOW BINARY LOGS")
	if err != nil {
		return false, fmt.Errorf("%w: list the binlogs: %w", ErrPreflight, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	for rows.Next() {
		vals := make([]sql.RawBytes, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return false, err
		}
		if string(vals[0]) == file {
			return true, nil
		}
	}
	return false, rows.Err()
}

func (r *Runner) tableExists(ctx context.Context, name string) (bool, error) {
	var n int
	err := r.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?`,
		r.cfg.Database, name).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("%w: %w", ErrPreflight, err)
	}
	return n > 0, nil
}

// dropPrevious drops an earlier run's shadow, checkpoint and the other
// tables its checkpoint lists (--restart, or after its swap). The shadow
// goes only with a checkpoint beside it: a _T_new without one may be
// another tool's.
func (r *Runner) dropPrevious(ctx context.Context, cp *checkpoint) error {
	// Capture triggers before their queue, which goes with the artifacts:
	// a write that fires one would fail on the missing table.
	if err := r.dropLeftoverCapture(ctx); err != nil {
		return err
	}
	if err := r.restoreChildren(ctx); err != nil {
		return err
	}
	if err := r.dropSwapProc(ctx); err != nil {
		return fmt.Errorf("%w: %w", ErrPreflight, err)
	}
	var names []string
	switch {
	case cp == nil:
		// The run died before its first write: the tables it makes before
		// that, after the checkpoint table, are its own.
		names = append(names, r.names.Shadow, r.names.Postpone)
	case !r.res.AlreadyDone:
		names = append(names, r.names.Shadow)
		fallthrough
	default:
		names = append(names, cp.Artifacts...)
	}
	names = append(names, r.names.Checkpoint)
	if cp != nil {
		if err := r.dropSentry(ctx, cp.Sentry); err != nil {
			return fmt.Errorf("%w: drop the cut-over sentry %s: %w", ErrPreflight, cp.Sentry, err)
		}
	}
	for _, n := range names {
		if err := r.dropGuarded(ctx, n); err != nil {
			return fmt.Errorf("%w: drop %s: %w", ErrPreflight, n, err)
		}
	}
	return nil
}

// resumable reports whether a run that failed with err should keep its
// shadow and checkpoint for the next run: the cut-over could not get its
// lock before the deadline, or a connection was lost.
func resumable(err error) bool {
	return errors.Is(err, mdl.ErrDeadline) || dbconn.ConnectionLost(err) || errors.Is(err, ErrChildrenOnShadow)
}

// resumeShadow takes up the shadow of the checkpoint: the indexes still to
// build are the new table's that it lacks.
func (r *Runner) resumeShadow(ctx context.Context) error {
	// A copy: the checkpoints this run writes must not change what it
	// took up (the copy still to do is read from r.resume after they begin).
	ckpt := *r.resume
	ckpt.Indexes, ckpt.Todo, ckpt.Artifacts = slices.Clone(ckpt.Indexes), slices.Clone(ckpt.Todo), slices.Clone(ckpt.Artifacts)
	r.shadowCreated, r.ckptCreated, r.ckpt = true, true, &ckpt
	// Copies of the triggers, if the earlier run died in its cut-over's
	// last moments, before anything writes to the shadow (triggers.go).
	if err := r.dropShadowTriggers(ctx, nil); err != nil {
		return err
	}
	if err := r.probeTriggers(ctx); err != nil {
		return err
	}
	var err error
	if r.shadow, err = schema.Load(ctx, r.db, r.cfg.Database, r.names.Shadow); err != nil {
		return err
	}
	if err := r.resumeForeignKeys(ctx); err != nil {
		return err
	}
	if err := r.shadowRowKey(ctx); err != nil {
		return err
	}
	ddl, err := schema.ShowCreate(ctx, r.db, r.cfg.Database, r.names.Shadow)
	if err != nil {
		return err
	}
	have := schema.SecondaryKeys(ddl)
	for _, k := range r.resume.Indexes {
		if !slices.ContainsFunc(have, func(h schema.KeyDef) bool { return h.Def == k.Def }) {
			r.deferred = append(r.deferred, k)
		}
	}
	if !r.resume.Copied {
		// The earlier run may have built a unique index after its copy and
		// died before a checkpoint said the copy was done: the copy goes on
		// here, and during it a row moved to another primary key could
		// collide with itself. The index is built again after the copy.
		if err := r.dropBuiltUnique(ctx, have); err != nil {
			return err
		}
	}
	postponed, err := r.tableExists(ctx, r.names.Postpone)
	if err != nil {
		return err
	}
	switch {
	case r.cfg.PostponeCutover && postponed:
		r.postponeCreated = true
	case r.cfg.PostponeCutover:
		if err := r.addArtifact(ctx, r.names.Postpone); err != nil {
			return err
		}
		if err := r.createPostpone(ctx); err != nil {
			return err
		}
	case postponed:
		if err := r.dropGuarded(ctx, r.names.Postpone); err != nil {
			return err
		}
	}
	if slices.Contains(r.resume.Artifacts, r.names.Heartbeat) {
		// The earlier run's heartbeat; this run makes its own if it needs one.
		if err := r.dropGuarded(ctx, r.names.Heartbeat); err != nil {
			return err
		}
	}
	r.res.Resumed, r.res.ResumedRows = true, r.resume.Rows
	from := []any{"binlog", r.resume.position().String()}
	if r.resume.Capture == CaptureTriggers {
		queue, _ := capture.Names(r.orig.Name)
		from = []any{"queue", queue}
	}
	r.log.Info("resuming the earlier run from its checkpoint", append([]any{"checkpoint", r.names.Checkpoint, "written", r.resume.At.Format(time.RFC3339),
		"copy_done", r.resume.Copied, "rows_copied", r.resume.Rows}, from...)...)
	return r.shadowReady(ctx)
}

// resumeCopy prepares the copy of a resumed run: done when the earlier run
// had finished it, else the intervals still to copy (nil for a fresh run),
// emptied in the shadow first (a range above a lane's watermark may have
// been copied in part, or whole, out of order).
func (r *Runner) resumeCopy(ctx context.Context) (within []ranges.Span, done bool, err error) {
	if r.resume == nil {
		return nil, false, nil
	}
	if r.resume.Copied {
		r.sched.CopyDone()
		r.log.Info("the earlier run had copied every row")
		return nil, true, nil
	}
	within, err = r.resume.spans()
	if err != nil {
		return nil, false, err
	}
	shadowQ := dbconn.QuoteTable(r.cfg.Database, r.names.Shadow)
	var cleared int64
	for _, sp := range within {
		where, args := sp.Where(r.key)
		for {
			res, err := r.db.ExecContext(ctx, "DELETE FROM "+shadowQ+" WHERE "+where+" LIMIT 5000", args...)
			if err != nil {
				return nil, false, fmt.Errorf("clear the ranges to copy again: %w", err)
			}
			n, _ := res.RowsAffected()
			cleared += n
			if n < 5000 {
				break
			}
		}
	}
	r.res.Recopied = cleared
	r.log.Info("copying what the earlier run had not", "intervals", len(within), "rows_cleared", cleared)
	return within, false, nil
}

// resumeWithin tells the scheduler which intervals the resumed copy covers,
// so that a change outside them (copied by the earlier run) is applied at
// once.
func (r *Runner) resumeWithin(ctx context.Context) error {
	spans, err := r.resume.spans()
	if err != nil {
		return err
	}
	return r.sched.Within(ctx, spans)
}

// endEarlierRun ends the sessions the run that wrote the checkpoint left on
// the server: a statement sent before sluice died (a range copy, an index
// build) runs on until the server notices, and would write into the shadow
// while this run resumes. It kills them and waits until they are gone (an
// index build rolls back first).
func (r *Runner) endEarlierRun(ctx context.Context, run string) error {
	if run == "" || run == r.cfg.Conn.RunID {
		return nil
	}
	deadline := time.Now().Add(r.cfg.LockDeadline)
	for logged := false; ; {
		ids, err := r.earlierSessions(ctx, run)
		if err != nil {
			return fmt.Errorf("%w: find the sessions of the earlier run: %w", ErrPreflight, err)
		}
		if len(ids) == 0 {
			return nil
		}
		if !logged {
			r.log.Info("ending the earlier run's sessions still on the server", "sessions", len(ids))
			logged = true
		}
		for _, id := range ids {
			r.db.ExecContext(ctx, fmt.Sprintf("KILL %d", id)) // gone already is fine
		}
		if time.Now().After(deadline) {
			return preflightErr("the earlier run's sessions %v are still on the server after KILL; wait for them to end and run again", ids)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// earlierSessions returns the sessions of run: those whose connection
// carries its sluice_run attribute. Where performance_schema shows no
// connection attributes (it is off, as by default on MariaDB), those whose
// running statement writes and names the run's new table, its checkpoint or
// its change queue (a CREATE TRIGGER writing to it) as sluice writes them,
// `db`.`name`: reads (a backup, a person looking) are let be, and an idle
// session of a dead client writes nothing and is ended by the server. The
// session list shows other accounts' sessions only to one with PROCESS
// (grants.go).
func (r *Runner) earlierSessions(ctx context.Context, run string) ([]int64, error) {
	if !sessionListOnly(r.cfg.Database) {
		var ids []int64
		visible := false
		rows, err := r.db.QueryContext(ctx, "SELECT PROCESSLIST_ID, ATTR_VALUE, PROCESSLIST_ID = CONNECTION_ID() FROM performance_schema.session_connect_attrs WHERE ATTR_NAME = ? AND ATTR_VALUE IN (?, ?)",
			mdl.RunAttr, run, r.cfg.Conn.RunID)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		for rows.Next() {
			var id int64
			var value string
			var here bool
			if err := rows.Scan(&id, &value, &here); err != nil {
				return nil, err
			}
			switch {
			case value == run:
				ids = append(ids, id)
			case here:
				visible = true // this connection's attribute is seen: so would the earlier run's be
			}
		}
		if err := rows.Err(); err != nil || visible || len(ids) > 0 {
			return ids, err
		}
	}
	queue, _ := capture.Names(r.cfg.Table)
	names := []string{dbconn.QuoteTable(r.cfg.Database, r.names.Shadow), dbconn.QuoteTable(r.cfg.Database, r.names.Checkpoint),
		dbconn.QuoteTable(r.cfg.Database, queue)}
	rows, err := r.db.QueryContext(ctx, "SELECT ID, INFO FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID() AND INFO IS NOT NULL")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		var info string
		if err := rows.Scan(&id, &info); err != nil {
			return nil, err
		}
		if earlierWrite(info) && slices.ContainsFunc(names, func(n string) bool { return strings.Contains(info, n) }) {
			ids = append(ids, id)
		}
	}
	return ids, rows.Err()
}

// earlierWrite reports whether statement info, as the session list shows
// it, is of a kind sluice sends to change its tables.
func earlierWrite(info string) bool {
	switch firstKeyword(info) {
	case "INSERT", "REPLACE", "UPDATE", "DELETE", "ALTER", "CREATE", "DROP", "RENAME", "TRUNCATE":
		return true
	}
	return false
}
