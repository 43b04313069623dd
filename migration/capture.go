package migration

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/sluicedb/sluice/internal/capture"
	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/mdl"
	"github.com/sluicedb/sluice/internal/plan"
	"github.com/sluicedb/sluice/internal/schema"
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
//     triggers were made on, checks that the three triggers are still on it,
//     and stops the run if not;
//   - a foreign key's cascade and a replication applier's writes fire no
//     trigger: a table with foreign keys, and a server that a replication
//     channel, Group Replication or Galera writes, are refused;
//   - a run that dies leaves the triggers, which go on filling the queue:
//     the next run of the same table drops them first (it holds the table's
//     run lock, so no live run owns them).
//
// A run that dies leaves its triggers recording into the queue, which then
// holds every change not yet applied: the next run of the same migration
// takes them up (takeUpCapture) instead of a binlog position, once it has
// checked that none of them was dropped and that the original is the table
// they were made on, unchanged; otherwise it drops them and says what to do.

// triggerCapture reports whether the run captures changes by triggers.
func (r *Runner) triggerCapture() bool { return r.cfg.Capture == CaptureTriggers }

// dropLeftoverCapture drops the capture triggers and queue an earlier run of
// this table left behind (it died, or lost its connection), in either
// capture mode: such triggers would otherwise go on firing, and be taken for
// the table's own. They may be on the original or, after a swap, on the old
// table. Only a queue whose comment marks it as sluice's is dropped, and only
// triggers of the capture's names that write to it (or to a queue that is
// gone, which fail every write): a table of that name that is not sluice's
// is left alone (and refused with --capture=triggers). Called in preflight
// with the table's run lock held and the earlier run's statements ended
// (resume.go), so that none of its CREATE TRIGGERs can land after it.
func (r *Runner) dropLeftoverCapture(ctx context.Context) error {
	table, names := capture.Names(r.orig.Name)
	var comment sql.NullString
	err := r.db.QueryRowContext(ctx, "SELECT TABLE_COMMENT FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?",
		r.cfg.Database, table).Scan(&comment)
	queue, ours := err == nil, err == nil && comment.String == capture.Comment(r.orig.Name)
	switch {
	case err != nil && !errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("%w: %w", ErrPreflight, err)
	case queue && !ours:
		return nil // another's: the table's triggers are its own
	}
	left, err := r.captureTriggersIn(ctx, r.db, names, table)
	if err != nil || (len(left) == 0 && !queue) {
		return err
	}
	if queue {
		if err := r.queueWriters(ctx, names, table); err != nil {
			return err
		}
	}
	r.log.Warn("an earlier run's change-capture triggers and queue are left; dropping them", "triggers", len(left), "queue", table)
	for _, f := range left {
		if err := r.dropTrigger(ctx, f.name, f.on); err != nil {
			return fmt.Errorf("%w: %w", ErrPreflight, err)
		}
		if sameName(f.on, r.orig.Name, r.vars) {
			r.orig.Triggers = slicesWithout(r.orig.Triggers, []string{f.name})
		}
	}
	if queue {
		if err := r.dropGuarded(ctx, table); err != nil {
			return fmt.Errorf("%w: drop %s: %w", ErrPreflight, table, err)
		}
	}
	return nil
}

// queueWriters refuses a leftover queue that a trigger other than the
// capture's own writes to (one carried to another table, say): dropping the
// queue would fail every write that fires it.
func (r *Runner) queueWriters(ctx context.Context, names [3]string, queue string) error {
	var name, on string
	// The queue's name is plain (capture.PlainName): as a word, quoted or
	// not, in a trigger of this database but the capture's own, or after
	// this database's name in any other's. (Another database's queue of
	// a table of the same name is not this one.)
	word := regexp.QuoteMeta(strings.ToLower(queue)) + "([^a-z0-9_$]|$)"
	err := r.db.QueryRowContext(ctx, `SELECT TRIGGER_NAME, EVENT_OBJECT_TABLE FROM information_schema.TRIGGERS
		WHERE NOT (TRIGGER_SCHEMA = ? AND TRIGGER_NAME IN (?, ?, ?))
		AND (TRIGGER_SCHEMA = ? AND LOWER(ACTION_STATEMENT) REGEXP ? OR LOWER(ACTION_STATEMENT) REGEXP ?)
		ORDER BY TRIGGER_NAME LIMIT 1`,
		r.cfg.Database, names[0], names[1], names[2],
		r.cfg.Database, "(^|[^a-z0-9_$.`])`?"+word,
		"(^|[^a-z0-9_$])`?"+regexp.QuoteMeta(strings.ToLower(r.cfg.Database))+"`?[.]`?"+word).Scan(&name, &on)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return fmt.Errorf("%w: %w", ErrPreflight, err)
	}
	return preflightErr("trigger %s of %s writes to %s, the change-capture queue an earlier run of sluice left; drop that trigger (DROP TRIGGER %s), then run again", name, on, queue, dbconn.QuoteIdent(name))
}

