package bench

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rpt "github.com/sluicedb/sluice/bench/report"
	"github.com/sluicedb/sluice/internal/plan"
)

// TestRaceCharts: the bars are each ALTER's median multiple of F at each
// load, F itself left out, a failed ALTER marked; the throughput chart has
// one line per ALTER placed on the ALTER's clock.
func TestRaceCharts(t *testing.T) {
	const f = 10 * time.Second
	res := func(name, load string, wall time.Duration) result {
		return result{name: name, load: load, wall: wall, f: f}
	}
	tps := []float64{100, 100, 0, 0, 100}
	sl := res("sluice", "40% load", 30*time.Second)
	sl.tps, sl.tpsFrom = tps, -1.5
	rs := []result{
		res(rebuildName, "idle", f),
		res(copyName, "idle", 20*time.Second),
		res("sluice", "idle", 15*time.Second),
		res("sluice", "idle", 17*time.Second),
		res("sluice", "idle", 40*time.Second),
		res(copyName, "40% load", 25*time.Second),
		sl,
		{name: "pt-online-schema-change", load: "40% load", wall: 50 * time.Second, f: f, failure: "exit 1"},
	}
	charts := raceCharts(rs)
	if len(charts) != 2 {
		t.Fatalf("%d charts, want the bars and one throughput chart", len(charts))
	}
	bars := charts[0].Bars
	if bars == nil || strings.Join(bars.Groups, ",") != "idle: MODIFY k BIGINT,40% load: MODIFY k BIGINT" {
		t.Fatalf("bars: %+v", bars)
	}
	want := map[string][]float64{"native ALTER": {2, 2.5}, "sluice": {1.7, 3}, "pt-online-schema-change": {math.NaN(), math.NaN()}}
	if len(bars.Series) != len(want) {
		t.Fatalf("bar series %+v, want %d (F's own run left out)", bars.Series, len(want))
	}
	for _, s := range bars.Series {
		w, ok := want[s.Name]
		if !ok {
			t.Fatalf("bar series %q", s.Name)
		}
		for i := range w {
			if !(math.IsNaN(w[i]) && math.IsNaN(s.Values[i])) && math.Abs(w[i]-s.Values[i]) > 1e-9 {
				t.Errorf("%s at %s: %v, want %v", s.Name, bars.Groups[i], s.Values[i], w[i])
			}
		}
		if s.Name == "pt-online-schema-change" && s.Missing[1] != "failed" {
			t.Errorf("the failed run is not marked: %q", s.Missing)
		}
	}
	lines := charts[1].Lines
	if len(lines) != 3 {
		t.Fatalf("throughput lines %+v", lines)
	}
	got := lines[1]
	if !strings.HasPrefix(got.Name, "sluice") || len(got.X) != 5 || got.X[0] != -1.5 || got.X[4] != 2.5 || got.Y[2] != 0 {
		t.Errorf("sluice's throughput line: %+v", got)
	}
	for name, tool := range map[string]string{copyName: "native ALTER", rebuildName: "native ALTER", "sluice MODIFY k BIGINT --threads=2": "sluice --threads=2",
		"gh-ost ENGINE=InnoDB": "gh-ost", "sluice MODIFY k BIGINT [old/sluice]": "sluice [old/sluice]"} {
		if got := toolOf(name); got != tool {
			t.Errorf("toolOf(%q) = %q, want %q", name, got, tool)
		}
	}
	if len(lines[0].X) != 0 || len(lines[2].X) != 0 {
		t.Errorf("lines without a measured series should be empty (keeping colours): %+v", lines)
	}
	if _, err := charts[0].SVG(); err != nil {
		t.Error(err)
	}
	if _, err := charts[1].SVG(); err != nil {
		t.Error(err)
	}
}

// TestSpanMatchesWindow: the seconds Span returns for the chart are the
// seconds Between summarises, for random series and offsets (seed printed).
func TestSpanMatchesWindow(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	for range 2000 {
		n := rng.IntN(20)
		l := &Load{}
		for range n {
			l.tps = append(l.tps, float64(rng.IntN(5)))
			l.errs = append(l.errs, 0)
			l.p99 = append(l.p99, rng.Float64()*100)
		}
		from := time.Duration(rng.Int64N(int64(25 * time.Second)))
		to := from + time.Duration(rng.Int64N(int64(10*time.Second)))
		w := l.Between(from, to)
		tps, p99, first := l.Span(from, to)
		if len(tps) != w.Seconds || len(p99) != len(tps) {
			t.Fatalf("seed %d: %v over [%s, %s]: span has %d seconds, window %d", seed, l.tps, from, to, len(tps), w.Seconds)
		}
		sum, worst := 0.0, 0.0
		for i := range tps {
			sum += tps[i]
			worst = max(worst, p99[i])
		}
		if len(tps) > 0 && (math.Abs(sum/float64(len(tps))-w.Mean) > 1e-9 || worst != w.P99) {
			t.Fatalf("seed %d: span mean %v p99 %v, window %+v", seed, sum/float64(len(tps)), worst, w)
		}
		if len(tps) > 0 && (tps[0] != l.tps[int(first)-1] || first < from.Seconds()) {
			t.Fatalf("seed %d: first second ends at %v for from %s", seed, first, from)
		}
	}
}

