package bench

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	rpt "github.com/sluicedb/sluice/bench/report"
	"github.com/sluicedb/sluice/internal/dbconn"
)

// MDLOptions configure the metadata-lock benchmark: the four terminals of
// the metadata-lock seed. A long SELECT ... SLEEP() holds the table, readers
// query it throughout, and each tool in turn tries to change it.
type MDLOptions struct {
	DSN     string
	Sluice  string        // path of the sluice binary
	PtOsc   string        // command running pt-online-schema-change ("": left out)
	GhOst   string        // command running gh-ost ("": on PATH, if any; "none": left out)
	Spirit  string        // command running spirit (likewise)
	Rows    int           // rows in the table (default 200,000)
	Blocker time.Duration // how long the blocking SELECT sleeps (default 100s)
	Readers int           // reader sessions (default 8)
	Out     io.Writer
	// ReportDir receives mdl.json, .txt and .html ("": none).
	ReportDir string
}

const (
	mdlDB    = "sbmdl"
	mdlAlter = "ADD COLUMN x INT"
)

// mdlResult is what one tool did to the readers while the blocker held the
// table.
type mdlResult struct {
	tool      string
	outcome   string        // "done" or why it stopped
	took      time.Duration // from its start to its end
	worst     time.Duration // slowest reader query
	slow      int64         // reader queries slower than 1.5s
	failed    int64         // reader queries that failed
	queries   int64         // reader queries in all
	maxQueued int           // most reader queries seen waiting for the metadata lock at once
	queuedSec float64       // seconds of reader queries spent waiting for the metadata lock
}

// MDL runs the scenario for native ALTER, sluice (INSTANT and copy paths) and
// the peers given, and prints the worst reader latency and the queue each
// caused.
func MDL(ctx context.Context, o MDLOptions) error {
	if o.Rows <= 0 {
		o.Rows = 200_000
	}
	if o.Blocker <= 0 {
		o.Blocker = 100 * time.Second
	}
	if o.Readers <= 0 {
		o.Readers = 8
	}
	started := time.Now()
	s, err := Connect(ctx, o.DSN)
	if err != nil {
		return err
	}
	defer s.DB.Close()
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "bench-mdl: "+format+"\n", args...) }
	target := []string{"--host", s.Conn.Host, "--port", strconv.Itoa(s.Conn.Port), "--user", s.Conn.User,
		"--database", mdlDB, "--table", "t", "--alter", mdlAlter, "--progress-interval", "1h"}
	type tool struct {
		name string
		run  func(ctx context.Context) error
	}
	tools := []tool{
		{"native ALTER TABLE (server's lock_wait_timeout)", func(ctx context.Context) error {
			return s.dbaAlter(ctx, mdlDB+".t", mdlAlter)
		}},
		{"sluice (INSTANT path, --kill-blockers=never)", func(ctx context.Context) error {
			return s.command(ctx, o.Sluice, append([]string{"migrate"}, target...)...)
		}},
		{"sluice (copy path, --kill-blockers=never)", func(ctx context.Context) error {
			return s.command(ctx, o.Sluice, append([]string{"migrate", "--method", "copy", "--drop-old"}, target...)...)
		}},
	}
	if o.PtOsc != "" {
		if err := s.runPtOscArgs(ctx, o.PtOsc, "--version"); err != nil {
			return err
		}
		tools = append(tools, tool{"pt-online-schema-change (its defaults)", func(ctx context.Context) error {
			dsn := fmt.Sprintf("h=%s,P=%d,u=%s,D=%s,t=t", s.Conn.Host, s.Conn.Port, s.Conn.User, mdlDB)
			return s.runPtOscArgs(ctx, o.PtOsc, "--execute", "--alter", mdlAlter, "--recursion-method=none", "--no-check-alter", dsn)
		}})
	}
	if gh := findPeer(o.GhOst, "gh-ost"); gh != "" {
		tools = append(tools, tool{"gh-ost (its defaults)", func(ctx context.Context) error {
			return s.runGhOst(ctx, gh, mdlDB, "t", mdlAlter)
		}})
	}
	if sp := findPeer(o.Spirit, "spirit"); sp != "" {
		tools = append(tools, tool{"spirit (its defaults)", func(ctx context.Context) error {
			return s.runSpirit(ctx, sp, mdlDB, "t", mdlAlter)
		}})
	}
	var results []mdlResult
	for _, t := range tools {
		logf("%s: %d-row table, a %s blocker, %d readers", t.name, o.Rows, o.Blocker, o.Readers)
		r, err := s.mdlScenario(ctx, o, t.run)
		if err != nil {
			return fmt.Errorf("%s: %w", t.name, err)
		}
		r.tool = t.name
		logf("  %s in %s; worst reader %s", r.outcome, r.took.Round(time.Millisecond), r.worst.Round(time.Millisecond))
		results = append(results, r)
	}
	if o.Out == nil {
		o.Out = os.Stdout
	}
	var text bytes.Buffer
	mdlReport(io.MultiWriter(o.Out, &text), o, results)
	return saveReport(o.ReportDir, rpt.Report{Name: "mdl", Title: "The metadata-lock trap: what each tool does to the readers of a held table", Started: started,
		Server: s.serverVersion(ctx), Text: text.String(), Charts: mdlCharts(results), Raw: mdlRaws(results)})
}

