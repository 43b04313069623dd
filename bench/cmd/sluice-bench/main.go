// Command sluice-bench runs sluice's demo and benchmark on the sandbox server
// named by SLUICE_TEST_DSN (make demo, make bench).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicedb/sluice/bench"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := &cobra.Command{Use: "sluice-bench", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(demoCmd(), runCmd(), ddlCmd(), mdlCmd(), scaleCmd(), availabilityCmd(), redoCmd())
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "sluice-bench: "+err.Error())
		os.Exit(1)
	}
}

func dsn() (string, error) {
	d := os.Getenv("SLUICE_TEST_DSN")
	if d == "" {
		return "", errors.New("SLUICE_TEST_DSN is not set: run it through 'make demo' or 'make bench'")
	}
	return d, nil
}

func demoCmd() *cobra.Command {
	var rows, writers int
	c := &cobra.Command{
		Use:   "demo",
		Short: "Migrate a table on the sandbox while writers change it, and check nothing was lost",
		RunE: func(c *cobra.Command, _ []string) error {
			d, err := dsn()
			if err != nil {
				return err
			}
			return bench.Demo(c.Context(), d, rows, writers, c.OutOrStdout())
		},
	}
	c.Flags().IntVar(&rows, "rows", 200_000, "rows in the demo table")
	c.Flags().IntVar(&writers, "writers", 8, "concurrent writers during the migration")
	return c
}

func ddlCmd() *cobra.Command {
	o := bench.DDLOptions{
		Threads: []int{1, 2, 4},
		Buffers: []int64{1 << 20, 64 << 20, 512 << 20},
		Reads:   []int{1, 2},
	}
	c := &cobra.Command{
		Use:   "ddl",
		Short: "Sweep innodb_ddl_threads x innodb_ddl_buffer_size x innodb_parallel_read_threads for in-place index builds, beside the planner's choice",
		RunE: func(c *cobra.Command, _ []string) error {
			d, err := dsn()
			if err != nil {
				return err
			}
			o.DSN, o.Out = d, c.OutOrStdout()
			return bench.DDLSweep(c.Context(), o)
		},
	}
	c.Flags().IntVar(&o.Rows, "rows", 1_000_000, "sysbench table size")
	c.Flags().StringVar(&o.ReportDir, "report-dir", "bench/out", "write ddl.json, .txt and .html here (\"\": none)")
	c.Flags().IntSliceVar(&o.Threads, "ddl-threads", o.Threads, "innodb_ddl_threads values")
	c.Flags().Int64SliceVar(&o.Buffers, "ddl-buffer-sizes", o.Buffers, "innodb_ddl_buffer_size values, bytes")
	c.Flags().IntSliceVar(&o.Reads, "read-threads", o.Reads, "innodb_parallel_read_threads values")
	c.Flags().IntVar(&o.Repeat, "repeat", 3, "fresh runs, interleaved, of the planner's choice and of the sweep's three fastest settings, compared by median")
	return c
}

