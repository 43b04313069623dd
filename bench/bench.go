package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Options configure a benchmark run.
type Options struct {
	DSN         string
	Sluice      string // path of the sluice binary
	Rows        int    // sysbench table size (default 1,000,000)
	LoadThreads int    // sysbench threads, and the key round's writers (default 8)
	LoadRatio   float64
	Baseline    time.Duration // load before each timed ALTER (default 10s)
	SkipFull    bool          // skip the unthrottled-load runs
	IdleOnly    bool          // only the idle rounds (no capacity, no load)
	SluiceOnly  bool          // time only F and sluice (for tuning sluice)
	SluiceArgs  []string      // extra flags for every sluice run
	// Logs is a directory that keeps every sluice run's output, one file a
	// run, numbered in run order ("" keeps none).
	Logs string
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
	// GhOst and Spirit are the commands running gh-ost and spirit ("":
	// the binary on PATH, if any; "none": left out).
	GhOst, Spirit string
	// Limit stops an ALTER that has not finished by then (0: none); it is
	// reported as not finished.
	Limit time.Duration
	// Replicas is the command that manages the sandbox's replicas
	// ("CMD down", "CMD reset", "CMD up 1", "CMD status"), e.g.
	// "scripts/sandbox.sh replicas". With it the other rounds run with the
	// replicas down, and the replica round runs with one fresh replica. ""
	// leaves the replicas alone and the replica round out.
	Replicas    string
	SkipReplica bool // leave the replica round out
	SkipKeys    bool // leave the key-type round out
	// SkipSysbench leaves out the sysbench rounds of sbtest1 (idle, load,
	// unthrottled); the load's capacity is still measured.
	SkipSysbench bool
	MaxLag       time.Duration // the replica round's --max-lag for sluice and pt-online-schema-change (default 1s)
	Out          io.Writer
	// ReportDir receives the run's report (race.json, race.txt,
	// race.html; "": none).
	ReportDir string
}

const (
	tplDB   = "sbtest_tpl"
	benchDB = "sbtest"
	modifyK = "MODIFY COLUMN k BIGINT NOT NULL DEFAULT 0"
	rebuild = "ENGINE=InnoDB"
)

// toolMarkers pick out the statements of the tool under test in a deadlock:
// sluice's and pt-online-schema-change's name the shadow table, sluice's read
// with FOR SHARE, a native ALTER is one. sysbench's statements have none, nor
// have the key round's load generator's.
func toolMarkers(table string) []string {
	return []string{"_" + table + "_new", "FOR SHARE", "ALTER TABLE"}
}

// opResult is what one ALTER reports beyond its time: sluice's peak memory
// and phase timings.
type opResult struct {
	rssMB   float64
	phases  string
	spans   []phaseSpan   // sluice's phases on the wall clock
	catchUp time.Duration // sluice's catch-up phase
	// replicas is the tool's own account of the replicas it watched ("" when
	// it watched none or says nothing).
	replicas string
	eta      *[2]float64 // the copy ETA's error at 1/4 and 1/2 (eta.go); nil: not measured
	// slowest is sluice's slowest copy chunk, of slowRows rows, against
	// its chunk-time target.
	slowest, target time.Duration
	slowRows        int64
}

// opFunc runs one ALTER.
type opFunc func(context.Context) (opResult, error)

// step is one timed ALTER of the benchmark.
type step struct {
	name, load string
	op         opFunc
	isF        bool   // the idle in-place rebuild: F
	table      string // the table restored before it ("": sbtest1)
	// ownLoad: under load, the bench's own load generator drives table
	// (the key round), not sysbench.
	ownLoad bool
}

// result is one timed ALTER.
type result struct {
	name   string
	load   string
	round  string // "" (the sysbench rounds), "keys" or "replica"
	table  string
	wall   time.Duration
	before Window
	during Window
	rssMB  float64
	// f is the idle in-place rebuild (F) timed last before this run, in the
	// same round: the run's own yardstick, since the host's speed drifts.
	f       time.Duration
	phases  string        // sluice's phase timings
	catchUp time.Duration // sluice's catch-up phase
	// lowIn names the sluice phases the load's lowest second fell in.
	lowIn   string
	failure string
	// deadlocks InnoDB reported during the ALTER, and those with one of the
	// tool's own statements in them
	deadlocks, toolDeadlocks int
	lag                      *lagResult  // the replica's lag, in the replica round
	toolReplicas             string      // the tool's own account of the replicas it watched
	eta                      *[2]float64 // sluice's ETA error at 1/4 and 1/2 of the copy (eta.go)
	// tps is the load's throughput a second from the baseline to 2s after
	// the ALTER, p99 its latency (ms, nil: not measured), tpsFrom the end of
	// tps[0]'s second in seconds from the ALTER's start.
	tps, p99 []float64
	tpsFrom  float64
}

