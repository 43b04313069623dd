package advise

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/plan"
)

func server(cpus int, binlog bool, writes float64) Server {
	return Server{
		Facts:     plan.Facts{Version: "8.4.3", Server: plan.ParseServer("8.4.3"), CPUs: cpus, FreePool: 4 << 30},
		Binlog:    binlog,
		Current:   map[string]string{"innodb_ddl_threads": "4", "innodb_ddl_buffer_size": "1048576", "innodb_parallel_read_threads": "4", "innodb_log_writer_threads": "ON"},
		Writes:    Activity{Window: 5 * time.Second, WritesPerSec: writes},
		SortBytes: 1 << 30, SortWhat: "a table",
	}
}

func setting(t *testing.T, a Advice, name string) Setting {
	t.Helper()
	for _, s := range a.Settings {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no %s in %+v", name, a.Settings)
	return Setting{}
}

// TestLogWriters: seed 001's findings, case by case, each with its reason.
func TestLogWriters(t *testing.T) {
	for _, c := range []struct {
		name        string
		s           Server
		want, cause string
	}{
		{"binlog on, 8 cores, idle", server(8, true, 0), "OFF", "binlog is on"},
		{"binlog on, 16 cores, heavy", server(16, true, 1e5), "OFF", "binlog is on"},
		{"binlog on, 32 cores", server(32, true, 0), "ON", "past 16 cores"},
		{"binlog off, 4 cores, heavy writes", server(4, false, 5000), "ON", "write-intensive"},
		{"binlog off, 4 cores, light", server(4, false, 10), "OFF", "writes little"},
		{"binlog off, 64 cores, light", server(64, false, 10), "ON", "past 16 cores"},
		{"unknown cores", server(0, true, 0), "ON", "unknown"},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := setting(t, Advise(c.s), "innodb_log_writer_threads")
			if st.Recommended != c.want || !strings.Contains(st.Why, c.cause) {
				t.Errorf("recommended %s (%s), want %s for %q", st.Recommended, st.Why, c.want, c.cause)
			}
			if st.Change != (st.Recommended != "ON") {
				t.Errorf("change %v for ON -> %s", st.Change, st.Recommended)
			}
		})
	}
	heavyRedoOnly := server(4, false, 0)
	heavyRedoOnly.Writes.RedoPerSec = 20 << 20
	if st := setting(t, Advise(heavyRedoOnly), "innodb_log_writer_threads"); st.Recommended != "ON" {
		t.Errorf("20 MiB of redo a second without the binlog: %s", st.Recommended)
	}
	numeric := server(4, true, 0)
	numeric.Current["innodb_log_writer_threads"] = "0"
	if st := setting(t, Advise(numeric), "innodb_log_writer_threads"); st.Current != "OFF" || st.Change {
		t.Errorf("a current value of 0 reads as %q, change %v", st.Current, st.Change)
	}
}

// TestServersWithoutTheSettings: MariaDB has none of them; MySQL before
// 8.0.27 has no innodb_ddl_*; each gap is said, not advised.
func TestServersWithoutTheSettings(t *testing.T) {
	m := server(8, true, 0)
	m.Facts.Version, m.Facts.Server = "11.8.3-MariaDB", plan.ParseServer("11.8.3-MariaDB")
	a := Advise(m)
	if len(a.Settings) != 0 || len(a.Notes) != 1 || !strings.Contains(a.Notes[0], "MariaDB has neither") {
		t.Errorf("MariaDB: %+v", a)
	}
	old := server(8, true, 0)
	delete(old.Current, "innodb_ddl_threads")
	delete(old.Current, "innodb_ddl_buffer_size")
	delete(old.Current, "innodb_log_writer_threads")
	a = Advise(old)
	if len(a.Settings) != 0 || len(a.Notes) != 2 {
		t.Errorf("a server without innodb_ddl_* (its index builds do not read in parallel) and the writer threads: %+v", a)
	}
}

// TestDDLWithinMemory: for random processors, free memory and sort sizes
// (seed printed), the build's settings stay within the planner's budget
// (beyond the 1 MiB floor), the buffer reaches a 64th of the sort unless the
// budget stops it and the reason says which, and threads follow the
// processors up to 8.
func TestDDLWithinMemory(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 3))
	for range 3000 {
		s := server(1+rng.IntN(96), rng.IntN(2) == 0, 0)
		s.Facts.FreePool = rng.Int64N(64 << 30)
		s.SortBytes = rng.Int64N(1 << 40)
		a := Advise(s)
		threads, buf := setting(t, a, "innodb_ddl_threads"), setting(t, a, "innodb_ddl_buffer_size")
		var n, b int64
		parse(t, threads.Recommended, &n)
		parse(t, buf.Recommended, &b)
		budget := s.Facts.DDLMemory()
		if n != int64(min(s.Facts.CPUs, 8)) {
			t.Fatalf("seed %d: %d processors -> %d threads", seed, s.Facts.CPUs, n)
		}
		if b > 1<<20 && b*n > budget {
			t.Fatalf("seed %d: %d threads x %d bytes over the budget %d", seed, n, b, budget)
		}
		capped := b < s.SortBytes/64
		if capped != strings.Contains(buf.Why, "held to what fits") {
			t.Fatalf("seed %d: buffer %d for a sort of %d (budget %d), reason %q", seed, b, s.SortBytes, budget, buf.Why)
		}
		if threads.MemoryBytes != 0 || buf.MemoryBytes < b*n {
			t.Fatalf("seed %d: memory %d / %d for %d x %d (counted once, on the buffer)", seed, buf.MemoryBytes, threads.MemoryBytes, n, b)
		}
	}
}

func parse(t *testing.T, s string, v *int64) {
	t.Helper()
	var err error
	if *v, err = strconv.ParseInt(s, 10, 64); err != nil {
		t.Fatalf("%q: %v", s, err)
	}
}