// mdlRaw is one tool's scenario as the report's JSON holds it.
type mdlRaw struct {
	Tool          string  `json:"tool"`
	Outcome       string  `json:"outcome"`
	Seconds       float64 `json:"seconds"`
	WorstReader   float64 `json:"worst_reader_seconds"`
	Slow          int64   `json:"reader_queries_over_1_5s"`
	Failed        int64   `json:"reader_queries_failed"`
	Queries       int64   `json:"reader_queries"`
	MaxQueued     int     `json:"most_queued_at_once"`
	QueuedSeconds float64 `json:"queued_reader_seconds"`
}

func mdlRaws(rs []mdlResult) []mdlRaw {
	out := make([]mdlRaw, 0, len(rs))
	for _, r := range rs {
		out = append(out, mdlRaw{r.tool, r.outcome, r.took.Seconds(), r.worst.Seconds(), r.slow, r.failed, r.queries, r.maxQueued, r.queuedSec})
	}
	return out
}

// mdlCharts draws each tool's worst reader latency and the readers it
// queued at once, one bar a tool.
func mdlCharts(rs []mdlResult) []rpt.Chart {
	worst := &rpt.Bars{Groups: []string{"worst reader latency (s)"}}
	queued := &rpt.Bars{Groups: []string{"most readers queued at once"}}
	for _, r := range rs {
		worst.Series = append(worst.Series, rpt.BarSeries{Name: r.tool, Values: []float64{r.worst.Seconds()}})
		queued.Series = append(queued.Series, rpt.BarSeries{Name: r.tool, Values: []float64{float64(r.maxQueued)}})
	}
	return []rpt.Chart{
		{Title: "Slowest reader query while a long SELECT holds the table", Y: "seconds", Bars: worst,
			Note: "A tool whose lock request waits behind the long SELECT queues every reader behind it: their latency grows to the SELECT's length."},
		{Title: "Readers queued behind the metadata lock at once", Y: "queries", Bars: queued},
	}
}

// command runs a peer or sluice, with the password (if any) in the
// environment, and returns its last line on failure.
func (s *Server) command(ctx context.Context, bin string, args ...string) error {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = os.Environ()
	if s.Conn.Password != "" {
		cmd.Env = append(cmd.Env, "MYSQL_PWD="+s.Conn.Password)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%v: %s", err, lastLine(string(out)))
	}
	return nil
}

