package ranges

import (
	"math"
	"testing"
)

// covers checks that spans tile offsets 0..total with no gap or overlap.
func collect(t *testing.T, p *Planner, size int) []OffsetSpan {
	t.Helper()
	var out []OffsetSpan
	for i := 0; i < 1_000_000; i++ {
		s, ok := p.Next(size, 0, false)
		if !ok {
			return out
		}
		out = append(out, s)
	}
	t.Fatal("planner never finished")
	return nil
}

func TestPlannerTiles(t *testing.T) {
	spans := collect(t, &Planner{Total: 9999, Density: 1}, 1000)
	if len(spans) != 10 {
		t.Fatalf("%d spans, want 10: %+v", len(spans), spans)
	}
	if spans[0].HasLo || spans[0].Hi != 999 {
		t.Errorf("first span must be open below and end at 999: %+v", spans[0])
	}
	for i := 1; i < len(spans); i++ {
		if !spans[i].HasLo || spans[i].Lo != spans[i-1].Hi {
			t.Errorf("span %d does not start where %d ended: %+v %+v", i, i-1, spans[i-1], spans[i])
		}
	}
	if last := spans[len(spans)-1]; last.HasHi {
		t.Errorf("last span must be open above: %+v", last)
	}
}

func TestPlannerDensity(t *testing.T) {
	// One row per 100 key values: 1000-row spans are 100,000 values wide.
	p := &Planner{Total: 10_000_000, Density: 0.01}
	s, _ := p.Next(1000, 0, false)
	s, _ = p.Next(1000, 0, false)
	if s.Width != 100_000 {
		t.Errorf("width %d, want 100000", s.Width)
	}
	// An observed density replaces the estimate.
	s, _ = p.Next(1000, 0.5, true)
	if s.Width != 2000 {
		t.Errorf("width %d, want 2000", s.Width)
	}
}

func TestPlannerWholeUint64Range(t *testing.T) {
	// A key spanning all of uint64 at a tiny density must not wrap around.
	p := &Planner{Total: math.MaxUint64, Density: 1e-15} // spans of 1e18 values
	n := 0
	for {
		s, ok := p.Next(1000, 0, false)
		if !ok {
			break
		}
		if s.HasHi && s.HasLo && s.Hi <= s.Lo {
			t.Fatalf("span went backwards: %+v", s)
		}
		n++
		if n > 100 {
			t.Fatal("too many spans")
		}
	}
}

func TestPlannerSingleValue(t *testing.T) {
	spans := collect(t, &Planner{Total: 0, Density: 1}, 1000)
	if len(spans) != 1 || spans[0].HasLo || spans[0].HasHi {
		t.Errorf("a one-value key is one open span: %+v", spans)
	}
}

func TestDensityFallsOverEmptyRanges(t *testing.T) {
	if d := Density(1000, 1000); d != 1 {
		t.Errorf("dense: %v", d)
	}
	// An empty range of 500 values: the next step is about 500 times longer.
	if d := Density(500, 0); d > 0.0021 || d < 0.0019 {
		t.Errorf("after one empty range: %v", d)
	}
	// Crossing 2^64 values from a density-1 start takes few empty ranges.
	p := &Planner{Total: math.MaxUint64, Density: 1}
	var keys uint64
	n := 0
	for {
		d, ok := 0.0, keys > 0
		if ok {
			d = Density(keys, 0)
		}
		s, more := p.Next(500, d, ok)
		if !more {
			break
		}
		keys += s.Width
		n++
		if n > 200 {
			t.Fatalf("still cutting after %d ranges", n)
		}
	}
}