// takeUpCapture checks, in preflight, that the capture an earlier run left
// (checkpoint cp) can be taken up: its queue is there, the three triggers
// are on the original and write to it, no other trigger does, and the
// original is the table they were made on, with the same definition (a
// TRUNCATE or an ALTER while sluice was away fires no trigger). The capture
// triggers are then sluice's, not the table's own.
func (r *Runner) takeUpCapture(ctx context.Context, cp *checkpoint) error {
	where := r.cfg.Database + "." + r.names.Checkpoint
	if !r.triggerCapture() {
		r.keptCapture = true // for the run with the flag
		return preflightErr("the checkpoint in %s is of a run that captured changes by triggers, which stay on %s recording every write: resume it with --capture=triggers, or %s", where, r.orig.Name, restartHint)
	}
	table, names := capture.Names(r.orig.Name)
	var comment string
	err := r.db.QueryRowContext(ctx, "SELECT TABLE_COMMENT FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?",
		r.cfg.Database, table).Scan(&comment)
	switch {
	case errors.Is(err, sql.ErrNoRows) || err == nil && comment != capture.Comment(r.orig.Name):
		return preflightErr("the change queue %s of the run in %s is gone, so the changes since it stopped are unknown: %s", table, where, restartHint)
	case err != nil:
		return fmt.Errorf("%w: %w", ErrPreflight, err)
	}
	if err := r.queueWriters(ctx, names, table); err != nil {
		return err
	}
	d, err := r.captureDrift(ctx, r.db, names, table, cp.TableID, cp.OrigDef, cp.CaptureStamp)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrPreflight, err)
	}
	switch d.kind {
	case driftTriggers:
		return preflightErr("%d of the %d change-capture triggers the run in %s made are on %s (one was dropped, and the writes since went unrecorded): %s",
			d.on, len(names), where, r.orig.Name, restartHint)
	case driftTable:
		return preflightErr("%s was truncated, made again or rebuilt since the run in %s made its change-capture triggers, which no trigger records: %s", r.orig.Name, where, restartHint)
	case driftDefinition:
		return preflightErr("%s was altered since the run in %s made its change-capture triggers: %s", r.orig.Name, where, restartHint)
	case driftCapture:
		return preflightErr("the change-capture triggers or the queue %s of the run in %s were dropped and made again, or the queue truncated, since (changes may have gone unrecorded): %s", table, where, restartHint)
	}
	r.orig.Triggers = slicesWithout(r.orig.Triggers, names[:])
	return nil
}

// captureTrigger is a trigger of one of the capture's names, and its table.
type captureTrigger struct{ name, on, created, body string }

// captureTriggersIn lists, on q, the triggers of the database named names;
// one that does not write to the queue table is not sluice's, and refused.
func (r *Runner) captureTriggersIn(ctx context.Context, q dbconn.Querier, names [3]string, queue string) ([]captureTrigger, error) {
	rows, err := q.QueryContext(ctx, `SELECT TRIGGER_NAME, EVENT_OBJECT_TABLE, COALESCE(CAST(CREATED AS CHAR), ''), ACTION_STATEMENT FROM information_schema.TRIGGERS
		WHERE TRIGGER_SCHEMA = ? AND TRIGGER_NAME IN (?, ?, ?) ORDER BY TRIGGER_NAME`, r.cfg.Database, names[0], names[1], names[2])
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPreflight, err)
	}
	defer rows.Close()
	var out []captureTrigger
	for rows.Next() {
		var f captureTrigger
		if err := rows.Scan(&f.name, &f.on, &f.created, &f.body); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrPreflight, err)
		}
		if !strings.Contains(f.body, dbconn.QuoteIdent(queue)) {
			return nil, preflightErr("trigger %s of %s has the name of sluice's change capture, but does not write to %s: rename it", f.name, f.on, queue)
		}
		out = append(out, f)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPreflight, err)
	}
	return out, nil
}

