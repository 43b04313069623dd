package bench

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"io"
	"math"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

// The replica round: the 40%-load round of sbtest1 with one replica
// attached. Its lag is measured by the bench itself, the same way for every
// tool: a heartbeat row on the primary, in a database of its own, gets the
// bench's clock every 100 ms, and is read back on the replica every 100 ms;
// the lag is the bench's clock now minus the value read. The lag is watched
// from the ALTER's start until the replica has applied every transaction
// the primary had when the ALTER ended: a native ALTER replicates as one
// statement that the replica starts only then, and holds the replica's
// later transactions back while it runs.

const (
	heartbeatDB    = "sbtest_hb"
	heartbeatTable = heartbeatDB + ".heartbeat"
	heartbeatEvery = 100 * time.Millisecond
)

// replicaCmd manages the sandbox replicas with the --replicas command
// ("CMD status", "CMD down", "CMD reset", "CMD up N").
type replicaCmd struct {
	parts    []string
	found    int // replicas running when the bench started
	restored bool
	note     string
}

var runningLine = regexp.MustCompile(`(?m)^\S+ running\b`)

// takeReplicasDown counts the running replicas and stops them: the rounds
// without a replica stay comparable with earlier measurements, and the
// replicas do not share the host's cores with them.
func takeReplicasDown(ctx context.Context, command string) (*replicaCmd, error) {
	c := &replicaCmd{parts: strings.Fields(command)}
	out, err := c.run(ctx, "status")
	if err != nil {
		return nil, err
	}
	c.found = len(runningLine.FindAllString(out, -1))
	logf("replicas: %d running; stopping them for the rounds without a replica", c.found)
	if _, err := c.run(ctx, "down"); err != nil {
		return nil, err
	}
	return c, nil
}

// run runs the command with args and returns its standard output.
func (c *replicaCmd) run(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, c.parts[0], append(slices.Clone(c.parts[1:]), args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %v: %s", strings.Join(c.parts, " "), strings.Join(args, " "), err,
			lastLine(stdout.String()+"\n"+stderr.String()))
	}
	return stdout.String(), nil
}

// restore puts the replicas back as the bench found them: as many running
// (each re-cloned from the primary if it cannot resume), or all down. It
// returns a sentence for the report; only the first call acts.
func (c *replicaCmd) restore(ctx context.Context) string {
	if c.restored {
		return c.note
	}
	c.restored = true
	var err error
	if c.found == 0 {
		_, err = c.run(ctx, "down")
		c.note = "Replicas: none ran when the bench started; they are left down."
	} else {
		_, err = c.run(ctx, "up", strconv.Itoa(c.found))
		c.note = fmt.Sprintf("Replicas: %d ran when the bench started; the rounds without a replica ran with them down, "+
			"and %d were started again at the end (re-cloned from the primary where they could not resume).", c.found, c.found)
	}
	if err != nil {
		c.note += " Restoring them FAILED: " + err.Error()
	}
	logf("%s", c.note)
	return c.note
}

var exportLine = regexp.MustCompile(`export \w+='([^']*)'`)

// replicaDSN reads the first replica's DSN from the export line "CMD up"
// prints.
func replicaDSN(out string) (string, error) {
	m := exportLine.FindStringSubmatch(out)
	if m == nil || m[1] == "" {
		return "", fmt.Errorf("no replica DSN in the output of the replicas command (an export line NAME='DSN,...'): %q", lastLine(out))
	}
	return strings.Split(m[1], ",")[0], nil
}

// replica is the replica attached in the replica round.
type replica struct {
	addr string // host:port
	srv  *Server
}

