package migration

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/sluicedb/sluice/internal/throttle"
)

// What the operator may do to a running migration (sluice ctl, through the
// control socket): pause and resume it, change its settings, postpone or
// trigger the cut-over, abort it. Each is safe to call from any goroutine at
// any moment of the run; none sends SQL of the operator's to the server.

// ErrAborted is why a run the operator aborted stopped.
var ErrAborted = errors.New("aborted by the operator (sluice ctl abort); the original table is unchanged")

// errTooLate refuses what can no longer be done once the swap is under way.
var errTooLate = errors.New("the cut-over has begun")

// pausedReason is the throttle's reason while the operator pauses the run.
const pausedReason = "paused by the operator (sluice ctl resume lets it go on)"

// maxThreads is the most copy workers the operator may ask for.
const maxThreads = 64

// live holds what the operator changes while the run goes on.
type live struct {
	mu      sync.Mutex
	paused  bool
	since   time.Time     // when the pause began
	resumed chan struct{} // closed while not paused
	cancel  context.CancelCauseFunc
	// postpone: the cut-over waits for the operator; decided: the run has
	// passed the point where it looks (postpone can no longer change);
	// release: the operator said to cut over.
	postpone, decided, release bool
	// cutting: the cut-over phase has begun (no pause from then on);
	// locks: table-lock attempts under way; aborted: Abort was called
	// (the swap must not begin); done is closed when the run ends.
	cutting, aborted  bool
	done              chan struct{}
	locks             int
	threads           int
	chunkTime, maxLag time.Duration
	// database and table name the run for Status (preflight spells them
	// as the server stores them).
	database, table string
}

func newLive(cfg Config) *live {
	l := &live{resumed: make(chan struct{}), done: make(chan struct{}), postpone: cfg.PostponeCutover, threads: cfg.CopyWorkers,
		chunkTime: cfg.ChunkTime, maxLag: cfg.MaxLag, database: cfg.Database, table: cfg.Table}
	close(l.resumed)
	return l
}

func (l *live) get() live {
	l.mu.Lock()
	defer l.mu.Unlock()
	return live{paused: l.paused, since: l.since, postpone: l.postpone && !l.release, threads: l.threads, chunkTime: l.chunkTime,
		maxLag: l.maxLag, database: l.database, table: l.table}
}

func (l *live) name(database, table string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.database, l.table = database, table
}