// TestAvailCharts: a throughput and a latency chart for each widening, one
// line a tool in the tools' order, on the ALTER's clock; a tool stopped at
// the limit says so in its legend.
func TestAvailCharts(t *testing.T) {
	tools := []string{"native ALTER", "sluice", "gh-ost"}
	long := make([]float64, 100)
	runs := []availRun{
		{Tool: "native ALTER", Alter: widenings[0].name, Took: 20 * time.Second, TPS: []float64{50, 0, 0, 50}, P99: []float64{10, 0, 0, 9000}, From: -0.5},
		{Tool: "sluice", Alter: widenings[0].name, Took: 30 * time.Second, TPS: []float64{50, 49, 50}, P99: []float64{10, 12, 11}, From: -0.2},
		{Tool: "native ALTER", Alter: widenings[1].name, Failure: "did not finish in 10m0s", TPS: []float64{50, 0}, P99: []float64{10, 0}, From: -0.5},
		{Tool: "gh-ost", Alter: widenings[0].name, Failure: "did not finish in 10m0s", TPS: long, P99: long, From: -0.5},
	}
	charts := availCharts(runs, tools)
	if len(charts) != 2*len(widenings) {
		t.Fatalf("%d charts", len(charts))
	}
	tps, lat := charts[0], charts[1]
	// Cut 15 s after the longest run that finished (sluice's 30 s).
	if gh := tps.Lines[2]; len(gh.X) == 0 || gh.X[len(gh.X)-1] > 45 || gh.X[len(gh.X)-1] < 44 || !strings.Contains(gh.Name, "did not finish") {
		t.Errorf("gh-ost's unfinished line: %d points, last at %v, %q", len(gh.X), gh.X[len(gh.X)-1], gh.Name)
	}
	if len(tps.Lines) != 3 || tps.Lines[0].Name != "native ALTER (20s)" || tps.Lines[1].X[0] != -0.2 || tps.Lines[0].Y[1] != 0 || !lat.LogY || lat.Lines[0].Y[3] != 9000 {
		t.Errorf("the INT widening's charts: %+v / %+v", tps.Lines, lat.Lines)
	}
	if n := charts[2].Lines[0].Name; !strings.Contains(n, "did not finish") {
		t.Errorf("the stopped run's legend: %q", n)
	}
	if len(charts[2].Lines[1].X) != 0 {
		t.Errorf("sluice has no run of the second widening, yet a line: %+v", charts[2].Lines[1])
	}
	for _, c := range charts {
		if _, err := c.SVG(); err != nil {
			t.Errorf("%s: %v", c.Title, err)
		}
	}
}

// TestRedoCharts: one chart a workload, a line for each writer setting and
// binlog mode, its points by clients; the table prints every measured row.
func TestRedoCharts(t *testing.T) {
	var points []redoPoint
	for _, binlog := range []bool{true, false} {
		for _, rt := range []string{"ON", "OFF"} {
			for _, c := range []int{1, 2, 4} {
				tps := float64(c * 100)
				if rt == "OFF" {
					tps += 7
				}
				points = append(points, redoPoint{Workload: redoWorkloads[0].name, Binlog: binlog, Writers: rt, Clients: c, TPS: tps})
			}
		}
	}
	charts := redoCharts(points)
	if len(charts) != len(redoWorkloads) || len(charts[0].Lines) != 4 {
		t.Fatalf("charts: %+v", charts)
	}
	off := charts[0].Lines[1]
	if off.Name != "writers OFF, binlog ON" || len(off.X) != 3 || off.X[2] != 4 || off.Y[2] != 407 {
		t.Errorf("the OFF/binlog line: %+v", off)
	}
	if len(charts[1].Lines[0].X) != 0 {
		t.Errorf("the unmeasured workload has points: %+v", charts[1].Lines[0])
	}
	var b strings.Builder
	redoReport(&b, "9.7.4", 2, RedoOptions{Rows: 10, Seconds: time.Second, Concurrency: []int{1, 2, 4}}, points)
	if n := strings.Count(b.String(), redoWorkloads[0].name); n != 4 || !strings.Contains(b.String(), "407") {
		t.Errorf("the table has %d rows of the workload:\n%s", n, b.String())
	}
	for _, c := range charts {
		if _, err := c.SVG(); err != nil {
			t.Error(err)
		}
	}
}