// replicaRound brings up one fresh replica (reset, up 1), waits for it, and
// times F, the native ALTERs, sluice and pt-online-schema-change (the last
// two with a maximum lag) under the load, every run with the replica's lag
// beside it.
func (b *benchRun) replicaRound(ctx context.Context, reps *replicaCmd, rate float64) error {
	o := b.o
	logf("replica round: a fresh replica (%s reset, then up 1)", strings.Join(reps.parts, " "))
	if _, err := reps.run(ctx, "reset"); err != nil {
		return err
	}
	out, err := reps.run(ctx, "up", "1")
	if err != nil {
		return err
	}
	dsn, err := replicaDSN(out)
	if err != nil {
		return err
	}
	srv, err := Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer srv.DB.Close()
	rp := &replica{addr: fmt.Sprintf("%s:%d", srv.Conn.Host, srv.Conn.Port), srv: srv}
	for _, q := range []string{
		"CREATE DATABASE IF NOT EXISTS " + heartbeatDB,
		"CREATE TABLE IF NOT EXISTS " + heartbeatTable + " (id TINYINT NOT NULL PRIMARY KEY, ts BIGINT NOT NULL)",
		"INSERT INTO " + heartbeatTable + " VALUES (1, 0) ON DUPLICATE KEY UPDATE ts = 0",
	} {
		if _, err := b.s.DB.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("heartbeat table: %w", err)
		}
	}
	defer b.s.DB.ExecContext(context.WithoutCancel(ctx), "DROP DATABASE IF EXISTS "+heartbeatDB)
	b.round, b.lastF, b.replica, b.replicaAddr = "replica", 0, rp, rp.addr
	defer func() { b.round, b.replica = "", nil }()

	load := b.loadName()
	lag := "--max-lag=" + o.MaxLag.String()
	list := []step{b.fStep()}
	if !o.SluiceOnly {
		list = append(list,
			step{name: rebuildName, load: load, op: b.native("sbtest1", rebuild)},
			step{name: copyName, load: load, op: b.native("sbtest1", modifyK)})
	}
	list = append(list, step{name: "sluice MODIFY k BIGINT " + lag, load: load,
		op: b.sluiceWith("sbtest1", modifyK, []string{lag, "--replica=" + rp.addr})})
	if o.PtOsc != "" && !o.SluiceOnly {
		// pt-online-schema-change takes whole seconds and reads the
		// replica's Seconds_Behind_Source.
		secs := strconv.Itoa(max(1, int(math.Ceil(o.MaxLag.Seconds()))))
		list = append(list, step{name: "pt-online-schema-change MODIFY k BIGINT --max-lag=" + secs, load: load,
			op: func(ctx context.Context) (opResult, error) {
				out, err := b.s.runPtOsc(ctx, o.PtOsc, modifyK, "--max-lag="+secs, "--check-interval=1",
					fmt.Sprintf("--check-replica-lag=h=%s,P=%d,u=%s", srv.Conn.Host, srv.Conn.Port, srv.Conn.User))
				return opResult{replicas: ptOscReplicas(out)}, err
			}})
	}
	return b.run(ctx, list, rate)
}

var (
	ptOscWatches = regexp.MustCompile(`Will check replica lag on:\n\S+ -> (\S+)`)
	ptOscWaits   = regexp.MustCompile(`(?mi)^.*replica lag is .*$`)
)

// ptOscReplicas is pt-online-schema-change's own account of the replica it
// watched: which, and how often it said it waited for it.
func ptOscReplicas(out string) string {
	m := ptOscWatches.FindStringSubmatch(out)
	if m == nil {
		return ""
	}
	return fmt.Sprintf("%s: %d \"Replica lag is ...\" reports", m[1], len(ptOscWaits.FindAllString(out, -1)))
}

// settle waits until the replica has applied every transaction the primary
// has, and flushes its dirty pages: every timed run starts from the same
// state on both.
func (rp *replica) settle(ctx context.Context, primary *Server) error {
	if err := rp.caughtUp(ctx, primary, 30*time.Minute); err != nil {
		return err
	}
	return rp.srv.Flush(ctx)
}

// caughtUp waits until the replica has applied the transactions the primary
// has now, failing early if its replication stops.
func (rp *replica) caughtUp(ctx context.Context, primary *Server, timeout time.Duration) error {
	var set string
	if err := primary.DB.QueryRowContext(ctx, "SELECT @@GLOBAL.gtid_executed").Scan(&set); err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	for {
		var r sql.NullInt64
		if err := rp.srv.DB.QueryRowContext(ctx, "SELECT WAIT_FOR_EXECUTED_GTID_SET(?, 5)", set).Scan(&r); err != nil {
			return fmt.Errorf("replica %s: %w", rp.addr, err)
		}
		if r.Valid && r.Int64 == 0 {
			return nil
		}
		var io, sqlState string
		if err := rp.srv.DB.QueryRowContext(ctx, `SELECT c.SERVICE_STATE, a.SERVICE_STATE
			FROM performance_schema.replication_connection_status c JOIN performance_schema.replication_applier_status a USING (CHANNEL_NAME)
			WHERE CHANNEL_NAME = ''`).Scan(&io, &sqlState); err != nil {
			return fmt.Errorf("replica %s: %w", rp.addr, err)
		}
		if sqlState != "ON" {
			return fmt.Errorf("replica %s: its applier stopped (receiver %s, applier %s)", rp.addr, io, sqlState)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("replica %s has not caught up with the primary in %s", rp.addr, timeout)
		}
	}
}

