package migration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/plan"
	"github.com/sluicedb/sluice/internal/schema"
	"github.com/sluicedb/sluice/internal/throttle"
)

// Several tables, one cut-over. RunGroup runs one Runner per table, all at
// once; each copies, catches up and checks its table on its own, then waits at
// its cut-over until every other has come there too. The last to arrive takes
// one LOCK TABLES of every original and shadow through the metadata-lock
// guard, drains and verifies each table on that connection, and swaps them all
// in one RENAME TABLE, which MySQL carries out atomically: the application
// sees every table changed, or none. A table whose run fails stops the
// others: no table is swapped, every original stays as it was.

// RunGroup migrates the tables of cfgs, one Config each, in one database, and
// swaps them together. Results come in the order of cfgs.
func RunGroup(ctx context.Context, cfgs []Config) ([]Result, error) {
	if err := validateGroup(cfgs); err != nil {
		return nil, err
	}
	g := &group{n: len(cfgs), done: make(chan struct{}), allPassed: make(chan struct{}), passedBy: map[*Runner]bool{}}
	runners := make([]*Runner, len(cfgs))
	for i, cfg := range cfgs {
		if cfg.Method == "" || cfg.Method == "auto" {
			cfg.Method = "copy" // INSTANT or in place, a table would change alone
		}
		r, err := New(cfg)
		if err != nil {
			return nil, fmt.Errorf("table %s: %w", cfg.Table, err)
		}
		r.group = g
		if i > 0 {
			// One run id for the group: the guard takes no session of the
			// group for a blocker of its cut-over.
			r.cfg.Conn.RunID = runners[0].cfg.Conn.RunID
		}
		runners[i] = r
	}
	gctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	g.ctx = gctx
	results := make([]Result, len(runners))
	errs := make([]error, len(runners))
	var wg sync.WaitGroup
	for i, r := range runners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = r.Run(gctx)
			if errs[i] != nil && !errors.As(errs[i], new(*stoppedBy)) {
				// The others stop too: no table is swapped without the rest.
				cancel(&stoppedBy{r.cfg.Table, errs[i]})
			}
			g.finished(r, errs[i])
		}()
	}
	wg.Wait()
	if g.err != nil {
		return results, g.err // the cut-over's, or the failure that stopped it
	}
	// The first failure is the cause; the others' errors say they stopped
	// for it.
	if cause := context.Cause(gctx); cause != nil && ctx.Err() == nil {
		return results, cause
	}
	for i, err := range errs {
		if err != nil {
			return results, fmt.Errorf("table %s: %w", cfgs[i].Table, err)
		}
	}
	return results, nil
}

// stoppedBy is why the runs of a group stop when one of them failed. A
// refusal at preflight comes before any run has made a table (passed), so a
// resumed run stopped by it has not yet taken up the earlier run's work,
// which stays for the run after the fix.
type stoppedBy struct {
	table string
	err   error
}

func (e *stoppedBy) Error() string {
	return fmt.Sprintf("the migration of %s failed: %v", e.table, e.err)
}
func (e *stoppedBy) Unwrap() error { return e.err }

// validateGroup refuses, before anything is read from the server, what a
// group cannot do.
func validateGroup(cfgs []Config) error {
	if len(cfgs) < 2 {
		return fmt.Errorf("%w: a group needs two tables or more", ErrConfig)
	}
	seen, made := map[string]bool{}, map[string]string{}
	for _, c := range cfgs {
		// Long names are cut to make the tables' own (_<t>_new, ...): two
		// tables of the group must not share them.
		shadow := strings.ToLower(schema.NamesFor(c.Table).Shadow)
		if other, ok := made[shadow]; ok && !strings.EqualFold(other, c.Table) {
			return fmt.Errorf("%w: tables %s and %s would share the new table %s (names are cut to fit): migrate them one by one", ErrConfig, other, c.Table, shadow)
		}
		made[shadow] = c.Table
		switch {
		case c.Database != cfgs[0].Database:
			return fmt.Errorf("%w: tables %s.%s and %s.%s: the tables swapped together must be in one database", ErrConfig,
				cfgs[0].Database, cfgs[0].Table, c.Database, c.Table)
		case seen[strings.ToLower(c.Table)]:
			return fmt.Errorf("%w: table %s is named twice: give each table one --table and one --alter (several changes of a table go in one ALTER, comma-separated)", ErrConfig, c.Table)
		case c.Method != "" && c.Method != "auto" && c.Method != "copy":
			return fmt.Errorf("%w: --method %s: several tables are swapped together on the copy path only (an INSTANT or in-place change would show one table changed before the others)", ErrConfig, c.Method)
		case c.Capture == CaptureTriggers:
			return fmt.Errorf("%w: --capture=triggers with several tables is not supported yet: migrate the tables one by one, or capture by the binlog", ErrConfig)
		}
		seen[strings.ToLower(c.Table)] = true
	}
	return nil
}

