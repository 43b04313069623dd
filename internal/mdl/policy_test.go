package mdl

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestGiveUp(t *testing.T) {
	p := Policy{Budget: 800 * time.Millisecond, MaxQueued: 5}
	cases := []struct {
		waited time.Duration
		queued int
		want   bool
		why    string
	}{
		{100 * time.Millisecond, 0, false, ""},
		{100 * time.Millisecond, 5, false, ""},
		{100 * time.Millisecond, 6, true, "more than --max-queued=5"},
		{800 * time.Millisecond, 0, true, "budget of 800ms"},
	}
	for i, tc := range cases {
		got, why := p.GiveUp(tc.waited, tc.queued)
		if got != tc.want || !strings.Contains(why, tc.why) {
			t.Errorf("case %d: GiveUp(%s, %d) = %v %q", i, tc.waited, tc.queued, got, why)
		}
	}
	// No queue limit: only the budget (the default 1s) ends an attempt.
	if got, _ := (Policy{}).GiveUp(999*time.Millisecond, 1000); got {
		t.Error("a queue ended an attempt without --max-queued")
	}
}

func TestLockWaitSeconds(t *testing.T) {
	for _, tc := range []struct {
		budget time.Duration
		want   int
	}{{0, 1}, {300 * time.Millisecond, 1}, {time.Second, 1}, {1500 * time.Millisecond, 2}, {3 * time.Second, 3}} {
		if got := (Policy{Budget: tc.budget}).LockWaitSeconds(); got != tc.want {
			t.Errorf("budget %s: %d, want %d", tc.budget, got, tc.want)
		}
	}
}

func TestDelayBacksOffWithJitter(t *testing.T) {
	p := Policy{}
	if d := p.Delay(1, 0.5); d != 250*time.Millisecond {
		t.Errorf("first retry: %s", d)
	}
	if d := p.Delay(3, 0.5); d != time.Second {
		t.Errorf("third retry: %s", d)
	}
	if d := p.Delay(50, 0.5); d != 8*time.Second {
		t.Errorf("capped: %s", d)
	}
	lo, hi := p.Delay(2, 0), p.Delay(2, 0.999)
	if lo != 250*time.Millisecond || hi < 749*time.Millisecond || hi >= 750*time.Millisecond {
		t.Errorf("jitter range %s-%s", lo, hi)
	}
}

func TestKill(t *testing.T) {
	reader := Session{ID: 1, Held: []string{"SHARED_READ"}}
	writer := Session{ID: 2, Held: []string{"SHARED_WRITE"}, RowsModified: 50000}
	locker := Session{ID: 3, Held: []string{"SHARED_READ_ONLY"}, Explicit: true}
	never := Policy{}
	after := Policy{KillAfter: 10 * time.Second, KillMaxRows: 1000}
	cases := []struct {
		p        Policy
		s        Session
		blocking time.Duration
		want     bool
		why      string
	}{
		{never, reader, time.Hour, false, "never"},
		{after, reader, 5 * time.Second, false, "kills after 10s"},
		{after, reader, 10 * time.Second, true, "blocked the lock request for 10s"},
		{after, writer, time.Hour, false, "modified 50000 rows"},
		{after, locker, time.Hour, false, "LOCK TABLES"},
	}
	for i, tc := range cases {
		got, why := tc.p.Kill(tc.s, tc.blocking)
		if got != tc.want || !strings.Contains(why, tc.why) {
			t.Errorf("case %d: Kill = %v %q", i, got, why)
		}
	}
}

func TestSessionString(t *testing.T) {
	s := Session{ID: 42, User: "app", Host: "10.0.0.7:5123", Command: "Query", Time: 95 * time.Second,
		Held: []string{"SHARED_READ"}, TrxAge: 96 * time.Second, RowsModified: 3,
		Query: "SELECT   *, SLEEP(100)\n FROM t " + strings.Repeat("x", 200)}
	got := s.String()
	for _, want := range []string{"connection 42 (app@10.0.0.7:5123, Query 1m35s)", "holds SHARED_READ",
		"transaction open 1m36s, 3 rows modified", "running: SELECT *, SLEEP(100) FROM t xxx", "..."} {
		if !strings.Contains(got, want) {
			t.Errorf("%q lacks %q", got, want)
		}
	}
	if len(got) > 300 {
		t.Errorf("too long: %d characters", len(got))
	}
	if !s.Blocking() || s.Queued() || !s.Wrote() {
		t.Error("classification")
	}
	q := Session{Pending: []string{"SHARED_READ"}}
	if q.Blocking() || !q.Queued() {
		t.Error("a pending-only session is queued, not blocking")
	}
}

