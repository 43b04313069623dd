package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/testdb"
)

type advice struct {
	Version string
	Address string
	CPUs    int
	Binlog  bool
	Writes  struct {
		WindowSeconds float64 `json:"window_seconds"`
		Writes        float64 `json:"write_statements_per_second"`
	}
	Settings []struct {
		Name, Current, Recommended, Why string
		Change                          bool
		MemoryBytes                     int64 `json:"memory_bytes"`
	}
	Notes []string
}

func adviseOn(t *testing.T, db *testdb.DB, args ...string) (advice, run) {
	t.Helper()
	r := sluice(t, nil, append([]string{"advise", "--host", db.Server.Host, "--port", fmt.Sprint(db.Server.Port), "--user", db.Server.User, "--format", "json"}, args...)...)
	var a advice
	if r.code == 0 {
		if err := json.Unmarshal([]byte(r.stdout), &a); err != nil {
			t.Fatalf("advise's JSON: %v\n%s", err, r.stdout)
		}
	}
	return a, r
}

func (a advice) get(t *testing.T, name string) (rec int64, why string) {
	t.Helper()
	for _, s := range a.Settings {
		if s.Name == name {
			v, err := strconv.ParseInt(s.Recommended, 10, 64)
			if err != nil && name != "innodb_log_writer_threads" {
				t.Fatalf("%s recommended %q", name, s.Recommended)
			}
			return v, s.Why
		}
	}
	t.Fatalf("advise says nothing of %s: %+v", name, a)
	return 0, ""
}

// TestAdviseTwoServers: the sandbox's two MySQL servers differ in memory
// (a 2 GiB and a 256 MiB buffer pool): sized for the same 8 GiB sort, advise
// holds each to a quarter of its free pool, saying why, never past what it
// allows, and the one with less free memory lower. On MariaDB
// it says there is nothing to tune.
func TestAdviseTwoServers(t *testing.T) {
	db := testdb.New(t)
	if db.Flavor == dbconn.MariaDB {
		a, r := adviseOn(t, db, "--window", "200ms")
		if r.code != 0 || len(a.Settings) != 0 || len(a.Notes) == 0 || !strings.Contains(a.Notes[0], "MariaDB has neither") {
			t.Errorf("advise on MariaDB: exit %d, %+v\n%s", r.code, a, r.stderr)
		}
		return
	}
	alt := testdb.NewAlt(t)
	big, r := adviseOn(t, db, "--window", "200ms", "--sort-size", "8G")
	if r.code != 0 {
		t.Fatalf("advise: exit %d: %s", r.code, r.stderr)
	}
	small, r := adviseOn(t, alt, "--window", "200ms", "--sort-size", "8G")
	if r.code != 0 {
		t.Fatalf("advise on the alt server: exit %d: %s", r.code, r.stderr)
	}
	pool := func(d *testdb.DB) (size, free int64) {
		var page int64
		d.QueryRow("SELECT @@innodb_buffer_pool_size, @@innodb_page_size").Scan(&size, &page)
		d.QueryRow("SELECT VARIABLE_VALUE FROM performance_schema.global_status WHERE VARIABLE_NAME = 'Innodb_buffer_pool_pages_free'").Scan(&free)
		return size, free * page
	}
	budgets := map[string]int64{}
	for _, c := range []struct {
		name string
		a    advice
		db   *testdb.DB
	}{{"default", big, db}, {"alt", small, alt}} {
		threads, _ := c.a.get(t, "innodb_ddl_threads")
		buf, why := c.a.get(t, "innodb_ddl_buffer_size")
		size, free := pool(c.db)
		// The planner's budget, from the server's own figures: a quarter of
		// the free pool between 64 MiB and 1 GiB.
		budget := min(max(free/4, 64<<20), 1<<30)
		budgets[c.name] = budget
		t.Logf("%s: pool %d, free %d: %d threads x %d: %s", c.name, size, free, threads, buf, why)
		if threads*buf > budget*11/10 { // the free pool moves between the two reads
			t.Errorf("%s: %d threads x %d bytes over the budget %d", c.name, threads, buf, budget)
		}
		if buf < 8<<30/64 && !strings.Contains(why, "held to what fits") {
			t.Errorf("%s: a buffer below a 64th of the sort (%d) without saying the memory held it: %s", c.name, buf, why)
		}
	}
	if want := fmt.Sprintf("%s:%d", db.Server.Host, db.Server.Port); big.Address != want || big.Version == "" {
		t.Errorf("advice of %s, version %q", big.Address, big.Version)
	}
	bigBuf, _ := big.get(t, "innodb_ddl_buffer_size")
	smallBuf, _ := small.get(t, "innodb_ddl_buffer_size")
	// What holds the buffer is the free pool, not the pool: a busy 2 GiB
	// pool may have less free than the idle 256 MiB one.
	switch {
	case budgets["default"] <= budgets["alt"]:
		t.Logf("the default server's free pool allows no more than the alt's (%d, %d): the two buffers are not compared", budgets["default"], budgets["alt"])
	case smallBuf > bigBuf:
		// Equal is right too: the buffers are rounded down to a power of
		// two a thread (99 and 64 MiB for 2 threads both give 32 MiB).
		t.Errorf("the 256 MiB server got a buffer of %d, the 2 GiB one %d: the smaller free memory should hold it no higher", smallBuf, bigBuf)
	}
	if _, why := big.get(t, "innodb_log_writer_threads"); !strings.Contains(why, "binlog is on") || !big.Binlog {
		t.Errorf("the sandbox runs with the binlog: %q", why)
	}
}

