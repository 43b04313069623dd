package migration

import (
	"context"
	crand "crypto/rand"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicedb/sluice/internal/apply"
	"github.com/sluicedb/sluice/internal/binlog"
	"github.com/sluicedb/sluice/internal/capture"
	"github.com/sluicedb/sluice/internal/checksum"
	"github.com/sluicedb/sluice/internal/chunk"
	"github.com/sluicedb/sluice/internal/copier"
	"github.com/sluicedb/sluice/internal/ddl"
	"github.com/sluicedb/sluice/internal/plan"
	"github.com/sluicedb/sluice/internal/rowkey"
	"github.com/sluicedb/sluice/internal/schema"
	"github.com/sluicedb/sluice/internal/throttle"
)

// Runner runs one migration. Use New, then Run once.
type Runner struct {
	cfg Config
	log *slog.Logger

	db      *sql.DB
	alter   *ddl.Alter
	orig    *schema.Table
	shadow  *schema.Table
	names   schema.Names
	key     rowkey.Cols
	mapping *schema.Mapping

	sched    *apply.Scheduler
	tracker  *apply.Tracker // keys changed since the checksum (verify.go)
	applier  *apply.Applier
	streamer *binlog.Streamer // nil with capture by triggers
	// queue and poller capture changes by triggers (capture.go); queueMade
	// and captureTriggers say what of them exists; tableID and origDef are
	// the original's InnoDB id and definition when the triggers were made,
	// captureStamp the triggers and queue as made (stampOf).
	queue           *capture.Queue
	poller          *capture.Poller
	queueMade       bool
	captureTriggers atomic.Bool
	keptCapture     bool // an earlier run's, left for a run with --capture=triggers
	tableID         uint64
	origDef         string
	rebuildBase     atomic.Int64 // the streamer's rebuilds when tableID was read (intact.go)
	rebased         atomic.Bool
	atCutover       atomic.Bool // the tables are compared for the last time
	captureStamp    string
	// copier is set by the copy phase and read by the progress reporter.
	copier   atomic.Pointer[copier.Copier]
	throttle *throttle.Throttler
	lag      *lagWatch // nil: no replica is watched (replicas.go)

	vars ServerVars
	plan *plan.Plan
	path plan.Path // the path taken (the plan's, or the forced one)
	ddl  plan.DDL  // index-build settings

	deferred                       []schema.KeyDef // secondary indexes built after the copy
	grants                         Grants          // the account's, as checkPrivileges read them
	related                        []string        // tables foreign keys connect to the original (children.go)
	swapPlan                       swapPlan        // the next cut-over attempt's procedure (swapproc.go)
	shadowCreated, postponeCreated bool
	ckptCreated                    bool
	// runLock holds the table's named lock for the run (resume.go); its
	// watch owns it until runLockQuit is called and runLockDone closed.
	// lockLost says another session took the lock meanwhile.
	runLock     *sql.Conn
	runLockID   int64
	runLockQuit context.CancelFunc
	runLockDone chan struct{}
	lockLost    atomic.Bool
	// resume is the checkpoint this run takes up (nil: a fresh run); ckpt
	// is the one it records.
	resume, ckpt *checkpoint
	ckptMu       sync.Mutex // serialises checkpoint writes
	// sentry: the MariaDB cut-over's sentry table, once made (sentry.go).
	sentry string
	// copyHeld: the apply is held (Scheduler.Hold) until the catch-up;
	// uniqueInCopy: because the shadow has a unique key during the copy.
	copyHeld, uniqueInCopy bool
	copySettle             copySettle // one copy collision settled at a time (backlog.go)
	// newPKCollides: the ALTER gives the new table a primary key that two
	// rows of the original may share (rowkey.go).
	newPKCollides bool
	// checksummed: the checksum ran beside the index build.
	checksummed bool
	swapped     atomic.Bool
	// shadowTriggers: copies of the triggers may be on the shadow
	// (triggers.go); the apply is not let go while they may be.
	shadowTriggers atomic.Bool
	// renaming is set just before the RENAME is sent: from then on the binlog
	// reader may see sluice's own RENAME, which is no reason to stop.
	renaming atomic.Bool
	// applyDone is closed when the apply workers stop, applyErr set first.
	applyDone chan struct{}
	applyErr  error
	phase     atomic.Value // string
	// lockAttempts counts Result.LockAttempts: an apply worker settling a
	// unique-key conflict takes a lock too (settleConflict).
	lockAttempts atomic.Int64
	lockWait     lockWaits
	// started is when Run began; observed is what Status reads of the
	// run, once its capture runs (status.go).
	started  time.Time
	observed atomic.Pointer[observed]
	// group: the runs this one is swapped with (group.go); nil alone.
	group *group
	res   Result
	live  *live // what the operator changes meanwhile (operator.go)
}

