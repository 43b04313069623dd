package replica

import (
	"errors"
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func TestSplitHostPort(t *testing.T) {
	for _, c := range []struct {
		in   string
		host string
		port int
		err  string
	}{
		{"db2:3306", "db2", 3306, ""},
		{"[::1]:3307", "::1", 3307, ""},
		{"127.0.0.1:13317", "127.0.0.1", 13317, ""},
		{"db2", "", 0, "not host:port"},
		{"db2:0", "", 0, "1 to 65535"},
		{"db2:70000", "", 0, "1 to 65535"},
		{":3306", "", 0, "1 to 65535"},
		{"root:pw@tcp(db2:3306)/", "", 0, "host:port only"},
		{"user@db2:3306", "", 0, "host:port only"},
	} {
		h, p, err := SplitHostPort(c.in)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%q: err = %v, want %q", c.in, err, c.err)
		case c.err == "" && (err != nil || h != c.host || p != c.port):
			t.Errorf("%q: %q %d %v, want %q %d", c.in, h, p, err, c.host, c.port)
		}
	}
}

// TestSlowestAndOver: a replica that cannot be measured outranks any
// measured lag; among measured ones the highest wins; Over pauses for either.
func TestSlowestAndOver(t *testing.T) {
	m := &Monitor{}
	if _, ok := m.Slowest(); ok {
		t.Fatal("Slowest with no replicas reports one")
	}
	if why := Over(Lag{}, false, time.Second); why != "" {
		t.Errorf("no replicas: %q", why)
	}
	m.lags = []Lag{{Name: "a:1", Lag: 200 * time.Millisecond}, {Name: "b:1", Lag: 2 * time.Second}, {Name: "c:1", Lag: time.Second}}
	l, _ := m.Slowest()
	if l.Name != "b:1" {
		t.Errorf("slowest = %s, want b:1", l.Name)
	}
	if why := Over(l, true, 1500*time.Millisecond); !strings.Contains(why, "b:1 lags 2s") {
		t.Errorf("Over = %q", why)
	}
	if why := Over(l, true, 3*time.Second); why != "" {
		t.Errorf("under the limit: Over = %q", why)
	}
	m.lags[0].Err = errors.New("cannot be reached")
	l, _ = m.Slowest()
	if l.Name != "a:1" {
		t.Errorf("slowest = %s, want the unreachable a:1", l.Name)
	}
	if why := Over(l, true, time.Hour); !strings.Contains(why, "a:1: cannot be reached") {
		t.Errorf("an unreachable replica must pause the copy: Over = %q", why)
	}
}

// TestAhead: the lag a replica is heading for is its lag divided by the rate
// its heartbeat advances, from a window of readings at least half a second
// long; a replica that keeps up (or catches up) is heading for its lag.
func TestAhead(t *testing.T) {
	t0 := time.Unix(1000, 0)
	// readings every 100ms for a second, the beat advancing rate times as fast.
	hist := func(rate float64, lag time.Duration) ([]sample, sample) {
		var h []sample
		for i := 0; i <= 10; i++ {
			at := t0.Add(time.Duration(i) * 100 * time.Millisecond)
			end := t0.Add(time.Second)
			beat := end.Add(-lag).Add(-time.Duration(rate * float64(time.Duration(10-i)*100*time.Millisecond)))
			h = append(h, sample{at: at, beat: beat})
		}
		return h[:10], h[10]
	}
	near := func(got, want time.Duration) bool {
		d := got - want
		return d > -time.Millisecond && d < time.Millisecond
	}
	for _, c := range []struct {
		rate float64
		lag  time.Duration
		want time.Duration
	}{
		{1, 300 * time.Millisecond, 300 * time.Millisecond},    // keeps up
		{2, time.Second, time.Second},                          // catches up
		{0.25, 500 * time.Millisecond, 2 * time.Second},        // four times slower than the primary
		{0.5, 800 * time.Millisecond, 1600 * time.Millisecond}, // two times
		{0, 400 * time.Millisecond, 8 * time.Second},           // stopped: lag / minRate
	} {
		h, now := hist(c.rate, c.lag)
		got := ahead(h, now, now.at.Sub(now.beat))
		if !near(got, c.want) {
			t.Errorf("rate %.2f, lag %s: ahead %s, want %s", c.rate, c.lag, got, c.want)
		}
	}
	// Too short a window says nothing about the rate.
	h, now := hist(0.1, time.Second)
	if got := ahead(h[8:], now, time.Second); got != time.Second {
		t.Errorf("from 200ms of readings: ahead %s, want the lag itself", got)
	}
	if got := ahead(nil, now, time.Second); got != time.Second {
		t.Errorf("with no earlier reading: ahead %s, want the lag itself", got)
	}
	// Over pauses for a replica heading past the limit, and names both.
	l := Lag{Name: "a:1", Lag: 600 * time.Millisecond, Ahead: 2400 * time.Millisecond}
	if why := Over(l, true, time.Second); !strings.Contains(why, "lags 600ms") || !strings.Contains(why, "heading for 2.4s") {
		t.Errorf("Over = %q", why)
	}
	m := &Monitor{lags: []Lag{{Name: "a:1", Lag: 900 * time.Millisecond}, l}}
	m.lags[1].Name = "b:1"
	if s, _ := m.Slowest(); s.Name != "b:1" {
		t.Errorf("slowest = %s, want b:1, heading for the most lag", s.Name)
	}
}

