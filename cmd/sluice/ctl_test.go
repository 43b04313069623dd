package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/testdb"
)

// model is an independent record of what the writers committed: id -> v.
type model struct {
	mu   sync.Mutex
	rows map[int]string
}

// write runs random single-row writes on ids [lo, hi) until ctx ends, and
// records each committed one. A statement is never cut short by ctx: one
// that committed as ctx ended is recorded like any other.
func (m *model) write(ctx context.Context, t *testing.T, db *sql.DB, seed int64, lo, hi int) {
	rng := rand.New(rand.NewSource(seed))
	for ctx.Err() == nil {
		id := lo + rng.Intn(hi-lo)
		v := fmt.Sprintf("w%d", rng.Int63())
		var err error
		switch rng.Intn(4) {
		case 0:
			_, err = db.Exec("DELETE FROM big WHERE id = ?", id)
			if err == nil {
				m.mu.Lock()
				delete(m.rows, id)
				m.mu.Unlock()
			}
		default:
			_, err = db.Exec("INSERT INTO big (id, v) VALUES (?, ?) ON DUPLICATE KEY UPDATE v = VALUES(v)", id, v)
			if err == nil {
				m.mu.Lock()
				m.rows[id] = v
				m.mu.Unlock()
			}
		}
		if err != nil {
			t.Errorf("writer: %v", err)
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// ctl runs sluice ctl on socket and returns its reply.
func ctl(t *testing.T, socket string, args ...string) run {
	t.Helper()
	return sluice(t, nil, append([]string{"ctl", "--socket", socket}, args...)...)
}

func ctlStatus(t *testing.T, socket string) map[string]any {
	t.Helper()
	r := ctl(t, socket, "status")
	var st map[string]any
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &st) != nil {
		t.Fatalf("ctl status: exit %d: %s%s", r.code, r.stdout, r.stderr)
	}
	return st
}

// shadowWrites is a server counter of the writes to the shadow table:
// performance_schema's table I/O where it is on, else the table's checksum.
func shadowWrites(t *testing.T, db *testdb.DB) string {
	t.Helper()
	var on int
	db.QueryRow("SELECT @@performance_schema").Scan(&on)
	var v string
	var err error
	if on == 1 {
		err = db.QueryRow(`SELECT CONCAT(COUNT_INSERT, '/', COUNT_UPDATE, '/', COUNT_DELETE) FROM performance_schema.table_io_waits_summary_by_table
			WHERE OBJECT_SCHEMA = ? AND OBJECT_NAME = '_big_new'`, db.Name).Scan(&v)
	} else {
		var name string
		err = db.QueryRow("CHECKSUM TABLE _big_new").Scan(&name, &v)
	}
	if err != nil {
		t.Fatalf("read the shadow's writes: %v", err)
	}
	return v
}

// copying samples the server's process list for d, or until it has seen
// enough, and returns the most copy statements seen running at once:
// INSERTs into the shadow of a key range (the apply's name keys in an IN
// list).
func copying(t *testing.T, db *testdb.DB, d time.Duration, enough int) int {
	t.Helper()
	most := 0
	for end := time.Now().Add(d); time.Now().Before(end) && most < enough; time.Sleep(time.Millisecond) {
		n := db.Processes(t, `DB = ? AND INFO LIKE 'INSERT INTO %_big_new%' AND INFO NOT LIKE '% IN (%'`, db.Name)
		most = max(most, n)
	}
	return most
}

// TestControlSocket steers a migration under concurrent writers through
// sluice ctl: postpone, a pause that stops every write of sluice's (read
// from the server's counters), threads changed while the copy runs (read
// from the server's process list), resume, cutover. The table ends equal to
// the writers' own record.
func TestControlSocket(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE big (id INT PRIMARY KEY, v VARCHAR(40), pad CHAR(100) NOT NULL DEFAULT '')")
	db.Fill(t, "big", 100000, "n, CONCAT('v', n), ''")
	for k := 1; k <= 3; k++ {
		db.MustExec(t, fmt.Sprintf("INSERT INTO big SELECT id + %d, CONCAT('v', id + %d), '' FROM big WHERE id <= 100000", 100000*k, 100000*k))
	}
	m := &model{rows: map[int]string{}}
	for id := 1; id <= 400000; id++ {
		m.rows[id] = fmt.Sprintf("v%d", id)
	}
	socket := filepath.Join(t.TempDir(), "run.sock")
	// The copy waits on the throttle flag until the test has paused it: a
	// fast server (or slow ctl calls under the race detector) would
	// otherwise copy most rows before the first pause.
	hold := filepath.Join(t.TempDir(), "hold")
	if err := os.WriteFile(hold, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	args := append(target(db, "big"), "--alter", "ADD COLUMN x INT", "--method", "copy", "--threads", "4", "--chunk-time", "10ms",
		"--control-socket", socket, "--replica-discovery=false", "--throttle-flag-file", hold)
	args = slices.DeleteFunc(args, func(s string) bool { return s == "--quiet" })
	cmd := exec.Command(binary, args...)
	var outBuf, errBuf testdb.SyncBuffer
	cmd.Stdout, cmd.Stderr = &outBuf, &errBuf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() { defer wg.Done(); m.write(ctx, t, db.DB, int64(w+1), 1+w*200000, 200000+w*200000+500) }()
	}
	defer func() { stop(); wg.Wait() }()

	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(socket); err == nil && ctlStatus(t, socket)["phase"] == "copy" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the copy never started:\n%s", errBuf.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if fi, err := os.Stat(socket); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket %v, %v; want mode 0600", fi, err)
	}
	// A true pause: nothing is written to the shadow while the writers go on.
	if r := ctl(t, socket, "pause"); r.code != 0 || !strings.Contains(r.stdout, "paused during copy") {
		t.Fatalf("ctl pause: exit %d: %s%s", r.code, r.stdout, r.stderr)
	}
	if err := os.Remove(hold); err != nil { // from here only the pause holds the copy
		t.Fatal(err)
	}
	if r := ctl(t, socket, "postpone"); r.code != 0 || !strings.Contains(r.stdout, "postponed") {
		t.Fatalf("ctl postpone: exit %d: %s%s", r.code, r.stdout, r.stderr)
	}
	if r := ctl(t, socket, "set", "threads=0"); r.code != 1 || !strings.Contains(r.stderr, "1 to 64") {
		t.Errorf("set threads=0: exit %d: %s", r.code, r.stderr)
	}

	before, st0 := shadowWrites(t, db), ctlStatus(t, socket)
	time.Sleep(2 * time.Second)
	after, st1 := shadowWrites(t, db), ctlStatus(t, socket)
	if before != after {
		t.Errorf("the shadow was written while paused: %s, then %s", before, after)
	}
	if st0["rows_copied"] != st1["rows_copied"] || st0["applied"] != st1["applied"] || st1["paused"] != true {
		t.Errorf("status while paused: %v, then %v", st0, st1)
	}
	if st1["rows_copied"].(float64) >= 400000 {
		t.Fatalf("the copy ended before the pause; the test proves nothing (%v rows)", st1["rows_copied"])
	}
	if st1["backlog"].(float64) <= st0["backlog"].(float64) {
		t.Errorf("the backlog did not grow in 2s of writes while paused (%v, then %v): the changes are not read meanwhile", st0["backlog"], st1["backlog"])
	}

	// Threads: one copy statement at a time, then four; short chunks keep
	// the copy going while it is measured.
	for _, set := range []string{"threads=1", "chunk-time=2ms"} {
		if r := ctl(t, socket, "set", set); r.code != 0 || !strings.Contains(r.stdout, set) {
			t.Fatalf("set %s: exit %d: %s%s", set, r.code, r.stdout, r.stderr)
		}
	}
	if st := ctlStatus(t, socket); st["threads"] != 1.0 || st["chunk_time_seconds"] != 0.002 {
		t.Errorf("status after set: threads %v, chunk time %v", st["threads"], st["chunk_time_seconds"])
	}
	if r := ctl(t, socket, "resume"); r.code != 0 || !strings.Contains(r.stdout, "resumed") {
		t.Fatalf("ctl resume: exit %d: %s%s", r.code, r.stdout, r.stderr)
	}
	one := copying(t, db, 400*time.Millisecond, 2)
	// Paused while threads go up, so that a fast server's copy is not over
	// before it is measured again.
	if r := ctl(t, socket, "pause"); r.code != 0 {
		t.Fatalf("pause: %s", r.stderr)
	}
	// Long chunks now: four 2 ms statements rarely overlap in a sample of
	// the process list, and a fast server's copy would be over first.
	for _, set := range []string{"threads=4", "chunk-time=100ms"} {
		if r := ctl(t, socket, "set", set); r.code != 0 {
			t.Fatalf("set %s: %s", set, r.stderr)
		}
	}
	if r := ctl(t, socket, "resume"); r.code != 0 {
		t.Fatalf("resume: %s", r.stderr)
	}
	four := copying(t, db, 1500*time.Millisecond, 2)
	if ph := ctlStatus(t, socket)["phase"]; four < 2 && ph != "copy" {
		t.Fatalf("the copy ended while threads were measured (phase %v); the test proves nothing", ph)
	}
	if one != 1 || four < 2 {
		t.Errorf("copy statements at once: %d with threads=1 (want 1), %d with threads=4 (want 2 or more)", one, four)
	}

	for ctlStatus(t, socket)["phase"] != "postponed" {
		if time.Now().After(deadline.Add(60 * time.Second)) {
			t.Fatalf("never reached the postponed cut-over:\n%s", errBuf.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	wg.Wait()
	if r := ctl(t, socket, "cutover"); r.code != 0 || !strings.Contains(r.stdout, "triggered") {
		t.Fatalf("ctl cutover: exit %d: %s%s", r.code, r.stdout, r.stderr)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("migrate: %v\n%s", err, errBuf.String())
	}
	if !strings.Contains(outBuf.String(), "paused") {
		t.Errorf("the summary does not count the pause: %s", outBuf.String())
	}
	if _, err := os.Stat(socket); !os.IsNotExist(err) {
		t.Errorf("the socket outlived the run: %v", err)
	}
	got := map[int]string{}
	rows, err := db.Query("SELECT id, v FROM big")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id int
		var v string
		rows.Scan(&id, &v)
		got[id] = v
	}
	rows.Close()
	if len(got) != len(m.rows) {
		t.Errorf("%d rows, the writers' record has %d", len(got), len(m.rows))
	}
	for id, v := range m.rows {
		if got[id] != v {
			t.Fatalf("row %d is %q, the writers wrote %q", id, got[id], v)
		}
	}
}

// TestControlAbort: a stale socket file is replaced, a second run of the
// same socket is refused, and abort stops the run with the original as it
// was.
func TestControlAbort(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE big (id INT PRIMARY KEY, v VARCHAR(200))")
	db.Fill(t, "big", 60000, "n, REPEAT('v', 200)")
	before := fmt.Sprint(db.Dump(t, "big", "*", "id"))
	socket := filepath.Join(t.TempDir(), "run.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: socket, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close() // a dead run's socket file
	args := append(target(db, "big"), "--alter", "ADD COLUMN x INT", "--method", "copy", "--chunk-time", "1ms", "--threads", "1",
		"--control-socket", socket, "--replica-discovery=false")
	args = slices.DeleteFunc(args, func(s string) bool { return s == "--quiet" })
	cmd, _, errBuf := startMigrate(t, args, "copy", false)
	if !strings.Contains(errBuf.String(), "replaced=") {
		t.Errorf("the log does not say the stale socket was replaced:\n%s", errBuf.String())
	}
	second := sluice(t, nil, args...)
	if second.code != 1 || !strings.Contains(second.stderr, "another sluice run uses "+socket) {
		t.Errorf("a second run on the live socket: exit %d: %s", second.code, second.stderr)
	}
	if r := ctl(t, socket, "abort"); r.code != 0 || !strings.Contains(r.stdout, "aborting") {
		t.Fatalf("ctl abort: exit %d: %s%s", r.code, r.stdout, r.stderr)
	}
	stoppedUntouched(t, db, cmd.Wait(), errBuf.String(), "big", before, "aborted by the operator")
}

// TestProgressBar: --progress-style bar draws one live bar (phase, rows,
// rate, backlog) in place of the periodic progress lines; --progress-style
// lines keeps the lines.
func TestProgressBar(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE big (id INT PRIMARY KEY, v VARCHAR(200))")
	db.Fill(t, "big", 60000, "n, REPEAT('v', 200)")
	for i, style := range []string{"bar", "lines"} {
		args := append(target(db, "big"), "--alter", fmt.Sprintf("ADD COLUMN x%d INT", i), "--method", "copy", "--chunk-time", "1ms",
			"--threads", "1", "--progress-interval", "200ms", "--progress-style", style, "--drop-old", "--replica-discovery=false")
		args = slices.DeleteFunc(args, func(s string) bool { return s == "--quiet" })
		r := sluice(t, nil, args...)
		if r.code != 0 {
			t.Fatalf("%s: exit %d: %s", style, r.code, r.stderr)
		}
		bar := strings.Contains(r.stderr, "copy | ") && regexp.MustCompile(`\(\d+/\d+, \d+ rows/s\)`).MatchString(r.stderr)
		lines := strings.Contains(r.stderr, "msg=progress")
		if style == "bar" && (!bar || lines) || style == "lines" && (bar || !lines) {
			t.Errorf("--progress-style %s: bar drawn %v, progress lines %v:\n%.2000s", style, bar, lines, r.stderr)
		}
	}
}
