package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"text/tabwriter"
	"time"

	rpt "github.com/sluicedb/sluice/bench/report"
)

// AvailabilityOptions configures the write-availability benchmark: a
// rate-limited write load on sbtest1 before, during and after a column
// widening, for each tool.
type AvailabilityOptions struct {
	DSN    string
	Sluice string // sluice binary
	PtOsc  string // command running pt-online-schema-change ("": left out)
	GhOst  string // command running gh-ost ("": on PATH, if any; "none": left out)
	Spirit string // command running spirit (likewise)
	Rows   int    // sbtest1's rows (default 1,000,000)
	// Threads are the load's clients (default 16); Rate its transactions
	// a second (0: Load times the capacity measured first).
	Threads int
	Rate    float64
	Load    float64       // the rate as a fraction of capacity, when Rate is 0 (default 0.5)
	Around  time.Duration // the load before and after each ALTER (default 10s)
	// Limit stops a tool that has not finished (default 10m): it is
	// reported as not finished.
	Limit     time.Duration
	ReportDir string // availability.json/.txt/.html ("": none)
	Out       io.Writer
	// FromJSON draws the report again from an earlier run's
	// availability.json instead of running anything.
	FromJSON string
}

// availTpl holds sbtest1 as the availability runs start from: the sysbench
// template with pad as a VARCHAR(60), so that widening it to VARCHAR(120)
// changes its length bytes under utf8mb4 and cannot be done in place.
const availTpl = "sbtest_avail_tpl"

// widenings are the seed's column expansions.
var widenings = []struct{ name, alter string }{
	{"INT to BIGINT", "MODIFY COLUMN k BIGINT NOT NULL DEFAULT 0"},
	{"VARCHAR(60) to VARCHAR(120)", "MODIFY COLUMN pad VARCHAR(120) NOT NULL DEFAULT ''"},
}

// availRun is one tool's widening under the load.
type availRun struct {
	Tool, Alter string
	Took        time.Duration
	Failure     string
	Before      Window // the load before the ALTER
	During      Window
	TPS, P99    []float64 // a second, from Around before to Around after
	From        float64   // the end of TPS[0]'s second from the ALTER's start
}

// Availability runs the benchmark and prints, writes its report.
func Availability(ctx context.Context, o AvailabilityOptions) error {
	if o.Rows <= 0 {
		o.Rows = 1_000_000
	}
	if o.Threads <= 0 {
		o.Threads = 16
	}
	if o.Load <= 0 {
		o.Load = 0.5
	}
	if o.Around <= 0 {
		o.Around = 10 * time.Second
	}
	if o.Limit <= 0 {
		o.Limit = 10 * time.Minute
	}
	if o.Out == nil {
		o.Out = os.Stdout
	}
	if o.FromJSON != "" {
		return redrawAvailability(o)
	}
	if err := ensureSysbench(); err != nil {
		return err
	}
	started := time.Now()
	s, err := Connect(ctx, o.DSN)
	if err != nil {
		return err
	}
	defer s.DB.Close()
	if err := s.prepareTemplate(ctx, o.Rows); err != nil {
		return err
	}
	if err := s.availTemplate(ctx, o.Rows); err != nil {
		return err
	}
	tools := s.availTools(o)
	if o.Rate <= 0 {
		if err := s.resetFrom(ctx, availTpl, "sbtest1"); err != nil {
			return err
		}
		l, err := s.startSysbench(ctx, benchDB, "oltp_write_only", o.Threads, 0, 30*time.Minute)
		if err != nil {
			return err
		}
		time.Sleep(15 * time.Second)
		capacity := l.Between(3*time.Second, l.Since()).Mean
		l.Stop()
		o.Rate = capacity * o.Load
		logf("availability: capacity %.0f write transactions a second; the load runs at %.0f", capacity, o.Rate)
	}
	var runs []availRun
	for _, w := range widenings {
		for _, t := range tools {
			r, err := s.availRun(ctx, o, t.name, w.name, func(ctx context.Context) error { return t.run(ctx, w.alter) })
			if err != nil {
				return err
			}
			runs = append(runs, r)
		}
	}
	var text bytes.Buffer
	availReport(io.MultiWriter(o.Out, &text), o, runs)
	return saveReport(o.ReportDir, rpt.Report{Name: "availability", Title: "Write availability during a column widening", Started: started,
		Server: s.serverVersion(ctx), Text: text.String(), Charts: availCharts(runs, toolNames(tools)), Raw: runs})
}