// benchRun is one "sluice-bench run": the server, the results so far and
// the state of the round being timed.
type benchRun struct {
	s       *Server
	o       Options
	results []result
	lastF   time.Duration
	round   string   // the round being timed: "" (sysbench rounds), "keys", "replica"
	replica *replica // the replica attached in the replica round (nil: none)
	// replicaAddr is the replica round's replica, host:port.
	replicaAddr string
	// keyCapacity is what the key round's own load generator sustains on
	// sbtest1; keyRate the rate of its load.
	keyCapacity, keyRate float64
	// rate is the sysbench load's rate, from the capacity measured without
	// a replica.
	rate float64
}

func logf(format string, args ...any) { fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...) }

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
	if o.MaxLag <= 0 {
		o.MaxLag = time.Second
	}
	if err := ensureSysbench(); err != nil {
		return err
	}
	started := time.Now()
	var text bytes.Buffer
	if o.Out == nil {
		o.Out = os.Stdout
	}
	o.Out = io.MultiWriter(o.Out, &text)
	s, err := Connect(ctx, o.DSN)
	if err != nil {
		return err
	}
	defer s.DB.Close()
	if err := s.prepareTemplate(ctx, o.Rows); err != nil {
		return err
	}
	if !o.SkipKeys {
		if err := s.prepareKeyTemplates(ctx, o.Rows); err != nil {
			return err
		}
	}
	o.GhOst, o.Spirit = findPeer(o.GhOst, "gh-ost"), findPeer(o.Spirit, "spirit")
	if o.PtOsc != "" {
		// Untimed first call: the peer may install itself on first use.
		if err := s.runPtOscArgs(ctx, o.PtOsc, "--version"); err != nil {
			return err
		}
	}
	s.Logs = o.Logs
	b := &benchRun{s: s, o: o}

	// The sysbench and key rounds run with the replicas down, as every
	// earlier measurement did; they are put back as found at the end.
	var reps *replicaCmd
	replicaNote := ""
	if o.Replicas != "" {
		if reps, err = takeReplicasDown(ctx, o.Replicas); err != nil {
			return err
		}
		defer reps.restore(context.WithoutCancel(ctx))
	} else if !o.SkipReplica && !o.IdleOnly {
		logf("no --replicas command: the replica round is left out")
	}
	finish := func(capacity float64) error {
		if reps != nil {
			replicaNote = reps.restore(context.WithoutCancel(ctx))
		}
		b.report(capacity, replicaNote)
		return b.writeReport(ctx, started, text.String())
	}

	// Every round begins with F, idle, and every run is read as a multiple
	// of the F of its round.
	if !o.SkipSysbench {
		idle := append([]step{b.fStep()}, b.steps("idle", []step{{name: copyName, load: "idle", op: b.native("sbtest1", modifyK)}}, modifyK, "MODIFY k BIGINT")...)
		if err := b.run(ctx, idle, 0); err != nil {
			return err
		}
	}
	if o.IdleOnly {
		if !o.SkipKeys {
			if err := b.keyRound(ctx, false); err != nil {
				return err
			}
		}
		return finish(0)
	}

	// What the server sustains (the replica round's load too).
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
	b.rate = rate
	logf("capacity %.0f tps; %.0f%% load is %.0f tps", capacity, o.LoadRatio*100, rate)
	loadName := b.loadName()

	if !o.SkipSysbench {
		if err := b.run(ctx, append([]step{b.fStep()}, b.steps(loadName, []step{{name: copyName, load: loadName, op: b.native("sbtest1", modifyK)}}, modifyK, "MODIFY k BIGINT")...), rate); err != nil {
			return err
		}
	}
	if !o.SkipFull && !o.SkipSysbench {
		full := append([]step{b.fStep()}, b.steps("unthrottled", []step{{name: rebuildName, load: "unthrottled", op: b.native("sbtest1", rebuild)}}, rebuild, "ENGINE=InnoDB")...)
		if err := b.run(ctx, full, 0); err != nil {
			return err
		}
	}
	if !o.SkipKeys {
		if err := b.keyRound(ctx, true); err != nil {
			return err
		}
	}
	if reps != nil && !o.SkipReplica {
		if err := b.replicaRound(ctx, reps, rate); err != nil {
			return err
		}
	}
	return finish(capacity)
}

const rebuildName, copyName = "native ALTER ENGINE=InnoDB (in-place rebuild)", "native ALTER MODIFY k BIGINT (copy, blocks writes)"

func (b *benchRun) loadName() string { return fmt.Sprintf("%.0f%% load", b.o.LoadRatio*100) }

