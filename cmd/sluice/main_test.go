package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/testdb"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sluice-cli")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "sluice")
	args := []string{"build", "-o", binary}
	if raceBuild {
		args = append(args, "-race") // the race detector watches the runs the tests start too
	}
	if out, err := exec.Command("go", append(args, ".")...).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build sluice: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type run struct {
	code           int
	stdout, stderr string
}

func sluice(t *testing.T, env []string, args ...string) run {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), env...)
	var o, e testdb.SyncBuffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// A run that hangs is stopped with SIGQUIT, which makes Go print every
	// goroutine's stack: the test fails saying where, not at the package's
	// timeout with nothing of the child's.
	hung := time.AfterFunc(runLimit, func() { cmd.Process.Signal(syscall.SIGQUIT) })
	err := cmd.Wait()
	if !hung.Stop() {
		t.Fatalf("sluice %s ran longer than %s; its stacks:\n%s", strings.Join(args, " "), runLimit, e.String())
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return run{code, o.String(), e.String()}
}

// runLimit bounds one run of sluice in these tests; none takes a minute.
const runLimit = 8 * time.Minute

func target(db *testdb.DB, table string) []string {
	return []string{"migrate", "--host", db.Server.Host, "--port", fmt.Sprint(db.Server.Port), "--user", db.Server.User,
		"--database", db.Name, "--table", table, "--quiet"}
}

// lastLine returns stderr's last line: the error sluice prints.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func TestBadInputOneLineExitOne(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE ok (id INT PRIMARY KEY, v INT)", "CREATE TABLE nopk (v INT)",
		"INSERT INTO ok VALUES (1, 1), (2, 2)")
	groupRefused := "no primary key"
	if db.Flavor == dbconn.MariaDB {
		// Both tables are refused there (a group, or no primary key), and
		// either refusal may come first; TestGroupCommand checks MariaDB's.
		groupRefused = "preflight: "
	}
	cases := []struct {
		name string
		args []string
		env  []string
		want string
	}{
		{"unknown table", append(target(db, "nope"), "--alter", "ADD COLUMN x INT"), nil, "does not exist"},
		{"malformed alter", append(target(db, "ok"), "--alter", "ADD COLUMN"), nil, "cannot parse the ALTER clause"},
		{"alter the server refuses", append(target(db, "ok"), "--alter", "ADD COLUMN v INT"), nil, "does not apply"},
		{"no primary key", append(target(db, "nopk"), "--alter", "MODIFY v BIGINT"), nil, "no primary key"},
		{"no primary key, copy forced", append(target(db, "nopk"), "--alter", "ADD COLUMN x INT", "--method", "copy"), nil, "no primary key"},
		{"bad method", append(target(db, "ok"), "--alter", "ADD COLUMN x INT", "--method", "fast"), nil, "use auto, instant, inplace or copy"},
		{"unapproved risk", append(target(db, "ok"), "--alter", "DROP COLUMN v"), nil, "--approve=drop-column"},
		{"algorithm in the alter", append(target(db, "ok"), "--alter", "ADD COLUMN x INT, ALGORITHM=COPY"), nil, "leave them out"},
		{"no alter", target(db, "ok"), nil, "no ALTER given"},
		{"password on the command line", append(target(db, "ok"), "--alter", "ADD COLUMN x INT", "--password", "secret"), nil, "not accepted on the command line"},
		{"password in the DSN", []string{"migrate", "--dsn", "u:secret@tcp(127.0.0.1:1)/d", "--table", "ok", "--alter", "ADD COLUMN x INT"}, nil, "holds a password"},
		{"wrong password", []string{"migrate", "--host", db.Server.Host, "--port", fmt.Sprint(db.Server.Port), "--user", "sluice",
			"--database", db.Name, "--table", "ok", "--alter", "ADD COLUMN x INT"}, []string{"MYSQL_PWD=wrong-password"}, "access denied"},
		{"unknown flag", []string{"migrate", "--nope"}, nil, "unknown flag"},
		{"bad --max-load", append(target(db, "ok"), "--alter", "ADD COLUMN x INT", "--method", "copy", "--max-load", "Threads_running"), nil, `--max-load: "Threads_running" is not Name=N`},
		{"unknown status variable", append(target(db, "ok"), "--alter", "ADD COLUMN x INT", "--method", "copy", "--critical-load", "Threads_runing=50"), nil, "no global status variable Threads_runing"},
		{"bad tls mode", append(target(db, "ok"), "--alter", "ADD COLUMN x INT", "--tls", "maybe"), nil, `tls="maybe" is not one of`},
		{"bad --log-format", append(target(db, "ok"), "--alter", "ADD COLUMN x INT", "--log-format", "xml"), nil, `--log-format "xml": use text or json`},
		{"bad --metrics-addr", append(target(db, "ok"), "--alter", "ADD COLUMN x INT", "--metrics-addr", "9104"), nil, `--metrics-addr "9104": want HOST:PORT`},
		{"a group's table without its alter", append(target(db, "ok"), "--alter", "ADD COLUMN x INT", "--table", "nopk"), nil, "give one --alter for each --table"},
		{"a group names a table twice", append(target(db, "ok"), "--alter", "ADD COLUMN x INT", "--table", "ok", "--alter", "ADD COLUMN y INT"), nil, "named twice"},
		{"a group with a table it cannot copy", append(target(db, "ok"), "--alter", "ADD COLUMN x INT", "--table", "nopk", "--alter", "ADD COLUMN x INT"), nil, groupRefused},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := sluice(t, c.env, c.args...)
			if r.code != 1 {
				t.Errorf("exit code %d, want 1; stderr:\n%s", r.code, r.stderr)
			}
			line := lastLine(r.stderr)
			if !strings.HasPrefix(line, "sluice: ") || !strings.Contains(line, c.want) {
				t.Errorf("last line %q, want it to contain %q", line, c.want)
			}
			if strings.Contains(r.stderr+r.stdout, "secret") || strings.Contains(r.stderr+r.stdout, "wrong-password") {
				t.Errorf("a password shows in the output:\n%s", r.stderr)
			}
			if tables := db.Tables(t); !slices.Equal(tables, []string{"nopk", "ok"}) {
				t.Errorf("leftovers: %v", tables)
			}
		})
	}
}