// redrawAvailability writes the report of the runs an earlier
// availability.json holds, its text as printed then.
func redrawAvailability(o AvailabilityOptions) error {
	data, err := os.ReadFile(o.FromJSON)
	if err != nil {
		return err
	}
	var old struct {
		Started time.Time
		Server  string
		Text    string
		Raw     []availRun
	}
	if err := json.Unmarshal(data, &old); err != nil || len(old.Raw) == 0 {
		return fmt.Errorf("%s: not an availability report with runs (%v)", o.FromJSON, err)
	}
	var tools []string
	for _, r := range old.Raw {
		tools = appendNew(tools, r.Tool)
	}
	fmt.Fprint(o.Out, old.Text)
	return saveReport(o.ReportDir, rpt.Report{Name: "availability", Title: "Write availability during a column widening", Started: old.Started,
		Server: old.Server, Text: old.Text, Charts: availCharts(old.Raw, tools), Raw: old.Raw})
}

func toolNames(tools []availTool) []string {
	var out []string
	for _, t := range tools {
		out = append(out, t.name)
	}
	return out
}

type availTool struct {
	name string
	run  func(ctx context.Context, alter string) error
}

// availTools are native ALTER (a DBA's session, the server's own lock wait),
// sluice with its defaults, and the peers given.
func (s *Server) availTools(o AvailabilityOptions) []availTool {
	tools := []availTool{
		{"native ALTER", func(ctx context.Context, alter string) error {
			return s.dbaAlter(ctx, benchDB+".sbtest1", alter)
		}},
		{"sluice", func(ctx context.Context, alter string) error {
			_, err := s.runSluiceOn(ctx, o.Sluice, "sbtest1", alter, []string{"--replica-discovery=false"}, false)
			return err
		}},
	}
	if o.PtOsc != "" {
		tools = append(tools, availTool{"pt-online-schema-change", func(ctx context.Context, alter string) error {
			_, err := s.runPtOsc(ctx, o.PtOsc, alter)
			return err
		}})
	} else {
		logf("availability: no --pt-osc: pt-online-schema-change is left out")
	}
	if gh := findPeer(o.GhOst, "gh-ost"); gh != "" {
		tools = append(tools, availTool{"gh-ost", func(ctx context.Context, alter string) error {
			return s.runGhOst(ctx, gh, benchDB, "sbtest1", alter)
		}})
	}
	if sp := findPeer(o.Spirit, "spirit"); sp != "" {
		tools = append(tools, availTool{"spirit", func(ctx context.Context, alter string) error {
			return s.runSpirit(ctx, sp, benchDB, "sbtest1", alter)
		}})
	}
	return tools
}

// availTemplate makes availTpl.sbtest1 from the sysbench template once.
func (s *Server) availTemplate(ctx context.Context, rows int) error {
	var n int64
	var typ string
	err := s.DB.QueryRowContext(ctx, "SELECT COUNT(*), (SELECT COLUMN_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 'sbtest1' AND COLUMN_NAME = 'pad') FROM "+availTpl+".sbtest1", availTpl).Scan(&n, &typ)
	if err == nil && n == int64(rows) && typ == "varchar(60)" {
		return nil
	}
	logf("availability: preparing %s.sbtest1 (once)", availTpl)
	for _, q := range []string{
		"DROP DATABASE IF EXISTS " + availTpl,
		"CREATE DATABASE " + availTpl,
		"CREATE TABLE " + availTpl + ".sbtest1 LIKE " + tplDB + ".sbtest1",
		"ALTER TABLE " + availTpl + ".sbtest1 MODIFY COLUMN pad VARCHAR(60) NOT NULL DEFAULT ''",
		"INSERT INTO " + availTpl + ".sbtest1 SELECT * FROM " + tplDB + ".sbtest1",
	} {
		if _, err := s.DB.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("availability template: %s: %w", q, err)
		}
	}
	return nil
}

