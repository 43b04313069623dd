package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"slices"
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
	IdleOnly    bool          // only the idle rounds (no capacity, no load)
	SluiceOnly  bool          // time only F and sluice (for tuning sluice)
	SluiceArgs  []string      // extra flags for every sluice run
	// Variants are further sluice runs, each with its own extra flags
	// (space-separated), timed beside the default one in the same run.
	Variants []string
	// Baselines are other sluice binaries (another build, e.g. an earlier
	// commit's), each timed beside this one in the same run.
	Baselines []string
	// Repeat runs every ALTER this many times, interleaved (F, sluice, peer,
	// F, sluice, ...), and reports medians (default 1).
	Repeat int
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

// toolMarkers pick out the statements of the tool under test in a deadlock:
// sluice's and pt-online-schema-change's name the shadow table, sluice's read
// with FOR SHARE, a native ALTER is one. sysbench's statements have none.
var toolMarkers = []string{"_sbtest1_new", "FOR SHARE", "ALTER TABLE"}

// opResult is what one ALTER reports beyond its time: sluice's peak memory
// and phase timings.
type opResult struct {
	rssMB  float64
	phases string
	spans  []phaseSpan // sluice's phases on the wall clock
}

// opFunc runs one ALTER.
type opFunc func(context.Context) (opResult, error)

// step is one timed ALTER of the benchmark.
type step struct {
	name, load string
	op         opFunc
	isF        bool // the idle in-place rebuild: F
}

