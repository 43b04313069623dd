package migration

import (
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
	// ETA is the copy's remaining time at its mean rate so far (0 outside
	// the copy).
	ETA time.Duration
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
	r.observed.Store(o)
}

// Status returns the run's state now. It may be called from any goroutine,
// at any time: before the capture starts it holds the phase alone.
func (r *Runner) Status() Status {
	s := Status{Database: r.cfg.Database, Table: r.cfg.Table, Phase: r.Phase(),
		LockAttempts: r.lockAttempts.Load(), LongestLockWait: time.Duration(r.lockWait.longest.Load())}
	o := r.observed.Load()
	if o == nil {
		return s
	}
	s.Elapsed, s.RowsEstimated = time.Since(o.start), o.estimated
	if c := r.copier.Load(); c != nil {
		s.RowsCopied = c.Rows()
		if s.Phase == "copy" && s.RowsCopied > 0 {
			s.ETA = time.Duration(float64(s.Elapsed) * float64(max(s.RowsEstimated-s.RowsCopied, 0)) / float64(s.RowsCopied))
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
