package bench

import (
	"math"
	"testing"
	"time"
)

// copyRun makes samples of a copy of 1000 rows at 100 rows/s whose status
// said the time left times skew, then a checksum phase.
func copyRun(skew float64, withEnd bool) []etaSample {
	t0 := time.Unix(0, 0)
	var out []etaSample
	for i := 0; i <= 100; i++ {
		at := t0.Add(time.Duration(i) * 100 * time.Millisecond)
		rows := int64(i * 10)
		left := time.Duration(float64(10*time.Second-time.Duration(i)*100*time.Millisecond) * skew)
		out = append(out, etaSample{at: at, phase: "copy", rows: rows, est: 1000, eta: left})
	}
	if withEnd {
		out = append(out, etaSample{at: t0.Add(10 * time.Second), phase: "checksum", rows: 1000, est: 1000})
	}
	return out
}

func TestETAErrors(t *testing.T) {
	for _, c := range []struct {
		skew    float64
		withEnd bool
		q, h    float64
		ok      bool
	}{
		{skew: 1, withEnd: true, q: 0, h: 0, ok: true},
		{skew: 1.5, withEnd: true, q: 0.5, h: 0.5, ok: true},
		{skew: 0.5, withEnd: true, q: -0.5, h: -0.5, ok: true},
		{skew: 1, withEnd: false, ok: false}, // the copy never ended: nothing to compare with
	} {
		q, h, ok := etaErrors(copyRun(c.skew, c.withEnd))
		if ok != c.ok || ok && (math.Abs(q-c.q) > 1e-9 || math.Abs(h-c.h) > 1e-9) {
			t.Errorf("skew %v end %v: %.3f %.3f %v; want %.3f %.3f %v", c.skew, c.withEnd, q, h, ok, c.q, c.h, c.ok)
		}
	}
	if _, _, ok := etaErrors(nil); ok {
		t.Error("no samples gave an error figure")
	}
}
