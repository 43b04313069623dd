package bench

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// ScaleOptions configure "sluice-bench scale": the idle change of the main
// bench on sysbench tables of several sizes, each beside the server's own
// in-place rebuild of the same table from the same state.
type ScaleOptions struct {
	DSN      string
	Sluice   string
	Sizes    []int // rows (default 1M, 5M, 10M)
	Repeat   int   // runs of each, interleaved (default 1)
	Replicas string
	Logs     string
	Out      io.Writer
}

// scaleResult is one size's runs.
type scaleResult struct {
	rows            int
	f, sluice       []time.Duration
	phases          []string
	slowest, target []time.Duration
	slowRows        []int64
	eta             []*[2]float64
}

var slowestLine = regexp.MustCompile(`slowest copy chunk (\S+) \((\d+) rows\), target (\S+)`)

// Scale runs the sizes, then a table whose BIGINT keys cluster in the
// middle with one row at each extreme, and prints where sluice's time went
// beside the server's rebuild.
func Scale(ctx context.Context, o ScaleOptions) error {
	if len(o.Sizes) == 0 {
		o.Sizes = []int{1_000_000, 5_000_000, 10_000_000}
	}
	o.Repeat = max(o.Repeat, 1)
	if err := ensureSysbench(); err != nil {
		return err
	}
	s, err := Connect(ctx, o.DSN)
	if err != nil {
		return err
	}
	defer s.DB.Close()
	s.Logs = o.Logs
	if err := s.prepareTemplate(ctx, 1_000_000); err != nil {
		return err
	}
	if o.Replicas != "" {
		reps, err := takeReplicasDown(ctx, o.Replicas)
		if err != nil {
			return err
		}
		defer reps.restore(context.WithoutCancel(ctx))
	}
	var results []scaleResult
	for _, rows := range o.Sizes {
		tpl := fmt.Sprintf("sbtest_scale_%d", rows)
		if err := s.scaleTemplate(ctx, tpl, rows); err != nil {
			return err
		}
		r := scaleResult{rows: rows}
		for rep := 0; rep < o.Repeat; rep++ {
			if err := s.resetFrom(ctx, tpl, "sbtest1"); err != nil {
				return err
			}
			logf("scale %d rows: native ALTER %s (idle)", rows, rebuild)
			start := time.Now()
			if _, err := s.DB.ExecContext(ctx, "ALTER TABLE "+benchDB+".sbtest1 "+rebuild); err != nil {
				return err
			}
			r.f = append(r.f, time.Since(start))
			logf("  %s", r.f[len(r.f)-1].Round(time.Millisecond))
			if err := s.resetFrom(ctx, tpl, "sbtest1"); err != nil {
				return err
			}
			logf("scale %d rows: sluice %s (idle)", rows, modifyK)
			if err := s.scaleSluice(ctx, o.Sluice, "sbtest1", &r); err != nil {
				return err
			}
		}
		results = append(results, r)
	}
	// Keys far apart: a few rows at the extremes of a BIGINT, the rest
	// together.
	skew := scaleResult{}
	if err := s.skewTemplate(ctx); err != nil {
		return err
	}
	if err := s.resetFrom(ctx, "sbtest_scale_skew", "skew"); err != nil {
		return err
	}
	logf("skewed BIGINT key: sluice %s (idle)", modifyK)
	if err := s.scaleSluice(ctx, o.Sluice, "skew", &skew); err != nil {
		return err
	}
	reportScale(o.Out, results, skew)
	return nil
}

// scaleSluice runs sluice's idle change on table and records its figures.
func (s *Server) scaleSluice(ctx context.Context, bin, table string, r *scaleResult) error {
	start := time.Now()
	// The replicas are down (or left alone): a primary may still list a
	// stopped replica for a while, and sluice would wait for it.
	out, err := s.runSluiceOn(ctx, bin, table, modifyK, []string{"--replica-discovery=false"}, true)
	if err != nil {
		return err
	}
	r.sluice = append(r.sluice, time.Since(start))
	r.phases = append(r.phases, out.phases)
	r.eta = append(r.eta, out.eta)
	r.slowest = append(r.slowest, out.slowest)
	r.target = append(r.target, out.target)
	r.slowRows = append(r.slowRows, out.slowRows)
	logf("  %s (%s); slowest chunk %s of %d rows, target %s", r.sluice[len(r.sluice)-1].Round(time.Millisecond), out.phases,
		out.slowest, out.slowRows, out.target)
	return nil
}

// parseSlowest reads sluice's summary line about its slowest chunk.
func parseSlowest(log string) (slowest, target time.Duration, rows int64) {
	m := slowestLine.FindStringSubmatch(log)
	if m == nil {
		return 0, 0, 0
	}
	slowest, _ = time.ParseDuration(m[1])
	rows, _ = strconv.ParseInt(m[2], 10, 64)
	target, _ = time.ParseDuration(m[3])
	return slowest, target, rows
}