// New validates cfg and returns a Runner. It does not touch the server.
func New(cfg Config) (*Runner, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	// A character set or collation the parser does not know may be the
	// server's: the clause is parsed again once the server taught it its
	// names (preflight).
	alter, err := ddl.Parse(cfg.Alter)
	if err != nil && !errors.Is(err, ddl.ErrUnknownName) {
		return nil, err
	}
	// Every connection of the run carries its id, so the metadata-lock guard
	// never takes sluice's own sessions for blockers.
	var id [8]byte
	crand.Read(id[:])
	cfg.Conn.RunID = hex.EncodeToString(id[:])
	r := &Runner{cfg: cfg, log: cfg.Logger, alter: alter, names: schema.NamesFor(cfg.Table), sched: apply.NewScheduler(),
		tracker: apply.NewTracker(), live: newLive(cfg)}
	r.phase.Store("new")
	if cfg.Observe != nil {
		cfg.Observe(r.Status)
	}
	if cfg.Attach != nil {
		if err := cfg.Attach(r); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Run performs the migration. On any error, or when ctx is cancelled, the
// original table is left as it was, no lock is held, and the shadow table is
// dropped; the returned error says why.
func (r *Runner) Run(ctx context.Context) (res Result, err error) {
	start := time.Now()
	r.started = start
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	r.live.mu.Lock()
	r.live.cancel = cancel
	r.live.mu.Unlock()
	defer close(r.live.done)
	defer func() {
		if cerr := r.teardown(ctx, err); cerr != nil {
			err = errors.Join(err, cerr)
		}
		if err != nil && r.earlierCaptureKept() {
			err = fmt.Errorf("%w (the earlier run's change-capture triggers stay on %s, recording every write, for the run that takes up its checkpoint)", err, r.orig.Name)
		}
		r.res.Total = time.Since(start)
		r.res.LockAttempts = int(r.lockAttempts.Load())
		r.res.Swapped = r.swapped.Load()
		res = r.res
	}()

	if err := r.runPhase(ctx, "preflight", r.preflight); err != nil || r.res.AlreadyDone {
		return r.res, stoppedBecause(ctx, err)
	}
	if err := r.group.passed(ctx, r); err != nil { // group.go
		return r.res, err
	}
	if r.path != plan.PathCopy {
		name, fn := "instant", r.runInstant
		if r.path == plan.PathInplace {
			name, fn = "in-place", r.runInplace
		}
		r.res.Path = string(r.path)
		err := r.runPhase(ctx, name, fn)
		if err == nil || !errors.Is(err, errRefused) || r.cfg.Method != "auto" {
			return r.res, stoppedBecause(ctx, err)
		}
		r.log.Info("the server refused the "+name+" path; taking the copy path", "reason", err)
		r.path = plan.PathCopy
		if err := r.copyPreflight(ctx); err != nil {
			return r.res, err
		}
	}
	r.res.Path = string(plan.PathCopy)
	for _, p := range []struct {
		name string
		fn   func(context.Context) error
	}{
		{"shadow", r.createShadow},
		{"capture", func(ctx context.Context) error { return r.startCapture(ctx, cancel) }},
		{"copy", r.copyRows},
		{"index", r.buildIndexes},
		{"catch-up", r.catchUp},
		{"checksum", r.checksum},
		{"postponed", r.waitForCutover},
		{"cut-over", r.cutover},
	} {
		if p.name == "postponed" && !r.postponing() {
			continue
		}
		if err := r.runPhase(ctx, p.name, p.fn); err != nil {
			if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) && !r.swapped.Load() {
				if errors.Is(err, ErrChildrenOnShadow) { // kept whatever stopped the run (children.go)
					return r.res, errors.Join(cause, err)
				}
				return r.res, cause
			}
			return r.res, err
		}
	}
	return r.res, nil
}

// stoppedBecause returns, for err, what stopped the run, if something did
// (its context's cause: a lost lock, a failed worker), rather than the bare
// cancellation that err then is.
func stoppedBecause(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); err != nil && cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return err
}