func TestPasswordFromFileAndOptionFile(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE t1 (id INT PRIMARY KEY, v INT)", "INSERT INTO t1 VALUES (1, 1)")
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	os.WriteFile(pw, []byte("sluice-sandbox\n"), 0o600)
	cnf := filepath.Join(dir, "my.cnf")
	os.WriteFile(cnf, []byte(fmt.Sprintf("[client]\nuser = sluice\npassword = \"sluice-sandbox\"\nhost=%s\nport=%d\n", db.Server.Host, db.Server.Port)), 0o600)

	base := []string{"migrate", "--host", db.Server.Host, "--port", fmt.Sprint(db.Server.Port), "--user", "sluice", "--database", db.Name, "--table", "t1"}
	r := sluice(t, nil, append(base, "--password-file", pw, "--alter", "ADD COLUMN a INT", "--drop-old")...)
	if r.code != 0 {
		t.Fatalf("--password-file: exit %d: %s", r.code, r.stderr)
	}
	r = sluice(t, nil, "migrate", "--defaults-file", cnf, "--database", db.Name, "--table", "t1", "--alter", "ADD COLUMN b INT", "--drop-old")
	if r.code != 0 {
		t.Fatalf("--defaults-file: exit %d: %s", r.code, r.stderr)
	}
	if strings.Contains(r.stdout+r.stderr, "sluice-sandbox") {
		t.Error("the password shows in the output")
	}
	var n int
	db.QueryRow("SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 't1'", db.Name).Scan(&n)
	if n != 4 {
		t.Errorf("t1 has %d columns, want 4", n)
	}
}

func TestInterruptMidCopy(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE big (id INT PRIMARY KEY, v VARCHAR(200))")
	db.Fill(t, "big", 60000, "n, REPEAT('v', 200)")
	before := fmt.Sprint(db.Dump(t, "big", "*", "id"))
	args := append(target(db, "big"), "--alter", "ADD COLUMN x INT", "--method", "copy", "--chunk-time", "1ms", "--threads", "1", "--progress-interval", "100ms")
	args = slices.DeleteFunc(args, func(s string) bool { return s == "--quiet" })
	cmd := exec.Command(binary, args...)
	var errBuf testdb.SyncBuffer
	cmd.Stderr = &errBuf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(errBuf.String(), "phase=copy") && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGINT)
	stoppedUntouched(t, db, cmd.Wait(), errBuf.String(), "big", before, "interrupted during copy", "untouched")
}