func runCmd() *cobra.Command {
	var o bench.Options
	var fromJSON string
	c := &cobra.Command{
		Use:   "run",
		Short: "Time sluice against native ALTER TABLE, idle and under sysbench load, with a replica, and on other key types",
		RunE: func(c *cobra.Command, _ []string) error {
			d, err := dsn()
			if err != nil {
				return err
			}
			if fromJSON != "" {
				return bench.RedrawRace(fromJSON, o.ReportDir)
			}
			o.DSN, o.Out = d, c.OutOrStdout()
			o.Sluice = besideMe(o.Sluice)
			return bench.Run(c.Context(), o)
		},
	}
	c.Flags().IntVar(&o.Rows, "rows", 1_000_000, "sysbench table size")
	c.Flags().IntVar(&o.LoadThreads, "threads", 8, "sysbench threads")
	c.Flags().Float64Var(&o.LoadRatio, "load", 0.4, "throttled load as a fraction of the measured capacity")
	c.Flags().DurationVar(&o.Baseline, "baseline", 10*time.Second, "load before each timed ALTER")
	c.Flags().BoolVar(&o.SkipFull, "skip-unthrottled", false, "skip the runs under unthrottled load")
	c.Flags().BoolVar(&o.IdleOnly, "idle-only", false, "only the idle runs: no capacity measurement, no load")
	c.Flags().IntVar(&o.Repeat, "repeat", 1, "run every ALTER this many times, interleaved, and report medians")
	c.Flags().BoolVar(&o.SluiceOnly, "sluice-only", false, "time only F and sluice, leaving out native ALTER and the peers")
	c.Flags().StringVar(&o.Sluice, "sluice", "", "sluice binary (default: beside sluice-bench)")
	c.Flags().StringVar(&o.PtOsc, "pt-osc", "", `command running pt-online-schema-change, e.g. "scripts/sandbox.sh pt-osc" ("": leave the peer out)`)
	c.Flags().StringVar(&o.Logs, "logs", "", "keep every sluice run's output in this directory, one numbered file a run")
	c.Flags().StringSliceVar(&o.SluiceArgs, "sluice-args", nil, "extra flags for every sluice run, e.g. --sluice-args=--threads=3")
	c.Flags().StringArrayVar(&o.Baselines, "compare-with", nil, "also time this other sluice binary (e.g. an earlier commit's build) beside this one, in the same run (repeatable)")
	c.Flags().StringVar(&o.Replicas, "replicas", "", `command managing the sandbox's replicas ("CMD status|down|reset|up 1"), e.g. "scripts/sandbox.sh replicas": the other rounds run with them down, the replica round with one fresh replica, and they are put back as found at the end ("": leave the replicas alone, no replica round)`)
	c.Flags().BoolVar(&o.SkipReplica, "skip-replica", false, "leave out the replica round (the load round again with one replica attached and its lag measured)")
	c.Flags().BoolVar(&o.SkipKeys, "skip-keys", false, "leave out the key-type round (sluice on composite-key and string-key tables beside sbtest1, idle and under the bench's own load)")
	c.Flags().BoolVar(&o.SkipSysbench, "skip-sysbench-rounds", false, "leave out the sysbench rounds of sbtest1 without a replica (idle, load, unthrottled): only the key-type and replica rounds (the load's capacity is still measured)")
	c.Flags().DurationVar(&o.MaxLag, "max-lag", time.Second, "the replica round's maximum replica lag for sluice (--max-lag) and pt-online-schema-change (whole seconds)")
	c.Flags().StringVar(&o.GhOst, "gh-ost", "", `command running gh-ost ("": gh-ost on PATH, if any; "none": leave it out)`)
	c.Flags().StringVar(&o.Spirit, "spirit", "", `command running spirit ("": spirit on PATH, if any; "none": leave it out)`)
	c.Flags().StringVar(&fromJSON, "from-json", "", "draw the report again from an earlier run's race.json, running nothing")
	c.Flags().DurationVar(&o.Limit, "limit", 20*time.Minute, "stop an ALTER that has not finished by then; it is reported as not finished")
	c.Flags().StringVar(&o.ReportDir, "report-dir", "bench/out", "write the run's report here: race.json (raw results), race.txt and race.html (charts) (\"\": none)")
	c.Flags().StringArrayVar(&o.Variants, "variant", nil, `also time sluice with these flags, beside the default, in the same run (repeatable), e.g. --variant "--threads=4"`)
	return c
}

func mdlCmd() *cobra.Command {
	var o bench.MDLOptions
	c := &cobra.Command{
		Use:   "mdl",
		Short: "A long SELECT holds the table while readers query it: the worst reader latency and queue caused by native ALTER, sluice and the peers",
		RunE: func(c *cobra.Command, _ []string) error {
			d, err := dsn()
			if err != nil {
				return err
			}
			o.DSN, o.Out = d, c.OutOrStdout()
			o.Sluice = besideMe(o.Sluice)
			return bench.MDL(c.Context(), o)
		},
	}
	c.Flags().IntVar(&o.Rows, "rows", 200_000, "rows in the table")
	c.Flags().DurationVar(&o.Blocker, "blocker", 100*time.Second, "how long the blocking SELECT holds the table")
	c.Flags().IntVar(&o.Readers, "readers", 8, "reader sessions")
	c.Flags().StringVar(&o.Sluice, "sluice", "", "sluice binary (default: beside sluice-bench)")
	c.Flags().StringVar(&o.PtOsc, "pt-osc", "", `command running pt-online-schema-change, e.g. "scripts/sandbox.sh pt-osc" ("": leave the peer out)`)
	c.Flags().StringVar(&o.GhOst, "gh-ost", "", `command running gh-ost ("": gh-ost on PATH, if any; "none": leave it out)`)
	c.Flags().StringVar(&o.Spirit, "spirit", "", `command running spirit ("": spirit on PATH, if any; "none": leave it out)`)
	c.Flags().StringVar(&o.ReportDir, "report-dir", "bench/out", "write mdl.json, .txt and .html here (\"\": none)")
	return c
}