// TestSlowRate: the lowest rate of the last ten seconds, 1 when none fell
// behind.
func TestSlowRate(t *testing.T) {
	now := time.Unix(1000, 0)
	m := &Monitor{now: func() time.Time { return now }}
	if r := m.SlowRate(); r != 1 {
		t.Errorf("no slow reading: %v, want 1", r)
	}
	m.slow = []rateAt{{now.Add(-12 * time.Second), 0.1}, {now.Add(-8 * time.Second), 0.3}, {now.Add(-time.Second), 0.6}}
	if r := m.SlowRate(); r != 0.3 {
		t.Errorf("SlowRate = %v, want 0.3 (0.1 is older than ten seconds)", r)
	}
	now = now.Add(10 * time.Second)
	if r := m.SlowRate(); r != 1 {
		t.Errorf("after ten seconds without a slow reading: %v, want 1", r)
	}
}

// TestSlowRateFromReadings: readings every 200ms of a replica whose commits
// reach it in bursts (it applies the primary's time at its pace, each
// reading 0-150ms late at random) never count as falling behind, so the copy's
// chunks are not cut for a healthy replica; a replica applying the primary's
// time at a quarter of its pace does, within two seconds. The slow readings
// kept stay within the last ten seconds however long the run. Seeded (printed).
func TestSlowRateFromReadings(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	t0 := time.Unix(1000, 0)
	run := func(pace float64, jitter time.Duration, readings int) (*Monitor, float64) {
		now := t0
		m := &Monitor{now: func() time.Time { return now }, hist: make([][]sample, 1), lags: make([]Lag, 1),
			warned: map[string]bool{}, log: slog.New(slog.DiscardHandler)}
		slowest := 1.0
		for i := 1; i <= readings; i++ {
			now = t0.Add(time.Duration(i) * 200 * time.Millisecond)
			elapsed := now.Sub(t0)
			// The replica has applied the primary's time up to beat.
			beat := t0.Add(time.Duration(pace * float64(elapsed)))
			if jitter > 0 {
				beat = beat.Add(-time.Duration(rng.Int64N(int64(jitter))))
			}
			m.recordLocked(0, Lag{Name: "r:1", Lag: now.Sub(beat), beat: beat}, now)
			slowest = min(slowest, m.SlowRate())
		}
		return m, slowest
	}
	if _, low := run(1, 150*time.Millisecond, 300); low != 1 {
		t.Errorf("a healthy replica with bursty commits read as falling behind: SlowRate %.2f", low)
	}
	m, low := run(0.25, 50*time.Millisecond, 10)
	if low > 0.5 {
		t.Errorf("a replica at a quarter of the primary's pace: SlowRate %.2f within 2s, want about 0.25", low)
	}
	m, _ = run(0.25, 0, 600) // two minutes
	if n := len(m.slow); n > int(slowMemory/(200*time.Millisecond))+1 {
		t.Errorf("%d slow readings kept after two minutes, want those of the last %s only", n, slowMemory)
	}
}
