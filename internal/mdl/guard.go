package mdl

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sluicedb/sluice/internal/dbconn"
)

// ErrDeadline means no attempt got the lock before the deadline.
var ErrDeadline = errors.New("could not get the metadata lock before the deadline")

// Guard runs statements that need an exclusive metadata lock on a table: one
// attempt waits at most the budget, a watcher ends it early when queries pile
// up behind it, blockers are named, killed only as the policy allows, and
// attempts are retried with backoff and jitter until the deadline.
type Guard struct {
	DB       *sql.DB
	Database string
	Tables   []string // the tables the statements lock
	Policy   Policy
	Log      *slog.Logger
	// OwnRun, if set, is the RunID of the connections of the sluice run
	// itself: they are never counted as blockers or queued sessions.
	OwnRun string
	// Poll is how often the watcher looks at the locks (default 50ms).
	Poll time.Duration
	// Before, if set, runs before each attempt; its error ends Run. After, if
	// set, runs once each attempt is over, whatever its outcome.
	Before func(ctx context.Context) error
	After  func()
}

// ErrRetry is returned by fn when its work under the lock could not finish in
// time: the attempt ends, the lock is released, and it is taken again later.
var ErrRetry = errors.New("retry under a new lock")

// errGaveUp marks an attempt the watcher ended.
var errGaveUp = errors.New("attempt given up")

// Attempt is what one attempt saw.
type Attempt struct {
	Blockers []Session // the sessions holding a lock on the table, last seen
	Queued   int       // the most sessions seen queued behind the request
	GaveUp   string    // why the watcher ended it, if it did
}

