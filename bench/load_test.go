package bench

import (
	"testing"
	"time"
)

func TestWindow(t *testing.T) {
	tps := []float64{100, 100, 50, 0, 0, 80, 100}
	w := window(tps, 2*time.Second, 5500*time.Millisecond)
	// seconds 3..6 (indexes 2..5): 50, 0, 0, 80
	if w.Seconds != 4 || w.Mean != 32.5 || w.Min != 0 || w.Zero != 2 {
		t.Errorf("got %+v", w)
	}
	if w := window(tps, 10*time.Second, 12*time.Second); w.Seconds != 0 || w.Mean != 0 {
		t.Errorf("empty window: %+v", w)
	}
}

func TestPhaseTimes(t *testing.T) {
	log := `time=x level=INFO msg="phase done" phase=preflight took=11ms
time=x level=INFO msg="phase done" phase=copy took=3.983s
time=x level=INFO msg="phase done" phase=checksum took=1.46s`
	if got := phaseTimes(log); got != "copy 4.0, checksum 1.5" {
		t.Errorf("got %q", got)
	}
}