func (r *Runner) runPhase(ctx context.Context, name string, fn func(context.Context) error) error {
	if err := r.waitResumed(ctx, name); err != nil {
		return err
	}
	r.phase.Store(name)
	if r.cfg.OnPhase != nil {
		r.cfg.OnPhase(name)
	}
	t := time.Now()
	r.log.Info("phase start", "phase", name)
	err := fn(ctx)
	d := time.Since(t)
	r.res.Phases = append(r.res.Phases, PhaseTime{Name: name, Duration: d})
	if err != nil {
		return err
	}
	r.log.Info("phase done", "phase", name, "took", d.Round(time.Millisecond))
	return nil
}

// Phase returns the name of the running phase.
func (r *Runner) Phase() string { return r.phase.Load().(string) }

// earlierCaptureKept reports whether the run stops with the capture by
// triggers of the run it takes up not yet taken up with that run's shadow
// and checkpoint: all three stay for the next run (takeUpCapture).
func (r *Runner) earlierCaptureKept() bool {
	return r.resume != nil && r.resume.Capture == CaptureTriggers && !r.shadowCreated
}

// teardown stops background work and, unless the swap happened, drops the
// shadow table. It runs even when ctx is done.
func (r *Runner) teardown(ctx context.Context, runErr error) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 60*time.Second)
	defer cancel()
	if r.streamer != nil {
		r.streamer.Close()
	}
	var errs []error
	// A run that failed in a way a later run can get past keeps its work.
	// The checkpoint loop may still be writing it.
	r.ckptMu.Lock()
	recorded := r.ckpt != nil && r.ckpt.resumable()
	r.ckptMu.Unlock()
	keep := runErr != nil && resumable(runErr) && r.shadowCreated && !r.swapped.Load() && recorded && !r.lockLost.Load()
	if keep {
		if err := r.finalCheckpoint(cctx); err != nil {
			r.log.Warn("could not record the last progress; the next run resumes from an earlier checkpoint", "error", err)
		}
	}
	if err := r.stopLagWatch(cctx); err != nil && r.db != nil {
		errs = append(errs, err)
	}
	switch {
	case r.db == nil:
	case r.lockLost.Load():
		// Another run may be at work on them.
		r.log.Warn("the migration's lock is lost: every table is left as it is")
		r.db.Close()
		return errors.Join(errs...)
	case keep:
		r.res.Kept = r.names.Shadow
		r.log.Warn("kept the new table and its checkpoint: run the same command again to resume, or with --restart to start over",
			"shadow", r.names.Shadow, "checkpoint", r.names.Checkpoint)
	case r.earlierCaptureKept():
		r.log.Warn("the earlier run's change-capture triggers stay, recording every write, with its new table and checkpoint", "table", r.orig.Name)
	default:
		if r.queue != nil {
			if err := r.dropCapture(cctx); err != nil {
				errs = append(errs, err)
			}
		}
		for _, t := range []struct {
			made       bool
			name, what string
		}{
			{r.shadowCreated && !r.swapped.Load(), r.names.Shadow, "the shadow table"},
			{r.postponeCreated, r.names.Postpone, "the postponed cut-over's table"},
			{r.ckptCreated, r.names.Checkpoint, "the checkpoint table"},
		} {
			if !t.made {
				continue
			}
			if err := r.dropGuarded(cctx, t.name); err != nil {
				errs = append(errs, fmt.Errorf("drop %s %s: %w (drop it by hand)", t.what, t.name, err))
			} else if runErr != nil && t.name == r.names.Shadow {
				r.log.Info("dropped the shadow table", "table", t.name)
			}
		}
	}
	if r.db != nil && r.orig != nil && (r.swapPlan.proc != "" || len(r.orig.ForeignKeys) > 0 || len(r.orig.Children) > 0) {
		if err := r.dropSwapProc(cctx); err != nil {
			r.log.Warn("could not drop the cut-over's procedure; drop it by hand", "err", err)
		}
	}
	if r.db != nil && r.sentry != "" && !r.swapped.Load() {
		// A cut-over that gave up may leave its sentry; dropped only if it
		// is one (a swap whose reply was lost made that name the original).
		if err := r.dropSentry(cctx, r.sentry); err != nil {
			errs = append(errs, fmt.Errorf("drop the cut-over sentry %s: %w (drop it by hand)", r.sentry, err))
		}
	}
	if r.db != nil {
		r.releaseRunLock(cctx)
		r.db.Close()
	}
	return errors.Join(errs...)
}

