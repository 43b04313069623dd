package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"time"
)

// Load is a sysbench oltp_read_write run in the background, or the bench's
// own load generator (keyload.go), recording its per-second throughput.
type Load struct {
	cmd   *exec.Cmd
	halt  func() // stops the bench's own generator (instead of cmd)
	start time.Time
	mu    sync.Mutex // protects tps and errs
	tps   []float64  // tps[i] is the throughput of second i+1
	errs  []float64  // errs[i] is the failed transactions (deadlocks...) of second i+1
	p99   []float64  // p99[i] is second i+1's 99th percentile latency, ms (sysbench only)
	done  chan struct{}
}

var (
	reportLine = regexp.MustCompile(`^\[ (\d+)s \] thds: \d+ tps: ([0-9.]+) .* err/s: ([0-9.]+)`)
	latency    = regexp.MustCompile(` lat \(ms,99%\): ([0-9.]+) `)
)

// StartLoad starts sysbench with threads threads at rate transactions a
// second (0: unthrottled) for at most maxDur.
func (s *Server) StartLoad(ctx context.Context, db string, threads int, rate float64, maxDur time.Duration) (*Load, error) {
	return s.startSysbench(ctx, db, "oltp_read_write", threads, rate, maxDur)
}

// startSysbench starts sysbench's test (oltp_read_write, oltp_write_only)
// as StartLoad does.
func (s *Server) startSysbench(ctx context.Context, db, test string, threads int, rate float64, maxDur time.Duration) (*Load, error) {
	args := append(s.sysbenchArgs(db), "--threads="+strconv.Itoa(threads), "--rate="+strconv.Itoa(int(rate)),
		"--time="+strconv.Itoa(int(maxDur.Seconds())), "--report-interval=1", "--percentile=99", "--mysql-ignore-errors=all", test, "run")
	cmd := exec.CommandContext(ctx, "sysbench", args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = io.Discard
	l := &Load{cmd: cmd, done: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start sysbench: %w", err)
	}
	l.start = time.Now()
	go func() {
		defer close(l.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			m := reportLine.FindStringSubmatch(sc.Text())
			if m == nil {
				continue
			}
			sec, _ := strconv.Atoi(m[1])
			v, _ := strconv.ParseFloat(m[2], 64)
			e, _ := strconv.ParseFloat(m[3], 64)
			var p float64
			if lm := latency.FindStringSubmatch(sc.Text()); lm != nil {
				p, _ = strconv.ParseFloat(lm[1], 64)
			}
			l.mu.Lock()
			for len(l.tps) < sec {
				l.tps = append(l.tps, 0)
				l.errs = append(l.errs, 0)
				l.p99 = append(l.p99, 0)
			}
			l.tps[sec-1], l.errs[sec-1], l.p99[sec-1] = v, e, p
			l.mu.Unlock()
		}
	}()
	return l, nil
}

// Second returns the wall-clock span of second i of the series (i, i+1].
func (l *Load) Second(i int) (from, to time.Time) {
	from = l.start.Add(time.Duration(i) * time.Second)
	return from, from.Add(time.Second)
}

// Since returns the time since the load started.
func (l *Load) Since() time.Duration { return time.Since(l.start) }

// Stop ends sysbench and waits for its output to be read.
func (l *Load) Stop() {
	if l.halt != nil {
		l.halt()
		return
	}
	l.cmd.Process.Kill()
	l.cmd.Wait()
	<-l.done
}

// Window summarises throughput between two offsets from the load's start.
type Window struct {
	Mean, Min float64
	MinAt     int // the second (an index of Load's series) with the lowest throughput
	Zero      int // seconds with no transaction at all
	Seconds   int
	Errors    float64 // failed transactions in all
	P99       float64 // the highest of the seconds' 99th percentile latencies, ms (0: not measured)
}

// Between summarises the whole seconds in [from, to].
func (l *Load) Between(from, to time.Duration) Window {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := window(l.tps, from, to)
	w.Errors = window(l.errs, from, to).Mean * float64(w.Seconds)
	if len(l.p99) > 0 {
		lat, _ := l.span(l.p99, from, to)
		for _, v := range lat {
			w.P99 = max(w.P99, v)
		}
	}
	return w
}

// Span returns the throughput and p99 latency (nil: not measured) of the
// whole seconds in [from, to], and the end of the first one's second, in
// seconds from the load's start.
func (l *Load) Span(from, to time.Duration) (tps, p99 []float64, first float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	tps, first = l.span(l.tps, from, to)
	if len(l.p99) > 0 {
		p99, _ = l.span(l.p99, from, to)
	}
	return tps, p99, first
}

// span is series' seconds in [from, to], as window counts them (l.mu held).
func (l *Load) span(series []float64, from, to time.Duration) ([]float64, float64) {
	lo := max(int(from.Seconds()), 0)
	hi := min(int(to.Seconds()+0.999)-1, len(series)-1)
	if hi < lo {
		return nil, 0
	}
	return slices.Clone(series[lo : hi+1]), float64(lo + 1)
}

// window is Between's pure core: second i of tps covers (i, i+1] seconds.
func window(tps []float64, from, to time.Duration) Window {
	lo := int(from.Seconds())
	hi := int(to.Seconds()+0.999) - 1
	w := Window{Min: -1}
	sum := 0.0
	for i := max(lo, 0); i <= hi && i < len(tps); i++ {
		v := tps[i]
		sum += v
		w.Seconds++
		if w.Min < 0 || v < w.Min {
			w.Min, w.MinAt = v, i
		}
		if v == 0 {
			w.Zero++
		}
	}
	if w.Seconds > 0 {
		w.Mean = sum / float64(w.Seconds)
	} else {
		w.Min = 0
	}
	return w
}
