package chunk

import (
	"testing"
	"time"
)

func TestNextGrowsWhenFast(t *testing.T) {
	cfg := Config{Target: 100 * time.Millisecond, Initial: 1000}
	got := Next(cfg, 1000, 1000, 10*time.Millisecond)
	if got != 2000 {
		t.Errorf("fast chunk: got %d, want doubling to 2000", got)
	}
}

func TestNextShrinksWhenSlow(t *testing.T) {
	cfg := Config{Target: 100 * time.Millisecond}
	// The ideal is 400 rows; the size moves half way there.
	got := Next(cfg, 4000, 4000, time.Second)
	if got != 2200 {
		t.Errorf("slow chunk: got %d, want 2200", got)
	}
}

func TestNextConverges(t *testing.T) {
	cfg := Config{Target: 100 * time.Millisecond, Max: 1_000_000}
	// A server that copies 20,000 rows a second: the target is 2,000 rows.
	size := 100
	for i := 0; i < 30; i++ {
		d := time.Duration(float64(size) / 20000 * float64(time.Second))
		size = Next(cfg, size, size, d)
	}
	if size < 1900 || size > 2100 {
		t.Errorf("size = %d, want about 2000", size)
	}
}

func TestNextBounds(t *testing.T) {
	cfg := Config{Min: 50, Max: 500}
	if got := Next(cfg, 400, 400, time.Microsecond); got != 500 {
		t.Errorf("max: got %d", got)
	}
	if got := Next(cfg, 60, 60, time.Hour); got != 50 {
		t.Errorf("min: got %d", got)
	}
	if got := Next(cfg, 300, 3, time.Hour); got != 300 {
		t.Errorf("a tiny last chunk must not move the size: got %d", got)
	}
}

func TestSizer(t *testing.T) {
	s := NewSizer(Config{Initial: 1000, Target: 100 * time.Millisecond})
	if s.Size() != 1000 {
		t.Fatalf("initial %d", s.Size())
	}
	s.Observe(1000, 400*time.Millisecond)
	if s.Size() != 625 {
		t.Errorf("after slow chunk: %d, want 625", s.Size())
	}
}

// TestSizerLimit: a limit below the target cuts the next size to the
// limit's share of the rows at once; a limit of zero or above the target
// leaves the usual adaptation.
func TestSizerLimit(t *testing.T) {
	var limit time.Duration
	s := NewSizer(Config{Target: 200 * time.Millisecond, Initial: 10000, Limit: func() time.Duration { return limit }})
	s.Observe(10000, 200*time.Millisecond) // on target
	if got := s.Size(); got != 10000 {
		t.Fatalf("on target without a limit: size %d, want 10000", got)
	}
	limit = 50 * time.Millisecond
	s.Observe(10000, 200*time.Millisecond)
	if got := s.Size(); got != 2500 {
		t.Errorf("limit a quarter of the target: size %d, want 2500 at once", got)
	}
	s.Observe(2500, 50*time.Millisecond)
	if got := s.Size(); got != 2500 {
		t.Errorf("on the limit: size %d, want it kept at 2500", got)
	}
	limit = time.Second // above the target: the target rules, growing at most double
	s.Observe(2500, 50*time.Millisecond)
	if got := s.Size(); got != 5000 {
		t.Errorf("limit lifted: size %d, want 5000 (doubling towards the target)", got)
	}
	limit = 0
	s.Observe(5000, 100*time.Millisecond)
	if got := s.Size(); got != 7500 {
		t.Errorf("no limit: size %d, want 7500 (half way to the target's 10000)", got)
	}
}