// availRun restores sbtest1, starts the load, runs the tool after Around,
// and keeps the load Around after it ends.
func (s *Server) availRun(ctx context.Context, o AvailabilityOptions, tool, alter string, run func(context.Context) error) (availRun, error) {
	r := availRun{Tool: tool, Alter: alter}
	if err := s.resetFrom(ctx, availTpl, "sbtest1"); err != nil {
		return r, err
	}
	l, err := s.startSysbench(ctx, benchDB, "oltp_write_only", o.Threads, o.Rate, 2*time.Hour)
	if err != nil {
		return r, err
	}
	defer l.Stop()
	time.Sleep(o.Around)
	logf("availability: %s, %s", tool, alter)
	from := l.Since()
	rctx, cancel := context.WithTimeout(ctx, o.Limit)
	err = run(rctx)
	cancel()
	to := l.Since()
	r.Took = to - from
	if err != nil {
		if ctx.Err() != nil {
			return r, ctx.Err()
		}
		r.Failure = err.Error()
		if errors.Is(rctx.Err(), context.DeadlineExceeded) {
			r.Failure = fmt.Sprintf("did not finish in %s", o.Limit)
		}
		logf("  %s", r.Failure)
	}
	time.Sleep(o.Around)
	l.Stop()
	r.Before = l.Between(2*time.Second, from)
	r.During = l.Between(from, to)
	var first float64
	r.TPS, r.P99, first = l.Span(2*time.Second, to+o.Around)
	r.From = first - from.Seconds()
	logf("  %s; lowest second %.0f tps, worst p99 %.0f ms", r.Took.Round(time.Millisecond), r.During.Min, r.During.P99)
	return r, nil
}

func availReport(w io.Writer, o AvailabilityOptions, runs []availRun) {
	fmt.Fprintf(w, "\nWrite availability during a column widening: %d-row sbtest1, sysbench oltp_write_only, %d clients at %.0f transactions a second,\n%s before and after each ALTER. p99: the worst second's 99th percentile latency.\n\n", o.Rows, o.Threads, o.Rate, o.Around)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ALTER\ttool\ttook\tTPS before\tTPS during\tlowest second\tzero-TPS seconds\tp99 before (ms)\tp99 during (ms)")
	for _, r := range runs {
		took := r.Took.Round(100 * time.Millisecond).String()
		if r.Failure != "" {
			took = "FAILED: " + oneLine(r.Failure, 60)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.0f\t%.0f\t%.0f\t%d\t%.0f\t%.0f\n", r.Alter, r.Tool, took, r.Before.Mean, r.During.Mean, r.During.Min, r.During.Zero, r.Before.P99, r.During.P99)
	}
	tw.Flush()
}

// availCharts draws, for each widening, the load's throughput and its p99
// latency second by second, one line a tool in the order of tools. The
// seconds shown end 15 s after the longest run that finished: a tool
// stopped at the limit is cut there (its legend says it did not finish).
func availCharts(runs []availRun, tools []string) []rpt.Chart {
	var charts []rpt.Chart
	for _, w := range widenings {
		tps := rpt.Chart{Title: "Writes a second during " + w.name, X: "seconds from the ALTER's start", Y: "transactions a second",
			Marks: []rpt.Mark{{X: 0, Label: "ALTER starts"}}}
		lat := rpt.Chart{Title: "p99 latency of the writes during " + w.name, X: "seconds from the ALTER's start", Y: "ms (log scale)", LogY: true,
			Marks: []rpt.Mark{{X: 0, Label: "ALTER starts"}}}
		end := -1.0
		for _, r := range runs {
			if r.Alter == w.name && r.Failure == "" {
				end = max(end, r.Took.Seconds()+15)
			}
		}
		if end < 0 { // nothing finished: all of it
			end = math.Inf(1)
		}
		for _, t := range tools {
			ts, ls := rpt.Series{Name: t}, rpt.Series{Name: t}
			for _, r := range runs {
				if r.Tool != t || r.Alter != w.name {
					continue
				}
				label := fmt.Sprintf("%s (%.0fs)", t, r.Took.Seconds())
				if r.Failure != "" {
					label = t + " (" + oneLine(r.Failure, 40) + ")"
				}
				ts.Name, ls.Name = label, label
				for i := range r.TPS {
					if x := r.From + float64(i); x <= end {
						ts.X, ts.Y = append(ts.X, x), append(ts.Y, r.TPS[i])
					}
				}
				for i := range r.P99 {
					if x := r.From + float64(i); x <= end {
						ls.X, ls.Y = append(ls.X, x), append(ls.Y, r.P99[i])
					}
				}
			}
			tps.Lines, lat.Lines = append(tps.Lines, ts), append(lat.Lines, ls)
		}
		lat.Note = "A second in which no write completed has no latency: it is left out here (the writes a second show it as zero), and the line joins the seconds around it."
		tps.Note = "The load is rate-limited: a tool that keeps writes flowing holds the line at the rate; a write stall drops it to zero, and the queue it leaves shows as a burst above the rate."
		charts = append(charts, tps, lat)
	}
	return charts
}
