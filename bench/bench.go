package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
)

// Options configure a benchmark run.
type Options struct {
	DSN         string
	Sluice      string // path of the sluice binary
	Rows        int    // sysbench table size (default 1,000,000)
	LoadThreads int    // sysbench threads (default 8)
	LoadRatio   float64
	Baseline    time.Duration // load before each timed ALTER (default 10s)
	SkipFull    bool          // skip the unthrottled-load runs
	SluiceOnly  bool          // time only F and sluice (for tuning sluice)
	SluiceArgs  []string      // extra flags for every sluice run
	// PtOsc is the command that runs pt-online-schema-change ("" skips the
	// peer), e.g. "scripts/sandbox.sh pt-osc".
	PtOsc string
	Out   io.Writer
}

const (
	tplDB   = "sbtest_tpl"
	benchDB = "sbtest"
	modifyK = "MODIFY COLUMN k BIGINT NOT NULL DEFAULT 0"
	rebuild = "ENGINE=InnoDB"
)

// opResult is what one ALTER reports beyond its time: sluice's peak memory
// and phase timings.
type opResult struct {
	rssMB  float64
	phases string
}

// opFunc runs one ALTER.
type opFunc func(context.Context) (opResult, error)

// step is one timed ALTER of the benchmark.
type step struct {
	name, load string
	op         opFunc
}

// result is one timed ALTER.
type result struct {
	name    string
	load    string
	wall    time.Duration
	before  Window
	during  Window
	rssMB   float64
	phases  string // sluice's phase timings
	failure string
}

// Run runs every scenario and prints the table of results.
func Run(ctx context.Context, o Options) error {
	if o.Rows <= 0 {
		o.Rows = 1_000_000
	}
	if o.LoadThreads <= 0 {
		o.LoadThreads = 8
	}
	if o.LoadRatio <= 0 {
		o.LoadRatio = 0.4
	}
	if o.Baseline <= 0 {
		o.Baseline = 10 * time.Second
	}
	if err := ensureSysbench(); err != nil {
		return err
	}
	s, err := Connect(ctx, o.DSN)
	if err != nil {
		return err
	}
	defer s.DB.Close()
	if err := s.prepareTemplate(ctx, o.Rows); err != nil {
		return err
	}
	if o.PtOsc != "" {
		// Untimed first call: the peer may install itself on first use.
		if err := s.runPtOscArgs(ctx, o.PtOsc, "--version"); err != nil {
			return err
		}
	}
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...) }

	var results []result
	// timed runs one ALTER from a freshly restored, flushed table, under a
	// load of rate transactions a second unless load is "idle".
	timed := func(st step, rate float64) error {
		if err := s.reset(ctx, o.Rows); err != nil {
			return err
		}
		r := result{name: st.name, load: st.load}
		var l *Load
		var from time.Duration
		if st.load != "idle" {
			if l, err = s.StartLoad(ctx, benchDB, o.LoadThreads, rate, 30*time.Minute); err != nil {
				return err
			}
			time.Sleep(o.Baseline)
			from = l.Since()
		}
		logf("%s (%s)", st.name, st.load)
		start := time.Now()
		out, err := st.op(ctx)
		r.wall, r.rssMB, r.phases = time.Since(start), out.rssMB, out.phases
		if err != nil {
			r.failure = err.Error()
		}
		if l != nil {
			to := l.Since()
			time.Sleep(2 * time.Second)
			l.Stop()
			r.before = l.Between(2*time.Second, from)
			r.during = l.Between(from, to)
		}
		logf("  %s", r.wall.Round(time.Millisecond))
		results = append(results, r)
		return nil
	}
	native := func(alter string) opFunc {
		return func(ctx context.Context) (opResult, error) {
			_, err := s.DB.ExecContext(ctx, "ALTER TABLE "+benchDB+".sbtest1 "+alter)
			return opResult{}, err
		}
	}
	sluice := func(alter string) opFunc {
		return func(ctx context.Context) (opResult, error) { return s.runSluice(ctx, o.Sluice, alter, o.SluiceArgs) }
	}
	ptosc := func(alter string) opFunc {
		return func(ctx context.Context) (opResult, error) { return opResult{}, s.runPtOsc(ctx, o.PtOsc, alter) }
	}
	// steps lists one load level's ALTERs; the peer only when it is available.
	steps := func(load string, natives []step, sluiceAlter, name string) []step {
		if o.SluiceOnly {
			natives = natives[:0]
		}
		out := append(natives, step{"sluice " + name, load, sluice(sluiceAlter)})
		if o.PtOsc != "" && !o.SluiceOnly {
			out = append(out, step{"pt-online-schema-change " + name, load, ptosc(sluiceAlter)})
		}
		return out
	}
	const rebuildName, copyName = "native ALTER ENGINE=InnoDB (in-place rebuild)", "native ALTER MODIFY k BIGINT (copy, blocks writes)"
	run := func(list []step, rate float64) error {
		for _, st := range list {
			if err := timed(st, rate); err != nil {
				return err
			}
		}
		return nil
	}

	// Idle; the first step is F.
	idle := append([]step{{rebuildName, "idle", native(rebuild)}}, steps("idle", []step{{copyName, "idle", native(modifyK)}}, modifyK, "MODIFY k BIGINT")...)
	if err := run(idle, 0); err != nil {
		return err
	}

	// What the server sustains.
	if err := s.reset(ctx, o.Rows); err != nil {
		return err
	}
	l, err := s.StartLoad(ctx, benchDB, o.LoadThreads, 0, 30*time.Minute)
	if err != nil {
		return err
	}
	time.Sleep(15 * time.Second)
	capacity := l.Between(3*time.Second, l.Since()).Mean
	l.Stop()
	rate := capacity * o.LoadRatio
	logf("capacity %.0f tps; %.0f%% load is %.0f tps", capacity, o.LoadRatio*100, rate)
	loadName := fmt.Sprintf("%.0f%% load", o.LoadRatio*100)

	if err := run(steps(loadName, []step{{copyName, loadName, native(modifyK)}}, modifyK, "MODIFY k BIGINT"), rate); err != nil {
		return err
	}
	if !o.SkipFull {
		full := steps("unthrottled", []step{{rebuildName, "unthrottled", native(rebuild)}}, rebuild, "ENGINE=InnoDB")
		if err := run(full, 0); err != nil {
			return err
		}
	}
	report(o.Out, results, o.Rows, capacity, o.LoadThreads)
	return nil
}