// lagWatch is the heartbeat's writer on the primary and reader on the
// replica, from a timed run's start until the replica has caught up.
type lagWatch struct {
	rp      *replica
	mu      sync.Mutex
	samples []lagSample
	failed  int // replica reads that failed
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	once    sync.Once
}

type lagSample struct {
	at  time.Time
	lag time.Duration
}

// lagResult is the replica's lag around one timed run.
type lagResult struct {
	before   time.Duration // the worst lag under the load alone, before the ALTER
	during   time.Duration // the worst lag from the ALTER's start until the replica caught up
	caughtUp time.Duration // from the ALTER's end until the replica had applied it all
	samples  int
	failed   int
	err      string
}

// watch starts the heartbeat. It returns once the replica has seen the
// first beat, so that no earlier value counts as lag.
func (rp *replica) watch(ctx context.Context, primary *Server) (*lagWatch, error) {
	wctx, cancel := context.WithCancel(ctx)
	w := &lagWatch{rp: rp, cancel: cancel}
	writer, err := primary.DB.Conn(wctx)
	if err != nil {
		cancel()
		return nil, err
	}
	reader, err := rp.srv.DB.Conn(wctx)
	if err != nil {
		writer.Close()
		cancel()
		return nil, err
	}
	beat := func() error {
		_, err := writer.ExecContext(wctx, "UPDATE "+heartbeatTable+" SET ts = ? WHERE id = 1", time.Now().UnixMicro())
		return err
	}
	read := func() (int64, error) {
		var ts int64
		err := reader.QueryRowContext(wctx, "SELECT ts FROM "+heartbeatTable+" WHERE id = 1").Scan(&ts)
		return ts, err
	}
	first := time.Now().UnixMicro()
	if err := beat(); err != nil {
		writer.Close()
		reader.Close()
		cancel()
		return nil, fmt.Errorf("heartbeat: %w", err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		ts, err := read()
		if err == nil && ts >= first {
			break
		}
		if time.Now().After(deadline) {
			writer.Close()
			reader.Close()
			cancel()
			return nil, fmt.Errorf("replica %s did not see the heartbeat within a minute (%v)", rp.addr, err)
		}
	}
	w.wg.Add(2)
	go func() {
		defer w.wg.Done()
		defer writer.Close()
		t := time.NewTicker(heartbeatEvery)
		defer t.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case <-t.C:
				beat()
			}
		}
	}()
	go func() {
		defer w.wg.Done()
		defer reader.Close()
		t := time.NewTicker(heartbeatEvery)
		defer t.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case <-t.C:
			}
			ts, err := read()
			now := time.Now()
			w.mu.Lock()
			if err != nil {
				if wctx.Err() == nil {
					w.failed++
				}
			} else {
				w.samples = append(w.samples, lagSample{at: now, lag: now.Sub(time.UnixMicro(ts))})
			}
			w.mu.Unlock()
		}
	}()
	return w, nil
}

// stop ends the heartbeat (idempotent).
func (w *lagWatch) stop() {
	w.once.Do(func() {
		w.cancel()
		w.wg.Wait()
	})
}

// finish waits until the replica has applied what the primary had at the
// ALTER's end, stops the heartbeat and sums the lag up.
func (w *lagWatch) finish(ctx context.Context, primary *Server, start, end time.Time) lagResult {
	var res lagResult
	if err := w.rp.caughtUp(ctx, primary, 30*time.Minute); err != nil {
		res.err = err.Error()
	}
	caught := time.Now()
	res.caughtUp = caught.Sub(end)
	time.Sleep(3 * heartbeatEvery) // the reader's last samples, up to the catch-up
	w.stop()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range w.samples {
		if s.at.Before(start) {
			res.before = max(res.before, s.lag)
		} else {
			res.during = max(res.during, s.lag)
			res.samples++
		}
	}
	res.failed = w.failed
	return res
}