// startCapture starts capturing changes (from the binlog, or by triggers:
// capture.go) and applying them, each once its row is copied, and watches
// both for errors, which cancel the run.
func (r *Runner) startCapture(ctx context.Context, cancel context.CancelCauseFunc) error {
	// The binlog's position first: every change after it is read.
	var pos binlog.Position
	if !r.triggerCapture() {
		var err error
		if pos, err = r.binlogStart(ctx); err != nil {
			return err
		}
	}
	// Before the first change arrives: no key may reach the shadow before
	// the copy has copied its row.
	ord, ordErr := apply.NewOrder(ctx, r.db, r.key)
	if ordErr != nil {
		r.log.Info("changes wait for the end of the copy", "reason", ordErr)
	}
	// Each held key's mark carries the stream's position (checkpoints).
	var live atomic.Pointer[binlog.Streamer]
	r.sched.SetClock(func() binlog.Position {
		if st := live.Load(); st != nil {
			return st.Position()
		}
		return pos
	})
	if ordErr == nil {
		// Changes are applied while the copy runs, each once its row is
		// copied.
		r.sched.TrackCopy(ctx, ord)
		if r.resume != nil && !r.resume.Copied {
			if err := r.resumeWithin(ctx); err != nil {
				return err
			}
		}
	}
	if r.resume != nil && r.resume.Copied {
		// Before the first checkpoint: one written before the copy phase
		// must say so too.
		r.sched.CopyDone()
	}
	keptUnique, err := r.shadowHasUnique(ctx)
	if err != nil {
		return err
	}
	if ordErr != nil || keptUnique {
		// With a unique index kept on the shadow during the copy, a
		// collision between rows copied at different times could not be
		// told from a real one, so the apply waits for the copy instead.
		if keptUnique {
			r.log.Info("changes wait for the end of the copy", "reason", "a unique secondary index is kept on the new table during the copy")
		}
		r.sched.Hold(true) // keys wait until the copy is done
		r.copyHeld, r.uniqueInCopy = true, keptUnique
	}
	if r.triggerCapture() {
		if err := r.startTriggerCapture(ctx, cancel); err != nil {
			return err
		}
	} else {
		if err := r.readBinlog(ctx, pos); err != nil {
			return err
		}
		live.Store(r.streamer)
	}
	r.applier, err = apply.New(apply.Config{DB: r.db, Mapping: r.mapping, Key: r.key, Workers: r.cfg.ApplyWorkers, Flavor: r.vars.Flavor,
		Settle: r.settleConflict}, r.sched)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	wg.Add(2)
	r.applyDone = make(chan struct{})
	go func() {
		defer wg.Done()
		err := r.applier.Run(ctx)
		r.applyErr = err
		close(r.applyDone)
		if err != nil && !r.settling() {
			if errors.Is(err, apply.ErrDuplicate) && !errors.Is(err, errCollision) {
				err = fmt.Errorf("%w: %w", errCollision, err)
			}
			cancel(err)
		}
	}()
	go func() {
		defer wg.Done()
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if r.streamer == nil {
					return // the queue's poller stops the run itself (capture.go)
				}
				if err := r.streamer.Err(); err != nil && !r.settling() {
					cancel(err)
					return
				}
			}
		}
	}()
	if err := r.startLagWatch(ctx); err != nil {
		return err
	}
	r.observe(r.started)
	go r.reportProgress(ctx)
	// The first check before the copy starts: no chunk is copied under a load
	// over --max-load, nor while a replica lags.
	if err := r.throttle.Check(ctx); err != nil {
		return err
	}
	go func() {
		// Until the run ends; a stop it asks for after the swap began is moot.
		if err := r.throttle.Run(ctx); err != nil && !r.settling() {
			cancel(err)
		}
	}()
	go r.checkpointLoop(ctx)
	return nil
}

// binlogStart returns the binlog position changes are read from: the
// current end, or a resumed run's checkpoint.
func (r *Runner) binlogStart(ctx context.Context) (binlog.Position, error) {
	pos, err := binlog.CurrentPosition(ctx, r.db)
	if err != nil {
		return pos, err
	}
	if r.resume != nil {
		return r.resume.position(), nil
	}
	return pos, r.waitPreparedXA(ctx) // before the copy: see xa.go
}