// TestDDLChart: every setting is one point, the planner's and the fastest
// in series of their own.
func TestDDLChart(t *testing.T) {
	mk := func(th int, peak int64, sweep time.Duration) *ddlRun {
		return &ddlRun{d: plan.DDL{Threads: th, BufferBytes: 1 << 20, ReadThreads: th}, peak: peak, sweep: sweep}
	}
	runs := []*ddlRun{mk(1, 1<<20, 3*time.Second), mk(2, 2<<20, 2*time.Second), mk(4, 4<<20, time.Second)}
	c := ddlChart("one index", runs, runs[1], runs[2])
	if len(c.Lines) != 3 || len(c.Lines[0].X) != 1 || c.Lines[1].Y[0] != 2 || c.Lines[2].X[0] != 4 || !c.Lines[0].Dots {
		t.Errorf("ddl chart: %+v", c.Lines)
	}
	same := ddlChart("one index", runs, runs[2], runs[2])
	if len(same.Lines[2].X) != 0 || len(same.Lines[1].X) != 1 || len(same.Lines[0].X) != 2 {
		t.Errorf("planner's choice is the fastest: %+v", same.Lines)
	}
	if raws := ddlRaws("one index", runs, runs[2]); len(raws) != 3 || !raws[2].FastestSeen || raws[0].Sweep != 3 {
		t.Errorf("raw: %+v", raws)
	}
	if _, err := c.SVG(); err != nil {
		t.Error(err)
	}
}

// TestMDLCharts: a bar a tool in each chart, its figure as measured.
func TestMDLCharts(t *testing.T) {
	rs := []mdlResult{{tool: "native", worst: 100 * time.Second, maxQueued: 8}, {tool: "sluice", worst: 20 * time.Millisecond}}
	cs := mdlCharts(rs)
	if len(cs) != 2 || len(cs[0].Bars.Series) != 2 || cs[0].Bars.Series[0].Values[0] != 100 || cs[1].Bars.Series[0].Values[0] != 8 || cs[1].Bars.Series[1].Values[0] != 0 {
		t.Errorf("mdl charts: %+v %+v", cs[0].Bars, cs[1].Bars)
	}
	for _, c := range cs {
		if _, err := c.SVG(); err != nil {
			t.Error(err)
		}
	}
	if raw := mdlRaws(rs); raw[0].WorstReader != 100 || raw[1].Tool != "sluice" {
		t.Errorf("raw: %+v", raw)
	}
}

// TestRedrawRace: a race report drawn again from its JSON has the same
// charts as the one written from the run.
func TestRedrawRace(t *testing.T) {
	const f = 10 * time.Second
	sl := result{name: "sluice", load: "40% load", wall: 30 * time.Second, f: f, tps: []float64{100, 0, 100}, tpsFrom: -0.5}
	rs := []result{{name: rebuildName, load: "idle", wall: f, f: f}, {name: "sluice", load: "idle", wall: 15 * time.Second, f: f}, sl,
		{name: "gh-ost", load: "40% load", wall: 5 * time.Second, f: f, failure: "did not finish in 3m0s"}}
	dir, again := t.TempDir(), t.TempDir()
	if err := saveReport(dir, rpt.Report{Name: "race", Title: "t", Charts: raceCharts(rs), Raw: rawResults(rs)}); err != nil {
		t.Fatal(err)
	}
	if err := RedrawRace(filepath.Join(dir, "race.json"), again); err != nil {
		t.Fatal(err)
	}
	charts := func(d string) string {
		var r struct{ Charts json.RawMessage }
		data, err := os.ReadFile(filepath.Join(d, "race.json"))
		if err != nil || json.Unmarshal(data, &r) != nil {
			t.Fatalf("%s: %v", d, err)
		}
		return string(r.Charts)
	}
	if a, b := charts(dir), charts(again); a != b || !strings.Contains(a, "did not finish in 3m0s") {
		t.Errorf("redrawn charts differ:\n%s\n%s", a, b)
	}
}
