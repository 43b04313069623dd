package control

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		in, name, key, value, err string
	}{
		{in: "status", name: "status"},
		{in: "  PAUSE \n", name: "pause"},
		{in: "set threads=2", name: "set", key: "threads", value: "2"},
		{in: "set max-load=Threads_running=25,Threads_connected=9", name: "set", key: "max-load", value: "Threads_running=25,Threads_connected=9"},
		{in: "", err: "empty command"},
		{in: "status now", err: "takes no argument"},
		{in: "set threads", err: "NAME=VALUE"},
		{in: "set threads=", err: "NAME=VALUE"},
		{in: "set a=1 b=2", err: "one NAME=VALUE"},
		{in: "DROP TABLE t", err: `unknown command "DROP"`},
		{in: "select 1", err: "unknown command"},
	} {
		got, err := Parse(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("Parse(%q) = %+v, %v; want an error with %q", c.in, got, err, c.err)
			}
			continue
		}
		if err != nil || got.Name != c.name || got.Key != c.key || got.Value != c.value {
			t.Errorf("Parse(%q) = %+v, %v; want %s %s=%s", c.in, got, err, c.name, c.key, c.value)
		}
	}
}

// recorder is a Target that records what it is asked.
type recorder struct {
	mu   sync.Mutex
	asks []string
}

func (r *recorder) ask(s string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asks = append(r.asks, s)
	return "did " + s, nil
}
func (r *recorder) StatusJSON() ([]byte, error)           { return []byte(`{"phase":"copy"}`), nil }
func (r *recorder) Pause(context.Context) (string, error) { return r.ask("pause") }
func (r *recorder) Resume() (string, error)               { return r.ask("resume") }
func (r *recorder) Set(_ context.Context, k, v string) (string, error) {
	return r.ask("set " + k + "=" + v)
}
func (r *recorder) Cutover() (string, error)  { return r.ask("cutover") }
func (r *recorder) Postpone() (string, error) { return r.ask("postpone") }
func (r *recorder) Abort() (string, error)    { return r.ask("abort") }

func serve(t *testing.T, path string) (*Server, *recorder) {
	t.Helper()
	s, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rec := &recorder{}
	go s.Serve(ctx, rec)
	t.Cleanup(func() { cancel(); s.Close() })
	return s, rec
}

func send(t *testing.T, path, line string) Reply {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := Send(ctx, path, line)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestSocketModeAndCommands(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.sock")
	_, rec := serve(t, path)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v, want a socket with 0600", fi.Mode())
	}
	r := send(t, path, "status")
	var st map[string]any
	if !r.OK || json.Unmarshal(r.Status, &st) != nil || st["phase"] != "copy" {
		t.Fatalf("status reply %+v", r)
	}
	for _, line := range []string{"pause", "resume", "set threads=2", "cutover", "postpone", "abort"} {
		if r := send(t, path, line); !r.OK || r.Message != "did "+line {
			t.Errorf("%s: reply %+v", line, r)
		}
	}
	// A valid command padded past the length limit is refused for its
	// length (sent raw: Send trims a line).
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte("status" + strings.Repeat(" ", 5000) + "\n"))
	var long Reply
	if err := json.NewDecoder(c).Decode(&long); err != nil || long.OK || !strings.Contains(long.Error, "too long") {
		t.Errorf("an over-long line: reply %+v, %v", long, err)
	}
	c.Close()
	for _, line := range []string{"DROP TABLE t", "set threads"} {
		if r := send(t, path, line); r.OK || r.Error == "" {
			t.Errorf("%.20s: reply %+v, want an error", line, r)
		}
	}
	if got := strings.Join(rec.asks, ","); got != "pause,resume,set threads=2,cutover,postpone,abort" {
		t.Errorf("the target was asked %s", got)
	}
}

func TestStaleSocketReplacedLiveRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.sock")
	// A run that died leaves its socket file: nothing answers on it.
	staleSocket(t, path)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the stale socket file is gone: %v", err)
	}
	s, _ := serve(t, path)
	if !s.Stale {
		t.Error("the stale socket was not reported as replaced")
	}
	if r := send(t, path, "status"); !r.OK {
		t.Fatalf("the new socket does not answer: %+v", r)
	}
	// A second run of the same migration is refused while the first lives.
	if _, err := Listen(path); err == nil || !strings.Contains(err.Error(), "another sluice run uses") {
		t.Fatalf("a live socket was not refused: %v", err)
	}
	if r := send(t, path, "status"); !r.OK {
		t.Fatalf("the refused Listen broke the live socket: %+v", r)
	}
	// Any other file is never removed.
	file := filepath.Join(t.TempDir(), "notes")
	os.WriteFile(file, []byte("x"), 0o600)
	if _, err := Listen(file); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Fatalf("a plain file was not refused: %v", err)
	}
	if _, err := os.Stat(file); err != nil {
		t.Fatal("the plain file was removed")
	}
}