// fStep is F: the idle in-place rebuild of sbtest1.
func (b *benchRun) fStep() step {
	return step{name: rebuildName, load: "idle", op: b.native("sbtest1", rebuild), isF: true}
}

func (b *benchRun) native(table, alter string) opFunc {
	return func(ctx context.Context) (opResult, error) {
		_, err := b.s.DB.ExecContext(ctx, "ALTER TABLE "+benchDB+"."+table+" "+alter)
		return opResult{}, err
	}
}

func (b *benchRun) sluiceWith(table, alter string, extra []string) opFunc {
	return b.sluiceBin(b.o.Sluice, table, alter, extra, true)
}

// sluiceBin runs the sluice binary bin (watch: through its control socket,
// see runSluiceOn). In the rounds the bench runs with the replicas down,
// sluice does not look for replicas: a primary may still list a stopped one
// for a while, and sluice would wait for it.
func (b *benchRun) sluiceBin(bin, table, alter string, extra []string, watch bool) opFunc {
	args := append(append([]string(nil), b.o.SluiceArgs...), extra...)
	return func(ctx context.Context) (opResult, error) {
		run := args
		if b.o.Replicas != "" && b.replica == nil {
			run = append(slices.Clone(args), "--replica-discovery=false")
		}
		return b.s.runSluiceOn(ctx, bin, table, alter, run, watch)
	}
}

func (b *benchRun) ptosc(alter string) opFunc {
	return func(ctx context.Context) (opResult, error) {
		_, err := b.s.runPtOsc(ctx, b.o.PtOsc, alter)
		return opResult{}, err
	}
}

// steps lists one load level's ALTERs of sbtest1; the peer only when it is
// available.
func (b *benchRun) steps(load string, natives []step, sluiceAlter, name string) []step {
	o := b.o
	if o.SluiceOnly {
		natives = natives[:0]
	}
	out := append(natives, step{name: "sluice " + name, load: load, op: b.sluiceWith("sbtest1", sluiceAlter, nil)})
	for _, v := range o.Variants {
		out = append(out, step{name: "sluice " + name + " " + v, load: load, op: b.sluiceWith("sbtest1", sluiceAlter, strings.Fields(v))})
	}
	for _, bin := range o.Baselines {
		out = append(out, step{name: "sluice " + name + " [" + bin + "]", load: load, op: b.sluiceBin(bin, "sbtest1", sluiceAlter, nil, false)})
	}
	if o.PtOsc != "" && !o.SluiceOnly {
		out = append(out, step{name: "pt-online-schema-change " + name, load: load, op: b.ptosc(sluiceAlter)})
	}
	if o.GhOst != "" && !o.SluiceOnly {
		out = append(out, step{name: "gh-ost " + name, load: load, op: func(ctx context.Context) (opResult, error) {
			return opResult{}, b.s.runGhOst(ctx, o.GhOst, benchDB, "sbtest1", sluiceAlter)
		}})
	}
	if o.Spirit != "" && !o.SluiceOnly {
		out = append(out, step{name: "spirit " + name, load: load, op: func(ctx context.Context) (opResult, error) {
			return opResult{}, b.s.runSpirit(ctx, o.Spirit, benchDB, "sbtest1", sluiceAlter)
		}})
	}
	return out
}

// run times the steps, o.Repeat times over, interleaved.
func (b *benchRun) run(ctx context.Context, list []step, rate float64) error {
	for rep := 0; rep < b.o.Repeat; rep++ {
		for _, st := range list {
			if err := b.timed(ctx, st, rate); err != nil {
				return err
			}
		}
	}
	return nil
}