// captureRefusal refuses, in preflight, the tables capture by triggers does
// not handle (plan.CaptureRefusal): foreign keys, whose cascades fire no
// trigger, or a trigger of the capture's names, among others.
func (r *Runner) captureRefusal(ctx context.Context) error {
	switch {
	case !r.triggerCapture():
		return nil
	case r.resume != nil && r.resume.Capture != CaptureTriggers:
		return preflightErr("an earlier run of this migration read the binlog and left a checkpoint; resume it with --capture=binlog, or start over with --restart")
	}
	if why := plan.CaptureRefusal(r.orig); why != "" {
		return preflightErr("%s", why)
	}
	if why := r.appliedElsewhere(ctx); why != "" {
		return preflightErr("%s; the changes it applies fire no trigger, so --capture=triggers cannot see them: run sluice with the binlog", why)
	}
	if why := statementCapture(r.vars); why != "" {
		return preflightErr("%s", why)
	}
	return nil
}

// statementCapture says why capture by triggers cannot run under the
// server's binlog format, or "". Pure.
func statementCapture(v ServerVars) string {
	if logBinOn(v) && strings.EqualFold(v.Format, "STATEMENT") {
		// Every session's default: replicas replay the writes with the
		// capture's triggers, whose queue rows stop their appliers.
		return "the server's binlog_format is STATEMENT: replicas would replay the application's writes with the capture's triggers, whose queue rows stop their appliers; set binlog_format=ROW (or MIXED) first"
	}
	return ""
}

// logBinOn reports whether the server writes a binary log.
func logBinOn(v ServerVars) bool { return v.LogBin == "1" || strings.EqualFold(v.LogBin, "ON") }

// appliedElsewhere says why some writes to this server come from a
// replication applier ("" if none is seen): a replica's channel, a Group
// Replication member, a Galera node. Best effort: what the account cannot
// read is not seen.
func (r *Runner) appliedElsewhere(ctx context.Context) string {
	if r.vars.Replica {
		return "the server is a replica"
	}
	var n int
	if r.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM performance_schema.replication_group_members WHERE MEMBER_STATE = 'ONLINE'").Scan(&n) == nil && n > 0 {
		return "the server is a Group Replication member"
	}
	var wsrep sql.NullString
	if r.db.QueryRowContext(ctx, "SELECT @@global.wsrep_on").Scan(&wsrep) == nil && (wsrep.String == "1" || strings.EqualFold(wsrep.String, "ON")) {
		return "the server is a Galera node"
	}
	if r.vars.Flavor == dbconn.MariaDB {
		if rows, err := r.db.QueryContext(ctx, "SHOW ALL SLAVES STATUS"); err == nil {
			replica := rows.Next()
			rows.Close()
			if replica {
				return "the server is a replica"
			}
		}
	}
	return ""
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
	q.Formats = r.vars.Flavor == dbconn.MariaDB
	q.StopStatements = logBinOn(r.vars)
	if _, err := capture.Identity(ctx, r.db, r.vars.Flavor, t.Database, t.Name); err != nil {
		return preflightErr("%v; --capture=triggers compares it at the cut-over to see a TRUNCATE, which fires no trigger: use the binlog, or rename the table", err)
	}
	if r.resume != nil {
		// The earlier run's queue and triggers (takeUpCapture), and what
		// the cut-over compares, as they were made.
		r.queue, r.queueMade, r.tableID, r.origDef, r.captureStamp = q, true, r.resume.TableID, r.resume.OrigDef, r.resume.CaptureStamp
		r.captureTriggers.Store(true)
		return nil
	}
	if exists, err := r.tableExists(ctx, q.Table); err != nil {
		return fmt.Errorf("%w: %w", ErrPreflight, err)
	} else if exists {
		return preflightErr("table %s.%s already exists; drop it if it is stale", r.cfg.Database, q.Table)
	}
	r.queue = q
	return nil
}

