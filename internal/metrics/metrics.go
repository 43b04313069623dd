// Package metrics serves the state of running migrations (migration.Status)
// as Prometheus metrics, read from each run at every scrape.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluicedb/sluice/migration"
)

// Board holds the runs whose state is served. Add is migration.Config's
// Observe.
type Board struct {
	mu   sync.Mutex
	runs []func() migration.Status
}

// Add adds a run.
func (b *Board) Add(status func() migration.Status) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.runs = append(b.runs, status)
}

// Statuses returns every run's state now.
func (b *Board) Statuses() []migration.Status {
	b.mu.Lock()
	runs := append([]func() migration.Status(nil), b.runs...)
	b.mu.Unlock()
	out := make([]migration.Status, len(runs))
	for i, s := range runs {
		out[i] = s()
	}
	return out
}

var labels = []string{"database", "table"}

func desc(name, help string, extra ...string) *prometheus.Desc {
	return prometheus.NewDesc("sluice_"+name, help, append(append([]string(nil), labels...), extra...), nil)
}

// The metrics, each labelled with the run's database and table.
var (
	phaseDesc     = desc("phase", "The phase the run is in (1 for the current one).", "phase")
	copiedDesc    = desc("rows_copied_total", "Rows the copy has written to the new table.")
	estimatedDesc = desc("rows_estimated", "The original table's row count as the server estimates it.")
	etaDesc       = desc("copy_eta_seconds", "The copy's remaining time at its rate over the last five seconds (0 outside the copy).")
	appliedDesc   = desc("changes_applied_total", "Changed keys applied to the new table.")
	backlogDesc   = desc("apply_backlog", "Changed keys waiting to be applied.")
	binlogDesc    = desc("binlog_lag_seconds", "How far behind the binlog reader is (binlog capture).")
	replicaDesc   = desc("replica_lag_seconds", "The slowest watched replica's lag (absent when no replica is watched or it cannot be measured).")
	throttleDesc  = desc("throttled_seconds_total", "Time the copy paused, by reason: replica_lag, or other (--max-load, --critical-load, --throttle-flag-file, sluice ctl pause).", "reason")
	pausedDesc    = desc("paused", "1 while the operator has paused the run (sluice ctl pause).")
	threadsDesc   = desc("copy_threads", "Copy workers allowed at once (--threads, or sluice ctl set threads).")
	chunkDesc     = desc("chunk_time_seconds", "The wanted duration of one copy statement (0: the default).")
	attemptsDesc  = desc("lock_attempts_total", "Metadata-lock attempts (cut-over, INSTANT or in-place ALTER).")
	lockWaitDesc  = desc("lock_wait_longest_seconds", "The longest wait for the cut-over's table locks.")
)

type collector struct{ board *Board }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{phaseDesc, copiedDesc, estimatedDesc, etaDesc, appliedDesc, backlogDesc,
		binlogDesc, replicaDesc, throttleDesc, pausedDesc, threadsDesc, chunkDesc, attemptsDesc, lockWaitDesc} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.board.Statuses() {
		l := []string{s.Database, s.Table}
		metric := func(d *prometheus.Desc, t prometheus.ValueType, v float64, extra ...string) {
			ch <- prometheus.MustNewConstMetric(d, t, v, append(append([]string(nil), l...), extra...)...)
		}
		metric(phaseDesc, prometheus.GaugeValue, 1, s.Phase)
		metric(copiedDesc, prometheus.CounterValue, float64(s.RowsCopied))
		metric(estimatedDesc, prometheus.GaugeValue, float64(s.RowsEstimated))
		metric(etaDesc, prometheus.GaugeValue, s.ETA.Seconds())
		metric(appliedDesc, prometheus.CounterValue, float64(s.Applied))
		metric(backlogDesc, prometheus.GaugeValue, float64(s.Backlog))
		metric(binlogDesc, prometheus.GaugeValue, s.BinlogLag.Seconds())
		if s.ReplicaLagKnown {
			metric(replicaDesc, prometheus.GaugeValue, s.ReplicaLag.Seconds())
		}
		metric(throttleDesc, prometheus.CounterValue, s.ThrottledLag.Seconds(), "replica_lag")
		metric(throttleDesc, prometheus.CounterValue, max(0, s.Throttled-s.ThrottledLag).Seconds(), "other")
		paused := 0.0
		if s.Paused {
			paused = 1
		}
		metric(pausedDesc, prometheus.GaugeValue, paused)
		metric(threadsDesc, prometheus.GaugeValue, float64(s.Threads))
		metric(chunkDesc, prometheus.GaugeValue, s.ChunkTime.Seconds())
		metric(attemptsDesc, prometheus.CounterValue, float64(s.LockAttempts))
		metric(lockWaitDesc, prometheus.GaugeValue, s.LongestLockWait.Seconds())
	}
}

// Handler serves the board's runs in Prometheus' text format.
func Handler(b *Board) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collector{b})
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}

// Listen opens addr for the metrics: HOST:PORT, or :PORT for the loopback
// address (the metrics are served on another interface only when the
// operator names it).
func Listen(addr string) (net.Listener, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr %q: want HOST:PORT, e.g. 127.0.0.1:9104", addr)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, port))
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr %q: %w", addr, err)
	}
	return l, nil
}

// Serve serves /metrics on l until ctx ends.
func Serve(ctx context.Context, l net.Listener, b *Board, log *slog.Logger) {
	mux := http.NewServeMux()
	mux.Handle("/metrics", Handler(b))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		srv.Shutdown(shut)
	}()
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Warn("the metrics endpoint stopped", "error", err)
	}
}