func report(w io.Writer, rs []result, rows int, capacity float64, threads int) {
	f := rs[0].wall
	fmt.Fprintf(w, "\nsluice benchmark: %d-row sysbench sbtest1, MySQL sandbox, %d-thread oltp_read_write load (capacity %.0f tps)\n", rows, threads, capacity)
	fmt.Fprintf(w, "F = native in-place rebuild, idle = %s; times are multiples of F, measured in this run\n\n", f.Round(time.Millisecond))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ALTER\tload\tx F\tTPS before\tTPS during (mean)\tkept\tlowest TPS/s\tzero-TPS s\tapp errors\tsluice max RSS")
	for _, r := range rs {
		x := float64(r.wall) / float64(f)
		rss := ""
		if r.rssMB > 0 {
			rss = fmt.Sprintf("%.0f MB", r.rssMB)
		}
		if r.load != "idle" {
			kept := 0.0
			if r.before.Mean > 0 {
				kept = r.during.Mean / r.before.Mean * 100
			}
			fmt.Fprintf(tw, "%s\t%s\t%.2f\t%.0f\t%.0f\t%.0f%%\t%.0f\t%d\t%.0f\t%s\n", r.name, r.load, x, r.before.Mean, r.during.Mean, kept, r.during.Min, r.during.Zero, r.during.Errors, rss)
		} else {
			fmt.Fprintf(tw, "%s\t%s\t%.2f\t-\t-\t-\t-\t-\t-\t%s\n", r.name, r.load, x, rss)
		}
		if r.failure != "" {
			fmt.Fprintf(tw, "  FAILED: %s\t\t\t\t\t\t\t\t\n", r.failure)
		}
	}
	tw.Flush()
	fmt.Fprintln(w, "\nsluice phases (seconds):")
	for _, r := range rs {
		if r.phases != "" {
			fmt.Fprintf(w, "  %-24s %-12s %s\n", strings.TrimPrefix(r.name, "sluice "), r.load, r.phases)
		}
	}
}

