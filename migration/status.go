package migration

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"time"
)

// Status is a running migration's state at one moment: what its progress
// lines print and what the metrics endpoint serves. Every field is safe to
// read while the run goes on.
type Status struct {
	Database, Table string
	Phase           string
	Elapsed         time.Duration
	// RowsCopied counts the rows the copy has written; RowsEstimated is the
	// table's row count as the server estimates it.
	RowsCopied, RowsEstimated int64
	// Rate is the copy's rows a second over its last ten seconds; ETA is
	// the copy's remaining time at that rate (0 outside the copy).
	Rate float64
	ETA  time.Duration
	// Backlog is the number of changed keys waiting to be applied; Applied
	// counts the key applications committed.
	Backlog int
	Applied int64
	// BinlogLag is how far behind the binlog reader is (binlog capture).
	BinlogLag time.Duration
	// ReplicaLag is the slowest watched replica's lag; ReplicaLagKnown is
	// false when no replica is watched or the slowest cannot be reached.
	ReplicaLag      time.Duration
	ReplicaLagKnown bool
	// Throttle says why the copy pauses now, or ""; Throttled is how long it
	// has paused in all, ThrottledLag the part of it for replica lag.
	Throttle                string
	Throttled, ThrottledLag time.Duration
	// LockAttempts counts the metadata-lock attempts; LongestLockWait is the
	// longest any of them waited for its lock.
	LockAttempts    int64
	LongestLockWait time.Duration
	// Paused says whether the operator paused the run, PausedFor for how
	// long; Postponed whether the cut-over waits for the operator.
	Paused, Postponed bool
	PausedFor         time.Duration
	// The settings the operator may change: copy workers, the wanted
	// duration of one chunk (0: the default), the replica lag and the
	// status ceilings over which the copy pauses.
	Threads   int
	ChunkTime time.Duration
	MaxLag    time.Duration
	MaxLoad   string
}

// statusJSON is Status as sluice ctl status prints it: durations in
// seconds.
type statusJSON struct {
	Database        string   `json:"database"`
	Table           string   `json:"table"`
	Phase           string   `json:"phase"`
	Elapsed         float64  `json:"elapsed_seconds"`
	RowsCopied      int64    `json:"rows_copied"`
	RowsEstimated   int64    `json:"rows_estimated"`
	Rate            float64  `json:"rows_per_second"`
	ETA             float64  `json:"eta_seconds"`
	Backlog         int      `json:"backlog"`
	Applied         int64    `json:"applied"`
	BinlogLag       float64  `json:"binlog_lag_seconds"`
	ReplicaLag      *float64 `json:"replica_lag_seconds"`
	Throttle        string   `json:"throttle"`
	Throttled       float64  `json:"throttled_seconds"`
	ThrottledLag    float64  `json:"throttled_lag_seconds"`
	Paused          bool     `json:"paused"`
	PausedFor       float64  `json:"paused_seconds"`
	Postponed       bool     `json:"cutover_postponed"`
	LockAttempts    int64    `json:"lock_attempts"`
	LongestLockWait float64  `json:"longest_lock_wait_seconds"`
	Threads         int      `json:"threads"`
	ChunkTime       float64  `json:"chunk_time_seconds"`
	MaxLag          float64  `json:"max_lag_seconds"`
	MaxLoad         string   `json:"max_load"`
}

// MarshalJSON spells durations in seconds and an unknown replica lag as
// null.
func (s Status) MarshalJSON() ([]byte, error) {
	j := statusJSON{Database: s.Database, Table: s.Table, Phase: s.Phase, Elapsed: s.Elapsed.Seconds(),
		RowsCopied: s.RowsCopied, RowsEstimated: s.RowsEstimated, Rate: s.Rate, ETA: s.ETA.Seconds(), Backlog: s.Backlog, Applied: s.Applied,
		BinlogLag: s.BinlogLag.Seconds(), Throttle: s.Throttle, Throttled: s.Throttled.Seconds(), ThrottledLag: s.ThrottledLag.Seconds(),
		Paused: s.Paused, PausedFor: s.PausedFor.Seconds(), Postponed: s.Postponed, LockAttempts: s.LockAttempts,
		LongestLockWait: s.LongestLockWait.Seconds(), Threads: s.Threads, ChunkTime: s.ChunkTime.Seconds(), MaxLag: s.MaxLag.Seconds(),
		MaxLoad: s.MaxLoad}
	if s.ReplicaLagKnown {
		l := s.ReplicaLag.Seconds()
		j.ReplicaLag = &l
	}
	return json.Marshal(j)
}

// observed holds what Status reads of a run once its capture runs: set
// once, after every field it holds is made.
type observed struct {
	start     time.Time
	estimated int64
	capture   func() time.Duration // the binlog reader's lag (0 for triggers)
}

// lockWaits records the waits for a metadata lock.
type lockWaits struct{ longest atomic.Int64 }

func (l *lockWaits) record(d time.Duration) {
	for {
		old := l.longest.Load()
		if int64(d) <= old || l.longest.CompareAndSwap(old, int64(d)) {
			return
		}
	}
}

// observe makes the run's progress readable by Status.
func (r *Runner) observe(start time.Time) {
	o := &observed{start: start, estimated: max(r.orig.EstimatedRows, 1), capture: func() time.Duration { return 0 }}
	if s := r.streamer; s != nil {
		o.capture = s.Lag
	}
	r.live.mu.Lock()
	r.observed.Store(o)
	r.stopApplyLocked() // a pause asked for before the throttle was made
	r.live.mu.Unlock()
}

// Status returns the run's state now. It may be called from any goroutine,
// at any time: before the capture starts it holds the phase alone.
func (r *Runner) Status() Status {
	l := r.live.get()
	s := Status{Database: l.database, Table: l.table, Phase: r.Phase(),
		LockAttempts: r.lockAttempts.Load(), LongestLockWait: time.Duration(r.lockWait.longest.Load()),
		Paused: l.paused, Postponed: l.postpone, Threads: l.threads, ChunkTime: l.chunkTime, MaxLag: l.maxLag}
	if l.paused {
		s.PausedFor = time.Since(l.since)
	}
	o := r.observed.Load()
	if o == nil {
		return s
	}
	var loads []string
	for _, m := range r.throttle.MaxLoad() {
		loads = append(loads, fmt.Sprintf("%s=%d", m.Name, m.Max))
	}
	s.MaxLoad = strings.Join(loads, ",")
	s.Elapsed, s.RowsEstimated = time.Since(o.start), o.estimated
	if c := r.copier.Load(); c != nil {
		s.RowsCopied, s.ChunkTime = c.Rows(), c.ChunkTime()
		if s.Phase == "copy" {
			s.Rate = c.Rate()
			if s.Rate > 0 {
				s.ETA = time.Duration(float64(max(s.RowsEstimated-s.RowsCopied, 0)) / s.Rate * float64(time.Second))
			}
		}
	}
	s.Backlog, s.Applied, s.BinlogLag = r.sched.Backlog(), r.applier.Applied(), o.capture()
	s.Throttle, s.Throttled, s.ThrottledLag = r.throttle.Reason(), r.throttle.Throttled(), r.throttle.Lagged()
	if r.lag != nil {
		if l, ok := r.lag.mon.Slowest(); ok && l.Err == nil {
			s.ReplicaLag, s.ReplicaLagKnown = l.Lag, true
		}
	}
	return s
}
