package migration

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/replica"
)

// Replica lag: every row the copy writes reaches the replicas through the
// binlog, and a fast copy can leave them behind. While the slowest replica
// lags more than MaxLag, or cannot be measured, the copy pauses (the apply
// goes on: its work is the application's own writes) and the cut-over does
// not start. See package replica for how the lag is measured.

// lagWatch is the replica monitor of a run.
type lagWatch struct {
	mon  *replica.Monitor
	stop context.CancelFunc
	done chan struct{}
	made bool // the heartbeat table was created
}

// findReplicas discovers the replicas (copy path preflight).
func (r *Runner) findReplicas(ctx context.Context) error {
	if !r.cfg.ReplicaDiscovery && len(r.cfg.ReplicaAddrs) == 0 {
		return nil
	}
	found, err := replica.Discover(ctx, replica.Discovery{Primary: r.db, Conn: r.cfg.Conn, Named: r.cfg.ReplicaAddrs,
		Auto: r.cfg.ReplicaDiscovery, Log: r.log})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrPreflight, err)
	}
	if len(found) == 0 {
		r.log.Info("no replicas found; replica lag is not watched")
		return nil
	}
	r.lag = &lagWatch{mon: replica.NewMonitor(replica.MonitorConfig{Primary: r.db,
		Table: dbconn.QuoteTable(r.cfg.Database, r.names.Heartbeat), Replicas: found, Log: r.log})}
	r.res.Replicas = r.lag.mon.Names()
	r.log.Info("watching replica lag", "replicas", r.res.Replicas, "max_lag", r.cfg.MaxLag)
	return nil
}

// inFlightBudget bounds the replicas' share of the copy's chunks in flight
// (see chunkLimit), and never more than half of MaxLag.
const inFlightBudget = 500 * time.Millisecond

// chunkLimit caps the copy's chunk time while a replica falls behind. The
// throttle pauses the copy between chunks, so the chunks in flight when it
// does still reach the replicas, and each costs a replica its time on the
// primary divided by the rate at which the replica applies the primary's
// time: the lag overshoots --max-lag by that much. The copy's workers
// together keep it within inFlightBudget. 0 (no cap) while every replica
// keeps up.
func (r *Runner) chunkLimit() time.Duration {
	if r.lag == nil {
		return 0
	}
	return chunkCap(r.lag.mon.SlowRate(), r.maxLag(), r.copyThreads())
}

// chunkCap is chunkLimit's arithmetic.
func chunkCap(rate float64, maxLag time.Duration, workers int) time.Duration {
	if rate >= 1 {
		return 0
	}
	budget := min(inFlightBudget, maxLag/2)
	return max(time.Duration(float64(budget)*rate/float64(max(workers, 1))), 10*time.Millisecond)
}

// lagReason is the throttle's replica signal.
func (r *Runner) lagReason() string {
	l, ok := r.lag.mon.Slowest()
	return replica.Over(l, ok, r.maxLag())
}

// startLagWatch creates the heartbeat table and starts the monitor; it
// returns once every replica has been measured or five seconds have passed
// (a replica that has not is lagging, and the copy waits for it).
func (r *Runner) startLagWatch(ctx context.Context) error {
	if r.lag == nil {
		return nil
	}
	hb := dbconn.QuoteTable(r.cfg.Database, r.names.Heartbeat)
	if err := r.addArtifact(ctx, r.names.Heartbeat); err != nil {
		return err
	}
	if err := replica.CreateTable(ctx, r.db, hb); err != nil {
		return err
	}
	r.lag.made = true
	mctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	r.lag.stop, r.lag.done = stop, make(chan struct{})
	go func() {
		defer close(r.lag.done)
		r.lag.mon.Run(mctx)
	}()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if l, _ := r.lag.mon.Slowest(); l.Err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// waitReplicas holds the cut-over while a replica lags.
func (r *Runner) waitReplicas(ctx context.Context) error {
	if r.lag == nil || r.lagReason() == "" {
		return nil
	}
	start := time.Now()
	r.log.Info("the cut-over waits for the replicas", "reason", r.lagReason())
	err := r.throttle.WaitLag(ctx)
	r.res.CutoverLagWait = time.Since(start)
	if err == nil {
		r.log.Info("the replicas caught up", "waited", r.res.CutoverLagWait.Round(time.Millisecond))
	}
	return err
}

// stopLagWatch stops the monitor and drops the heartbeat table (teardown).
func (r *Runner) stopLagWatch(ctx context.Context) error {
	if r.lag == nil {
		return nil
	}
	if r.lag.stop != nil {
		r.lag.stop()
		<-r.lag.done
	}
	r.res.ReplicaLagMax = r.lag.mon.Worst()
	r.res.ReplicaPaused = r.throttle.Lagged()
	r.lag.mon.Close()
	if !r.lag.made {
		return nil
	}
	if _, err := r.db.ExecContext(ctx, "DROP TABLE IF EXISTS "+dbconn.QuoteTable(r.cfg.Database, r.names.Heartbeat)); err != nil {
		return fmt.Errorf("drop the heartbeat table %s: %w (drop it by hand)", r.names.Heartbeat, err)
	}
	return nil
}

// lagProgress is the replica part of a progress line.
func (r *Runner) lagProgress() []any {
	if r.lag == nil {
		return nil
	}
	l, _ := r.lag.mon.Slowest()
	if l.Err != nil {
		return []any{"replica_lag", "unknown (" + l.Name + ")"}
	}
	return []any{"replica_lag", l.Lag.Round(10 * time.Millisecond), "lag_paused", r.throttle.Lagged().Round(time.Second)}
}
