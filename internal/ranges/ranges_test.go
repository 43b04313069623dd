package ranges

import (
	"cmp"
	"math"
	"slices"
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

// TestLanePlannerTiles: the lanes' spans, taken in turn, tile 0..Total with
// no gap or overlap, in key order within each lane; only the very first span
// is open below and only the very last open above.
func TestLanePlannerTiles(t *testing.T) {
	for _, tc := range []struct {
		total   uint64
		density float64
		lanes   int
	}{{99_999, 1, 4}, {100_000, 1, 3}, {7, 1, 4}, {2, 1, 4}, {0, 1, 4}, {math.MaxUint64, 1e-15, 4}, {50_000, 1, 1}} {
		lp := NewLanePlanner(tc.total, tc.density, tc.lanes)
		type got struct {
			s    OffsetSpan
			lane int
		}
		var all []got
		var order []int
		for i := 0; ; i++ {
			if i > 100_000 {
				t.Fatalf("%+v: never finished", tc)
			}
			s, lane, ok := lp.Next(1000, 0, false)
			if !ok {
				break
			}
			order = append(order, lane)
			all = append(all, got{s, lane})
		}
		slices.SortFunc(all, func(a, b got) int {
			if !a.s.HasLo {
				return -1
			}
			if !b.s.HasLo {
				return 1
			}
			return cmp.Compare(a.s.Lo, b.s.Lo)
		})
		if all[0].s.HasLo || all[0].lane != 0 {
			t.Fatalf("%+v: the first span must be lane 0's, open below: %+v", tc, all[0])
		}
		for i := 1; i < len(all); i++ {
			p, c := all[i-1], all[i]
			if !p.s.HasHi || !c.s.HasLo || c.s.Lo != p.s.Hi {
				t.Fatalf("%+v: span %+v does not start where %+v ended", tc, c, p)
			}
			if c.lane < p.lane {
				t.Fatalf("%+v: lanes out of key order: %+v after %+v", tc, c, p)
			}
			if c.s.HasHi && c.s.Width != c.s.Hi-c.s.Lo {
				t.Fatalf("%+v: width %d of %+v", tc, c.s.Width, c)
			}
		}
		if last := all[len(all)-1]; last.s.HasHi {
			t.Fatalf("%+v: the last span must be open above: %+v", tc, last)
		}
		lanes := map[int]bool{}
		for _, g := range all {
			lanes[g.lane] = true
		}
		want := tc.lanes
		if tc.total < uint64(tc.lanes) {
			want = int(max(tc.total, 1))
		}
		if len(lanes) != want {
			t.Errorf("%+v: %d lanes used, want %d", tc, len(lanes), want)
		}
		// In turn: the first round takes one span from each lane.
		for i := range min(want, len(order)) {
			if order[i] != i {
				t.Errorf("%+v: lanes not taken in turn: %v", tc, order)
				break
			}
		}
	}
}