// probeCapture proves, on the empty shadow, that the account may create a
// trigger (with the binlog on, the server wants SUPER or
// log_bin_trust_function_creators=ON), so that a refusal comes before the
// copy, in one line. The probe has a name of its own: one a death leaves on
// the shadow goes with it.
func (r *Runner) probeCapture(ctx context.Context) error {
	if r.queue == nil {
		return nil
	}
	probe := dbconn.QuoteTable(r.cfg.Database, r.queue.Table+"_p")
	q := "CREATE TRIGGER " + probe + " AFTER INSERT ON " + dbconn.QuoteTable(r.cfg.Database, r.names.Shadow) + " FOR EACH ROW SET @sluice_probe = 1"
	if _, err := r.db.ExecContext(ctx, q); err != nil {
		return preflightErr("the change-capture triggers cannot be created (%v): grant TRIGGER, and SUPER (or set log_bin_trust_function_creators=ON) while the binlog is on", err)
	}
	if _, err := r.db.ExecContext(ctx, "DROP TRIGGER "+probe); err != nil {
		return fmt.Errorf("drop the probe trigger %s: %w", probe, err)
	}
	return nil
}

// startTriggerCapture makes the queue and its triggers (through the
// metadata-lock guard: CREATE TRIGGER waits for every transaction on the
// table), records what the cut-over compares, and starts the poller.
func (r *Runner) startTriggerCapture(ctx context.Context, cancel context.CancelCauseFunc) error {
	if r.resume == nil {
		if err := r.makeTriggerCapture(ctx); err != nil {
			return err
		}
	}
	r.poller = capture.NewPoller(r.queue, sinks{sched: r.sched, tracker: r.tracker})
	r.sched.SetClock(r.poller.Round)
	r.log.Info("changes are captured by triggers", "queue", r.queue.Table, "triggers", strings.Join(r.queue.Triggers[:], ", "), "taken_up", r.resume != nil)
	go r.pollQueue(ctx, cancel)
	return nil
}

// makeTriggerCapture makes the queue and the triggers of a fresh run, and
// records in the checkpoint what they were made on.
func (r *Runner) makeTriggerCapture(ctx context.Context) error {
	// The checkpoint says so before anything is made: a run that dies
	// before the triggers are all made starts over, one that dies after its
	// swap is known to be done.
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
	// An XA transaction prepared before the triggers existed fired none, and
	// the copy cannot see its rows: it must end before the copy (xa.go).
	if err := r.waitPreparedXA(ctx); err != nil {
		return err
	}
	// What the cut-over compares, read once every trigger exists: a change
	// before it would have been seen when the copy read the rows.
	if r.tableID, err = capture.Identity(ctx, r.db, r.vars.Flavor, r.orig.Database, r.orig.Name); err != nil {
		return err
	}
	if r.origDef, err = r.definitionOn(ctx, r.db); err != nil {
		return err
	}
	trs, err := r.captureTriggersIn(ctx, r.db, r.queue.Triggers, r.queue.Table)
	if err != nil {
		return err
	}
	if r.captureStamp, err = r.stampOf(ctx, r.db, trs, r.queue.Table); err != nil {
		return err
	}
	if err := r.nextSecond(ctx); err != nil {
		return err
	}
	if err := r.recheckOriginal(ctx); err != nil {
		return err
	}
	// From here a run taken up resumes: everything to copy, every change
	// in the queue.
	r.ckptMu.Lock()
	defer r.ckptMu.Unlock()
	r.ckpt.TableID, r.ckpt.OrigDef, r.ckpt.CaptureStamp, r.ckpt.Todo = r.tableID, r.origDef, r.captureStamp, []todoSpan{{}}
	return r.saveCheckpoint(ctx, r.ckpt)
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
			if dbconn.ErrorNumber(err) == dbconn.ErrLockWaitTimeout || dbconn.Retryable(err) {
				continue // the queue was locked a while (a drain): read it again
			}
			if ctx.Err() == nil && !r.settling() {
				cancel(err)
			}
			return
		}
		if time.Since(last) < time.Second {
			continue
		}
		last = time.Now()
		if err := r.trimQueue(ctx); err != nil && ctx.Err() == nil {
			r.log.Warn("could not trim the change queue; trying again", "queue", r.queue.Table, "error", err)
		}
	}
}

