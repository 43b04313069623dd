package copier

import (
	"math"
	"testing"
	"time"
)

func TestMeterRate(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var m meter
	if r := m.rate(t0, 0); r != 0 {
		t.Fatalf("rate before start %v", r)
	}
	m.start(t0, 0)
	// 100 rows a second, a chunk every 50ms, for 30s.
	rows := int64(0)
	at := t0
	for i := 1; i <= 600; i++ {
		at = t0.Add(time.Duration(i) * 50 * time.Millisecond)
		rows += 5
		m.record(at, rows)
		if i == 40 { // 2s in: younger than the window
			if r := m.rate(at, rows); math.Abs(r-100) > 1 {
				t.Errorf("rate 2s in = %v, want 100", r)
			}
		}
	}
	if r := m.rate(at, rows); math.Abs(r-100) > 1 {
		t.Errorf("rate after 30s = %v, want 100", r)
	}
	if len(m.samples) > int(rateWindow/(100*time.Millisecond))+2 {
		t.Errorf("%d marks kept", len(m.samples))
	}
	// Then a pause of half the window.
	if r := m.rate(at.Add(rateWindow/2), rows); math.Abs(r-50) > 2 {
		t.Errorf("rate after a pause of half the window = %v, want 50", r)
	}
	// Then twice the pace for a whole window: the window forgets the pause.
	for i := 1; i <= int(rateWindow/(50*time.Millisecond)); i++ {
		rows += 10
		m.record(at.Add(rateWindow/2+time.Duration(i)*50*time.Millisecond), rows)
	}
	if r := m.rate(at.Add(rateWindow/2+rateWindow), rows); math.Abs(r-200) > 3 {
		t.Errorf("rate after the pace doubled = %v, want 200", r)
	}
}
