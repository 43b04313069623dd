package mdl

import (
	"fmt"
	"time"
)

// Policy bounds how a statement that needs an exclusive metadata lock waits
// for it.
type Policy struct {
	// Budget is how long one attempt may wait for the lock (default 1s). Every
	// query that queues behind the request waits at most that long because of
	// it.
	Budget time.Duration
	// Deadline is how long all attempts together may take (default 5m).
	Deadline time.Duration
	// MaxQueued gives up an attempt early once more than this many sessions
	// queue behind it (0: no limit but the budget).
	MaxQueued int
	// KillAfter is how long a session may block the request before it is
	// killed (0: never kill).
	KillAfter time.Duration
	// KillMaxRows spares a blocker whose transaction modified more rows: its
	// rollback would take longer than waiting.
	KillMaxRows int64
}

// WithDefaults fills in the zero fields that have defaults.
func (p Policy) WithDefaults() Policy {
	if p.Budget <= 0 {
		p.Budget = time.Second
	}
	if p.Deadline <= 0 {
		p.Deadline = 5 * time.Minute
	}
	return p
}

// LockWaitSeconds is the session lock_wait_timeout of one attempt: the budget
// rounded up to whole seconds, at least 1. The watcher ends an attempt at the
// budget itself when that is shorter.
func (p Policy) LockWaitSeconds() int {
	p = p.WithDefaults()
	s := int((p.Budget + time.Second - 1) / time.Second)
	return max(1, s)
}

// GiveUp reports whether an attempt that has waited for waited, with queued
// sessions waiting behind it, should end now, and why.
func (p Policy) GiveUp(waited time.Duration, queued int) (bool, string) {
	p = p.WithDefaults()
	if p.MaxQueued > 0 && queued > p.MaxQueued {
		return true, fmt.Sprintf("%d queries queued behind the lock request (more than --max-queued=%d)", queued, p.MaxQueued)
	}
	if waited >= p.Budget {
		return true, fmt.Sprintf("the lock was not granted within the budget of %s", p.Budget)
	}
	return false, ""
}

// Delay is the pause before attempt number attempt (1 for the first retry):
// from a quarter of a second doubling up to 8s, scaled by a jitter in
// [0.5, 1.5) from r in [0, 1), so that retries do not fall into step with a
// periodic job.
func (p Policy) Delay(attempt int, r float64) time.Duration {
	d := 250 * time.Millisecond << uint(min(max(attempt-1, 0), 5))
	return time.Duration(float64(d) * (0.5 + r))
}

// Spares reports whether the blocker s is never to be killed, however long
// it blocks, and why.
func (p Policy) Spares(s Session) (bool, string) {
	switch {
	case p.KillAfter <= 0:
		return true, "the kill policy is never (--kill-blockers)"
	case s.Explicit:
		return true, "it holds the table with LOCK TABLES, which sluice never kills"
	case s.TrxUnknown:
		return true, "its transaction could not be read (information_schema.INNODB_TRX fails while a statement holds a 4-byte character, or does not list it yet): sluice does not kill what it cannot measure"
	case s.RowsModified > p.KillMaxRows:
		return true, fmt.Sprintf("its transaction modified %d rows, more than --kill-max-rows=%d: rolling it back would take longer than waiting", s.RowsModified, p.KillMaxRows)
	}
	return false, ""
}

// Kill reports whether the blocker s, which has been seen blocking the
// request for blocking, is to be killed under the policy, and if not, why.
func (p Policy) Kill(s Session, blocking time.Duration) (bool, string) {
	if spare, why := p.Spares(s); spare {
		return false, why
	}
	switch {
	case blocking < p.KillAfter:
		return false, fmt.Sprintf("it has blocked for %s; the policy kills after %s", blocking.Round(time.Second), p.KillAfter)
	}
	return true, fmt.Sprintf("it blocked the lock request for %s (--kill-blockers=after=%s)", blocking.Round(time.Second), p.KillAfter)
}

// WaitOut reports whether sluice should wait for the blocker s without
// requesting the lock: s has held the table longer than the budget already,
// so it will most likely outlast an attempt, and a request would only queue
// the application behind it for the whole budget. A blocker the policy
// would kill now is not waited out: it is killed while a request waits, so
// that nothing can take the table between the kill and the request.
func (p Policy) WaitOut(s Session, blocking time.Duration) bool {
	p = p.WithDefaults()
	if !s.Blocking() || s.HeldFor() < p.Budget {
		return false
	}
	kill, _ := p.Kill(s, blocking)
	return !kill
}