// Run runs fn on a dedicated connection whose lock_wait_timeout is the
// budget, until fn succeeds, fails with an error other than a lock wait, ctx
// ends, or the deadline passes (ErrDeadline, naming the blockers). fn must be
// safe to run again after a lock-wait failure; the connection it gets is
// discarded afterwards unless fn returns nil.
func (g *Guard) Run(ctx context.Context, what string, fn func(ctx context.Context, conn *sql.Conn) error) error {
	p := g.Policy.WithDefaults()
	log := g.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	start := time.Now()
	seen := &tracked{first: map[int64]time.Time{}, logged: map[int64]string{}}
	var last Attempt
	var waitingOut int64 // the blocker being waited out, to log it once
	for attempt := 1; ; attempt++ {
		// A long-running blocker is waited out without a lock request, so
		// the application does not queue behind sluice at all meanwhile.
		if b, ok := g.waitOut(ctx, p, seen, log, what); ok {
			attempt--
			last.Blockers = []Session{b}
			if b.ID != waitingOut {
				waitingOut = b.ID
				log.Info("waiting without requesting the lock: a session has held the table longer than the lock budget, so a request would only queue the application behind it",
					"what", what, "blocker", b.String())
			}
			if time.Since(start)+waitOutPoll >= p.Deadline {
				return fmt.Errorf("%w: %s gave up after %d attempts in %s: %s", ErrDeadline, what, attempt,
					time.Since(start).Round(time.Second), describe(last.Blockers, p))
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(waitOutPoll):
			}
			continue
		}
		waitingOut = 0
		if g.Before != nil {
			if err := g.Before(ctx); err != nil {
				if g.After != nil {
					g.After()
				}
				return err
			}
		}
		a, err := g.once(ctx, p, fn, seen, log, what)
		if g.After != nil {
			g.After()
		}
		if err == nil {
			return nil
		}
		if !errors.Is(err, errGaveUp) && !errors.Is(err, ErrRetry) && !isLockWait(err) {
			return err
		}
		last = a
		reason := a.GaveUp
		if errors.Is(err, ErrRetry) {
			reason = err.Error()
		} else if reason == "" {
			reason = fmt.Sprintf("the lock was not granted within lock_wait_timeout=%ds", p.LockWaitSeconds())
		}
		args := []any{"what", what, "attempt", attempt, "why", reason, "queued", a.Queued}
		for i, b := range a.Blockers {
			args = append(args, fmt.Sprintf("blocker%d", i+1), b.String())
		}
		log.Info("metadata lock attempt ended; the application's queries went on", args...)
		delay := p.Delay(attempt, rand.Float64())
		if time.Since(start)+delay >= p.Deadline {
			return fmt.Errorf("%w: %s gave up after %d attempts in %s: %s", ErrDeadline, what, attempt,
				time.Since(start).Round(time.Second), describe(last.Blockers, p))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
	}
}

// waitOutPoll is how often a blocker being waited out is looked at.
const waitOutPoll = 200 * time.Millisecond

// waitOut returns a blocker to wait out without requesting the lock, if any
// (Policy.WaitOut).
func (g *Guard) waitOut(ctx context.Context, p Policy, seen *tracked, log *slog.Logger, what string) (Session, bool) {
	ss, err := Sessions(ctx, g.DB, g.Database, g.Tables, g.OwnRun)
	if err != nil {
		return Session{}, false
	}
	now := time.Now()
	for _, b := range g.track(ctx, p, ss, seen, log, what, false) {
		if p.WaitOut(b, now.Sub(seen.first[b.ID])) {
			return b, true
		}
	}
	return Session{}, false
}

// describe names the blockers for an error, and why the kill policy spared
// them if it would kill others.
func describe(bs []Session, p Policy) string {
	if len(bs) == 0 {
		return "no blocker was seen holding the table (a lock held briefly by each of many short queries?)"
	}
	parts := make([]string, len(bs))
	for i, b := range bs {
		parts[i] = b.String()
		if spare, why := p.Spares(b); spare && p.KillAfter > 0 {
			parts[i] += " (not killed: " + why + ")"
		}
	}
	return "blocked by " + strings.Join(parts, "; ")
}

func isLockWait(err error) bool {
	return dbconn.ErrorNumber(err) == dbconn.ErrLockWaitTimeout
}

// once is one attempt.
func (g *Guard) once(ctx context.Context, p Policy, fn func(context.Context, *sql.Conn) error,
	seen *tracked, log *slog.Logger, what string) (a Attempt, err error) {
	conn, err := g.DB.Conn(ctx)
	if err != nil {
		return a, err
	}
	ok := false
	defer func() {
		// The pool's other users wait as long as the session settings say.
		if ok {
			_, err := conn.ExecContext(context.WithoutCancel(ctx), "SET SESSION lock_wait_timeout = "+dbconn.SessionSettings["lock_wait_timeout"])
			ok = err == nil
		}
		if !ok {
			// A lock-wait error or a kill leaves nothing to keep: discard the
			// connection rather than return it in an unknown state.
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		}
		conn.Close()
	}()
	var self int64
	if err := conn.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&self); err != nil {
		return a, err
	}
	if _, err := conn.ExecContext(ctx, fmt.Sprintf("SET SESSION lock_wait_timeout = %d", p.LockWaitSeconds())); err != nil {
		return a, err
	}
	// Before the attempt: note the blockers. None is killed yet: a kill is
	// sent only while the request waits, so that it is next in line and no
	// new query can take the table between the kill and the request.
	if ss, err := Sessions(ctx, g.DB, g.Database, g.Tables, g.OwnRun, self); err == nil {
		a.Blockers = g.track(ctx, p, ss, seen, log, what, false)
	}

	own := &waiters{ids: []int64{self}}
	var mu sync.Mutex
	wctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	began := time.Now()
	go func() {
		defer close(done)
		t := time.NewTicker(g.poll())
		defer t.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case <-t.C:
			}
			waiting, err := waitsForMDL(wctx, g.DB, own.list())
			if err != nil || waiting == 0 {
				continue
			}
			ss, err := Sessions(wctx, g.DB, g.Database, g.Tables, g.OwnRun, self)
			if err != nil {
				continue
			}
			queued := 0
			for _, s := range ss {
				if s.Queued() {
					queued++
				}
			}
			blockers := g.track(wctx, p, ss, seen, log, what, true)
			mu.Lock()
			a.Blockers, a.Queued = blockers, max(a.Queued, queued)
			mu.Unlock()
			if give, why := p.GiveUp(time.Since(began), queued); give {
				// Only while the request still waits: a statement past its
				// lock is left to finish.
				if w, err := waitsForMDL(wctx, g.DB, own.list()); err == nil && w != 0 {
					mu.Lock()
					a.GaveUp = why
					mu.Unlock()
					g.DB.ExecContext(context.WithoutCancel(wctx), fmt.Sprintf("KILL QUERY %d", w))
					return
				}
			}
		}
	}()
	err = fn(context.WithValue(ctx, waitersKey{}, own), conn)
	stop()
	<-done
	mu.Lock()
	defer mu.Unlock()
	if err == nil {
		ok = true
		return a, nil
	}
	if a.GaveUp != "" && (dbconn.ErrorNumber(err) == dbconn.ErrQueryInterrupted || isLockWait(err)) {
		return a, fmt.Errorf("%w: %s", errGaveUp, a.GaveUp)
	}
	return a, err
}

func (g *Guard) poll() time.Duration {
	if g.Poll > 0 {
		return g.Poll
	}
	return 50 * time.Millisecond
}

// tracked remembers the blockers of one Run: when each was first seen, and
// what was logged of it (why it is not killed: a blocker is logged again
// when that changes, as when InnoDB lists its transaction only later).
type tracked struct {
	first  map[int64]time.Time
	logged map[int64]string
}