// startMigrate starts sluice with args (without --quiet: the phases are
// logged), in a process group of its own when ownGroup (the kernel drops a
// stop signal sent to an orphaned group), killed at the test's end, and
// waits until it logs phase. It returns the process and its output.
func startMigrate(t *testing.T, args []string, phase string, ownGroup bool) (cmd *exec.Cmd, stdout, stderr *testdb.SyncBuffer) {
	t.Helper()
	cmd = exec.Command(binary, slices.DeleteFunc(slices.Clone(args), func(s string) bool { return s == "--quiet" })...)
	if ownGroup {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	}
	stdout, stderr = &testdb.SyncBuffer{}, &testdb.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(stderr.String(), "phase="+phase) {
		if time.Now().After(deadline) {
			t.Fatalf("the migration never reached phase %s:\n%s", phase, stderr.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	return cmd, stdout, stderr
}

// stoppedUntouched checks a migrate that was stopped: exit code 1, a last
// line that says each of why, the original table as dumped before, and
// nothing left beside it.
func stoppedUntouched(t *testing.T, db *testdb.DB, err error, stderr, table, before string, why ...string) {
	t.Helper()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("want exit code 1, got %v; stderr:\n%s", err, stderr)
	}
	for _, w := range why {
		if line := lastLine(stderr); !strings.Contains(line, w) {
			t.Errorf("last line %q does not say %q", line, w)
		}
	}
	if after := fmt.Sprint(db.Dump(t, table, "*", "id")); after != before {
		t.Error("the original table changed")
	}
	if tables := db.Tables(t); !slices.Equal(tables, []string{table}) {
		t.Errorf("leftovers: %v", tables)
	}
}

func TestPlanCommand(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE t (id INT PRIMARY KEY, v INT NULL, s VARCHAR(20), KEY kv (v))",
		"INSERT INTO t VALUES (1, NULL, 'a'), (2, 5, 'a'), (3, 5, 'b'), (4, NULL, 'bb')")
	before := fmt.Sprint(db.Dump(t, "t", "*", "id"))
	conn := []string{"plan", "--host", db.Server.Host, "--port", fmt.Sprint(db.Server.Port), "--user", db.Server.User, "--database", db.Name, "--table", "t"}

	r := sluice(t, nil, append(conn, "--alter", "ADD UNIQUE KEY uv (v), MODIFY s VARCHAR(1) NOT NULL, DROP COLUMN x2")...)
	if r.code != 1 || !strings.Contains(lastLine(r.stderr), "names column x2, which t does not have") {
		t.Errorf("a clause naming a missing column: exit %d, %q", r.code, lastLine(r.stderr))
	}

	r = sluice(t, nil, append(conn, "--alter", "ADD UNIQUE KEY uv (v), MODIFY s VARCHAR(1) NOT NULL")...)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{"path:     copy", "unique-key: adds UNIQUE key uv", "(1 values held by more than one row)",
		"lossy-type: changes s from varchar(20) to varchar(1)", "(1 rows hold values that would not fit)", "--approve=lossy-type,not-null,unique-key",
		"not-null: makes s NOT NULL (0 rows hold NULL"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("plan output lacks %q:\n%s", want, r.stdout)
		}
	}

	r = sluice(t, nil, append(conn, "--alter", "ADD INDEX ks (s)", "--format", "json")...)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var p struct {
		Path     string
		Clauses  []struct{ Algorithm string }
		Settings []struct{ Name, Value string } `json:"session_settings"`
		DDL      *struct {
			Threads int `json:"innodb_ddl_threads"`
		} `json:"ddl_settings"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &p); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, r.stdout)
	}
	if p.Path != "in-place" || len(p.Clauses) != 1 || p.Clauses[0].Algorithm != "in-place" || p.DDL == nil || p.DDL.Threads < 1 {
		t.Errorf("json plan: %+v", p)
	}

	r = sluice(t, nil, append(conn, "--alter", "ADD COLUMN z INT", "--format", "yaml")...)
	if r.code != 1 || !strings.Contains(lastLine(r.stderr), "use text or json") {
		t.Errorf("bad format: exit %d, %q", r.code, lastLine(r.stderr))
	}
	// --dry-run is the same plan, and changes nothing either.
	r = sluice(t, nil, append(target(db, "t"), "--alter", "ADD COLUMN z INT", "--dry-run")...)
	if r.code != 0 || !strings.Contains(r.stdout, "path:     instant") {
		t.Errorf("--dry-run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if after := fmt.Sprint(db.Dump(t, "t", "*", "id")); after != before || !slices.Equal(db.Tables(t), []string{"t"}) {
		t.Error("plan changed the table")
	}
	var cols int
	db.QueryRow("SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 't'", db.Name).Scan(&cols)
	if cols != 3 {
		t.Errorf("t has %d columns after plan and --dry-run", cols)
	}
}

func TestKillAfterFlag(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{{"never", 0, true}, {"after=30s", 30 * time.Second, true}, {"after=0s", 0, false}, {"always", 0, false}, {"after=x", 0, false}} {
		got, err := killAfter(tc.in)
		if got != tc.want || (err == nil) != tc.ok {
			t.Errorf("%q: %s, %v", tc.in, got, err)
		}
		if err != nil && !strings.Contains(err.Error(), "use never or after=DURATION") {
			t.Errorf("%q: unclear error %v", tc.in, err)
		}
	}
}

// TestCutoverCommand: migrate --postpone-cutover waits after the checksum
// until 'sluice cutover', run as a separate process, tells it to swap; a
// second 'sluice cutover' finds no waiting migration and says so.
func TestCutoverCommand(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE p (id INT PRIMARY KEY, v INT)")
	db.Fill(t, "p", 1000, "n, n")
	args := append(target(db, "p"), "--alter", "ADD COLUMN x INT", "--method", "copy", "--postpone-cutover")
	cmd, outBuf, errBuf := startMigrate(t, args, "postponed", false)
	if !strings.Contains(errBuf.String(), "sluice cutover --database "+db.Name+" --table p") {
		t.Errorf("the log does not say how to trigger the cut-over:\n%s", errBuf.String())
	}
	time.Sleep(700 * time.Millisecond)
	if got := db.Tables(t); !slices.Contains(got, "_p_cutover") || slices.Contains(got, "_p_old") {
		t.Fatalf("tables while postponed: %v", got)
	}
	cut := append([]string{"cutover"}, target(db, "p")[1:]...)
	cut = slices.DeleteFunc(cut, func(s string) bool { return s == "--quiet" })
	if r := sluice(t, nil, cut...); r.code != 0 || !strings.Contains(r.stdout, "may cut over now") {
		t.Fatalf("sluice cutover: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("migrate: %v\n%s", err, errBuf.String())
	}
	if !strings.Contains(outBuf.String(), "migrated") {
		t.Errorf("stdout %q", outBuf.String())
	}
	if got := db.Tables(t); !slices.Equal(got, []string{"_p_old", "p"}) {
		t.Errorf("tables after the cut-over: %v", got)
	}
	r := sluice(t, nil, cut...)
	if r.code != 1 || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 || !strings.Contains(r.stderr, "no migration of this table is waiting") {
		t.Errorf("a second cutover: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestCtrlZIgnored: SIGTSTP (a terminal's Ctrl-Z) does not suspend a
// migration, which may hold the cut-over's locks when it comes; the run goes
// on and cuts over.
func TestCtrlZIgnored(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE p (id INT PRIMARY KEY, v INT)")
	db.Fill(t, "p", 1000, "n, n")
	args := append(target(db, "p"), "--alter", "ADD COLUMN x INT", "--method", "copy", "--postpone-cutover")
	cmd, _, errBuf := startMigrate(t, args, "postponed", true)
	cmd.Process.Signal(syscall.SIGTSTP)
	time.Sleep(300 * time.Millisecond)
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	// pid (comm) state ...: the state after the command's closing parenthesis.
	if f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:])); len(f) == 0 || f[0] == "T" {
		syscall.Kill(cmd.Process.Pid, syscall.SIGCONT)
		t.Fatalf("sluice was suspended by SIGTSTP (state %q)", f)
	}
	db.MustExec(t, "DROP TABLE `_p_cutover`")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("migrate: %v\n%s", err, errBuf.String())
	}
	if got := db.Tables(t); !slices.Equal(got, []string{"_p_old", "p"}) {
		t.Errorf("tables after the cut-over: %v", got)
	}
}

// TestJSONLogsAndMetricsAddress: --log-format json writes every log line as
// one JSON object, among them the metrics endpoint's address on the
// loopback interface.
func TestJSONLogsAndMetricsAddress(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE t (id INT PRIMARY KEY, v INT)", "INSERT INTO t VALUES (1, 1), (2, 2)")
	args := []string{"migrate", "--host", db.Server.Host, "--port", fmt.Sprint(db.Server.Port), "--user", db.Server.User,
		"--database", db.Name, "--table", "t", "--alter", "MODIFY v BIGINT", "--method", "copy", "--drop-old",
		"--log-format", "json", "--metrics-addr", ":0"}
	r := sluice(t, nil, args...)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	lines, url := 0, ""
	for _, line := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("a log line is not JSON: %q: %v", line, err)
		}
		lines++
		if m["msg"] == "metrics served" {
			url, _ = m["url"].(string)
		}
	}
	if lines < 5 || !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("%d JSON lines; the metrics address %q, want one on 127.0.0.1", lines, url)
	}
}