func availabilityCmd() *cobra.Command {
	var o bench.AvailabilityOptions
	c := &cobra.Command{
		Use:   "availability",
		Short: "A rate-limited write load before, during and after a column widening (INT to BIGINT, VARCHAR(60) to VARCHAR(120)): throughput and p99 a second for native ALTER, sluice and the peers",
		RunE: func(c *cobra.Command, _ []string) error {
			d, err := dsn()
			if err != nil {
				return err
			}
			o.DSN, o.Out = d, c.OutOrStdout()
			o.Sluice = besideMe(o.Sluice)
			return bench.Availability(c.Context(), o)
		},
	}
	c.Flags().IntVar(&o.Rows, "rows", 1_000_000, "rows in sbtest1")
	c.Flags().IntVar(&o.Threads, "threads", 16, "the load's clients")
	c.Flags().Float64Var(&o.Rate, "rate", 0, "the load's transactions a second (0: --load times the capacity measured first)")
	c.Flags().Float64Var(&o.Load, "load", 0.5, "the load's rate as a fraction of the capacity, when --rate is 0")
	c.Flags().DurationVar(&o.Around, "around", 10*time.Second, "the load before and after each ALTER")
	c.Flags().DurationVar(&o.Limit, "limit", 10*time.Minute, "stop a tool that has not finished by then; it is reported as not finished")
	c.Flags().StringVar(&o.Sluice, "sluice", "", "sluice binary (default: beside sluice-bench)")
	c.Flags().StringVar(&o.PtOsc, "pt-osc", "", `command running pt-online-schema-change, e.g. "scripts/sandbox.sh pt-osc" ("": leave the peer out)`)
	c.Flags().StringVar(&o.GhOst, "gh-ost", "", `command running gh-ost ("": gh-ost on PATH, if any; "none": leave it out)`)
	c.Flags().StringVar(&o.Spirit, "spirit", "", `command running spirit ("": spirit on PATH, if any; "none": leave it out)`)
	c.Flags().StringVar(&o.ReportDir, "report-dir", "bench/out", "write availability.json, .txt and .html here (\"\": none)")
	c.Flags().StringVar(&o.FromJSON, "from-json", "", "draw the report again from an earlier run's availability.json, running nothing")
	return c
}

func redoCmd() *cobra.Command {
	var o bench.RedoOptions
	c := &cobra.Command{
		Use:   "redo",
		Short: "innodb_log_writer_threads ON and OFF, with the binlog on and off, by concurrency, for an update-heavy and a read-write workload (seed 001)",
		RunE: func(c *cobra.Command, _ []string) error {
			d, err := dsn()
			if err != nil {
				return err
			}
			o.DSN, o.Out = d, c.OutOrStdout()
			return bench.Redo(c.Context(), o)
		},
	}
	c.Flags().IntVar(&o.Rows, "rows", 1_000_000, "rows in sbtest1")
	c.Flags().DurationVar(&o.Seconds, "seconds", 10*time.Second, "each point's run")
	c.Flags().IntSliceVar(&o.Concurrency, "clients", nil, "client counts (default 1, 2, 4, ... up to 4x the server's processors)")
	c.Flags().StringVar(&o.BinlogOff, "binlog-off", "", `command restarting the server without its binlog, e.g. "SLUICE_SANDBOX_BINLOG=off scripts/sandbox.sh up" ("": the current mode only)`)
	c.Flags().StringVar(&o.BinlogOn, "binlog-on", "", `command restarting it with the binlog, e.g. "scripts/sandbox.sh up"`)
	c.Flags().StringVar(&o.Replicas, "replicas", "", `command managing the sandbox's replicas: down during the runs, put back at the end ("": leave them alone)`)
	c.Flags().StringVar(&o.ReportDir, "report-dir", "bench/out", "write redo.json, .txt and .html here (\"\": none)")
	return c
}

func scaleCmd() *cobra.Command {
	var o bench.ScaleOptions
	c := &cobra.Command{
		Use:   "scale",
		Short: "sluice's idle change on sysbench tables of several sizes beside the server's own in-place rebuild, with where the time went, the slowest chunk and the ETA's error; then a skewed BIGINT key",
		RunE: func(c *cobra.Command, _ []string) error {
			d, err := dsn()
			if err != nil {
				return err
			}
			o.DSN, o.Out = d, c.OutOrStdout()
			o.Sluice = besideMe(o.Sluice)
			return bench.Scale(c.Context(), o)
		},
	}
	c.Flags().IntSliceVar(&o.Sizes, "sizes", []int{1_000_000, 5_000_000, 10_000_000}, "table sizes, rows")
	c.Flags().IntVar(&o.Repeat, "repeat", 1, "runs of each, interleaved (rebuild, sluice, rebuild, ...)")
	c.Flags().StringVar(&o.Sluice, "sluice", "", "sluice binary (default: beside sluice-bench)")
	c.Flags().StringVar(&o.Replicas, "replicas", "", `command managing the sandbox's replicas: they are down during the runs and put back at the end ("": leave them alone)`)
	c.Flags().StringVar(&o.Logs, "logs", "", "keep every sluice run's output in this directory")
	return c
}

// besideMe is bin, or the sluice binary beside sluice-bench when bin is "".
func besideMe(bin string) string {
	if bin != "" {
		return bin
	}
	exe, _ := os.Executable()
	return filepath.Join(filepath.Dir(exe), "sluice")
}
