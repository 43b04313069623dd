package throttle

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestParseLimits(t *testing.T) {
	got, err := ParseLimits(" Threads_running=25, Threads_connected = 500 ")
	if err != nil {
		t.Fatal(err)
	}
	want := []Limit{{"Threads_running", 25}, {"Threads_connected", 500}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if l, err := ParseLimits(""); err != nil || l != nil {
		t.Errorf("empty spec: %v, %v", l, err)
	}
	for spec, wantErr := range map[string]string{
		"Threads_running":                        "is not Name=N",
		"=5":                                     "is not Name=N",
		"Threads_running=":                       "is not Name=N",
		"Threads_running=-1":                     "whole number",
		"Threads_running=0":                      "whole number >= 1",
		"Threads_running=2.5":                    "whole number",
		"Threads_running=x":                      "whole number",
		"Threads running=3":                      "not a status variable name",
		"x');DROP TABLE t;--=1":                  "not a status variable name",
		"Threads_running=3,threads_RUNNING=4":    "given twice",
		"Threads_running=3,,Threads_connected=4": "is not Name=N",
	} {
		_, err := ParseLimits(spec)
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("%q: got %v, want an error with %q", spec, err, wantErr)
		}
	}
}

func TestReached(t *testing.T) {
	limits := []Limit{{"Threads_running", 25}, {"Threads_connected", 500}}
	cases := []struct {
		status map[string]int64
		want   string
	}{
		{map[string]int64{"threads_running": 24, "threads_connected": 499}, ""},
		{map[string]int64{"threads_running": 25, "threads_connected": 10}, "Threads_running=25 >= 25"},
		{map[string]int64{"threads_running": 3, "threads_connected": 800}, "Threads_connected=800 >= 500"},
		{map[string]int64{}, ""}, // a missing variable never counts as reached
	}
	for _, c := range cases {
		if got := Reached(limits, c.status); got != c.want {
			t.Errorf("%v: got %q, want %q", c.status, got, c.want)
		}
	}
}

func TestDecider(t *testing.T) {
	d := Decider{
		MaxLoad:      []Limit{{"Threads_running", 10}},
		CriticalLoad: []Limit{{"Threads_running", 50}},
		FlagFile:     "/f", PanicFile: "/p",
	}
	run := func(n int64) map[string]int64 { return map[string]int64{"threads_running": n} }
	steps := []struct {
		s            Signals
		throttle     string // substring; "" means not throttled
		abort        string // substring; "" means go on
		wantThrottle bool
	}{
		{s: Signals{Status: run(3)}},
		{s: Signals{Status: run(12)}, throttle: "max load: Threads_running=12 >= 10", wantThrottle: true},
		{s: Signals{Status: run(9)}},
		{s: Signals{Status: run(2), FlagFile: true}, throttle: "throttle flag file /f", wantThrottle: true},
		// Critical once: pause and check again; not twice in a row: go on.
		{s: Signals{Status: run(60)}, throttle: "critical load", wantThrottle: true},
		{s: Signals{Status: run(5)}},
		{s: Signals{Status: run(60)}, throttle: "critical load", wantThrottle: true},
		// Twice in a row: stop.
		{s: Signals{Status: run(70)}, abort: "critical load: Threads_running=70 >= 50"},
	}
	for i, st := range steps {
		dec := d.Next(st.s)
		if st.abort != "" {
			if !strings.Contains(dec.Abort, st.abort) {
				t.Errorf("step %d: abort %q, want %q", i, dec.Abort, st.abort)
			}
			continue
		}
		if dec.Abort != "" {
			t.Errorf("step %d: unexpected abort %q", i, dec.Abort)
		}
		if (dec.Throttle != "") != st.wantThrottle || !strings.Contains(dec.Throttle, st.throttle) {
			t.Errorf("step %d: throttle %q, want %q", i, dec.Throttle, st.throttle)
		}
	}
	if dec := (&Decider{PanicFile: "/p"}).Next(Signals{Panic: true}); !strings.Contains(dec.Abort, "panic flag file /p") {
		t.Errorf("panic: %+v", dec)
	}
}