// trimQueue deletes the queue rows whose keys are all applied. A key held
// for the copy counts as not applied (Scheduler.Pending): once the copy
// passes it, its change is to apply, and a run that takes the queue up
// after a death would not see it if its row were gone.
func (r *Runner) trimQueue(ctx context.Context) error {
	// The round first: every key marked before it is in the scheduler when
	// Pending looks (as for a checkpoint).
	since := r.poller.Round()
	if p, ok := r.sched.Pending(); ok && p.Compare(since) < 0 {
		since = p
	}
	_, err := r.poller.Forget(ctx, r.db, since)
	return err
}

// drainQueue, on a connection that sees every change committed (writes to
// the original are stopped by a lock), reads the whole queue into the
// scheduler and checks that the original is the table the triggers were made
// on, with the same definition.
func (r *Runner) drainQueue(ctx context.Context, conn *sql.Conn) error {
	if _, err := r.poller.Drain(ctx, conn); err != nil {
		return err
	}
	if err := r.queueUnsettled(ctx, conn); err != nil {
		return err
	}
	d, err := r.captureDrift(ctx, conn, r.queue.Triggers, r.queue.Table, r.tableID, r.origDef, r.captureStamp)
	if err != nil {
		return err
	}
	switch d.kind {
	case driftTriggers:
		return fmt.Errorf("%w: %d of the %d change-capture triggers are on %s (one was dropped: writes since went unrecorded); run sluice again",
			errOriginalChanged, d.on, len(r.queue.Triggers), r.orig.Name)
	case driftTable:
		return fmt.Errorf("%w: %s was truncated, dropped and made again, or rebuilt (OPTIMIZE TABLE, ALTER TABLE ... FORCE) during the migration, which its storage id shows and no trigger reports, so a TRUNCATE cannot be ruled out; run sluice again", errOriginalChanged, r.orig.Name)
	case driftDefinition:
		return fmt.Errorf("%w: %s was altered during the migration; run sluice again", errOriginalChanged, r.orig.Name)
	case driftCapture:
		return fmt.Errorf("%w: the change-capture triggers or their queue %s were dropped and made again, or the queue truncated, during the migration (changes may have gone unrecorded); run sluice again", errOriginalChanged, r.queue.Table)
	}
	return nil
}

// queueUnsettled returns mdl.ErrRetry while a transaction that has not
// ended holds a row of the queue. With writes to the original stopped by the
// lock, only a prepared XA transaction can: its rows are unseen until it
// commits, and once its session is gone (MariaDB) it holds no metadata lock
// that would keep the swap waiting, so its changes would land in the old
// table. A locking read of the queue meets its rows' locks at once (NOWAIT).
func (r *Runner) queueUnsettled(ctx context.Context, conn *sql.Conn) error {
	lock := " FOR SHARE NOWAIT"
	if r.vars.Flavor == dbconn.MariaDB {
		lock = " LOCK IN SHARE MODE NOWAIT"
	}
	var n int64
	err := conn.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+dbconn.QuoteTable(r.cfg.Database, r.queue.Table)+lock).Scan(&n)
	switch dbconn.ErrorNumber(err) {
	case dbconn.ErrLockNowait, dbconn.ErrLockWaitTimeout:
		return fmt.Errorf("%w: a transaction that has not ended (a prepared XA transaction, which XA RECOVER lists) holds changes of %s recorded in %s, so the table locks are released and taken again later: %v", mdl.ErrRetry, r.orig.Name, r.queue.Table, err)
	}
	return err
}

// drift is what changed, behind the triggers' back, since they were made.
type drift struct {
	kind driftKind
	on   int // how many of the capture triggers are on the original
}

