package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"text/tabwriter"
	"time"

	rpt "github.com/sluicedb/sluice/bench/report"
	"github.com/sluicedb/sluice/internal/plan"
)

// RedoOptions configures the redo writer benchmark (seed 001):
// innodb_log_writer_threads ON and OFF, with the binlog on and off, by
// concurrency, for an update-heavy and a read-write workload.
type RedoOptions struct {
	DSN  string
	Rows int // sbtest1's rows (default 1,000,000)
	// Seconds is each point's run (default 10s); Concurrency the client
	// counts (default 1, 2, 4, ... up to 4x the server's processors).
	Seconds     time.Duration
	Concurrency []int
	// BinlogOff and BinlogOn restart the server without and with the
	// binlog ("" for both: only the server's current mode is measured).
	BinlogOff, BinlogOn string
	Replicas            string // command managing the replicas (taken down during the runs, as for Run)
	ReportDir           string
	Out                 io.Writer
}

// redoWorkloads are sysbench's update-heavy and read-write tests.
var redoWorkloads = []struct{ name, test string }{
	{"update-heavy (oltp_update_index)", "oltp_update_index"},
	{"read-write (oltp_read_write)", "oltp_read_write"},
}

type redoPoint struct {
	Workload string  `json:"workload"`
	Binlog   bool    `json:"binlog"`
	Writers  string  `json:"innodb_log_writer_threads"`
	Clients  int     `json:"clients"`
	TPS      float64 `json:"tps"`
}

// Redo runs the sweep and prints, writes its report; the server is left in
// the binlog mode it started in and with its writer setting.
func Redo(ctx context.Context, o RedoOptions) error {
	if o.Rows <= 0 {
		o.Rows = 1_000_000
	}
	if o.Seconds <= 0 {
		o.Seconds = 10 * time.Second
	}
	if o.Out == nil {
		o.Out = os.Stdout
	}
	if (o.BinlogOff == "") != (o.BinlogOn == "") {
		return fmt.Errorf("give both --binlog-off and --binlog-on, or neither")
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
	var version, writers string
	var logBin int
	if err := s.DB.QueryRowContext(ctx, "SELECT VERSION(), @@innodb_log_writer_threads, @@log_bin").Scan(&version, &writers, &logBin); err != nil {
		return fmt.Errorf("this server has no innodb_log_writer_threads (MySQL 8.0.22 and later): %w", err)
	}
	facts, err := plan.ReadFacts(ctx, s.DB, s.Conn.Host)
	if err != nil {
		return err
	}
	if len(o.Concurrency) == 0 {
		for c := 1; c <= 4*max(facts.CPUs, 1); c *= 2 {
			o.Concurrency = append(o.Concurrency, c)
		}
	}
	if o.Replicas != "" {
		reps, err := takeReplicasDown(ctx, o.Replicas)
		if err != nil {
			return err
		}
		defer reps.restore(context.WithoutCancel(ctx))
	}
	defer s.DB.ExecContext(context.WithoutCancel(ctx), "SET GLOBAL innodb_log_writer_threads = "+writers)
	modes := []bool{logBin == 1}
	if o.BinlogOff != "" {
		modes = []bool{true, false}
		// The server ends in the mode it started in.
		defer restartIn(context.WithoutCancel(ctx), map[bool]string{true: o.BinlogOn, false: o.BinlogOff}[logBin == 1])
	}
	if err := s.prepareTemplate(ctx, o.Rows); err != nil {
		return err
	}
	var points []redoPoint
	for _, binlog := range modes {
		if o.BinlogOff != "" {
			if err := restartIn(ctx, map[bool]string{true: o.BinlogOn, false: o.BinlogOff}[binlog]); err != nil {
				return err
			}
			if err := s.DB.QueryRowContext(ctx, "SELECT @@log_bin").Scan(&logBin); err != nil || (logBin == 1) != binlog {
				return fmt.Errorf("after the restart the binlog is %v, want %v (%v)", logBin == 1, binlog, err)
			}
		}
		if err := s.reset(ctx, o.Rows); err != nil {
			return err
		}
		for _, w := range redoWorkloads {
			for _, rt := range []string{"ON", "OFF"} {
				if _, err := s.DB.ExecContext(ctx, "SET GLOBAL innodb_log_writer_threads = "+rt); err != nil {
					return err
				}
				for _, c := range o.Concurrency {
					l, err := s.startSysbench(ctx, benchDB, w.test, c, 0, o.Seconds+5*time.Second)
					if err != nil {
						return err
					}
					time.Sleep(o.Seconds)
					tps := l.Between(2*time.Second, l.Since()).Mean
					l.Stop()
					logf("redo: %s, binlog %v, writers %s, %d clients: %.0f tps", w.name, binlog, rt, c, tps)
					points = append(points, redoPoint{Workload: w.name, Binlog: binlog, Writers: rt, Clients: c, TPS: tps})
				}
			}
		}
	}
	var text bytes.Buffer
	redoReport(io.MultiWriter(o.Out, &text), version, facts.CPUs, o, points)
	return saveReport(o.ReportDir, rpt.Report{Name: "redo", Title: "Redo log writer threads ON and OFF, with and without the binlog", Started: started,
		Server: version, Text: text.String(), Charts: redoCharts(points), Raw: points})
}

// restartIn runs a restart command (its words split on spaces; a leading
// VAR=value sets the environment).
func restartIn(ctx context.Context, command string) error {
	parts := strings.Fields(command)
	var env []string
	for len(parts) > 0 && strings.Contains(parts[0], "=") {
		env, parts = append(env, parts[0]), parts[1:]
	}
	if len(parts) == 0 {
		return fmt.Errorf("restart command %q runs nothing", command)
	}
	cmd := exec.CommandContext(ctx, parts[0], parts[1:]...)
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %v: %s", command, err, lastLine(string(out)))
	}
	return nil
}

