// Package advise recommends the InnoDB settings the seeds' experiments
// tune: a parallel index build's (innodb_ddl_threads,
// innodb_ddl_buffer_size, innodb_parallel_read_threads) and the redo log's
// dedicated writer threads (innodb_log_writer_threads). Advise is pure: it
// decides from a Server the caller read (Read does, on a live server).
package advise

import (
	"fmt"
	"strings"
	"time"

	"github.com/sluicedb/sluice/internal/plan"
)

// Server is what a server says of itself, as Advise needs it.
type Server struct {
	Address string
	Facts   plan.Facts // version, processors, free buffer pool
	// BufferPool is innodb_buffer_pool_size.
	BufferPool int64
	Binlog     bool
	// Current holds the global value of every advised variable the server
	// has; a variable it lacks is absent.
	Current map[string]string
	Writes  Activity
	// SortBytes is the size of the index build the DDL settings are sized
	// for, SortWhat says what it is ("the largest table, shop.orders").
	SortBytes int64
	SortWhat  string
}

// Activity is the write load sampled over Window.
type Activity struct {
	Window        time.Duration `json:"-"`
	WindowSeconds float64       `json:"window_seconds"`
	WritesPerSec  float64       `json:"write_statements_per_second"`
	RedoPerSec    float64       `json:"redo_bytes_per_second"`
	Running       float64       `json:"threads_running_mean"` // the sampler's own session left out
	PeakRunning   int           `json:"threads_running_peak"`
}

// Setting is one recommendation.
type Setting struct {
	Name        string `json:"name"`
	Current     string `json:"current"`
	Recommended string `json:"recommended"`
	Change      bool   `json:"change"`
	Why         string `json:"why"`
	// Memory is what the recommended value costs, in words; MemoryBytes
	// the bytes it may allocate (0: negligible).
	Memory      string `json:"memory"`
	MemoryBytes int64  `json:"memory_bytes"`
	// Scope says where it is set; Verify the command that measures it on
	// this server.
	Scope  string `json:"scope"`
	Verify string `json:"verify"`
}

// Advice is Advise's answer.
type Advice struct {
	Version  string    `json:"version"`
	Address  string    `json:"address"`
	CPUs     int       `json:"cpus"`
	Binlog   bool      `json:"binlog"`
	Writes   Activity  `json:"writes"`
	Settings []Setting `json:"settings"`
	Notes    []string  `json:"notes,omitempty"`
}

// Write-heavy thresholds: a load past either is write-intensive in the sense
// of seed 001 (without the binlog, dedicated redo writers then pay even on
// few cores).
const (
	heavyWrites = 2000    // write statements a second
	heavyRedo   = 8 << 20 // redo bytes a second
	manyCores   = 16      // seed 001: past 16 cores, keep the writers ON
	ddlVerify   = "sluice-bench ddl (make bench-ddl on the sandbox): times index builds over a sweep of these settings beside this choice"
	redoVerify  = "sluice-bench redo (make bench-redo on the sandbox): sysbench throughput with the writer threads ON and OFF at rising concurrency"
)

// Advise recommends settings for s.
func Advise(s Server) Advice {
	a := Advice{Version: s.Facts.Version, Address: s.Address, CPUs: s.Facts.CPUs, Binlog: s.Binlog, Writes: s.Writes}
	if s.Facts.Server.MariaDB {
		a.Notes = append(a.Notes, "MariaDB has neither InnoDB's parallel index build (innodb_ddl_threads, innodb_ddl_buffer_size, innodb_parallel_read_threads) nor dedicated redo writer threads (innodb_log_writer_threads): nothing here to tune. Its index builds sort in innodb_sort_buffer_size, one thread each.")
		return a
	}
	a.Settings = append(a.Settings, ddlSettings(s, &a)...)
	if w, ok := logWriters(s); ok {
		a.Settings = append(a.Settings, w)
	} else {
		a.Notes = append(a.Notes, "this server has no innodb_log_writer_threads (MySQL 8.0.22 and later have): the redo log is written as it is")
	}
	return a
}