// timed runs one ALTER from a freshly restored, flushed table (and, in the
// replica round, a replica that has caught up and flushed too), under a load
// of rate transactions a second unless load is "idle".
func (b *benchRun) timed(ctx context.Context, st step, rate float64) error {
	s, o := b.s, b.o
	table := st.table
	if table == "" {
		table = "sbtest1"
	}
	if err := s.resetTable(ctx, table); err != nil {
		return err
	}
	var lw *lagWatch
	if b.replica != nil {
		if err := b.replica.settle(ctx, s); err != nil {
			return err
		}
		var err error
		if lw, err = b.replica.watch(ctx, s); err != nil {
			return err
		}
		defer lw.stop()
	}
	r := result{name: st.name, load: st.load, round: b.round, table: table}
	var l *Load
	var from time.Duration
	if st.load != "idle" {
		var err error
		if st.ownLoad {
			l, err = s.StartKeyLoad(ctx, keyTableNamed(table), o.LoadThreads, rate, o.Rows)
		} else {
			l, err = s.StartLoad(ctx, benchDB, o.LoadThreads, rate, 30*time.Minute)
		}
		if err != nil {
			return err
		}
		time.Sleep(o.Baseline)
		from = l.Since()
	}
	logf("%s (%s)", st.name, st.load)
	var dl *Deadlocks
	if l != nil {
		dl = WatchDeadlocks(ctx, s.DB, toolMarkers(table)...)
	}
	start := time.Now()
	opCtx, cancel := ctx, context.CancelFunc(func() {})
	if o.Limit > 0 {
		opCtx, cancel = context.WithTimeout(ctx, o.Limit)
	}
	out, err := st.op(opCtx)
	cancel()
	end := time.Now()
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil && opCtx.Err() != nil {
		err = fmt.Errorf("did not finish in %s", o.Limit)
	}
	r.wall, r.rssMB, r.phases, r.catchUp, r.toolReplicas, r.eta = end.Sub(start), out.rssMB, out.phases, out.catchUp, out.replicas, out.eta
	if r.eta != nil {
		logf("  copy ETA error: %+.0f%% at 1/4 of the rows, %+.0f%% at 1/2", r.eta[0]*100, r.eta[1]*100)
	}
	if st.isF && err == nil {
		b.lastF = r.wall
	}
	r.f = b.lastF
	if dl != nil {
		r.deadlocks, r.toolDeadlocks = dl.Stop()
	}
	if err != nil {
		r.failure = err.Error()
	}
	if lw != nil {
		// The load runs on while the replica catches up: a native ALTER
		// only starts on the replica once it has ended on the primary.
		lr := lw.finish(ctx, s, start, end)
		r.lag = &lr
		logf("  replica: worst lag %s, caught up %s after the ALTER ended", lr.during.Round(10*time.Millisecond), lr.caughtUp.Round(100*time.Millisecond))
	}
	if l != nil {
		to := end.Sub(l.start)
		if wait := 2*time.Second - time.Since(end); wait > 0 {
			time.Sleep(wait)
		}
		l.Stop()
		r.before = l.Between(2*time.Second, from)
		r.during = l.Between(from, to)
		var first float64
		r.tps, r.p99, first = l.Span(2*time.Second, to+2*time.Second)
		r.tpsFrom = first - from.Seconds()
		if len(out.spans) > 0 && r.during.Seconds > 0 {
			lo, hi := l.Second(r.during.MinAt)
			r.lowIn = strings.Join(phasesIn(out.spans, lo, hi), "/")
		}
	}
	logf("  %s", r.wall.Round(time.Millisecond))
	b.results = append(b.results, r)
	return nil
}

// report prints the sysbench rounds' table, then the key round's and the
// replica round's.
func (b *benchRun) report(capacity float64, replicaNote string) {
	var main, keys, reps []result
	for _, r := range b.results {
		switch r.round {
		case "keys":
			keys = append(keys, r)
		case "replica":
			reps = append(reps, r)
		default:
			main = append(main, r)
		}
	}
	if len(main) > 0 {
		report(b.o.Out, main, b.o.Rows, capacity, b.o.LoadThreads)
		reportETA(b.o.Out, main)
	} else if capacity > 0 {
		fmt.Fprintf(b.o.Out, "\nsluice benchmark: %d-row tables, MySQL sandbox; sysbench's %d-thread oltp_read_write load sustains %.0f tps on sbtest1\n", b.o.Rows, b.o.LoadThreads, capacity)
	}
	if len(keys) > 0 {
		b.reportKeys(b.o.Out, keys)
	}
	if len(reps) > 0 {
		b.reportReplica(b.o.Out, reps)
	}
	if replicaNote != "" {
		fmt.Fprintln(b.o.Out, "\n"+replicaNote)
	}
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
	printPhases(w, rs)
}

// printPhases prints each sluice run's phase timings.
func printPhases(w io.Writer, rs []result) {
	fmt.Fprintln(w, "\nsluice phases (seconds):")
	pw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, r := range rs {
		if r.phases != "" {
			low := ""
			if r.lowIn != "" {
				low = fmt.Sprintf("; the load's lowest second (%.0f tps) in %s", r.during.Min, r.lowIn)
			}
			name := strings.TrimPrefix(r.name, "sluice ")
			fmt.Fprintf(pw, "  %s\t%s\t%s%s\n", name, r.load, r.phases, low)
		}
	}
	pw.Flush()
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
	return s.resetTable(ctx, "sbtest1")
}

// resetTable restores sbtest.<table>, alone in its database, from the
// template and flushes dirty pages.
func (s *Server) resetTable(ctx context.Context, table string) error {
	return s.resetFrom(ctx, tplDB, table)
}
