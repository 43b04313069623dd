package dbconn

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"

	gomysql "github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-sql-driver/mysql"
)

func TestConnectionLost(t *testing.T) {
	wrapped := func(err error) error { return fmt.Errorf("copy: range (1, 2]: %w", err) }
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"driver bad connection", driver.ErrBadConn, true},
		{"invalid connection", wrapped(mysql.ErrInvalidConn), true},
		{"binlog connection was bad", fmt.Errorf("io.ReadFull(header) failed. err EOF: %w", gomysql.ErrBadConn), true},
		{"EOF", io.EOF, true},
		{"unexpected EOF", wrapped(io.ErrUnexpectedEOF), true},
		{"refused", &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, true},
		{"reset", wrapped(syscall.ECONNRESET), true},
		{"read timeout", &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}, true},
		{"closed", net.ErrClosed, true},
		{"server shutdown", &mysql.MySQLError{Number: 1053, Message: "Server shutdown in progress"}, true},
		{"connection killed", wrapped(&mysql.MySQLError{Number: 1927}), true},
		{"gone away", &mysql.MySQLError{Number: 2006}, true},
		{"lost during query", &mysql.MySQLError{Number: 2013}, true},
		{"inactivity", &mysql.MySQLError{Number: 4031}, true},
		{"binlog server shutdown", wrapped(&gomysql.MyError{Code: 1053}), true},
		{"context cancelled", wrapped(context.Canceled), false},
		{"context deadline", context.DeadlineExceeded, false},
		{"duplicate", &mysql.MySQLError{Number: ErrDupEntry}, false},
		{"deadlock", &mysql.MySQLError{Number: ErrLockDeadlock}, false},
		{"query interrupted", &mysql.MySQLError{Number: ErrQueryInterrupted}, false},
		{"access denied", &mysql.MySQLError{Number: ErrAccessDenied}, false},
		{"binlog purged", &gomysql.MyError{Code: 1236}, false},
		{"plain", errors.New("the table changed under the migration"), false},
	}
	for _, c := range cases {
		if got := ConnectionLost(c.err); got != c.want {
			t.Errorf("%s: ConnectionLost(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}