type driftKind int

const (
	driftNone       driftKind = iota
	driftTriggers             // one was dropped, or moved to another table
	driftTable                // the original's InnoDB id changed (a TRUNCATE, a rebuild)
	driftDefinition           // the original was altered
	driftCapture              // a trigger or the queue was made again, or the queue truncated
)

// captureDrift compares, on q, the capture (triggers names writing to queue)
// and the original with what was recorded when the triggers were made: the
// original's InnoDB id and definition, and the capture's stamp.
func (r *Runner) captureDrift(ctx context.Context, q dbconn.Querier, names [3]string, queue string, id uint64, def, stamp string) (drift, error) {
	trs, err := r.captureTriggersIn(ctx, q, names, queue)
	if err != nil {
		return drift{}, err
	}
	d := drift{}
	for _, f := range trs {
		if sameName(f.on, r.orig.Name, r.vars) {
			d.on++
		}
	}
	nowID, err := capture.Identity(ctx, q, r.vars.Flavor, r.orig.Database, r.orig.Name)
	if err != nil {
		return drift{}, err
	}
	nowDef, err := r.definitionOn(ctx, q)
	if err != nil {
		return drift{}, err
	}
	nowStamp, err := r.stampOf(ctx, q, trs, queue)
	if err != nil {
		return drift{}, err
	}
	switch {
	case d.on != len(names):
		d.kind = driftTriggers
	case nowID != id:
		d.kind = driftTable
	case nowDef != def:
		d.kind = driftDefinition
	case nowStamp != stamp:
		d.kind = driftCapture
	}
	return d, nil
}

// stampOf sums up the capture as made: each trigger's name, table, creation
// time and body, and the queue's InnoDB id. A trigger dropped and made again
// (the writes between went unrecorded) has a new creation time, and a queue
// truncated or made again a new id.
func (r *Runner) stampOf(ctx context.Context, q dbconn.Querier, trs []captureTrigger, queue string) (string, error) {
	id, err := capture.Identity(ctx, q, r.vars.Flavor, r.cfg.Database, queue)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, f := range trs {
		fmt.Fprintf(h, "%q %q %q %q\n", f.name, f.on, f.created, f.body)
	}
	fmt.Fprintf(h, "queue %d", id)
	return hex.EncodeToString(h.Sum(nil)), nil
}

// errOriginalChanged: the original was truncated or altered behind the
// triggers' back; the run stops before the swap.
var errOriginalChanged = errors.New("the table changed in a way its triggers do not record")

// definitionOn hashes the original's definition as SHOW CREATE TABLE gives
// it on q (a connection holding a lock on it may be the only one that can),
// with its row version (rowVersion).
func (r *Runner) definitionOn(ctx context.Context, q dbconn.Querier) (string, error) {
	ddl, err := r.showCreate(ctx, q)
	if err != nil {
		return "", err
	}
	version, err := r.rowVersion(ctx, q)
	if err != nil {
		return "", err
	}
	return hashDefinition(ddl+version, false), nil
}

// showCreateHash hashes SHOW CREATE TABLE of the original on q alone.
func (r *Runner) showCreateHash(ctx context.Context, q dbconn.Querier) (string, error) {
	ddl, err := r.showCreate(ctx, q)
	if err != nil {
		return "", err
	}
	return hashDefinition(ddl, false), nil
}

// showCreate is SHOW CREATE TABLE of the original on q.
func (r *Runner) showCreate(ctx context.Context, q dbconn.Querier) (string, error) {
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
	// Closed before the next query: q may be a single connection.
	return ddl, rows.Close()
}