// TestFlagFiles runs a Throttler on flag files alone (no server): the copy
// waits while the throttle file exists, goes on once it is gone, and the
// panic file stops the run.
func TestFlagFiles(t *testing.T) {
	dir := t.TempDir()
	flag, panicFile := filepath.Join(dir, "throttle"), filepath.Join(dir, "panic")
	var changes []string
	th := New(Config{FlagFile: flag, PanicFile: panicFile, Interval: 5 * time.Millisecond,
		OnChange: func(r string) { changes = append(changes, r) }})
	if !th.Active() {
		t.Fatal("a throttler with flag files is not active")
	}
	if err := th.Preflight(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(flag, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// One check pauses the copy at once, before Run's first tick.
	if err := th.Check(ctx); err != nil || th.Reason() == "" {
		t.Fatalf("a check with the flag file present: err %v, reason %q", err, th.Reason())
	}
	done := make(chan error, 1)
	go func() { done <- th.Run(ctx) }()
	deadline := time.Now().Add(5 * time.Second)
	for th.Reason() == "" {
		if time.Now().After(deadline) {
			t.Fatal("the flag file did not throttle")
		}
		time.Sleep(time.Millisecond)
	}
	waited := make(chan error, 1)
	go func() {
		err := th.Enter(ctx)
		if err == nil {
			th.Leave()
		}
		waited <- err
	}()
	select {
	case err := <-waited:
		t.Fatalf("Enter returned while throttled: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	os.Remove(flag)
	select {
	case err := <-waited:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Wait did not return after the flag file was removed")
	}
	if th.Throttled() < 50*time.Millisecond {
		t.Errorf("throttled for %s, want at least 50ms", th.Throttled())
	}
	if err := os.WriteFile(panicFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, ErrAbort) || !strings.Contains(err.Error(), "panic flag file") {
			t.Fatalf("got %v, want the panic abort", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the panic flag file did not stop the run")
	}
	// Paused, then resumed; the reset when Run returns changed nothing.
	if len(changes) != 2 || !strings.Contains(changes[0], "throttle flag file") || changes[1] != "" {
		t.Errorf("changes %q", changes)
	}
	// A stale panic file is refused before the migration starts.
	if err := New(Config{PanicFile: panicFile}).Preflight(context.Background()); err == nil || !strings.Contains(err.Error(), "exists already") {
		t.Errorf("stale panic file: %v", err)
	}
}

// TestLagPausesAndIsCounted: a replica-lag reason pauses the copy like any
// other, is counted apart, and holds WaitLag until it clears; a load reason
// alone does not hold WaitLag.
func TestLagPausesAndIsCounted(t *testing.T) {
	var lag atomic.Value
	lag.Store("replica r:1 lags 2s (--max-lag 1s)")
	flag := filepath.Join(t.TempDir(), "flag")
	th := New(Config{Lag: func() string { return lag.Load().(string) }, FlagFile: flag})
	if !th.Active() {
		t.Fatal("a lag source alone must make the throttler active")
	}
	ctx := context.Background()
	if err := th.Check(ctx); err != nil {
		t.Fatal(err)
	}
	if th.Reason() == "" || th.LagReason() == "" {
		t.Fatalf("lagging: Reason %q, LagReason %q", th.Reason(), th.LagReason())
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := th.WaitLag(short); err == nil {
		t.Fatal("WaitLag returned while the replica lags")
	}
	if err := th.Enter(short); err == nil {
		t.Fatal("Enter returned while the replica lags")
	}
	time.Sleep(20 * time.Millisecond)
	os.WriteFile(flag, nil, 0o600)
	lag.Store("")
	if err := th.Check(ctx); err != nil {
		t.Fatal(err)
	}
	if err := th.WaitLag(ctx); err != nil {
		t.Fatal(err)
	}
	if th.Reason() == "" {
		t.Fatal("the flag file must still pause the copy")
	}
	if l, all := th.Lagged(), th.Throttled(); l < 50*time.Millisecond || all < l {
		t.Errorf("Lagged %s, Throttled %s: want the lag pause counted, and within the total", l, all)
	}
}
