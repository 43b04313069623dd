package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicedb/sluice/internal/advise"
	"github.com/sluicedb/sluice/internal/dbconn"
)

func newAdvise() *cobra.Command {
	var f migrateFlags
	var window time.Duration
	var sortSize string
	c := &cobra.Command{
		Use:   "advise",
		Short: "Recommend the server's parallel index-build and redo writer settings, with why, their memory cost and how to verify them; change nothing",
		Long: `advise reads the server's processors, memory, binlog, redo and index-build
settings, samples its write load for --window, and says which innodb_ddl_threads,
innodb_ddl_buffer_size, innodb_parallel_read_threads and innodb_log_writer_threads
it recommends, why (from the experiments sluice's benchmarks reproduce), what
each costs in memory, and the benchmark that verifies it on that server. The
index build is sized for --database/--table when given, else for the largest
table. It only reads.`,
		Example: `  sluice advise --host db1 --user dba
  sluice advise --host db1 --user dba --database shop --table orders --format json`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if c.Flags().Changed("password") {
				return errPasswordFlag
			}
			if f.format != "text" && f.format != "json" {
				return fmt.Errorf("--format %q: use text or json", f.format)
			}
			if window < 100*time.Millisecond || window > 10*time.Minute {
				return fmt.Errorf("--window %s: give between 100ms and 10m", window)
			}
			if len(f.tables) > 1 {
				return fmt.Errorf("--table given %d times: advise sizes the index build for one table", len(f.tables))
			}
			conn, database, err := connection(c, f)
			if err != nil {
				return err
			}
			target := advise.Target{Database: database}
			if len(f.tables) == 1 {
				if target.Table = f.tables[0]; database == "" {
					return fmt.Errorf("--table %s without --database: pass both, or neither to size for the largest table", target.Table)
				}
			}
			if sortSize != "" {
				if target.SortBytes, err = parseSize(sortSize); err != nil {
					return fmt.Errorf("--sort-size %q: %v", sortSize, err)
				}
			}
			if err := conn.Validate(); err != nil {
				return err
			}
			db, err := dbconn.Open(c.Context(), conn, "", 2)
			if err != nil {
				return err
			}
			defer db.Close()
			s, err := advise.Read(c.Context(), db, conn.Host, window, target)
			if err != nil {
				return err
			}
			s.Address = fmt.Sprintf("%s:%d", conn.Host, conn.Port)
			a := advise.Advise(s)
			out := c.OutOrStdout()
			if f.format == "json" {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(a)
			}
			printAdvice(out, s.Address, s, a)
			return nil
		},
	}
	serverFlags(c, &f)
	c.Flags().StringVar(&f.format, "format", "text", "text or json")
	c.Flags().DurationVar(&window, "window", 5*time.Second, "how long to sample the write load")
	c.Flags().StringVar(&sortSize, "sort-size", "", "size the index build for this many bytes of index entries, e.g. 40G (default: the data of --table, else of the largest table, which bounds them)")
	return c
}

func printAdvice(w io.Writer, addr string, s advise.Server, a advise.Advice) {
	binlog := "off"
	if a.Binlog {
		binlog = "on"
	}
	cpus := "unknown processors"
	if a.CPUs > 0 {
		cpus = fmt.Sprintf("%d processors", a.CPUs)
	}
	fmt.Fprintf(w, "%s on %s: %s, %s buffer pool (%s free), binlog %s\n", a.Version, addr, cpus, advise.Size(s.BufferPool), advise.Size(s.Facts.FreePool), binlog)
	fmt.Fprintf(w, "write load over %s: %.0f write statements and %s of redo a second; %.1f sessions running on average, %d at most\n",
		a.Writes.Window, a.Writes.WritesPerSec, advise.Size(int64(a.Writes.RedoPerSec)), a.Writes.Running, a.Writes.PeakRunning)
	for _, st := range a.Settings {
		verdict := "keep " + st.Current
		if st.Change {
			verdict = st.Current + " -> " + st.Recommended
		}
		fmt.Fprintf(w, "\n%s: %s\n  why: %s\n  memory: %s\n  where: %s\n  verify: %s\n", st.Name, verdict, st.Why, st.Memory, st.Scope, st.Verify)
	}
	for _, n := range a.Notes {
		fmt.Fprintf(w, "\nnote: %s\n", n)
	}
}

// parseSize reads a byte count with an optional K, M, G or T suffix (binary
// units, an optional trailing B or iB).
func parseSize(s string) (int64, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	t = strings.TrimSuffix(strings.TrimSuffix(t, "B"), "I")
	shift := 0
	if n := len(t); n > 0 {
		if i := strings.IndexByte("KMGT", t[n-1]); i >= 0 {
			shift, t = 10*(i+1), t[:n-1]
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsNaN(v) || v*float64(int64(1)<<shift) < 1 || v*float64(int64(1)<<shift) > 1<<60 {
		return 0, fmt.Errorf("give a positive size such as 800M or 40G")
	}
	return int64(v * float64(int64(1)<<shift)), nil
}