func TestWaitOut(t *testing.T) {
	held := []string{"SHARED_READ"}
	longQuery := Session{Command: "Query", Time: 3 * time.Second, Held: held}
	idleTrx := Session{Command: "Sleep", Time: 5 * time.Second, TrxAge: 2 * time.Second, Held: held}
	young := Session{Command: "Query", Time: 0, TrxAge: 300 * time.Millisecond, Held: held}
	idleNoTrx := Session{Command: "Sleep", Time: 30 * time.Second, Held: held} // a lock held past its statement: only a transaction does that, but be safe
	queued := Session{Command: "Query", Time: 3 * time.Second, Pending: held}
	never := Policy{Budget: time.Second}
	kill := Policy{Budget: time.Second, KillAfter: 2 * time.Second, KillMaxRows: 100}
	for _, tc := range []struct {
		name     string
		p        Policy
		s        Session
		blocking time.Duration
		want     bool
	}{
		{"a long query is waited out", never, longQuery, 0, true},
		{"an old idle transaction is waited out", never, idleTrx, 0, true},
		{"a young one gets a request: it may end within the budget", never, young, 0, false},
		{"1s of statement time may be milliseconds: a request", never, Session{Command: "Query", Time: time.Second, TrxAge: 50 * time.Millisecond, Held: held}, 0, false},
		{"1.2s of transaction age may be 0.2s: a request", never, Session{Command: "Query", TrxAge: 1200 * time.Millisecond, Held: held}, 0, false},
		{"idle time alone is not a hold", never, idleNoTrx, 0, false},
		{"a queued session does not block", never, queued, 0, false},
		{"not yet killable: waited out", kill, longQuery, time.Second, true},
		{"killable: a request, so the kill happens while it waits", kill, longQuery, 3 * time.Second, false},
		{"spared big writer: waited out", kill, Session{Command: "Sleep", TrxAge: 5 * time.Second, RowsModified: 1000, Held: held}, time.Minute, true},
	} {
		if got := tc.p.WaitOut(tc.s, tc.blocking); got != tc.want {
			t.Errorf("%s: WaitOut = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A connection seen blocking at every poll blocks since its current statement
// or transaction began, not since the connection was first seen.
func TestBlockingSince(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name  string
		s     Session
		after time.Duration // now - first
		fresh bool          // counts from now
	}{
		{"a reader's next statement", Session{Command: "Query", Time: 0, InTrx: true}, 1500 * time.Millisecond, true},
		{"one long statement", Session{Command: "Query", Time: 2 * time.Second, InTrx: true}, 2500 * time.Millisecond, false},
		{"a statement within the second", Session{Command: "Query", Time: 0}, 900 * time.Millisecond, false},
		{"a long transaction, a new statement in it", Session{Command: "Query", Time: 0, InTrx: true, TrxAge: 5 * time.Second}, 3 * time.Second, false},
		{"a new transaction", Session{Command: "Sleep", Time: 0, InTrx: true, TrxAge: 200 * time.Millisecond}, 3 * time.Second, true},
		{"idle under LOCK TABLES", Session{Command: "Sleep", Time: 0, Explicit: true}, 3 * time.Second, false},
	} {
		now := t0.Add(c.after)
		got := blockingSince(t0, c.s, now)
		if want := map[bool]time.Time{true: now, false: t0}[c.fresh]; !got.Equal(want) {
			t.Errorf("%s: blocking since %s, want %s", c.name, got.Sub(t0), want.Sub(t0))
		}
	}
	if got := blockingSince(time.Time{}, Session{}, t0); !got.Equal(t0) {
		t.Errorf("first seen: %v", got)
	}
}

// TestTrackLogsWhyOnceItIsKnown: a blocker whose transaction InnoDB does not
// list yet is logged as one sluice cannot measure; once InnoDB lists it with
// more rows than --kill-max-rows, the log says so too (the operator learns why
// it is still spared), but its growing row count is not a line per poll.
func TestTrackLogsWhyOnceItIsKnown(t *testing.T) {
	var buf strings.Builder
	log := slog.New(slog.NewTextHandler(&buf, nil))
	p := Policy{Budget: time.Second, KillAfter: time.Second, KillMaxRows: 1000}.WithDefaults()
	g := &Guard{}
	seen := &tracked{first: map[int64]time.Time{}, logged: map[int64]string{}}
	s := Session{ID: 7, Command: "Sleep", Time: 3 * time.Second, Held: []string{"SHARED_WRITE"}, InTrx: true, TrxUnknown: true}
	for _, step := range []func(){
		func() {},
		func() {},
		func() { s.TrxUnknown, s.TrxAge, s.RowsModified = false, 3*time.Second, 3000 },
		func() { s.RowsModified = 4000 },
		func() { s.RowsModified = 5000 },
	} {
		step()
		if got := g.track(context.Background(), p, []Session{s}, seen, log, "cut-over", false); len(got) != 1 {
			t.Fatalf("the blocker is not returned: %v", got)
		}
	}
	out := buf.String()
	if n := strings.Count(out, "sluice waits for it"); n != 2 {
		t.Errorf("logged %d times, want 2 (unknown, then its rows):\n%s", n, out)
	}
	if !strings.Contains(out, "could not be read") || !strings.Contains(out, "modified 3000 rows, more than --kill-max-rows=1000") {
		t.Errorf("the log does not give both reasons:\n%s", out)
	}
}
