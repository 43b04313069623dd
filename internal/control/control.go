// Package control is a running migration's control socket: a unix socket on
// which sluice ctl (or any client, e.g. `echo status | nc -U PATH`) sends
// one command a connection and reads one JSON reply.
//
// The commands are fixed words (status, pause, resume, set NAME=VALUE,
// cutover, postpone, abort); nothing sent over the socket reaches the
// server as SQL. The socket file is mode 0600, by default in a directory
// only the invoking user may enter, so only that user (and root) can steer
// the run. A socket file left by a run that died is recognised (nothing
// answers on it) and replaced; one a live run answers on is refused.
package control

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Target is what the commands act on (a migration.Runner, through cmd).
type Target interface {
	StatusJSON() ([]byte, error)
	Pause(ctx context.Context) (string, error)
	Resume() (string, error)
	Set(ctx context.Context, name, value string) (string, error)
	Cutover() (string, error)
	Postpone() (string, error)
	Abort() (string, error)
}

// Command is one parsed request.
type Command struct {
	Name       string // status, pause, resume, set, cutover, postpone, abort
	Key, Value string // set's NAME=VALUE
}

// Commands lists the command words, for help texts.
const Commands = "status, pause, resume, set NAME=VALUE (threads, chunk-time, max-load, max-lag, ignore-replica), cutover, postpone, abort"

// maxLine is the longest request accepted.
const maxLine = 4096

// Parse parses a request line.
func Parse(line string) (Command, error) {
	f := strings.Fields(line)
	if len(f) == 0 {
		return Command{}, errors.New("empty command: give one of " + Commands)
	}
	c := Command{Name: strings.ToLower(f[0])}
	switch c.Name {
	case "status", "pause", "resume", "cutover", "postpone", "abort":
		if len(f) > 1 {
			return Command{}, fmt.Errorf("%s takes no argument", c.Name)
		}
	case "set":
		if len(f) != 2 {
			return Command{}, errors.New("set takes one NAME=VALUE, e.g. set threads=2")
		}
		k, v, ok := strings.Cut(f[1], "=")
		if !ok || k == "" || v == "" {
			return Command{}, fmt.Errorf("set %s: give NAME=VALUE, e.g. set threads=2", f[1])
		}
		c.Key, c.Value = strings.ToLower(k), v
	default:
		return Command{}, fmt.Errorf("unknown command %q: give one of %s", f[0], Commands)
	}
	return c, nil
}

// Reply is the answer to one command.
type Reply struct {
	OK      bool            `json:"ok"`
	Message string          `json:"message,omitempty"`
	Error   string          `json:"error,omitempty"`
	Status  json.RawMessage `json:"status,omitempty"`
}

// Do runs c on t.
func Do(ctx context.Context, t Target, c Command) Reply {
	var msg string
	var err error
	switch c.Name {
	case "status":
		var b []byte
		if b, err = t.StatusJSON(); err == nil {
			return Reply{OK: true, Status: b}
		}
	case "pause":
		msg, err = t.Pause(ctx)
	case "resume":
		msg, err = t.Resume()
	case "set":
		msg, err = t.Set(ctx, c.Key, c.Value)
	case "cutover":
		msg, err = t.Cutover()
	case "postpone":
		msg, err = t.Postpone()
	case "abort":
		msg, err = t.Abort()
	default:
		err = fmt.Errorf("unknown command %q", c.Name)
	}
	if err != nil {
		return Reply{Error: err.Error()}
	}
	return Reply{OK: true, Message: msg}
}

// Dir is the directory of the default sockets: $XDG_RUNTIME_DIR/sluice,
// else sluice-UID under the temporary directory. It is made mode 0700 if
// missing, and refused if another user owns it or may enter it.
func Dir() (string, error) {
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("sluice-%d", os.Getuid()))
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		dir = filepath.Join(d, "sluice")
	}
	return dir, privateDir(dir)
}

// DefaultPath is the socket of a migration of database.table on server
// (HOST:PORT), in Dir: DATABASE.TABLE@SERVER.sock, every byte other than a
// letter, digit, '_' or '-' of the names spelt %XX; a hash of them when
// that is too long for a socket's path.
func DefaultPath(server, database, table string) (string, error) {
	dir, err := Dir()
	if err != nil {
		return "", err
	}
	if p := filepath.Join(dir, plainName(database, table)+escape(server)+".sock"); len(p) < 100 {
		return p, nil
	}
	// A unix socket's path holds at most 107 bytes.
	return filepath.Join(dir, hashedName(database, table)+short(server)+".sock"), nil
}

func plainName(database, table string) string { return escape(database) + "." + escape(table) + "@" }

func hashedName(database, table string) string {
	return "sluice-" + short(database+"\x00"+table) + "-"
}

func short(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:6])
}

// Find returns the default socket of the one run of database.table that
// has one, whatever its server; it names them all when there are several.
func Find(database, table string) (string, error) {
	dir, err := Dir()
	if err != nil {
		return "", err
	}
	var found []string
	for _, pat := range []string{plainName(database, table) + "*.sock", hashedName(database, table) + "*.sock"} {
		m, _ := filepath.Glob(filepath.Join(dir, pat))
		found = append(found, m...)
	}
	switch len(found) {
	case 0:
		return "", fmt.Errorf("no run of %s.%s has a socket in %s: is it running on this host, as this user? (its first log line names its socket)", database, table, dir)
	case 1:
		return found[0], nil
	}
	return "", fmt.Errorf("runs of %s.%s on several servers have sockets: pass --socket, one of %s", database, table, strings.Join(found, ", "))
}