func binlogName(on bool) string {
	if on {
		return "binlog ON"
	}
	return "binlog OFF"
}

func redoReport(w io.Writer, version string, cpus int, o RedoOptions, points []redoPoint) {
	fmt.Fprintf(w, "\nRedo log writer threads (innodb_log_writer_threads) ON and OFF: %s, %d processors, %d-row sbtest1, %s a point; transactions a second\n\n", version, cpus, o.Rows, o.Seconds)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "workload\tbinlog\twriters\t"
	for _, c := range o.Concurrency {
		head += fmt.Sprintf("%d\t", c)
	}
	fmt.Fprintln(tw, head)
	for _, wl := range redoWorkloads {
		for _, binlog := range []bool{true, false} {
			for _, rt := range []string{"ON", "OFF"} {
				row, any := wl.name+"\t"+binlogName(binlog)+"\t"+rt+"\t", false
				for _, c := range o.Concurrency {
					for _, p := range points {
						if p.Workload == wl.name && p.Binlog == binlog && p.Writers == rt && p.Clients == c {
							row += fmt.Sprintf("%.0f\t", p.TPS)
							any = true
						}
					}
				}
				if any {
					fmt.Fprintln(tw, row)
				}
			}
		}
	}
	tw.Flush()
}

// redoCharts draws, for each workload, throughput by clients, one line for
// each writer setting and binlog mode measured (the seed's RT0/RT1 x
// binlog0/1).
func redoCharts(points []redoPoint) []rpt.Chart {
	var charts []rpt.Chart
	for _, wl := range redoWorkloads {
		c := rpt.Chart{Title: "Throughput by clients: " + wl.name, X: "clients", Y: "transactions a second"}
		for _, binlog := range []bool{true, false} {
			for _, rt := range []string{"ON", "OFF"} {
				s := rpt.Series{Name: "writers " + rt + ", " + binlogName(binlog)}
				for _, p := range points {
					if p.Workload == wl.name && p.Binlog == binlog && p.Writers == rt {
						s.X, s.Y = append(s.X, float64(p.Clients)), append(s.Y, p.TPS)
					}
				}
				c.Lines = append(c.Lines, s)
			}
		}
		floor := 0.0
		c.YFloor = &floor
		charts = append(charts, c)
	}
	return charts
}
