package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	rpt "github.com/sluicedb/sluice/bench/report"
)

// rawResult is one timed ALTER as the report's JSON holds it.
type rawResult struct {
	Name        string    `json:"name"`
	Load        string    `json:"load"`
	Round       string    `json:"round,omitempty"`
	Table       string    `json:"table"`
	Seconds     float64   `json:"seconds"`
	F           float64   `json:"f_seconds,omitempty"` // the F this run is read against
	TPSBefore   float64   `json:"tps_before,omitempty"`
	TPSDuring   float64   `json:"tps_during,omitempty"`
	TPSLowest   float64   `json:"tps_lowest_second,omitempty"`
	ZeroSeconds int       `json:"zero_tps_seconds,omitempty"`
	ErrorsMin   float64   `json:"app_errors_during_per_min,omitempty"`
	P99Ms       float64   `json:"p99_ms_during,omitempty"` // the worst second's p99 latency of the load, ms
	RSSMB       float64   `json:"sluice_rss_mb,omitempty"`
	Phases      string    `json:"sluice_phases,omitempty"`
	Failure     string    `json:"failure,omitempty"`
	TPS         []float64 `json:"tps,omitempty"`      // the load's throughput a second around the ALTER
	P99         []float64 `json:"p99_ms,omitempty"`   // and its p99 latency, ms, when measured
	TPSFrom     float64   `json:"tps_from,omitempty"` // the end of TPS[0]'s second, from the ALTER's start
}

func rawResults(rs []result) []rawResult {
	out := make([]rawResult, 0, len(rs))
	for _, r := range rs {
		raw := rawResult{Name: r.name, Load: r.load, Round: r.round, Table: r.table, Seconds: r.wall.Seconds(), F: r.f.Seconds(),
			RSSMB: r.rssMB, Phases: r.phases, Failure: r.failure, TPS: r.tps, P99: r.p99, TPSFrom: r.tpsFrom}
		if r.load != "idle" {
			raw.TPSBefore, raw.TPSDuring, raw.TPSLowest, raw.ZeroSeconds = r.before.Mean, r.during.Mean, r.during.Min, r.during.Zero
			if r.during.Seconds > 0 {
				raw.ErrorsMin = r.during.Errors * 60 / float64(r.during.Seconds)
			}
			raw.P99Ms = r.during.P99
		}
		out = append(out, raw)
	}
	return out
}

// raceCharts draws the sysbench rounds: every ALTER's time as a multiple of
// F at each load (F's own idle run left out: it is 1 by definition), and
// for each loaded round the application's throughput second by second
// around each ALTER's first run.
func raceCharts(rs []result) []rpt.Chart {
	ss := summarize(rs)
	if len(ss) == 0 {
		return nil
	}
	// Bars by tool (the ALTER's text left out of its name: native ALTER
	// copies in the loaded rounds and rebuilds in the unthrottled one),
	// groups by load, each named with its ALTER.
	var loads, groups, tools []string
	for _, s := range ss[1:] {
		if !slices.Contains(loads, s.load) {
			loads, groups = append(loads, s.load), append(groups, s.load+": "+alterOf(s.name))
		}
		tools = appendNew(tools, toolOf(s.name))
	}
	if len(tools) == 0 {
		return nil
	}
	bars := &rpt.Bars{Groups: groups}
	for _, tool := range tools {
		bs := rpt.BarSeries{Name: tool, Values: make([]float64, len(loads)), Missing: make([]string, len(loads))}
		for i := range loads {
			bs.Values[i] = math.NaN()
		}
		for _, s := range ss[1:] {
			if toolOf(s.name) != tool {
				continue
			}
			i := slices.Index(loads, s.load)
			switch {
			case s.wall == 0:
				bs.Missing[i] = "failed"
				if len(s.failures) > 0 && strings.HasPrefix(s.failures[0], "did not finish") {
					bs.Missing[i] = s.failures[0]
				}
			case s.x > 0:
				bs.Values[i] = s.x
			default:
				bs.Values[i] = float64(s.wall) / float64(ss[0].wall)
			}
		}
		bars.Series = append(bars.Series, bs)
	}
	charts := []rpt.Chart{{Title: "Time of each ALTER, as a multiple of F (lower is faster)", Y: "x F", Bars: bars,
		Note: fmt.Sprintf("F is the server's own in-place rebuild of the idle table, %s. Each bar is the median of the runs, each run divided by the F timed just before it.", ss[0].wall.Round(time.Millisecond))}}
	for _, load := range loads {
		if load == "idle" {
			continue
		}
		if c, ok := tpsChart(rs, load, tools); ok {
			charts = append(charts, c)
		}
	}
	return charts
}

// toolOf is a timed step's tool: its name without the ALTER it ran
// ("sluice MODIFY k BIGINT --threads=2" is "sluice --threads=2", both
// native ALTERs are "native ALTER").
func toolOf(name string) string {
	if strings.HasPrefix(name, "native ALTER") {
		return "native ALTER"
	}
	for _, a := range []string{" MODIFY k BIGINT", " ENGINE=InnoDB"} {
		name = strings.Replace(name, a, "", 1)
	}
	return name
}