// groupRefusal says, in preflight, why this table cannot be swapped with
// others, or nil.
func (r *Runner) groupRefusal() error {
	if r.group == nil {
		return nil
	}
	if why := plan.GroupRefusal(r.orig, plan.Server{MariaDB: r.vars.Flavor == dbconn.MariaDB}); why != "" {
		return preflightErr("%s", why)
	}
	return nil
}

// group is what the runners of one RunGroup share: who has come to the
// cut-over, who ended before it, and the outcome of the one swap.
type group struct {
	n       int
	ctx     context.Context // RunGroup's: cancelled when any run fails
	mu      sync.Mutex
	arrived []member
	gone    []*Runner // runs that left the cut-over before the swap (arrive)
	left    int       // runs that ended without coming to the cut-over, or left it
	failed  error     // the first of those that failed
	started bool
	done    chan struct{} // closed once err is set
	err     error
	// allPassed is closed once every run has passed its preflight (or
	// ended): only then does any make a table.
	allPassed chan struct{}
	passedBy  map[*Runner]bool
}

// passed is the group's first meeting: r has passed its preflight, and
// waits until every other run has too, so that a table refused at preflight
// stops the group before any run has made a table. Nil for a run alone.
func (g *group) passed(ctx context.Context, r *Runner) error {
	if g == nil {
		return nil
	}
	g.pass(r)
	select {
	case <-g.allPassed:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// pass counts r as past its preflight, once.
func (g *group) pass(r *Runner) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.passedBy[r] {
		return
	}
	g.passedBy[r] = true
	if len(g.passedBy) == g.n {
		close(g.allPassed)
	}
}

// member is a runner waiting at the cut-over, with its run's context.
type member struct {
	r   *Runner
	ctx context.Context
}

// arrive is r's cut-over: it waits until every run of the group has come
// here or ended, and returns the outcome of the one swap (made by the last
// to arrive). A run whose own context ends while it waits (its binlog
// reader or apply failed) leaves the group, which fails, unless the swap
// has started: then it waits for the outcome, since the swap may be under
// way with r's tables locked and r's teardown must not race it. The swap
// itself stops on any member's cancellation.
func (g *group) arrive(ctx context.Context, r *Runner) error {
	g.mu.Lock()
	g.arrived = append(g.arrived, member{r, ctx})
	last := g.ready()
	g.mu.Unlock()
	if last {
		g.cutover()
	} else {
		r.log.Info("waiting for the other tables of the group to come to the cut-over")
	}
	select {
	case <-g.done:
		return g.err
	case <-ctx.Done():
	}
	g.mu.Lock()
	if g.started {
		g.mu.Unlock()
		<-g.done
		return g.err
	}
	g.arrived = slices.DeleteFunc(g.arrived, func(m member) bool { return m.r == r })
	g.gone = append(g.gone, r)
	g.left++
	if g.failed == nil {
		g.failed = fmt.Errorf("the migration of %s failed while it waited for the others: %w", r.cfg.Table, context.Cause(ctx))
	}
	last = g.ready()
	g.mu.Unlock()
	if last {
		g.cutover()
	}
	return context.Cause(ctx)
}

// finished records that r's run ended; one that ended before the cut-over
// no longer holds the others back (a failure stops them through the
// context, and the swap is not made).
func (g *group) finished(r *Runner, err error) {
	g.pass(r) // one that ended in its preflight holds no one back (a failure stops them)
	g.mu.Lock()
	if slices.ContainsFunc(g.arrived, func(m member) bool { return m.r == r }) || slices.Contains(g.gone, r) {
		g.mu.Unlock()
		return
	}
	g.left++
	if err != nil && g.failed == nil {
		g.failed = fmt.Errorf("the migration of %s failed: %w", r.cfg.Table, err)
	}
	last := g.ready()
	g.mu.Unlock()
	if last {
		g.cutover()
	}
}

// ready reports, under mu, whether the swap may start now, and marks it
// started.
func (g *group) ready() bool {
	if g.started || len(g.arrived)+g.left < g.n {
		return false
	}
	g.started = true
	return true
}

// cutover makes the one swap of the runs that arrived, or fails them all
// when another failed, and lets them go on.
func (g *group) cutover() {
	defer close(g.done)
	switch {
	case g.failed != nil:
		g.err = fmt.Errorf("no table was swapped: %w", g.failed)
		return
	case len(g.arrived) == 0:
		return
	}
	if g.left > 0 {
		// Only a run that found its table already migrated ends early
		// without an error: an earlier run's swap did that table.
		g.arrived[0].r.log.Warn("some tables of the group were already migrated by an earlier run; the others are swapped together")
	}
	ctx, cancel := context.WithCancelCause(g.ctx)
	defer cancel(nil)
	rs := make([]*Runner, len(g.arrived))
	for i, m := range g.arrived {
		rs[i] = m.r
		stop := context.AfterFunc(m.ctx, func() { cancel(context.Cause(m.ctx)) })
		defer stop()
	}
	g.err = swapTogether(ctx, rs)
	if cause := context.Cause(ctx); g.err != nil && cause != nil && !errors.Is(cause, context.Canceled) {
		g.err = fmt.Errorf("%w (%w)", g.err, cause)
	}
}

// swapTogether is the group's cut-over: Runner.cutover for several tables
// at once, on MySQL (RENAME under LOCK TABLES).
func swapTogether(ctx context.Context, rs []*Runner) error {
	lead := rs[0]
	var tables, spec []string
	for _, r := range rs {
		// The tables the triggers use, which LOCK TABLES locks with the
		// original (learnTriggerTables), are watched too.
		tables = append(append(tables, r.orig.Name, r.names.Shadow), r.related...)
		spec = append(spec, r.orig.Quoted()+" WRITE", dbconn.QuoteTable(r.cfg.Database, r.names.Shadow)+" WRITE")
	}
	for _, r := range rs {
		if err := r.waitReplicas(ctx); err != nil {
			return fmt.Errorf("cut-over of %s: %w", r.orig.Name, err)
		}
		if why := r.throttle.Panicked(); why != "" {
			return fmt.Errorf("cut-over: %w: %s", throttle.ErrAbort, why)
		}
		if r.cfg.DropOld {
			if err := r.addArtifact(ctx, r.names.Old); err != nil {
				return err
			}
		}
	}
	before := func(ctx context.Context) error {
		if err := verifyAll(ctx, rs, 3); err != nil {
			return err
		}
		// LOCK TABLES takes its locks one table at a time: a transaction
		// that holds one of them and asks for another would close a cycle.
		// While it waits, the others' writers go on: their rows changed
		// meanwhile are compared again, so that few are left for the lock.
		lead.waitQuiet(ctx, tables)
		if err := verifyAll(ctx, rs, 1); err != nil {
			return err
		}
		for _, r := range rs {
			if err := r.pauseApply(ctx); err != nil {
				return err
			}
		}
		return nil
	}
	release := func() {
		for _, r := range rs {
			if !r.shadowTriggers.Load() { // copies the failed attempt could not drop (triggersOff)
				r.sched.Hold(false)
			}
		}
	}
	attempts := lead.lockAttempts.Load()
	defer func() {
		// Each run's result counts the group's attempts.
		for _, r := range rs[1:] {
			r.lockAttempts.Add(lead.lockAttempts.Load() - attempts)
			r.lockWait.record(time.Duration(lead.lockWait.longest.Load()))
		}
	}()
	err := lead.withLocks(ctx, "cut-over", tables, strings.Join(spec, ", "), before, release, func(ctx context.Context, lock *sql.Conn) error {
		start := time.Now()
		for _, r := range rs {
			t := time.Now()
			if err := r.finishLocked(ctx, lock); err != nil {
				return fmt.Errorf("%s: %w", r.orig.Name, err)
			}
			r.res.CutoverVerify = time.Since(t) - r.res.CutoverDrain
		}
		for _, r := range rs {
			// Copies of the triggers, or the last look that none appeared
			// (triggers.go).
			if err := r.carryTriggers(ctx, lock); err != nil {
				return triggersOffAll(ctx, rs, lock, fmt.Errorf("%s: %w", r.orig.Name, err))
			}
		}
		if err := renameTogether(ctx, rs, lock); err != nil {
			return triggersOffAll(ctx, rs, lock, err)
		}
		for _, r := range rs {
			r.res.CutoverLock = time.Since(start)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("cut-over: %w", err)
	}
	return nil
}

// triggersOffAll drops the copies of the triggers from every shadow of the
// group after a cut-over attempt that failed before its RENAME
// (Runner.triggersOff).
func triggersOffAll(ctx context.Context, rs []*Runner, lock *sql.Conn, cause error) error {
	for _, r := range rs {
		cause = r.triggersOff(ctx, lock, cause)
	}
	return cause
}

// verifyAll applies each run's backlog and compares the rows changed since
// its checksum, in up to passes rounds over the runs, until each has few
// left for the lock (Runner.cutover does so for one).
func verifyAll(ctx context.Context, rs []*Runner, passes int) error {
	for pass := 0; pass < passes; pass++ {
		again := false
		for _, r := range rs {
			if err := r.waitBacklog(ctx, 200); err != nil {
				return err
			}
			if pass > 0 && r.tracker.Len() <= verifyBatch {
				continue
			}
			if err := r.verifyChanged(ctx); err != nil {
				return err
			}
			again = again || r.tracker.Len() > verifyBatch
		}
		if !again {
			return nil
		}
	}
	return nil
}

// renameTogether renames each original to its old name and each shadow to
// its original's name in one RENAME TABLE, on lock, which holds the cut-over's
// locks of every table.
func renameTogether(ctx context.Context, rs []*Runner, lock *sql.Conn) error {
	// Each statement here is quick (metadata only, every lock held), and
	// one cut short by a cancellation would go on in the server without its
	// locks: they run to their end.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	var pairs []string
	for _, r := range rs {
		// A key added since the preflight would follow the RENAME to the
		// old table.
		if children, err := schema.ChildrenOf(ctx, r.db, r.cfg.Database, r.orig.Name); err != nil {
			return err
		} else if len(children) > 0 {
			return fmt.Errorf("foreign key %s, towards %s, was added during the migration; migrate that table on its own", children[0], r.orig.Name)
		}
		oldQ := dbconn.QuoteTable(r.cfg.Database, r.names.Old)
		shadowQ := dbconn.QuoteTable(r.cfg.Database, r.names.Shadow)
		pairs = append(pairs, r.orig.Quoted()+" TO "+oldQ, shadowQ+" TO "+r.orig.Quoted())
	}
	for i, r := range rs {
		if !r.beginRename() { // operator.go
			for _, done := range rs[:i] {
				done.renaming.Store(false)
			}
			return ErrAborted
		}
	}
	err := beforeRename(rs[0].cfg.Database) // a test's failed RENAME (export_test.go)
	if err == nil {
		_, err = lock.ExecContext(ctx, "RENAME TABLE "+strings.Join(pairs, ", "))
	}
	if err != nil && rs[0].renamed(ctx) {
		err = nil // the RENAME is atomic: it committed, only its reply was lost
	}
	if err != nil {
		for _, r := range rs {
			r.renaming.Store(false)
		}
		return err
	}
	for _, r := range rs {
		r.swapped.Store(true)
	}
	failpoint("renamed")
	return nil
}