// ddlSettings sizes an index build as sluice's planner does (plan.TuneDDL)
// for s.SortBytes within the planner's memory budget.
func ddlSettings(s Server, a *Advice) []Setting {
	cpus := s.Facts.CPUs
	if cpus <= 0 {
		a.Notes = append(a.Notes, "the server's processors are unknown (no access to information_schema.RESOURCE_GROUPS and not local): the index build is sized for 4")
	}
	budget := s.Facts.DDLMemory()
	d := plan.TuneDDL(cpus, s.SortBytes, budget)
	var out []Setting
	scope := "session: sluice sets it for each index build it runs; SET GLOBAL makes native ALTERs use it too"
	if cur, ok := s.Current["innodb_ddl_threads"]; ok {
		why := fmt.Sprintf("one sort thread per processor (%d processors), at most 8: the seeds' sweeps (000, 004) gain little past 8 threads", cpus)
		if cpus <= 0 {
			why = "4 sort threads: the processors are unknown"
		}
		out = append(out, Setting{Name: "innodb_ddl_threads", Current: cur, Recommended: fmt.Sprint(d.Threads), Why: why,
			Memory: "counted with innodb_ddl_buffer_size (up to threads x buffer)",
			Scope:  scope, Verify: ddlVerify})
	} else {
		a.Notes = append(a.Notes, "this server has no innodb_ddl_threads or innodb_ddl_buffer_size (MySQL 8.0.27 and later have): its index builds sort in innodb_sort_buffer_size, one thread each")
	}
	if cur, ok := s.Current["innodb_ddl_buffer_size"]; ok {
		var why string
		switch {
		case s.SortBytes/64 > d.BufferBytes: // TuneDDL stopped at the budget
			why = fmt.Sprintf("a 64th of the build's sort (%s, %s) would be %s; held to what fits the memory sluice allows an index build, a quarter of the free buffer pool (%s free) between 64 MiB and 1 GiB: %s for %d threads",
				Size(s.SortBytes), s.SortWhat, Size(s.SortBytes/64), Size(s.Facts.FreePool), Size(budget), d.Threads)
		case d.BufferBytes == 1<<20:
			why = fmt.Sprintf("the smallest buffer, 1 MiB: the build's sort (%s, %s) is small, and a larger buffer bought nothing on the sandbox (make bench-ddl)", Size(s.SortBytes), s.SortWhat)
		default:
			why = fmt.Sprintf("a 64th of the build's sort (%s, %s), so that the merge has at most 64 runs a thread", Size(s.SortBytes), s.SortWhat)
		}
		out = append(out, Setting{Name: "innodb_ddl_buffer_size", Current: cur, Recommended: fmt.Sprint(d.BufferBytes), Why: why,
			Memory: fmt.Sprintf("up to %s a sort thread, %s with %d threads and a MiB of overhead, allocated only while an index builds (make bench-ddl measured threads x buffer; the manual divides the buffer among the threads)", Size(d.BufferBytes), Size(d.Memory()), d.Threads), MemoryBytes: d.Memory(),
			Scope: scope, Verify: ddlVerify})
	}
	// Index builds read in parallel only where innodb_ddl_threads exists
	// (8.0.27); before, the variable serves CHECK TABLE and COUNT(*) alone.
	_, ddlThreads := s.Current["innodb_ddl_threads"]
	if cur, ok := s.Current["innodb_parallel_read_threads"]; ok && ddlThreads {
		out = append(out, Setting{Name: "innodb_parallel_read_threads", Current: cur, Recommended: fmt.Sprint(d.ReadThreads),
			Why:    fmt.Sprintf("one reader per processor (%d processors), at most 8: the build reads the clustered index in parallel; on the 2-core sandbox the read threads mattered most", cpus),
			Memory: "negligible (a few pages a thread)", Scope: scope, Verify: ddlVerify})
	}
	for i := range out {
		out[i].Change = out[i].Current != out[i].Recommended
	}
	return out
}

// logWriters decides innodb_log_writer_threads as seed 001 found: with the
// binlog on, OFF on up to 16 cores, whatever the concurrency; without it, ON
// for a write-intensive load even on few cores; past 16 cores, ON.
func logWriters(s Server) (Setting, bool) {
	cur, ok := s.Current["innodb_log_writer_threads"]
	if !ok {
		return Setting{}, false
	}
	st := Setting{Name: "innodb_log_writer_threads", Current: onOff(cur), Memory: "negligible (two threads)",
		Scope: "global, dynamic: SET PERSIST innodb_log_writer_threads = ...", Verify: redoVerify}
	cpus, w := s.Facts.CPUs, s.Writes
	heavy := w.WritesPerSec >= heavyWrites || w.RedoPerSec >= heavyRedo
	load := fmt.Sprintf("%.0f write statements and %s of redo a second over %s, %.1f sessions running on average", w.WritesPerSec, Size(int64(w.RedoPerSec)), w.Window.Round(time.Millisecond), w.Running)
	switch {
	case cpus <= 0:
		st.Recommended = st.Current
		st.Why = "the server's processors are unknown: keep it; seed 001 found OFF better on up to 16 cores with the binlog on"
	case cpus > manyCores:
		st.Recommended = "ON"
		st.Why = fmt.Sprintf("%d processors: past 16 cores seed 001 found the gap between ON and OFF small and ON the safer choice", cpus)
	case s.Binlog:
		st.Recommended = "OFF"
		st.Why = fmt.Sprintf("the binlog is on and the server has %d processors (up to 16): seed 001 found OFF generally faster there, at low and high concurrency alike (%s)", cpus, load)
	case heavy:
		st.Recommended = "ON"
		st.Why = fmt.Sprintf("the binlog is off and the load is write-intensive (%s; at least %d statements or %s a second): seed 001 found the dedicated writers pay even on few cores", load, heavyWrites, Size(heavyRedo))
	default:
		st.Recommended = "OFF"
		st.Why = fmt.Sprintf("the binlog is off and the load writes little (%s): user threads that already hold a processor write the redo faster than handing it to dedicated threads on %d cores", load, cpus)
	}
	st.Change = st.Current != st.Recommended
	return st, true
}

func onOff(v string) string {
	switch strings.ToUpper(v) {
	case "1", "ON":
		return "ON"
	case "0", "OFF":
		return "OFF"
	}
	return v
}

// Size is n bytes in binary units.
func Size(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.0f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