// privateDir makes dir mode 0700 if it is missing and checks that only the
// invoking user may enter it.
func privateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("control socket: %w (pass --control-socket PATH)", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("control socket: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return fmt.Errorf("control socket: %s is not a directory: remove it, or pass --control-socket PATH", dir)
	case ok && int(st.Uid) != os.Getuid():
		return fmt.Errorf("control socket: %s belongs to another user (uid %d): remove it, or pass --control-socket PATH", dir, st.Uid)
	case fi.Mode().Perm()&0o077 != 0:
		return fmt.Errorf("control socket: other users may enter %s (mode %04o): chmod 700 it, or pass --control-socket PATH", dir, fi.Mode().Perm())
	}
	return nil
}

// escape keeps letters, digits, '_' and '-' of a name and spells every
// other byte as %XX, so that every name gets its own file name.
func escape(name string) string {
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// Server serves one run's control socket.
type Server struct {
	Path string
	// Stale is set when Listen replaced a socket file a dead run left.
	Stale bool
	l     *net.UnixListener
	// lock is PATH.lock, locked for the server's life: two runs starting
	// at once cannot both take the path.
	lock *os.File
}

// Listen listens on path (mode 0600 from the start). A socket file of this
// user's that refuses connections (its run is gone) is replaced; one a live
// process answers on, one another user owns, one that cannot be dialled for
// another reason, or any other file, is refused and left alone.
func Listen(path string) (*Server, error) {
	s := &Server{Path: path}
	lock, err := os.OpenFile(path+".lock", os.O_CREATE|os.O_RDWR|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w (pass another --control-socket)", err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		return nil, fmt.Errorf("control socket: another sluice run uses %s (sluice ctl --socket %s status): wait for it, or pass another --control-socket", path, path)
	}
	s.lock = lock
	if err := s.listen(); err != nil {
		lock.Close()
		return nil, err
	}
	return s, nil
}

func (s *Server) listen() error {
	path := s.Path
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return fmt.Errorf("control socket: %s exists and is not a socket: remove it, or pass another --control-socket", path)
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
			return fmt.Errorf("control socket: %s belongs to another user (uid %d): pass another --control-socket", path, st.Uid)
		}
		c, err := net.DialTimeout("unix", path, time.Second)
		switch {
		case err == nil:
			c.Close()
			return fmt.Errorf("control socket: another sluice run uses %s (sluice ctl --socket %s status): wait for it, or pass another --control-socket", path, path)
		case !errors.Is(err, syscall.ECONNREFUSED):
			return fmt.Errorf("control socket: %s exists and cannot be told stale (%v): remove it if no run uses it, or pass another --control-socket", path, err)
		}
		if err := os.Remove(path); err != nil {
			return fmt.Errorf("control socket: remove the stale %s: %w", path, err)
		}
		s.Stale = true
	}
	// The socket is made with no access for others: a chmod after the bind
	// would leave a moment in which they could connect.
	old := syscall.Umask(0o177)
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	syscall.Umask(old)
	if err != nil {
		return fmt.Errorf("control socket: %w (pass another --control-socket)", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return fmt.Errorf("control socket: %w", err)
	}
	s.l = l
	return nil
}

// Serve answers commands on the socket until ctx is done or Close.
func (s *Server) Serve(ctx context.Context, t Target) {
	go func() {
		<-ctx.Done()
		s.l.Close()
	}()
	for {
		c, err := s.l.Accept()
		if err != nil {
			return
		}
		go s.answer(ctx, c, t)
	}
}

// Close stops listening, removes the socket file and lets the path go.
func (s *Server) Close() error {
	err := s.l.Close()
	s.lock.Close() // the lock file stays: removing it would let two runs lock two files
	return err
}

func (s *Server) answer(ctx context.Context, c net.Conn, t Target) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Minute))
	line, err := bufio.NewReaderSize(io.LimitReader(c, maxLine), maxLine).ReadString('\n')
	var r Reply
	switch {
	case err != nil && !errors.Is(err, io.EOF):
		r = Reply{Error: "read the command: " + err.Error()}
	case len(line) >= maxLine:
		r = Reply{Error: "the command is too long"}
	default:
		cmd, perr := Parse(line)
		if perr != nil {
			r = Reply{Error: perr.Error()}
		} else {
			r = Do(ctx, t, cmd)
		}
	}
	b, _ := json.Marshal(r)
	c.Write(append(b, '\n'))
}

// Send sends one command line to the socket at path and returns the reply.
func Send(ctx context.Context, path, line string) (Reply, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return Reply{}, fmt.Errorf("no sluice run answers on %s: %w", path, err)
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	if _, err := io.WriteString(c, strings.TrimSpace(line)+"\n"); err != nil {
		return Reply{}, err
	}
	var r Reply
	if err := json.NewDecoder(c).Decode(&r); err != nil {
		return Reply{}, fmt.Errorf("read the reply from %s: %w", path, err)
	}
	return r, nil
}