// readBinlog starts reading the binlog from pos and records the first
// checkpoint.
func (r *Runner) readBinlog(ctx context.Context, pos binlog.Position) error {
	tlsConf, err := r.cfg.Conn.TLS()
	if err != nil {
		return err
	}
	writers, err := r.tableWriters(ctx) // writers.go
	if err != nil {
		return err
	}
	r.streamer, err = binlog.Start(ctx, binlog.Config{
		Conn: r.cfg.Conn, TLS: tlsConf, Database: r.cfg.Database, Table: r.cfg.Table,
		Columns: len(r.orig.Columns), Key: r.key, Sink: sinks{sched: r.sched, tracker: r.tracker}, FoldCase: r.vars.LowerCaseNames != 0,
		CascadeParents: r.cascadeParents(), Writers: writers, ChildrenFollow: r.renameUnderLock(), Flavor: r.vars.Flavor, Logger: r.log,
	}, pos)
	if err != nil {
		return err
	}
	r.log.Info("reading changes from the binlog", "position", pos.String())
	if err := r.recordOriginal(ctx); err != nil { // intact.go
		return err
	}
	if r.resume == nil {
		// The first checkpoint: everything to copy, every change from pos.
		r.ckpt.File, r.ckpt.Pos, r.ckpt.Todo = pos.File, pos.Pos, []todoSpan{{}}
		r.ckpt.TableID, r.ckpt.OrigDef = r.tableID, r.origDef
		if err := r.saveCheckpoint(ctx, r.ckpt); err != nil {
			return err
		}
	}
	// A DDL from now on is seen in the binlog; one between preflight and
	// here is not, so the table is read again.
	return r.recheckOriginal(ctx)
}

func (r *Runner) copyRows(ctx context.Context) error {
	within, done, err := r.resumeCopy(ctx)
	if err != nil || done {
		return err
	}
	c, err := copier.New(copier.Config{
		DB: r.db, Mapping: r.mapping, Key: r.key, Workers: max(r.copyThreads(), 1), MaxWorkers: maxThreads,
		Chunk:  chunk.Config{Target: r.live.get().chunkTime, Limit: r.chunkLimit},
		Spans:  r.sched,
		Gate:   r.throttle,
		Within: within,
		Logger: r.log,
		// With a unique key during the copy, a row moved meanwhile may
		// collide with its own earlier copy.
		OnDuplicate: r.settleCopyCollisionIf(r.uniqueInCopy),
	})
	if err != nil {
		return err
	}
	r.copier.Store(c)
	// A setting the operator changed before the copier was stored.
	c.SetWorkers(r.copyThreads())
	c.SetChunkTime(r.live.get().chunkTime)
	r.db.SetMaxOpenConns(r.poolSizeFor(r.copyThreads()))
	err = c.Run(ctx)
	r.res.Throttled = r.throttle.Throttled()
	r.res.CopyLanes, r.res.ChunkTarget = c.Lanes(), c.ChunkTime()
	r.res.SlowestChunk, r.res.SlowestChunkRows = c.Slowest()
	if err == nil {
		r.res.KeysAppliedInCopy = r.applier.Applied()
		r.sched.CopyDone()
		if !r.copyHeld {
			r.log.Info("changes during the copy", "applied", r.res.KeysAppliedInCopy, "lanes", r.res.CopyLanes)
		}
	}
	r.res.RowsCopied = c.Rows()
	switch {
	case errors.Is(err, copier.ErrDuplicate) && r.uniqueInCopy:
		// A unique key of the new table is there during the copy: a row
		// the application moved to another key meanwhile may have been
		// copied at both keys.
		return fmt.Errorf("two rows copied collide under a unique key of the new table, so the migration stops (no row was dropped): either the original holds duplicates (sluice plan counts them) or the application moved a row to another key while it was copied (then run sluice again): %w", err)
	case errors.Is(err, copier.ErrDuplicate):
		return fmt.Errorf("the original table holds rows that collide under a unique key of the new table, so the migration stops (no row was dropped): %w", err)
	}
	return err
}