func TestDefaultPathAndFind(t *testing.T) {
	run := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", run)
	if _, err := Find("shop", "orders"); err == nil || !strings.Contains(err.Error(), "no run of shop.orders") {
		t.Fatalf("Find with no socket: %v", err)
	}
	p, err := DefaultPath("db1:3306", "shop", "orders")
	if err != nil || p != filepath.Join(run, "sluice", "shop.orders@db1%3A3306.sock") {
		t.Fatalf("DefaultPath = %q, %v", p, err)
	}
	fi, _ := os.Stat(filepath.Dir(p))
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("directory mode %v, want 0700", fi.Mode().Perm())
	}
	serve(t, p)
	if got, err := Find("shop", "orders"); err != nil || got != p {
		t.Errorf("Find = %q, %v; want %q", got, err, p)
	}
	// Another table's socket, and one whose name only starts alike, are not
	// found for it.
	other, _ := DefaultPath("db1:3306", "shop", "orders2")
	serve(t, other)
	if got, err := Find("shop", "orders"); err != nil || got != p {
		t.Errorf("Find beside orders2 = %q, %v", got, err)
	}
	// The same table on a second server: Find names both.
	second, _ := DefaultPath("db2:3306", "shop", "orders")
	serve(t, second)
	if _, err := Find("shop", "orders"); err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), second) {
		t.Errorf("Find with two servers: %v", err)
	}
	// Names that differ only in bytes a file name cannot hold get their
	// own sockets.
	a, _ := DefaultPath("h:1", "a.b", "c")
	b, _ := DefaultPath("h:1", "a", "b.c")
	c, _ := DefaultPath("h:1", "a/b", "c")
	if a == b || strings.Contains(filepath.Base(c), "/") {
		t.Errorf("paths %q %q %q", a, b, c)
	}
	long, err := DefaultPath("db1:3306", strings.Repeat("d", 64), strings.Repeat("t", 64))
	if err != nil || len(long) >= 108 {
		t.Errorf("long names: %q (%d bytes), %v", long, len(long), err)
	}
	serve(t, long)
	if got, err := Find(strings.Repeat("d", 64), strings.Repeat("t", 64)); err != nil || got != long {
		t.Errorf("Find of the long names = %q, %v", got, err)
	}
	// A directory other users may enter is refused.
	if err := os.Chmod(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := DefaultPath("db1:3306", "shop", "orders"); err == nil || !strings.Contains(err.Error(), "other users may enter") {
		t.Fatalf("an open directory was accepted: %v", err)
	}
}

// TestOthersSocketLeftAlone: a socket file another user owns is never
// removed, even when nothing answers on it.
func TestOthersSocketLeftAlone(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to give the socket file to another user")
	}
	path := filepath.Join(t.TempDir(), "run.sock")
	staleSocket(t, path)
	if err := os.Chown(path, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(path); err == nil || !strings.Contains(err.Error(), "belongs to another user") {
		t.Fatalf("another user's socket: %v", err)
	}
	if _, err := os.Lstat(path); err != nil {
		t.Fatal("another user's socket was removed")
	}
}

// TestConcurrentListenOneWins: runs that start at once on a path with a
// stale socket: exactly one gets it, and its socket answers.
func TestConcurrentListenOneWins(t *testing.T) {
	for round := 0; round < 20; round++ {
		path := filepath.Join(t.TempDir(), "run.sock")
		staleSocket(t, path)
		var wg sync.WaitGroup
		var mu sync.Mutex
		var won []*Server
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if s, err := Listen(path); err == nil {
					mu.Lock()
					won = append(won, s)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if len(won) != 1 {
			t.Fatalf("round %d: %d runs got the path", round, len(won))
		}
		ctx, cancel := context.WithCancel(context.Background())
		go won[0].Serve(ctx, &recorder{})
		if r := send(t, path, "status"); !r.OK {
			t.Fatalf("round %d: the winner's socket does not answer: %+v", round, r)
		}
		cancel()
		won[0].Close()
	}
}

// staleSocket leaves at path the socket file of a run that died: nothing
// answers on it.
func staleSocket(t *testing.T, path string) {
	t.Helper()
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close()
}