// rowVersion tells apart two versions of the original that SHOW CREATE
// TABLE does not: a column dropped and added again in place by an INSTANT
// ALTER (its values gone, its definition the same, the InnoDB id kept).
// MySQL 8.0.29+ counts such versions (INNODB_TABLES.TOTAL_ROW_VERSIONS;
// earlier ones have no INSTANT DROP COLUMN); MariaDB writes the table's
// definition file again, whose time is the table's CREATE_TIME.
func (r *Runner) rowVersion(ctx context.Context, q dbconn.Querier) (string, error) {
	query, args := "SELECT CAST(UNIX_TIMESTAMP(CREATE_TIME) AS CHAR) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?",
		[]any{r.orig.Database, r.orig.Name}
	if r.vars.Flavor != dbconn.MariaDB {
		query, args = "SELECT CAST(TOTAL_ROW_VERSIONS AS CHAR) FROM information_schema.INNODB_TABLES WHERE NAME = ?", []any{r.orig.Database + "/" + r.orig.Name}
	}
	rows, err := q.QueryContext(ctx, query, args...)
	if dbconn.ErrorNumber(err) == errBadField {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read the row version of %s: %w", r.orig.Name, err)
	}
	defer rows.Close()
	var v sql.NullString
	for rows.Next() {
		if err := rows.Scan(&v); err != nil {
			return "", err
		}
	}
	if err := rows.Err(); err != nil {
		return "", fmt.Errorf("read the row version of %s: %w", r.orig.Name, err)
	}
	return "\nversion " + v.String, nil
}

// nextSecond waits, on MariaDB, until the server's clock is past the second
// in which rowVersion was read: an ALTER after that, once rows are copied,
// leaves a CREATE_TIME that differs from the one read.
func (r *Runner) nextSecond(ctx context.Context) error {
	if r.vars.Flavor != dbconn.MariaDB {
		return nil
	}
	var from, now int64
	if err := r.db.QueryRowContext(ctx, "SELECT UNIX_TIMESTAMP()").Scan(&from); err != nil {
		return err
	}
	for now = from; now == from; {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if err := r.db.QueryRowContext(ctx, "SELECT UNIX_TIMESTAMP()").Scan(&now); err != nil {
			return err
		}
	}
	return nil
}

// errBadField is the server's error for an unknown column.
const errBadField = 1054

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

// dropCaptureTriggers drops the triggers named, on the original, or on the
// old table once the swap moved them there.
func (r *Runner) dropCaptureTriggers(ctx context.Context, names []string) error {
	on := r.orig.Name
	if r.swapped.Load() {
		on = r.names.Old
	}
	for _, n := range names {
		if err := r.dropTrigger(ctx, n, on); err != nil {
			return err
		}
	}
	return nil
}

// dropTrigger drops trigger name of table on, if it exists, through the
// guard (DROP TRIGGER waits for every transaction on its table).
func (r *Runner) dropTrigger(ctx context.Context, name, on string) error {
	err := r.lockGuard(on).Run(ctx, "DROP TRIGGER "+name, func(ctx context.Context, conn *sql.Conn) error {
		_, err := conn.ExecContext(ctx, "DROP TRIGGER IF EXISTS "+dbconn.QuoteTable(r.cfg.Database, name))
		return err
	})
	if err != nil {
		return fmt.Errorf("drop the change-capture trigger %s of %s: %w", name, on, err)
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
	return slices.DeleteFunc(slices.Clone(all), func(a string) bool { return slices.Contains(drop, a) })
}

// binlogUnreadable refuses binlog capture of a MariaDB table whose row
// events sluice's reader cannot take: a COMPRESSED column (logged in a type
// the reader cannot decode) or a long unique key (USING HASH, whose hidden
// column the row events carry beyond the table's columns). The first change
// to the table would stop the run. Trigger capture reads keys only. Pure.
func binlogUnreadable(t *schema.Table, triggers bool) error {
	if triggers {
		return nil
	}
	for _, c := range t.Columns {
		if strings.Contains(strings.ToUpper(c.ColumnType), "COMPRESSED") {
			return preflightErr("column %s is COMPRESSED, whose values in the binlog's row events sluice cannot read, so the first change to %s would stop the run: use --capture=triggers", c.Name, t.Name)
		}
	}
	for _, ix := range t.Indexes {
		if ix.Unique && strings.EqualFold(ix.Kind, "HASH") {
			return preflightErr("unique key %s of %s is a long unique key (USING HASH), whose hidden column the binlog's row events carry, which sluice cannot read, so the first change to %s would stop the run: use --capture=triggers", ix.Name, t.Name, t.Name)
		}
	}
	return nil
}
