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
	for _, line := range []string{"DROP TABLE t", "set threads", strings.Repeat("x", 5000)} {
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
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close()
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
	if _, err := Listen(path); err == nil || !strings.Contains(err.Error(), "another sluice run listens") {
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

func TestDefaultPath(t *testing.T) {
	run := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", run)
	p, err := DefaultPath("shop", "orders")
	if err != nil || p != filepath.Join(run, "sluice", "shop.orders.sock") {
		t.Fatalf("DefaultPath = %q, %v", p, err)
	}
	fi, _ := os.Stat(filepath.Dir(p))
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("directory mode %v, want 0700", fi.Mode().Perm())
	}
	// Names that differ only in bytes a file name cannot hold get their
	// own sockets.
	a, _ := DefaultPath("a.b", "c")
	b, _ := DefaultPath("a", "b.c")
	c, _ := DefaultPath("a/b", "c")
	if a == b || strings.Contains(filepath.Base(c), "/") {
		t.Errorf("paths %q %q %q", a, b, c)
	}
	long, err := DefaultPath(strings.Repeat("d", 64), strings.Repeat("t", 64))
	if err != nil || len(long) >= 108 {
		t.Errorf("long names: %q (%d bytes), %v", long, len(long), err)
	}
	// A directory other users may enter is refused.
	if err := os.Chmod(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := DefaultPath("shop", "orders"); err == nil || !strings.Contains(err.Error(), "other users may enter") {
		t.Fatalf("an open directory was accepted: %v", err)
	}
}
