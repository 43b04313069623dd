package copier

import (
	"sync"
	"time"
)

// rateWindow is how far back the copy's rate is measured: long enough to
// smooth the chunks' jitter, short enough to follow the server's pace (the
// first chunks are small, and a throttle or a pause changes the pace).
const rateWindow = 5 * time.Second

// meter follows the rows copied over time, for the copy's recent rate.
type meter struct {
	mu      sync.Mutex
	samples []mark // oldest first; the first is the copy's start
	// slow and slowRows: the longest chunk and its rows.
	slow     time.Duration
	slowRows int64
}

// chunk notes one chunk's duration and rows.
func (m *meter) chunk(d time.Duration, rows int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if d > m.slow {
		m.slow, m.slowRows = d, rows
	}
}

func (m *meter) slowest() (time.Duration, int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.slow, m.slowRows
}

type mark struct {
	at   time.Time
	rows int64
}

// start begins the measure at the first chunk copied: the time the
// ranges' first boundaries took to find says nothing of the pace.
func (m *meter) start(at time.Time, rows int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.samples = []mark{{at: at, rows: rows}}
}

// record notes that rows rows had been copied at time at. Marks stay at
// least 100ms apart (the newest is moved while it is nearer its
// predecessor), and none is kept older than the window needs.
func (m *meter) record(at time.Time, rows int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.samples) == 0 {
		m.samples = []mark{{at: at, rows: rows}}
		return
	}
	if n := len(m.samples); n > 1 && m.samples[n-1].at.Sub(m.samples[n-2].at) < 100*time.Millisecond {
		m.samples[n-1] = mark{at: at, rows: rows}
	} else {
		m.samples = append(m.samples, mark{at: at, rows: rows})
	}
	// Keep one mark at or before the window's start.
	drop := 0
	for drop+1 < len(m.samples) && at.Sub(m.samples[drop+1].at) >= rateWindow {
		drop++
	}
	m.samples = m.samples[drop:]
}

// rate returns rows a second over the last rateWindow up to now (since the
// start, if the copy is younger), counting the time since the last chunk.
func (m *meter) rate(now time.Time, rows int64) float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.samples) == 0 {
		return 0
	}
	// The rows copied at the window's start, read between the marks on
	// either side of it (no mark is made while nothing is copied).
	start := now.Add(-rateWindow)
	from := m.samples[0]
	if from.at.After(start) {
		start = from.at // a copy younger than the window
	}
	for i, s := range m.samples {
		if s.at.After(start) {
			break
		}
		from = s
		if i+1 < len(m.samples) && m.samples[i+1].at.After(start) {
			next := m.samples[i+1]
			from.rows += int64(float64(next.rows-s.rows) * start.Sub(s.at).Seconds() / next.at.Sub(s.at).Seconds())
		}
	}
	d := now.Sub(start).Seconds()
	if d <= 0 {
		return 0
	}
	return float64(rows-from.rows) / d
}