// result is one timed ALTER.
type result struct {
	name   string
	load   string
	wall   time.Duration
	before Window
	during Window
	rssMB  float64
	// f is the idle in-place rebuild (F) timed last before this run, in the
	// same round: the run's own yardstick, since the host's speed drifts.
	f      time.Duration
	phases string // sluice's phase timings
	// lowIn names the sluice phases the load's lowest second fell in.
	lowIn   string
	failure string
	// deadlocks InnoDB reported during the ALTER, and those with one of the
	// tool's own statements in them
	deadlocks, toolDeadlocks int
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
	if o.Repeat <= 0 {
		o.Repeat = 1
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
	var lastF time.Duration
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
		var dl *Deadlocks
		if l != nil {
			dl = WatchDeadlocks(ctx, s.DB, toolMarkers...)
		}
		start := time.Now()
		out, err := st.op(ctx)
		r.wall, r.rssMB, r.phases = time.Since(start), out.rssMB, out.phases
		if st.isF && err == nil {
			lastF = r.wall
		}
		r.f = lastF
		if dl != nil {
			r.deadlocks, r.toolDeadlocks = dl.Stop()
		}
		if err != nil {
			r.failure = err.Error()
		}
		if l != nil {
			to := l.Since()
			time.Sleep(2 * time.Second)
			l.Stop()
			r.before = l.Between(2*time.Second, from)
			r.during = l.Between(from, to)
			if len(out.spans) > 0 && r.during.Seconds > 0 {
				lo, hi := l.Second(r.during.MinAt)
				r.lowIn = strings.Join(phasesIn(out.spans, lo, hi), "/")
			}
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
	sluiceWith := func(alter string, extra []string) opFunc {
		args := append(append([]string(nil), o.SluiceArgs...), extra...)
		return func(ctx context.Context) (opResult, error) { return s.runSluice(ctx, o.Sluice, alter, args) }
	}
	sluice := func(alter string) opFunc {
		return sluiceWith(alter, nil)
	}
	ptosc := func(alter string) opFunc {
		return func(ctx context.Context) (opResult, error) { return opResult{}, s.runPtOsc(ctx, o.PtOsc, alter) }
	}
	// steps lists one load level's ALTERs; the peer only when it is available.
	steps := func(load string, natives []step, sluiceAlter, name string) []step {
		if o.SluiceOnly {
			natives = natives[:0]
		}
		out := append(natives, step{name: "sluice " + name, load: load, op: sluice(sluiceAlter)})
		for _, v := range o.Variants {
			out = append(out, step{name: "sluice " + name + " " + v, load: load, op: sluiceWith(sluiceAlter, strings.Fields(v))})
		}
		for _, b := range o.Baselines {
			args := append([]string(nil), o.SluiceArgs...)
			out = append(out, step{name: "sluice " + name + " [" + b + "]", load: load, op: func(ctx context.Context) (opResult, error) {
				return s.runSluice(ctx, b, sluiceAlter, args)
			}})
		}
		if o.PtOsc != "" && !o.SluiceOnly {
			out = append(out, step{name: "pt-online-schema-change " + name, load: load, op: ptosc(sluiceAlter)})
		}
		return out
	}
	const rebuildName, copyName = "native ALTER ENGINE=InnoDB (in-place rebuild)", "native ALTER MODIFY k BIGINT (copy, blocks writes)"
	run := func(list []step, rate float64) error {
		for rep := 0; rep < o.Repeat; rep++ {
			for _, st := range list {
				if err := timed(st, rate); err != nil {
					return err
				}
			}
		}
		return nil
	}

	// Every round begins with F, idle, and every run is read as a multiple
	// of the F of its round.
	fStep := step{name: rebuildName, load: "idle", op: native(rebuild), isF: true}
	idle := append([]step{fStep}, steps("idle", []step{{name: copyName, load: "idle", op: native(modifyK)}}, modifyK, "MODIFY k BIGINT")...)
	if err := run(idle, 0); err != nil {
		return err
	}
	if o.IdleOnly {
		report(o.Out, results, o.Rows, 0, o.LoadThreads)
		return nil
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

	if err := run(append([]step{fStep}, steps(loadName, []step{{name: copyName, load: loadName, op: native(modifyK)}}, modifyK, "MODIFY k BIGINT")...), rate); err != nil {
		return err
	}
	if !o.SkipFull {
		full := append([]step{fStep}, steps("unthrottled", []step{{name: rebuildName, load: "unthrottled", op: native(rebuild)}}, rebuild, "ENGINE=InnoDB")...)
		if err := run(full, 0); err != nil {
			return err
		}
	}
	report(o.Out, results, o.Rows, capacity, o.LoadThreads)
	return nil
}

// summary is every run of one ALTER at one load level.
type summary struct {
	name, load string
	runs       []result
	wall       time.Duration // median
	lo, hi     time.Duration // fastest and slowest run
	// x, xlo, xhi: the median, lowest and highest of wall/f over the runs
	// (each run against the F of its round); zero if a run has no F.
	x, xlo, xhi float64
	before      Window  // throughput before, over every run (Mean: mean of the runs)
	during      Window  // during: mean of means, lowest second, most zero seconds
	errBefore   float64 // failed application transactions a minute, before
	errDuring   float64 // and during
	rssMB       float64 // the largest
	failures    []string
	deadlocks   int // over every run
	toolDl      int // of which with the tool's statements
}

// summarize groups results by ALTER and load, in order of first appearance.
func summarize(rs []result) []summary {
	var out []summary
	idx := map[string]int{}
	for _, r := range rs {
		k := r.name + "\x00" + r.load
		i, ok := idx[k]
		if !ok {
			i = len(out)
			idx[k] = i
			out = append(out, summary{name: r.name, load: r.load})
		}
		out[i].runs = append(out[i].runs, r)
	}
	for i := range out {
		s := &out[i]
		// Times are of the runs that succeeded: a failed run's time is the
		// time it took to fail.
		var walls []time.Duration
		var secBefore, secDuring int
		var errB, errD float64
		s.during.Min = -1
		for _, r := range s.runs {
			if r.failure == "" {
				walls = append(walls, r.wall)
			}
			s.before.Mean += r.before.Mean / float64(len(s.runs))
			s.during.Mean += r.during.Mean / float64(len(s.runs))
			if r.during.Seconds > 0 && (s.during.Min < 0 || r.during.Min < s.during.Min) {
				s.during.Min = r.during.Min
			}
			s.during.Zero = max(s.during.Zero, r.during.Zero)
			secBefore, secDuring = secBefore+r.before.Seconds, secDuring+r.during.Seconds
			errB, errD = errB+r.before.Errors, errD+r.during.Errors
			s.rssMB = max(s.rssMB, r.rssMB)
			s.deadlocks, s.toolDl = s.deadlocks+r.deadlocks, s.toolDl+r.toolDeadlocks
			if r.failure != "" {
				s.failures = append(s.failures, r.failure)
			}
		}
		s.during.Min = max(s.during.Min, 0)
		if secBefore > 0 {
			s.errBefore = errB * 60 / float64(secBefore)
		}
		if secDuring > 0 {
			s.errDuring = errD * 60 / float64(secDuring)
		}
		if len(walls) > 0 {
			slices.Sort(walls)
			s.wall, s.lo, s.hi = median(walls), walls[0], walls[len(walls)-1]
		}
		s.x, s.xlo, s.xhi = pairedRatios(s.runs)
	}
	return out
}

// pairedRatios returns the median, lowest and highest of each run's wall time
// over the F of its round, leaving out failed runs, or zeros if some run has
// no F.
func pairedRatios(runs []result) (med, lo, hi float64) {
	xs := make([]float64, 0, len(runs))
	for _, r := range runs {
		if r.failure != "" {
			continue
		}
		if r.f <= 0 {
			return 0, 0, 0
		}
		xs = append(xs, float64(r.wall)/float64(r.f))
	}
	if len(xs) == 0 {
		return 0, 0, 0
	}
	slices.Sort(xs)
	return median(xs), xs[0], xs[len(xs)-1]
}

// median of sorted values: the middle one, or the mean of the middle two.
func median[T time.Duration | float64](d []T) T {
	n := len(d)
	if n%2 == 1 {
		return d[n/2]
	}
	return (d[n/2-1] + d[n/2]) / 2
}

func report(w io.Writer, rs []result, rows int, capacity float64, threads int) {
	ss := summarize(rs)
	f := ss[0].wall
	repeat := len(ss[0].runs)
	if capacity > 0 {
		fmt.Fprintf(w, "\nsluice benchmark: %d-row sysbench sbtest1, MySQL sandbox, %d-thread oltp_read_write load (capacity %.0f tps)\n", rows, threads, capacity)
	} else {
		fmt.Fprintf(w, "\nsluice benchmark: %d-row sysbench sbtest1, MySQL sandbox, idle\n", rows)
	}
	fmt.Fprintf(w, "F = native in-place rebuild, idle = %s", f.Round(time.Millisecond))
	if repeat > 1 {
		fmt.Fprintf(w, " (median of %d, %s-%s: the host's speed drifts)", repeat, ss[0].lo.Round(time.Millisecond), ss[0].hi.Round(time.Millisecond))
	}
	fmt.Fprintf(w, ".\nTimes are multiples of F, each run divided by the F timed just before it in the same round")
	if len(ss) > 1 && len(ss[len(ss)-1].runs) > 1 {
		fmt.Fprintf(w, ";\nmedians of %d interleaved runs (lowest-highest); F's own row is each F over the median F", len(ss[len(ss)-1].runs))
	}
	fmt.Fprintf(w, ".\n\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	var failed []string
	fmt.Fprintln(tw, "ALTER\tload\tx F\tTPS before\tTPS during (mean)\tkept\tlowest TPS/s\tzero-TPS s\tapp errors/min before, during\tdeadlocks (with the tool's statements)\tsluice max RSS")
	for i, s := range ss {
		med, lo, hi := s.x, s.xlo, s.xhi
		if i == 0 || med == 0 {
			med, lo, hi = float64(s.wall)/float64(f), float64(s.lo)/float64(f), float64(s.hi)/float64(f)
		}
		x := fmt.Sprintf("%.2f", med)
		if s.wall == 0 {
			x = "failed"
		} else if len(s.runs) > 1 {
			x += fmt.Sprintf(" (%.2f-%.2f)", lo, hi)
		}
		rss := ""
		if s.rssMB > 0 {
			rss = fmt.Sprintf("%.0f MB", s.rssMB)
		}
		if s.load != "idle" {
			kept := 0.0
			if s.before.Mean > 0 {
				kept = s.during.Mean / s.before.Mean * 100
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%.0f\t%.0f\t%.0f%%\t%.0f\t%d\t%.1f, %.1f\t%d (%d)\t%s\n", s.name, s.load, x, s.before.Mean, s.during.Mean, kept, s.during.Min, s.during.Zero, s.errBefore, s.errDuring, s.deadlocks, s.toolDl, rss)
		} else {
			fmt.Fprintf(tw, "%s\t%s\t%s\t-\t-\t-\t-\t-\t-\t-\t%s\n", s.name, s.load, x, rss)
		}
		for _, f := range s.failures {
			failed = append(failed, fmt.Sprintf("%s (%s): %s", s.name, s.load, f))
		}
	}
	tw.Flush()
	for _, f := range failed {
		fmt.Fprintln(w, "FAILED: "+f)
	}
	fmt.Fprintln(w, "\nsluice phases (seconds):")
	pw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, r := range rs {
		if r.phases != "" {
			low := ""
			if r.lowIn != "" {
				low = fmt.Sprintf("; the load's lowest second (%.0f tps) in %s", r.during.Min, r.lowIn)
			}
			fmt.Fprintf(pw, "  %s\t%s\t%s%s\n", strings.TrimPrefix(r.name, "sluice "), r.load, r.phases, low)
		}
	}
	pw.Flush()
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
	return opResult{rssMB: rss, phases: phaseTimes(string(out)), spans: phaseSpans(string(out))}, nil
}

// phaseSpan is one sluice phase on the wall clock.
type phaseSpan struct {
	name     string
	from, to time.Time
}

var phaseMark = regexp.MustCompile(`time=(\S+) level=\w+ msg="phase (start|done)" phase=(\S+)`)

// phaseSpans reads sluice's phases from its log.
func phaseSpans(log string) []phaseSpan {
	var out []phaseSpan
	open := map[string]time.Time{}
	for _, m := range phaseMark.FindAllStringSubmatch(log, -1) {
		at, err := time.Parse(time.RFC3339Nano, m[1])
		if err != nil {
			continue
		}
		if m[2] == "start" {
			open[m[3]] = at
		} else if from, ok := open[m[3]]; ok {
			out = append(out, phaseSpan{name: m[3], from: from, to: at})
			delete(open, m[3])
		}
	}
	return out
}

// phasesIn names the phases that overlap [from, to), in order, or says that
// none does.
func phasesIn(spans []phaseSpan, from, to time.Time) []string {
	var names []string
	for _, sp := range spans {
		if sp.from.Before(to) && sp.to.After(from) {
			names = append(names, sp.name)
		}
	}
	if len(names) == 0 {
		names = []string{"no phase (before or after sluice ran)"}
	}
	return names
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