// reportReplica prints the replica round.
func (b *benchRun) reportReplica(w io.Writer, rs []result) {
	ss := summarize(rs)
	f := ss[0].wall
	fmt.Fprintf(w, "\nReplica round: sbtest1 with one replica attached (%s, cloned fresh from the primary before the round),\n", b.replicaAddr)
	fmt.Fprintf(w, "sysbench's %s (%.0f tps, of the capacity measured without a replica); F = %s in this round, idle, with the replica attached.\n",
		b.loadName(), b.rate, f.Round(time.Millisecond))
	fmt.Fprintf(w, "Replica lag is the bench's own measure, the same for every tool: a heartbeat row written on the primary every %s\n", heartbeatEvery)
	fmt.Fprintf(w, "(the bench's clock) and read on the replica every %s; lag = now - the value read. It is watched from the\n", heartbeatEvery)
	fmt.Fprintf(w, "ALTER's start until the replica has applied everything the primary had at the ALTER's end (\"caught up\").\n")
	fmt.Fprintf(w, "sluice runs with --max-lag=%s, pt-online-schema-change with --max-lag and --check-replica-lag (Seconds_Behind_Source).\n\n", b.o.MaxLag)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ALTER\tload\tx F\tTPS before\tTPS during (mean)\tkept\tlowest TPS/s\tzero-TPS s\treplica lag before (worst)\treplica lag during (worst)\tcaught up after the ALTER's end\tsluice max RSS")
	var notes []string
	for _, s := range ss {
		var before, during, caught []time.Duration
		for _, r := range s.runs {
			if r.lag == nil {
				continue
			}
			before, during, caught = append(before, r.lag.before), append(during, r.lag.during), append(caught, r.lag.caughtUp)
			if r.lag.err != "" {
				notes = append(notes, fmt.Sprintf("%s (%s): the replica: %s", s.name, s.load, r.lag.err))
			}
			if r.lag.failed > 0 {
				notes = append(notes, fmt.Sprintf("%s (%s): %d heartbeat reads on the replica failed", s.name, s.load, r.lag.failed))
			}
			switch tool, _, _ := strings.Cut(s.name, " "); {
			case r.toolReplicas != "":
				notes = append(notes, fmt.Sprintf("%s (%s), %s's own account: replicas %s", s.name, s.load, tool, r.toolReplicas))
			case (tool == "sluice" || tool == "pt-online-schema-change") && r.failure == "":
				notes = append(notes, fmt.Sprintf("%s (%s): %s reported no replica it watched", s.name, s.load, tool))
			}
		}
		for _, f := range s.failures {
			notes = append(notes, fmt.Sprintf("FAILED: %s (%s): %s", s.name, s.load, f))
		}
		lagBefore := "-"
		if s.load != "idle" {
			lagBefore = durStats(before)
		}
		x, tps := xF(s, f), "-\t-\t-\t-\t-"
		if s.load != "idle" {
			tps = fmt.Sprintf("%.0f\t%.0f\t%.0f%%\t%.0f\t%d", s.before.Mean, s.during.Mean, kept(s), s.during.Min, s.during.Zero)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.name, s.load, x, tps, lagBefore, durStats(during), durStats(caught), rss(s))
	}
	tw.Flush()
	for _, n := range notes {
		fmt.Fprintln(w, n)
	}
	printPhases(w, rs)
}

// xF is a summary's time as a multiple of F: the median of its runs, each
// against the F of its round (lowest-highest over several runs).
func xF(s summary, f time.Duration) string {
	if s.wall == 0 {
		return "failed"
	}
	med, lo, hi := s.x, s.xlo, s.xhi
	if med == 0 && f > 0 {
		med, lo, hi = float64(s.wall)/float64(f), float64(s.lo)/float64(f), float64(s.hi)/float64(f)
	}
	x := fmt.Sprintf("%.2f", med)
	if len(s.runs) > 1 {
		x += fmt.Sprintf(" (%.2f-%.2f)", lo, hi)
	}
	return x
}

// kept is the load's throughput during the ALTER as a percentage of before.
func kept(s summary) float64 {
	if s.before.Mean <= 0 {
		return 0
	}
	return s.during.Mean / s.before.Mean * 100
}

func rss(s summary) string {
	if s.rssMB <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f MB", s.rssMB)
}

// durStats is the median of durations in seconds, with the lowest and
// highest when there are several.
func durStats(ds []time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	ds = slices.Clone(ds)
	slices.Sort(ds)
	out := fmt.Sprintf("%.2f s", median(ds).Seconds())
	if len(ds) > 1 {
		out += fmt.Sprintf(" (%.2f-%.2f)", ds[0].Seconds(), ds[len(ds)-1].Seconds())
	}
	return out
}