// scaleTemplate makes tpl.sbtest1 hold rows rows: copies of the 1M-row
// sysbench template at increasing ids (not logged to the binlog).
func (s *Server) scaleTemplate(ctx context.Context, tpl string, rows int) error {
	var n int64
	if err := s.DB.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+tpl+".sbtest1").Scan(&n); err == nil && n == int64(rows) {
		return nil
	}
	logf("preparing a %d-row table (once)", rows)
	conn, err := s.DB.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	stmts := []string{"SET SESSION sql_log_bin = 0", "DROP DATABASE IF EXISTS " + tpl, "CREATE DATABASE " + tpl,
		"CREATE TABLE " + tpl + ".sbtest1 LIKE " + tplDB + ".sbtest1"}
	for off := 0; off < rows; off += 1_000_000 {
		stmts = append(stmts, fmt.Sprintf("INSERT INTO %s.sbtest1 SELECT id + %d, k, c, pad FROM %s.sbtest1 WHERE id <= %d",
			tpl, off, tplDB, min(1_000_000, rows-off)))
	}
	for _, q := range stmts {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("scale template: %s: %w", q, err)
		}
	}
	return nil
}

// skewTemplate makes sbtest_scale_skew.skew: the 1M sysbench rows under a
// BIGINT key, and one more row at each end of the BIGINT range.
func (s *Server) skewTemplate(ctx context.Context) error {
	const tpl = "sbtest_scale_skew"
	var n int64
	if err := s.DB.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+tpl+".skew").Scan(&n); err == nil && n == 1_000_002 {
		return nil
	}
	conn, err := s.DB.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	for _, q := range []string{"SET SESSION sql_log_bin = 0", "DROP DATABASE IF EXISTS " + tpl, "CREATE DATABASE " + tpl,
		"CREATE TABLE " + tpl + ".skew (id BIGINT NOT NULL, k INT NOT NULL DEFAULT 0, c CHAR(120) NOT NULL DEFAULT '', pad CHAR(60) NOT NULL DEFAULT '', PRIMARY KEY (id), KEY k_1 (k))",
		"INSERT INTO " + tpl + ".skew SELECT id, k, c, pad FROM " + tplDB + ".sbtest1",
		"INSERT INTO " + tpl + ".skew VALUES (-9223372036854775807, 1, 'low', 'low'), (9223372036854775806, 1, 'high', 'high')",
	} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("skew template: %s: %w", q, err)
		}
	}
	return nil
}

// resetFrom restores sbtest.<table>, alone in its database, from tpl and
// flushes dirty pages.
func (s *Server) resetFrom(ctx context.Context, tpl, table string) error {
	for _, q := range []string{
		"DROP DATABASE IF EXISTS " + benchDB,
		"CREATE DATABASE " + benchDB,
		"CREATE TABLE " + benchDB + "." + table + " LIKE " + tpl + "." + table,
		"INSERT INTO " + benchDB + "." + table + " SELECT * FROM " + tpl + "." + table,
		"ANALYZE TABLE " + benchDB + "." + table,
		"PURGE BINARY LOGS BEFORE NOW()",
	} {
		if _, err := s.DB.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("reset: %s: %w", q, err)
		}
	}
	return s.Flush(ctx)
}

func reportScale(w io.Writer, rs []scaleResult, skew scaleResult) {
	fmt.Fprintf(w, "\nsluice at scale: sysbench sbtest1 of each size, idle; F = the server's own in-place rebuild (%s) of the same table from the same state;\n", rebuild)
	fmt.Fprintf(w, "sluice runs %s; medians of the runs (sluice / F of each pair)\n\n", modifyK)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "rows\tF\tsluice\tsluice / F\tsluice phases (s)\tslowest chunk / target\tETA error at 1/4, 1/2")
	for _, r := range rs {
		var ratios []float64
		for i := range r.sluice {
			ratios = append(ratios, r.sluice[i].Seconds()/r.f[i].Seconds())
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%.2f\t%s\t%s\t%s\n", r.rows, median(r.f).Round(10*time.Millisecond), median(r.sluice).Round(10*time.Millisecond),
			median(ratios), strings.Join(r.phases, " | "), slowestText(r), etaText(r.eta))
	}
	tw.Flush()
	if len(skew.sluice) > 0 {
		fmt.Fprintf(w, "\nskewed BIGINT key (1,000,000 rows together, one at each end of the BIGINT range): sluice %s, phases %s; slowest chunk / target %s\n",
			skew.sluice[0].Round(10*time.Millisecond), skew.phases[0], slowestText(skew))
	}
}

func slowestText(r scaleResult) string {
	var parts []string
	for i := range r.slowest {
		x := 0.0
		if r.target[i] > 0 {
			x = r.slowest[i].Seconds() / r.target[i].Seconds()
		}
		parts = append(parts, fmt.Sprintf("%s / %s (%.1fx, %d rows)", r.slowest[i].Round(time.Millisecond), r.target[i], x, r.slowRows[i]))
	}
	return strings.Join(parts, "; ")
}

func etaText(es []*[2]float64) string {
	var parts []string
	for _, e := range es {
		if e == nil {
			parts = append(parts, "-")
			continue
		}
		parts = append(parts, fmt.Sprintf("%+.0f%%, %+.0f%%", e[0]*100, e[1]*100))
	}
	return strings.Join(parts, "; ")
}