// runSluice runs the sluice binary on the benchmark table and returns its peak
// resident memory in MB and its phase timings.
func (s *Server) runSluice(ctx context.Context, bin, alter string, extra []string) (opResult, error) {
	args := append([]string{"migrate", "--host", s.Conn.Host, "--port", strconv.Itoa(s.Conn.Port),
		"--user", s.Conn.User, "--database", benchDB, "--table", "sbtest1", "--alter", alter, "--drop-old",
		"--progress-interval", "1h"}, extra...)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = os.Environ()
	if s.Conn.Password != "" {
		cmd.Env = append(cmd.Env, "MYSQL_PWD="+s.Conn.Password)
	}
	out, err := cmd.CombinedOutput()
	rss := 0.0
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok && cmd.ProcessState != nil {
		rss = float64(ru.Maxrss) / 1024
	}
	if err != nil {
		return opResult{rssMB: rss}, fmt.Errorf("sluice: %v: %s", err, lastLine(string(out)))
	}
	return opResult{rssMB: rss, phases: phaseTimes(string(out))}, nil
}

var phaseDone = regexp.MustCompile(`msg="phase done" phase=(\S+) took=(\S+)`)

// phaseTimes extracts "copy 3.9 index 1.1 ..." from sluice's log.
func phaseTimes(log string) string {
	var parts []string
	for _, m := range phaseDone.FindAllStringSubmatch(log, -1) {
		d, err := time.ParseDuration(m[2])
		if err != nil || d < 50*time.Millisecond {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %.1f", m[1], d.Seconds()))
	}
	return strings.Join(parts, ", ")
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// runPtOsc runs pt-online-schema-change with its defaults on the benchmark
// table. The sandbox has no replicas to watch.
func (s *Server) runPtOsc(ctx context.Context, command, alter string) error {
	dsn := fmt.Sprintf("h=%s,P=%d,u=%s,D=%s,t=sbtest1", s.Conn.Host, s.Conn.Port, s.Conn.User, benchDB)
	return s.runPtOscArgs(ctx, command, "--execute", "--alter", alter, "--recursion-method=none", "--no-check-alter", dsn)
}

// runPtOscArgs runs the pt-online-schema-change command with args.
func (s *Server) runPtOscArgs(ctx context.Context, command string, args ...string) error {
	parts := strings.Fields(command)
	cmd := exec.CommandContext(ctx, parts[0], append(parts[1:], args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pt-online-schema-change: %v: %s", err, lastLine(string(out)))
	}
	return nil
}

// prepareTemplate makes sure sbtest_tpl.sbtest1 holds rows rows, preparing it
// with sysbench once.
func (s *Server) prepareTemplate(ctx context.Context, rows int) error {
	var n int64
	err := s.DB.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+tplDB+".sbtest1").Scan(&n)
	if err == nil && n == int64(rows) {
		return nil
	}
	fmt.Fprintf(os.Stderr, "bench: preparing a %d-row sysbench table (once)\n", rows)
	if _, err := s.DB.ExecContext(ctx, "DROP DATABASE IF EXISTS "+tplDB); err != nil {
		return err
	}
	if _, err := s.DB.ExecContext(ctx, "CREATE DATABASE "+tplDB); err != nil {
		return err
	}
	args := append(s.sysbenchArgs(tplDB), "--threads=2", "--table-size="+strconv.Itoa(rows), "oltp_read_write", "prepare")
	if out, err := exec.CommandContext(ctx, "sysbench", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("sysbench prepare: %v\n%s", err, out)
	}
	return nil
}

// reset restores sbtest.sbtest1 from the template and flushes dirty pages.
func (s *Server) reset(ctx context.Context, rows int) error {
	for _, q := range []string{
		"DROP DATABASE IF EXISTS " + benchDB,
		"CREATE DATABASE " + benchDB,
		"CREATE TABLE " + benchDB + ".sbtest1 LIKE " + tplDB + ".sbtest1",
		"INSERT INTO " + benchDB + ".sbtest1 SELECT * FROM " + tplDB + ".sbtest1",
		"ANALYZE TABLE " + benchDB + ".sbtest1",
		"PURGE BINARY LOGS BEFORE NOW()",
	} {
		if _, err := s.DB.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("reset: %s: %w", q, err)
		}
	}
	return s.Flush(ctx)
}