// waitResumed returns once the run is not paused, or ctx is done. With
// phase "cut-over" it marks the cut-over as begun in the same step, so that
// no pause is accepted after it.
func (r *Runner) waitResumed(ctx context.Context, phase string) error {
	for logged := false; ; logged = true {
		r.live.mu.Lock()
		resumed, paused := r.live.resumed, r.live.paused
		if !paused && phase == "cut-over" {
			r.live.cutting = true
		}
		r.live.mu.Unlock()
		if !paused {
			return nil
		}
		if !logged {
			r.log.Info("paused by the operator; waiting for sluice ctl resume", "phase", r.Phase())
		}
		select {
		case <-resumed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// errPausedAttempt ends a sequence of lock attempts that a pause caught
// between two attempts; withLocks starts it again after the resume.
var errPausedAttempt = errors.New("paused before a lock attempt")

// attemptBegin counts a table-lock attempt under way until attemptEnd
// (Pause waits for it), unless the run is paused: then no attempt starts.
func (r *Runner) attemptBegin() error {
	r.live.mu.Lock()
	defer r.live.mu.Unlock()
	r.live.locks++ // attemptEnd runs in any case
	if r.live.paused && !r.live.cutting {
		return errPausedAttempt
	}
	return nil
}

func (r *Runner) attemptEnd() {
	r.live.mu.Lock()
	r.live.locks--
	r.live.mu.Unlock()
}

// beginRename marks the swap as begun unless the operator aborted first:
// from then on Abort refuses.
func (r *Runner) beginRename() bool {
	r.live.mu.Lock()
	defer r.live.mu.Unlock()
	if r.live.aborted {
		return false
	}
	r.renaming.Store(true)
	return true
}

// stopApply sets the apply and the copy's throttle to the pause state;
// r.live.mu must be held.
func (r *Runner) stopApplyLocked() {
	r.sched.Stop(r.live.paused)
	if r.observed.Load() != nil {
		reason := ""
		if r.live.paused {
			reason = pausedReason
		}
		r.throttle.SetOperator(reason)
	}
}

// Pause stops the copy and the apply until Resume: the chunks and batches
// in flight finish, no new one starts, and no phase that writes (or locks)
// begins. The binlog is still read, so the changes wait in memory. An index
// build or a checksum already running goes on to its end.
func (r *Runner) Pause(ctx context.Context) (string, error) {
	r.live.mu.Lock()
	if r.live.cutting || r.settling() {
		r.live.mu.Unlock()
		return "", fmt.Errorf("%w: it is too late to pause", errTooLate)
	}
	if r.live.paused {
		r.live.mu.Unlock()
		return "already paused", nil
	}
	r.live.paused, r.live.since, r.live.resumed = true, time.Now(), make(chan struct{})
	r.stopApplyLocked()
	resumed := r.live.resumed
	r.live.mu.Unlock()
	go r.watchRetention(resumed)
	// The chunks, batches and table-lock attempts in flight finish.
	deadline := time.Now().Add(30 * time.Second)
	for r.busy() > 0 && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	r.live.mu.Lock()
	still := r.live.paused && r.live.resumed == resumed
	r.live.mu.Unlock()
	if !still {
		return "paused, and resumed again meanwhile", nil
	}
	r.log.Warn("paused by the operator: nothing is copied or applied until sluice ctl resume", "phase", r.Phase())
	msg := fmt.Sprintf("paused during %s: nothing is copied or applied until resume; changes are still read (%d wait)", r.Phase(), r.sched.Backlog())
	if n := r.busy(); n > 0 {
		msg += fmt.Sprintf("; %d statements or lock attempts were still running after 30s", n)
	}
	return msg, nil
}

// busy counts the copy's chunks, the apply's batches and the table-lock
// attempts in flight.
func (r *Runner) busy() int {
	r.live.mu.Lock()
	n := r.live.locks
	r.live.mu.Unlock()
	n += r.sched.InFlight()
	if r.observed.Load() != nil {
		n += r.throttle.Busy()
	}
	return n
}

// Resume lifts the operator's pause.
func (r *Runner) Resume() (string, error) {
	r.live.mu.Lock()
	defer r.live.mu.Unlock()
	if !r.live.paused {
		return "not paused", nil
	}
	d := time.Since(r.live.since)
	r.live.paused = false
	close(r.live.resumed)
	r.stopApplyLocked()
	r.log.Info("resumed by the operator", "paused", d.Round(time.Millisecond))
	return fmt.Sprintf("resumed after %s", d.Round(time.Millisecond)), nil
}

// watchRetention warns while a pause nears the server's binlog retention:
// a run that stops past it cannot resume from its checkpoint. It counts
// from the pause's start, a lower bound of the age of the binlog the
// checkpoint names.
func (r *Runner) watchRetention(resumed <-chan struct{}) {
	var retention int64
	if r.observed.Load() == nil || r.db.QueryRow("SELECT @@GLOBAL.binlog_expire_logs_seconds").Scan(&retention) != nil || retention <= 0 {
		return
	}
	start, warned := time.Now(), 0
	t := time.NewTicker(10 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-resumed:
			return
		case <-r.live.done:
			return
		case <-t.C:
		}
		if step := retentionStep(time.Since(start), time.Duration(retention)*time.Second); step > warned {
			warned = step
			r.log.Warn("the pause nears the server's binlog retention: resume soon; a run that stops after the binlog it needs is purged must start over",
				"paused", time.Since(start).Round(time.Second), "binlog_expire_logs_seconds", retention)
		}
	}
}

// retentionStep says how near a pause of d is to retention: 0 below half,
// then 1, 2, 3 from a half, three quarters and nine tenths on.
func retentionStep(d, retention time.Duration) int {
	switch {
	case retention <= 0 || d < retention/2:
		return 0
	case d < retention*3/4:
		return 1
	case d < retention*9/10:
		return 2
	}
	return 3
}

// Set changes a setting while the run goes on: threads (copy workers),
// chunk-time, max-load, max-lag, or ignore-replica (a replica no longer
// watched).
func (r *Runner) Set(ctx context.Context, name, value string) (string, error) {
	switch name {
	case "threads":
		n, err := strconv.Atoi(value)
		if err != nil || n < 1 || n > maxThreads {
			return "", fmt.Errorf("threads=%s: give a whole number from 1 to %d", value, maxThreads)
		}
		return r.setThreads(n)
	case "chunk-time":
		d, err := time.ParseDuration(value)
		if err != nil || d < time.Millisecond || d > time.Minute {
			return "", fmt.Errorf("chunk-time=%s: give a duration from 1ms to 1m, e.g. 250ms", value)
		}
		r.live.mu.Lock()
		r.live.chunkTime = d
		r.live.mu.Unlock()
		if c := r.copier.Load(); c != nil {
			c.SetChunkTime(d)
		}
		return "chunk-time=" + d.String(), nil
	case "max-lag":
		d, err := time.ParseDuration(value)
		if err != nil || d <= 0 {
			return "", fmt.Errorf("max-lag=%s: give a duration above 0, e.g. 1.5s", value)
		}
		r.live.mu.Lock()
		r.live.maxLag = d
		r.live.mu.Unlock()
		if r.observed.Load() != nil && r.lag == nil { // r.lag is set before the run is observed
			return "max-lag=" + d.String() + " (no replica is watched)", nil
		}
		return "max-lag=" + d.String(), nil
	case "ignore-replica":
		if r.observed.Load() == nil {
			return "", errors.New("ignore-replica can be set once the copy is under way")
		}
		if r.lag == nil {
			return "", errors.New("ignore-replica: no replica is watched")
		}
		n, err := r.lag.mon.Ignore(value)
		if err != nil {
			return "", fmt.Errorf("ignore-replica=%s: %w", value, err)
		}
		return fmt.Sprintf("ignore-replica=%s (%d replicas still watched)", value, n), nil
	case "max-load":
		spec := value
		if spec == "none" {
			spec = ""
		}
		limits, err := throttle.ParseLimits(spec)
		if err != nil {
			return "", fmt.Errorf("max-load=%s: %w (none: no ceiling)", value, err)
		}
		if r.observed.Load() == nil {
			return "", errors.New("max-load can be changed once the copy is under way")
		}
		if err := r.throttle.SetMaxLoad(ctx, limits); err != nil {
			return "", fmt.Errorf("max-load=%s: %w", value, err)
		}
		return "max-load=" + value, nil
	}
	return "", fmt.Errorf("cannot set %q: threads, chunk-time, max-load, max-lag and ignore-replica can be set", name)
}

func (r *Runner) setThreads(n int) (string, error) {
	c := r.copier.Load()
	if c != nil && r.Phase() != "copy" {
		return "", errors.New("the copy is over: threads change the copy only")
	}
	r.live.mu.Lock()
	r.live.threads = n
	r.live.mu.Unlock()
	if c != nil {
		if err := c.SetWorkers(n); err != nil {
			return "", err
		}
	}
	if r.observed.Load() != nil {
		r.db.SetMaxOpenConns(r.poolSizeFor(n))
	}
	return "threads=" + strconv.Itoa(n), nil
}

// poolSizeFor is the most connections a run opens at once with n copy
// workers.
func (r *Runner) poolSizeFor(n int) int {
	return n + r.cfg.ApplyWorkers + r.cfg.ChecksumWorkers + 8
}

// maxLag is the replica lag over which the copy pauses.
func (r *Runner) maxLag() time.Duration {
	r.live.mu.Lock()
	defer r.live.mu.Unlock()
	return r.live.maxLag
}

// copyThreads is how many workers copy at once.
func (r *Runner) copyThreads() int {
	r.live.mu.Lock()
	defer r.live.mu.Unlock()
	return r.live.threads
}

// Postpone makes the run wait for the operator before its cut-over.
func (r *Runner) Postpone() (string, error) {
	r.live.mu.Lock()
	defer r.live.mu.Unlock()
	switch {
	case r.live.decided && (!r.live.postpone || r.live.release):
		return "", fmt.Errorf("%w: it is too late to postpone it", errTooLate)
	case r.live.postpone && !r.live.release:
		return "already postponed", nil
	}
	r.live.postpone, r.live.release = true, false
	return "cut-over postponed: after the checksum the new table is kept in sync until sluice ctl cutover", nil
}

// Cutover lets a postponed cut-over go ahead.
func (r *Runner) Cutover() (string, error) {
	r.live.mu.Lock()
	defer r.live.mu.Unlock()
	if !r.live.postpone {
		return "", errors.New("the cut-over is not postponed: it runs as soon as the checksum passes")
	}
	r.live.release = true
	if !r.live.decided {
		r.live.postpone = false
		return "the cut-over will run as soon as the checksum passes", nil
	}
	return "cut-over triggered", nil
}

// postponing decides, once, whether the run waits for the operator before
// its cut-over.
func (r *Runner) postponing() bool {
	r.live.mu.Lock()
	defer r.live.mu.Unlock()
	r.live.decided = true
	return r.live.postpone && !r.live.release
}

// released says whether the operator triggered the postponed cut-over.
func (r *Runner) released() bool {
	r.live.mu.Lock()
	defer r.live.mu.Unlock()
	return r.live.release
}

// Abort stops the run: the original table stays as it was and the new
// table is dropped, as after an interrupt.
func (r *Runner) Abort() (string, error) {
	r.live.mu.Lock()
	defer r.live.mu.Unlock()
	switch {
	case r.settling(): // beginRename sets it under this lock
		return "", fmt.Errorf("%w: the swap is being made, too late to abort", errTooLate)
	case r.live.cancel == nil:
		return "", errors.New("the run has not started")
	}
	r.live.aborted = true
	r.live.cancel(ErrAborted)
	if ph := r.Phase(); ph == "instant" || ph == "in-place" {
		return "aborting: the server's ALTER is interrupted; if it had already committed, the table has the new definition (sluice's last line says which)", nil
	}
	return "aborting: the run stops and drops its new table; the original table is unchanged", nil
}