// TestAdviseSeesTheWriteLoad: writes running while advise samples are
// counted: at least a good part of those an independent writer made.
func TestAdviseSeesTheWriteLoad(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE w (id INT AUTO_INCREMENT PRIMARY KEY, v INT)")
	ctx, stop := context.WithCancel(context.Background())
	var wrote atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			if _, err := db.ExecContext(ctx, "INSERT INTO w (v) VALUES (1)"); err == nil {
				wrote.Add(1)
			}
		}
	}()
	time.Sleep(200 * time.Millisecond)
	start := wrote.Load()
	t0 := time.Now()
	a, r := adviseOn(t, db, "--window", "2s", "--database", db.Name, "--table", "w")
	rate := float64(wrote.Load()-start) / time.Since(t0).Seconds()
	stop()
	wg.Wait()
	if r.code != 0 {
		t.Fatalf("advise: exit %d: %s", r.code, r.stderr)
	}
	t.Logf("the writer made %.0f inserts a second; advise saw %.0f write statements a second", rate, a.Writes.Writes)
	if rate < 5 {
		t.Skipf("the writer made only %.0f inserts a second: too few to compare", rate)
	}
	// advise's window sits inside the writer's; other tests write too.
	if a.Writes.Writes < rate/3 {
		t.Errorf("advise saw %.0f write statements a second; the writer alone made %.0f", a.Writes.Writes, rate)
	}
}

// TestAdviseBadInput: one line, exit 1.
func TestAdviseBadInput(t *testing.T) {
	db := testdb.New(t)
	conn := []string{"advise", "--host", db.Server.Host, "--port", fmt.Sprint(db.Server.Port), "--user", db.Server.User}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--table", "t"}, "without --database"},
		{[]string{"--database", db.Name, "--table", "nope"}, "no InnoDB table"},
		{[]string{"--sort-size", "lots"}, "--sort-size"},
		{[]string{"--sort-size", "nan"}, "--sort-size"},
		{[]string{"--sort-size", "0.5"}, "--sort-size"},
		{[]string{"--window", "1h"}, "--window"},
		{[]string{"--format", "xml"}, "--format"},
	} {
		r := sluice(t, nil, append(conn, c.args...)...)
		if r.code != 1 || !strings.Contains(lastLine(r.stderr), c.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("advise %v: exit %d, stderr %q; want one line with %q", c.args, r.code, r.stderr, c.want)
		}
	}
}
