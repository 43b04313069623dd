// Package bench measures sluice against native ALTER TABLE on a sysbench table,
// idle and under a sysbench load, and runs the demo. Every timed run starts
// from the same state: the table is restored from a template and InnoDB's
// dirty pages are flushed first.
package bench

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/sluicedb/sluice/internal/dbconn"
)

// Server is the sandbox server the benchmark runs on.
type Server struct {
	Conn dbconn.Config
	DB   *sql.DB
	Logs string // directory keeping each sluice run's output ("": none)
	runs int    // sluice runs so far, numbering the kept logs
}

// Connect opens an admin pool on the server named by dsn.
func Connect(ctx context.Context, dsn string) (*Server, error) {
	c, _, err := dbconn.ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	db, err := dbconn.Open(ctx, c, "", 8)
	if err != nil {
		return nil, err
	}
	return &Server{Conn: c, DB: db}, nil
}

// Flush makes InnoDB write every dirty page, so the next timed run does not
// pay for the previous one's writes.
func (s *Server) Flush(ctx context.Context) error {
	var pct, lwm string
	if err := s.DB.QueryRowContext(ctx, "SELECT @@global.innodb_max_dirty_pages_pct, @@global.innodb_max_dirty_pages_pct_lwm").Scan(&pct, &lwm); err != nil {
		return err
	}
	defer s.DB.ExecContext(context.WithoutCancel(ctx), "SET GLOBAL innodb_max_dirty_pages_pct = "+pct+", GLOBAL innodb_max_dirty_pages_pct_lwm = "+lwm)
	if _, err := s.DB.ExecContext(ctx, "SET GLOBAL innodb_max_dirty_pages_pct_lwm = 0, GLOBAL innodb_max_dirty_pages_pct = 0"); err != nil {
		return err
	}
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		var name string
		var dirty int64
		if err := s.DB.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE 'Innodb_buffer_pool_pages_dirty'").Scan(&name, &dirty); err != nil {
			return err
		}
		if dirty < 50 {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("dirty pages did not fall below 50 in 3 minutes")
}

// ensureSysbench installs Debian's sysbench when it is missing.
func ensureSysbench() error {
	if _, err := exec.LookPath("sysbench"); err == nil {
		return nil
	}
	fmt.Fprintln(os.Stderr, "bench: installing sysbench")
	for _, args := range [][]string{{"update", "-qq"}, {"install", "-y", "-qq", "sysbench"}} {
		cmd := exec.Command("apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("apt-get %v: %v\n%s", args, err, out)
		}
	}
	return nil
}

// sysbenchArgs are the connection options for sysbench against database db.
// The sandbox's root account has no password, so none is passed.
func (s *Server) sysbenchArgs(db string) []string {
	return []string{
		"--db-driver=mysql", "--mysql-host=" + s.Conn.Host, "--mysql-port=" + strconv.Itoa(s.Conn.Port),
		"--mysql-user=" + s.Conn.User, "--mysql-db=" + db, "--tables=1",
	}
}
