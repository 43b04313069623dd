package throttle

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/testdb"
)

// waitReason waits up to a second for the throttle's reason to satisfy ok.
func waitReason(t *testing.T, th *Throttler, ok func(string) bool, what string) {
	t.Helper()
	for end := time.Now().Add(time.Second); !ok(th.Reason()); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%s: reason still %q", what, th.Reason())
		}
	}
}

// TestOperatorPause: with nothing else to watch, the operator's pause holds
// Enter at once and its lift lets the copy go within a check; Busy counts
// the chunks between Enter and Leave.
func TestOperatorPause(t *testing.T) {
	th := New(Config{Interval: 5 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go th.Run(ctx)
	if err := th.Enter(ctx); err != nil || th.Busy() != 1 {
		t.Fatalf("Enter before any pause: %v, busy %d", err, th.Busy())
	}
	th.SetOperator("paused by the operator")
	if th.Reason() != "paused by the operator" {
		t.Fatalf("the pause did not take effect at once: %q", th.Reason())
	}
	// A check that read the signals before the pause does not lift it.
	th.set("", "")
	if th.Reason() == "" {
		t.Fatal("a check lifted the operator's pause")
	}
	th.Leave()
	short, stop := context.WithTimeout(ctx, 50*time.Millisecond)
	defer stop()
	if err := th.Enter(short); err == nil || th.Busy() != 0 {
		t.Fatalf("Enter while paused: %v, busy %d", err, th.Busy())
	}
	th.SetOperator("")
	waitReason(t, th, func(r string) bool { return r == "" }, "after the lift")
	if err := th.Enter(ctx); err != nil {
		t.Fatal(err)
	}
	th.Leave()
}

// TestSetMaxLoadLive: ceilings set while the run goes on are enforced even
// when the run started with nothing to watch, and a pause lifted after they
// were set lets the copy go when they are not reached.
func TestSetMaxLoadLive(t *testing.T) {
	db := testdb.New(t)
	th := New(Config{DB: db.DB, Interval: 5 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go th.Run(ctx)
	if err := th.SetMaxLoad(ctx, []Limit{{"No_such_status", 1}}); err == nil || !strings.Contains(err.Error(), "No_such_status") {
		t.Fatalf("an unknown status variable: %v", err)
	}
	// Threads_running is at least 1 (the check's own session).
	if err := th.SetMaxLoad(ctx, []Limit{{"Threads_running", 1}}); err != nil {
		t.Fatal(err)
	}
	waitReason(t, th, func(r string) bool { return strings.HasPrefix(r, "max load: Threads_running=") }, "max-load set live")
	th.SetOperator("paused by the operator")
	if err := th.SetMaxLoad(ctx, []Limit{{"Threads_running", 100000}}); err != nil {
		t.Fatal(err)
	}
	th.SetOperator("")
	waitReason(t, th, func(r string) bool { return r == "" }, "resumed under a ceiling not reached")
	if got := th.MaxLoad(); len(got) != 1 || got[0].Max != 100000 {
		t.Errorf("MaxLoad = %v", got)
	}
}
