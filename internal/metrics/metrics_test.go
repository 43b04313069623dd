package metrics

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/testdb"
	"github.com/sluicedb/sluice/migration"
)

// scrape returns the endpoint's metrics as "name{labels}" -> value.
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "sluice_") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// TestMetricsOfARun serves a real migration's metrics and scrapes them while
// its cut-over is postponed, after rows are changed, and once it is done:
// the names the README lists are there, labelled with the table, and their
// values agree with the server (the rows copied with COUNT(*)).
func TestMetricsOfARun(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE t (id INT PRIMARY KEY, v INT)")
	db.Fill(t, "t", 20000, "n, n")
	l, err := Listen(":0")
	if err != nil {
		t.Fatal(err)
	}
	if ip := l.Addr().(*net.TCPAddr).IP; !ip.IsLoopback() {
		t.Fatalf(":0 listens on %v, want the loopback address", ip)
	}
	board := &Board{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go Serve(ctx, l, board, slog.New(slog.NewTextHandler(io.Discard, nil)))
	url := "http://" + l.Addr().String() + "/metrics"
	if got := scrape(t, url); len(got) != 0 {
		t.Fatalf("metrics before any run: %v", got)
	}
	lbl := `database="` + db.Name + `",table="t"`
	// with returns the labels with one more, in the exposition's order
	// (sorted by name).
	with := func(name, value string) string {
		return `database="` + db.Name + `",` + name + `="` + value + `",table="t"`
	}
	var during map[string]float64
	cfg := migration.Config{Conn: db.Server, Database: db.Name, Table: "t", Alter: "MODIFY v BIGINT", Method: "copy",
		PostponeCutover: true, ChunkTime: 20 * time.Millisecond, Observe: board.Add}
	cfg.OnPhase = func(phase string) {
		if phase != "postponed" {
			return
		}
		if _, err := db.Exec("UPDATE t SET v = -v WHERE id <= 10"); err != nil {
			t.Error(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for during = scrape(t, url); during["sluice_changes_applied_total{"+lbl+"}"] < 10 && time.Now().Before(deadline); during = scrape(t, url) {
			time.Sleep(50 * time.Millisecond)
		}
		if err := migration.TriggerCutover(context.Background(), db.DB, db.Name, "t"); err != nil {
			t.Error(err)
		}
	}
	r, err := migration.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	var rows float64
	if err := db.QueryRow("SELECT COUNT(*) FROM t").Scan(&rows); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]float64{
		"sluice_phase{" + with("phase", "postponed") + "}": 1,
		"sluice_rows_copied_total{" + lbl + "}":            rows,
		"sluice_paused{" + lbl + "}":                       0,
	} {
		if got, ok := during[name]; !ok || got != want {
			t.Errorf("while postponed, %s = %v (present %v), want %v", name, got, ok, want)
		}
	}
	for _, name := range []string{"rows_estimated", "copy_eta_seconds", "apply_backlog", "binlog_lag_seconds",
		"lock_attempts_total", "lock_wait_longest_seconds", "copy_threads", "chunk_time_seconds"} {
		if _, ok := during["sluice_"+name+"{"+lbl+"}"]; !ok {
			t.Errorf("while postponed, sluice_%s is missing: %v", name, during)
		}
	}
	if during["sluice_changes_applied_total{"+lbl+"}"] < 10 {
		t.Errorf("10 rows changed while postponed, %v applied", during["sluice_changes_applied_total{"+lbl+"}"])
	}
	for _, reason := range []string{"replica_lag", "other"} {
		if _, ok := during["sluice_throttled_seconds_total{"+with("reason", reason)+"}"]; !ok {
			t.Errorf("sluice_throttled_seconds_total for %s is missing", reason)
		}
	}
	if _, ok := during["sluice_replica_lag_seconds{"+lbl+"}"]; ok {
		t.Error("a replica lag is served though no replica is watched")
	}
	after := scrape(t, url)
	if after["sluice_lock_attempts_total{"+lbl+"}"] < 1 || after["sluice_phase{"+with("phase", "cut-over")+"}"] != 1 {
		t.Errorf("after the swap: %v", after)
	}
}
