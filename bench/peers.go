package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// Running gh-ost and spirit, the peers built from their sources (see
// docs/BENCHMARKS.md), each with its own defaults.

// findPeer is the peer's command: given, else name on PATH, else "" (the
// peer is left out, which is logged). "none" leaves it out.
func findPeer(given, name string) string {
	switch given {
	case "none":
		return ""
	case "":
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
		logf("%s is not on PATH: it is left out (pass --%s to include it)", name, name)
		return ""
	}
	return given
}

// peerConf writes a [client] option file with the bench's account for a
// peer that reads one (gh-ost's and spirit's --conf), so that no password
// is on a command line; it returns the file and a cleanup.
func (s *Server) peerConf() (string, func(), error) {
	dir, err := os.MkdirTemp("", "sluice-bench-peer-")
	if err != nil {
		return "", nil, err
	}
	p := filepath.Join(dir, "my.cnf")
	body := fmt.Sprintf("[client]\nuser=%s\npassword=%s\n", s.Conn.User, s.Conn.Password)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	return p, func() { os.RemoveAll(dir) }, nil
}

// runGhOst runs gh-ost on database.table, on the primary, cutting over when
// done and dropping its leftovers.
func (s *Server) runGhOst(ctx context.Context, command, database, table, alter string) error {
	conf, done, err := s.peerConf()
	if err != nil {
		return err
	}
	defer done()
	parts := strings.Fields(command)
	// Its control socket beside the option file: a gh-ost stopped at the
	// time limit leaves its socket behind, and the next one could not
	// listen at the default path.
	args := append(parts[1:], "--conf="+conf, "--serve-socket-file="+filepath.Join(filepath.Dir(conf), "gh-ost.sock"),
		"--host="+s.Conn.Host, "--port="+strconv.Itoa(s.Conn.Port),
		"--database="+database, "--table="+table, "--alter="+alter, "--allow-on-master",
		"--initially-drop-ghost-table", "--initially-drop-old-table", "--ok-to-drop-table", "--execute")
	if err := s.command(ctx, parts[0], args...); err != nil {
		return fmt.Errorf("gh-ost: %w", err)
	}
	return nil
}

// runSpirit runs spirit's migrate on database.table.
func (s *Server) runSpirit(ctx context.Context, command, database, table, alter string) error {
	conf, done, err := s.peerConf()
	if err != nil {
		return err
	}
	defer done()
	parts := strings.Fields(command)
	args := append(parts[1:], "migrate", "--conf="+conf, fmt.Sprintf("--host=%s:%d", s.Conn.Host, s.Conn.Port),
		"--database="+database, "--statement=ALTER TABLE `"+table+"` "+alter)
	if err := s.command(ctx, parts[0], args...); err != nil {
		return fmt.Errorf("spirit: %w", err)
	}
	return nil
}