// track records when each blocker was first seen, logs those that have been
// in the way for the budget (the short transactions of a busy table are not
// worth a line each), kills those the policy allows if mayKill, and returns
// the blockers that remain.
func (g *Guard) track(ctx context.Context, p Policy, ss []Session, seen *tracked, log *slog.Logger, what string, mayKill bool) []Session {
	var blockers []Session
	now := time.Now()
	present := map[int64]bool{}
	for _, s := range ss {
		if !s.Blocking() {
			continue
		}
		present[s.ID] = true
		first := blockingSince(seen.first[s.ID], s, now)
		seen.first[s.ID] = first
		if max(s.HeldFor(), now.Sub(first)) >= p.Budget {
			args := []any{"what", what, "blocker", s.String()}
			spare, why := p.Spares(s)
			if spare && p.KillAfter > 0 {
				args = append(args, "not_killed", why)
			}
			// The kind of reason, not its text: a growing row count is
			// not worth a line each poll.
			note := fmt.Sprint(spare, s.TrxUnknown, s.Explicit)
			if prev, ok := seen.logged[s.ID]; !ok || prev != note {
				seen.logged[s.ID] = note
				log.Info("a session holds a metadata lock sluice needs; sluice waits for it", args...)
			}
		}
		if kill, why := p.Kill(s, now.Sub(first)); kill && mayKill {
			// The KILL, once decided, is not cut short by the attempt's end
			// (its report would then be wrong: the server may have run it).
			kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			_, err := g.DB.ExecContext(kctx, fmt.Sprintf("KILL %d", s.ID))
			cancel()
			if err == nil {
				log.Warn("killed a blocking session", "what", what, "blocker", s.String(), "why", why)
				delete(seen.first, s.ID)
				continue
			} else {
				log.Warn("could not kill a blocking session", "blocker", s.String(), "err", err)
			}
		}
		blockers = append(blockers, s)
	}
	// A connection seen again after a poll without it holds the table for
	// another statement or transaction: its time counts anew.
	for id := range seen.first {
		if !present[id] {
			delete(seen.first, id)
		}
	}
	return blockers
}

// blockingSince is when blocker s began to block, given first, when its
// connection was first seen blocking (zero: not before now). A connection
// that runs one short statement after another (a reader of a busy table) is
// seen at every poll, but each statement blocks only while it runs: when
// s's transaction, or outside one its statement, began after first, it is
// another blocker. A session idle outside a transaction has no such age.
// The server counts ages in whole seconds, so a start is taken as later than
// first only by more than a second.
func blockingSince(first time.Time, s Session, now time.Time) time.Time {
	switch {
	case first.IsZero():
		return now
	case s.Command != "Query" && !s.InTrx:
		return first // idle outside a transaction (LOCK TABLES): no age to go by
	case now.Add(-s.age()).After(first.Add(time.Second)):
		return now
	}
	return first
}

// waitsForMDL reports whether connection id waits for a metadata lock.
func waitsForMDL(ctx context.Context, q *sql.DB, ids []int64) (int64, error) {
	var id sql.NullInt64
	err := q.QueryRowContext(ctx, `SELECT MIN(t.PROCESSLIST_ID) FROM performance_schema.metadata_locks ml
		JOIN performance_schema.threads t ON t.THREAD_ID = ml.OWNER_THREAD_ID
		WHERE t.PROCESSLIST_ID IN (`+strings.TrimSuffix(strings.Repeat("?, ", len(ids)), ", ")+`) AND ml.LOCK_STATUS = 'PENDING'`,
		anys(ids)...).Scan(&id)
	return id.Int64, err
}

func anys(ids []int64) []any {
	out := make([]any, len(ids))
	for i, id := range ids {
		out[i] = id
	}
	return out
}

// waiters are the connections whose lock requests are an attempt's own: the
// locking connection, and those fn names with AlsoWaits.
type waiters struct {
	mu  sync.Mutex
	ids []int64
}

type waitersKey struct{}

func (w *waiters) list() []int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.ids)
}

// AlsoWaits tells the guard whose attempt runs fn (ctx is the one fn was
// given) that connection id's lock requests are the attempt's own, as the
// locking connection's are: while one waits, blockers are killed as the
// policy allows, and a pile-up interrupts it. (MariaDB's cut-over sends its
// RENAME from a second connection.)
func AlsoWaits(ctx context.Context, id int64) {
	if w, ok := ctx.Value(waitersKey{}).(*waiters); ok {
		w.mu.Lock()
		w.ids = append(w.ids, id)
		w.mu.Unlock()
	}
}