// checksum drains every change under a brief read lock on the original,
// opens consistent snapshots on several connections at that instant, releases
// the lock, and compares the tables in those snapshots while the application
// and the apply workers go on. It has nothing left to do when the comparison
// ran beside the index build.
func (r *Runner) checksum(ctx context.Context) error {
	if r.checksummed {
		return nil
	}
	snap, err := r.openSnapshots(ctx)
	if err != nil {
		return err
	}
	defer snap.close()
	return r.compare(ctx, snap.conns)
}

// snapshots are connections inside consistent snapshots of one instant.
type snapshots struct {
	conns []*sql.Conn
	done  bool
}

// close ends the snapshots and discards the connections (their session
// settings differ from the pool's).
func (s *snapshots) close() {
	if s.done {
		return
	}
	s.done = true
	for _, c := range s.conns {
		c.Raw(func(any) error { return driver.ErrBadConn })
		c.Close()
	}
}

// openSnapshots opens ChecksumWorkers+1 connections (one cuts ranges, the
// others compare) and, under a brief read lock on the original after every
// change is drained, a consistent snapshot on each.
func (r *Runner) openSnapshots(ctx context.Context) (*snapshots, error) {
	n := r.cfg.ChecksumWorkers + 1
	snap := &snapshots{}
	for i := 0; i < n; i++ {
		c, err := r.db.Conn(ctx)
		if err != nil {
			snap.close()
			return nil, fmt.Errorf("checksum: %w", err)
		}
		snap.conns = append(snap.conns, c)
		// A consistent snapshot needs REPEATABLE READ.
		if _, err := c.ExecContext(ctx, "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ"); err != nil {
			snap.close()
			return nil, fmt.Errorf("checksum: %w", err)
		}
	}
	err := r.drainUnderReadLock(ctx, "checksum snapshot", false, func(ctx context.Context, _ *sql.Conn) error {
		for _, c := range snap.conns {
			if _, err := c.ExecContext(ctx, "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY"); err != nil {
				return fmt.Errorf("checksum: open snapshot: %w", err)
			}
		}
		// Every change from here on is after the snapshot: record it for
		// the final guard (verify.go).
		r.tracker.Start()
		return r.rebase(ctx) // intact.go
	})
	if err != nil {
		snap.close()
		return nil, err
	}
	return snap, nil
}

// compare checksums both tables on snapshot connections.
func (r *Runner) compare(ctx context.Context, conns []*sql.Conn) error {
	res, err := checksum.Compare(ctx, conns, checksum.Config{Mapping: r.mapping, Key: r.key})
	r.res.ChecksumRows, r.res.ChecksumChunks, r.res.ChecksumSkipped = res.Rows, res.Chunks, res.Skipped
	if errors.Is(err, checksum.ErrMismatch) {
		return fmt.Errorf("the shadow table does not match the original, so there is no cut-over: %w", err)
	}
	if err != nil {
		// A lock wait, a lost connection: no verdict on the tables.
		return fmt.Errorf("the checksum could not finish, so there is no cut-over (the tables were not found to differ): %w", err)
	}
	if len(res.Skipped) > 0 {
		r.log.Warn("the checksum compared only whether these columns are NULL: their type change has no exact SQL form", "columns", strings.Join(res.Skipped, ","))
	}
	r.log.Info("checksum matches", "rows", res.Rows, "chunks", res.Chunks)
	return nil
}

func (r *Runner) reportProgress(ctx context.Context) {
	t := time.NewTicker(r.cfg.ProgressInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if r.swapped.Load() {
			return
		}
		s := r.Status()
		attrs := []any{"phase", s.Phase, "elapsed", s.Elapsed.Round(time.Second)}
		if c := r.copier.Load(); c != nil {
			pct := min(100, float64(s.RowsCopied)*100/float64(s.RowsEstimated))
			attrs = append(attrs, "copied", s.RowsCopied, "estimated", s.RowsEstimated, "pct", fmt.Sprintf("%.1f", pct), "chunk", c.ChunkSize())
			if s.ETA > 0 {
				attrs = append(attrs, "eta", s.ETA.Round(time.Second))
			}
		}
		attrs = append(attrs, "backlog", s.Backlog, "applied", s.Applied)
		attrs = append(attrs, r.queueProgress()...)
		attrs = append(attrs, r.lagProgress()...)
		if s.Throttle != "" && s.Phase == "copy" {
			attrs = append(attrs, "paused", s.Throttle)
		}
		r.log.Info("progress", attrs...)
	}
}