// alterOf is the ALTER a step's name says it ran.
func alterOf(name string) string {
	switch {
	case strings.Contains(name, "ENGINE=InnoDB"):
		return "ENGINE=InnoDB"
	case strings.Contains(name, "MODIFY k BIGINT"):
		return "MODIFY k BIGINT"
	}
	return name
}

// tpsChart is the application's throughput around the first run of each
// tool at load; the seconds shown end 15 s after the longest run that
// finished (a run stopped at the time limit is cut there).
func tpsChart(rs []result, load string, tools []string) (rpt.Chart, bool) {
	c := rpt.Chart{Title: "Application throughput around the ALTER (" + load + ")", X: "seconds from the ALTER's start", Y: "transactions a second",
		Marks: []rpt.Mark{{X: 0, Label: "ALTER starts"}}}
	end := -1.0
	for _, r := range rs {
		if r.load == load && r.failure == "" {
			end = max(end, r.wall.Seconds()+15)
		}
	}
	if end < 0 {
		end = math.Inf(1)
	}
	for _, tool := range tools {
		s := rpt.Series{Name: tool}
		for _, r := range rs {
			if toolOf(r.name) != tool || r.load != load || len(r.tps) == 0 {
				continue
			}
			for i, v := range r.tps {
				if x := r.tpsFrom + float64(i); x <= end {
					s.X, s.Y = append(s.X, x), append(s.Y, v)
				}
			}
			s.Name = fmt.Sprintf("%s (%.0fs)", tool, r.wall.Seconds())
			if r.failure != "" {
				s.Name = tool + " (" + oneLine(r.failure, 40) + ")"
			}
			break
		}
		// An empty series keeps the tool's colour the same as in the bars.
		c.Lines = append(c.Lines, s)
	}
	for _, s := range c.Lines {
		if len(s.X) > 0 {
			c.Note = "Each line is the first run of that tool; the number in brackets is how long it took. The load ran at the same rate for every tool."
			return c, true
		}
	}
	return c, false
}

func appendNew(list []string, s string) []string {
	if !slices.Contains(list, s) {
		return append(list, s)
	}
	return list
}

// serverVersion is the server's version string, for the report's header.
func (s *Server) serverVersion(ctx context.Context) string {
	var v string
	if err := s.DB.QueryRowContext(ctx, "SELECT VERSION()").Scan(&v); err != nil {
		return ""
	}
	return v
}

// writeReport writes the run's report (race.json, .txt, -N.svg, .html) to
// o.ReportDir, "" writing none: text is what the run printed.
func (b *benchRun) writeReport(ctx context.Context, started time.Time, text string) error {
	var sysbench []result
	for _, r := range b.results {
		if r.round == "" {
			sysbench = append(sysbench, r)
		}
	}
	return saveReport(b.o.ReportDir, rpt.Report{Name: "race", Title: "sluice against native ALTER and the peers", Started: started,
		Server: b.s.serverVersion(ctx), Text: text, Charts: raceCharts(sysbench), Raw: rawResults(b.results)})
}

// saveReport writes r into dir ("": nowhere) and logs where the page is.
func saveReport(dir string, r rpt.Report) error {
	if dir == "" {
		return nil
	}
	paths, err := r.Write(dir)
	if err != nil {
		return err
	}
	logf("report: %s", paths[len(paths)-1])
	return nil
}

// dbaAlter runs ALTER TABLE as a DBA's session would: with the server's
// lock_wait_timeout (a year by default), not the bench pool's.
func (s *Server) dbaAlter(ctx context.Context, table, alter string) error {
	conn, err := s.DB.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "SET SESSION lock_wait_timeout = @@global.lock_wait_timeout"); err != nil {
		return err
	}
	_, err = conn.ExecContext(ctx, "ALTER TABLE "+table+" "+alter)
	conn.ExecContext(context.WithoutCancel(ctx), "SET SESSION lock_wait_timeout = 30")
	return err
}

// RedrawRace writes the race's report again, into dir, from an earlier
// run's race.json, running nothing.
func RedrawRace(path, dir string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var old struct {
		Started time.Time
		Server  string
		Text    string
		Raw     []rawResult
	}
	if err := json.Unmarshal(data, &old); err != nil || len(old.Raw) == 0 {
		return fmt.Errorf("%s: not a race report with runs (%v)", path, err)
	}
	var rs []result
	for _, r := range old.Raw {
		if r.Round != "" {
			continue
		}
		rs = append(rs, result{name: r.Name, load: r.Load, round: r.Round, table: r.Table, failure: r.Failure,
			wall: time.Duration(r.Seconds * float64(time.Second)), f: time.Duration(r.F * float64(time.Second)),
			tps: r.TPS, p99: r.P99, tpsFrom: r.TPSFrom})
	}
	return saveReport(dir, rpt.Report{Name: "race", Title: "sluice against native ALTER and the peers", Started: old.Started,
		Server: old.Server, Text: old.Text, Charts: raceCharts(rs), Raw: old.Raw})
}