// mdlScenario restores the table, starts the blocker and the readers, runs
// the tool 0.2 s later, and measures until the tool ends and the blocker
// is gone.
func (s *Server) mdlScenario(ctx context.Context, o MDLOptions, run func(context.Context) error) (mdlResult, error) {
	var res mdlResult
	if err := s.mdlTable(ctx, o.Rows); err != nil {
		return res, err
	}
	blocker, err := s.DB.Conn(ctx)
	if err != nil {
		return res, err
	}
	defer blocker.Close()
	var blockerID int64
	if err := blocker.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&blockerID); err != nil {
		return res, err
	}
	blockerDone := make(chan struct{})
	go func() {
		defer close(blockerDone)
		blocker.ExecContext(ctx, fmt.Sprintf("SELECT id, SLEEP(%d) FROM %s.t WHERE id = 1", int(o.Blocker.Seconds()), mdlDB))
	}()
	defer s.DB.ExecContext(context.WithoutCancel(ctx), fmt.Sprintf("KILL %d", blockerID))
	if err := s.waitGranted(ctx, blockerID); err != nil {
		return res, err
	}

	// The readers have a pool of their own, one connection each, so that
	// neither they nor the sampler wait for a connection instead of a lock.
	// Each reader is an application session: the server's lock_wait_timeout
	// (a year by default), not the bench pool's.
	readers, err := dbconn.Open(ctx, s.Conn, "", o.Readers)
	if err != nil {
		return res, err
	}
	defer readers.Close()
	conns := make([]*sql.Conn, o.Readers)
	for i := range conns {
		if conns[i], err = readers.Conn(ctx); err != nil {
			return res, err
		}
		defer conns[i].Close()
		if _, err := conns[i].ExecContext(ctx, "SET SESSION lock_wait_timeout = @@global.lock_wait_timeout"); err != nil {
			return res, err
		}
	}
	rctx, stopReaders := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var worst, slow, failed, queries atomic.Int64
	for _, conn := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for rctx.Err() == nil {
				start := time.Now()
				var c string
				err := conn.QueryRowContext(rctx, "SELECT c FROM "+mdlDB+".t WHERE id = ?", 1+rand.IntN(o.Rows)).Scan(&c)
				if rctx.Err() != nil {
					return
				}
				took := time.Since(start)
				queries.Add(1)
				if err != nil {
					failed.Add(1)
				}
				if took > 1500*time.Millisecond {
					slow.Add(1)
				}
				for w := worst.Load(); int64(took) > w && !worst.CompareAndSwap(w, int64(took)); w = worst.Load() {
				}
				time.Sleep(10 * time.Millisecond)
			}
		}()
	}
	// The queue: reader queries waiting for the table's metadata lock.
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-rctx.Done():
				return
			case <-t.C:
			}
			var n int
			if err := s.DB.QueryRowContext(rctx, `SELECT COUNT(*) FROM performance_schema.metadata_locks
				WHERE OBJECT_TYPE = 'TABLE' AND OBJECT_SCHEMA = ? AND OBJECT_NAME = 't'
				AND LOCK_STATUS = 'PENDING' AND LOCK_TYPE = 'SHARED_READ'`, mdlDB).Scan(&n); err == nil {
				res.maxQueued = max(res.maxQueued, n)
				res.queuedSec += float64(n) * 0.1
			}
		}
	}()

	// The tool starts while the blocker is young, so that sluice makes at
	// least one lock request (an older blocker is waited out without one):
	// the worst case for the readers.
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	tctx, cancel := context.WithTimeout(ctx, o.Blocker+5*time.Minute)
	defer cancel()
	err = run(tctx)
	res.took = time.Since(start)
	res.outcome = "done"
	if err != nil {
		res.outcome = "failed: " + oneLine(err.Error(), 100)
	}
	// Whatever the tool did, measure until the blocker is gone too.
	select {
	case <-blockerDone:
	case <-ctx.Done():
	}
	time.Sleep(time.Second)
	stopReaders()
	wg.Wait()
	res.worst, res.slow, res.failed, res.queries = time.Duration(worst.Load()), slow.Load(), failed.Load(), queries.Load()
	return res, ctx.Err()
}

// waitGranted waits until connection id holds a metadata lock on a table.
func (s *Server) waitGranted(ctx context.Context, id int64) error {
	for i := 0; i < 500; i++ {
		var n int
		err := s.DB.QueryRowContext(ctx, `SELECT COUNT(*) FROM performance_schema.metadata_locks ml
			JOIN performance_schema.threads th ON th.THREAD_ID = ml.OWNER_THREAD_ID
			WHERE th.PROCESSLIST_ID = ? AND ml.OBJECT_TYPE = 'TABLE' AND ml.LOCK_STATUS = 'GRANTED'`, id).Scan(&n)
		if err != nil {
			return err
		}
		if n > 0 {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return errors.New("the blocking SELECT never took its metadata lock")
}

// mdlTable creates sbmdl.t afresh with rows rows and flushes dirty pages.
func (s *Server) mdlTable(ctx context.Context, rows int) error {
	conn, err := s.DB.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	for _, q := range []string{
		"DROP DATABASE IF EXISTS " + mdlDB,
		"CREATE DATABASE " + mdlDB,
		"CREATE TABLE " + mdlDB + ".t (id INT PRIMARY KEY, k INT NOT NULL, c CHAR(100) NOT NULL, KEY (k))",
		"SET SESSION cte_max_recursion_depth = " + strconv.Itoa(rows+1),
		"INSERT INTO " + mdlDB + ".t WITH RECURSIVE n (i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < " + strconv.Itoa(rows) +
			") SELECT i, i % 1000, REPEAT('c', 100) FROM n",
		"PURGE BINARY LOGS BEFORE NOW()",
	} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("prepare the table: %s: %w", q, err)
		}
	}
	return s.Flush(ctx)
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:n-3] + "..."
	}
	return s
}

func mdlReport(w io.Writer, o MDLOptions, rs []mdlResult) {
	fmt.Fprintf(w, "\nsluice metadata-lock benchmark: a %d-row table; SELECT ... SLEEP(%d) holds it; %d readers query it throughout; each tool runs %q 0.2 s after the blocker starts\n\n",
		o.Rows, int(o.Blocker.Seconds()), o.Readers, mdlAlter)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "tool\toutcome\ttook\tworst reader latency\treader queries > 1.5s\tmost queued at once\tqueued reader-seconds\tfailed reader queries")
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d of %d\t%d\t%.1f\t%d\n", r.tool, r.outcome, r.took.Round(100*time.Millisecond),
			r.worst.Round(10*time.Millisecond), r.slow, r.queries, r.maxQueued, r.queuedSec, r.failed)
	}
	tw.Flush()
}
