// Package dbconn opens sluice's connections to MySQL and is the one place where
// SQL text meets identifiers: every table and column name that sluice writes
// into a statement is quoted by QuoteIdent here.
//
// Every connection opened through this package carries the same session
// settings (UTC time zone, strict SQL mode, REPEATABLE READ, bounded lock waits),
// so that copy, apply, checksum and cut-over see values the same way.
package dbconn

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"syscall"
	"time"

	gomysql "github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-sql-driver/mysql"
)

// Config says where the server is and who sluice is there. Password is never
// logged; String redacts it.
type Config struct {
	Host     string
	Port     int
	User     string
	Password string
	// Params are extra driver parameters (for example tls=true).
	Params map[string]string
	// TLSFiles verify the server against a CA of the operator's and present
	// a client certificate (tls.go).
	TLSFiles TLSFiles
	// RunID, if set, is sent as the connection attribute sluice_run on every
	// connection, so that the run can tell its own sessions from the
	// application's in performance_schema.
	RunID string
	// TimeZone, if set, is the session time zone instead of UTC (a value
	// the server accepts for time_zone, e.g. "SYSTEM" or "+02:00").
	TimeZone string
	// isolationVar names the session's isolation variable when it is not
	// transaction_isolation (MariaDB before 11.1 knows only tx_isolation);
	// Open finds it.
	isolationVar string
}

// String describes the target without the password.
func (c Config) String() string {
	return fmt.Sprintf("%s@%s:%d", c.User, c.Host, c.Port)
}

// Validate reports the first missing setting.
func (c Config) Validate() error {
	switch {
	case c.Host == "":
		return errors.New("no host given: pass --host")
	case c.Port <= 0 || c.Port > 65535:
		return fmt.Errorf("port %d is out of range: pass --port between 1 and 65535", c.Port)
	case c.User == "":
		return errors.New("no user given: pass --user")
	}
	if _, err := c.TLS(); err != nil {
		return err
	}
	return nil
}

// SessionSettings are applied to every connection sluice opens.
//   - time_zone UTC: TIMESTAMP values keep their meaning whatever the server zone.
//   - strict sql_mode without NO_ZERO_DATE: lossy conversions fail, existing zero
//     dates still copy; NO_AUTO_VALUE_ON_ZERO: a row whose AUTO_INCREMENT
//     column holds 0 is copied as 0, not given the next number;
//     ERROR_FOR_DIVISION_BY_ZERO (in the server's default sql_mode): a
//     generated column, CHECK or index expression dividing by 0 fails as
//     the server's own ALTER fails, rather than storing NULL.
//   - READ COMMITTED: the copy's INSERT ... SELECT reads the original as a
//     consistent read, without locks. The apply, which must see the latest
//     committed row, reads with an explicit FOR SHARE: that waits for a
//     transaction already written to the binlog but not yet committed in
//     InnoDB, and in READ COMMITTED takes record locks only, no gap locks, so
//     the application's inserts and key updates never deadlock on a gap sluice
//     holds. (The checksum sets REPEATABLE READ itself for its consistent
//     snapshots.)
var SessionSettings = map[string]string{
	"time_zone":                "'+00:00'",
	"sql_mode":                 "'STRICT_ALL_TABLES,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION,NO_AUTO_VALUE_ON_ZERO'",
	"transaction_isolation":    "'READ-COMMITTED'",
	"innodb_lock_wait_timeout": "10",
	"lock_wait_timeout":        "30",
	"group_concat_max_len":     "1048576",
}

// DSN builds the driver data source name. It carries the password, so it must
// never be logged or shown.
func (c Config) DSN(database string) string {
	mc := mysql.NewConfig()
	mc.User = c.User
	mc.Passwd = c.Password
	mc.Net = "tcp"
	mc.Addr = fmt.Sprintf("%s:%d", c.Host, c.Port)
	mc.DBName = database
	mc.InterpolateParams = true
	mc.ParseTime = false
	mc.Timeout = 10 * time.Second
	mc.Params = map[string]string{"charset": "utf8mb4"}
	mc.ConnectionAttributes = "program_name:sluice"
	if c.RunID != "" {
		mc.ConnectionAttributes += ",sluice_run:" + c.RunID
	}
	for k, v := range SessionSettings {
		if k == "transaction_isolation" && c.isolationVar != "" {
			k = c.isolationVar
		}
		mc.Params[k] = v
	}
	if c.TimeZone != "" {
		mc.Params["time_zone"] = QuoteString(c.TimeZone)
	}
	for k, v := range c.Params {
		if k == "tls" {
			if !c.TLSFiles.Set() { // else open sets the config itself
				mc.TLSConfig = v
			}
			continue
		}
		mc.Params[k] = v
	}
	return mc.FormatDSN()
}

// Open returns a pool to database with sluice's session settings, after checking
// that the server answers. maxConns bounds the pool.
func Open(ctx context.Context, c Config, database string, maxConns int) (*sql.DB, error) {
	db, err := open(ctx, c, database, maxConns)
	if ErrorNumber(err) == ErrUnknownSystemVariable && strings.Contains(err.Error(), "transaction_isolation") {
		// MariaDB before 11.1 names it tx_isolation.
		c.isolationVar = "tx_isolation"
		db, err = open(ctx, c, database, maxConns)
	}
	return db, err
}

func open(ctx context.Context, c Config, database string, maxConns int) (*sql.DB, error) {
	mc, err := mysql.ParseDSN(c.DSN(database))
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", c, err)
	}
	if c.TLSFiles.Set() {
		if mc.TLS, err = c.TLS(); err != nil {
			return nil, err
		}
	}
	connector, err := mysql.NewConnector(mc)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", c, err)
	}
	db := sql.OpenDB(connector)
	db.SetMaxOpenConns(maxConns)
	db.SetMaxIdleConns(maxConns)
	db.SetConnMaxLifetime(time.Hour)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("connect to %s: %w", c, Explain(err))
	}
	return db, nil
}

// ParseDSN reads a go-sql-driver style DSN (user:pass@tcp(host:port)/db) into a
// Config and the database it names.
func ParseDSN(dsn string) (Config, string, error) {
	mc, err := mysql.ParseDSN(dsn)
	if err != nil {
		return Config{}, "", fmt.Errorf("parse DSN: %w", err)
	}
	c := Config{User: mc.User, Password: mc.Passwd, Host: "127.0.0.1", Port: 3306}
	if mc.Addr != "" {
		host, port, ok := strings.Cut(mc.Addr, ":")
		c.Host = host
		if ok {
			if _, err := fmt.Sscanf(port, "%d", &c.Port); err != nil {
				return Config{}, "", fmt.Errorf("parse DSN port %q: %w", port, err)
			}
		}
	}
	if mc.TLSConfig != "" {
		c.Params = map[string]string{"tls": mc.TLSConfig}
	}
	return c, mc.DBName, nil
}

// Querier runs queries: a *sql.DB, a *sql.Conn or a *sql.Tx.
type Querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// QuoteIdent quotes a MySQL identifier with backticks, doubling any backtick in it.
func QuoteIdent(name string) string {
	return "`" + strings.ReplaceAll(name, "`", "``") + "`"
}

// QuoteTable quotes database.table.
func QuoteTable(database, table string) string {
	return QuoteIdent(database) + "." + QuoteIdent(table)
}

// QuoteString quotes a string literal for the cases where a placeholder cannot
// stand (SHOW statements, COLLATE clauses are identifiers and use QuoteIdent).
func QuoteString(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `'`, `\'`, "\x00", `\0`, "\n", `\n`, "\r", `\r`, "\x1a", `\Z`)
	return "'" + r.Replace(s) + "'"
}

// MySQL error numbers sluice reacts to.
const (
	ErrDupEntry              = 1062
	ErrUnknownSystemVariable = 1193
	ErrLockWaitTimeout       = 1205
	ErrLockDeadlock          = 1213
	ErrCheckRead             = 1020
	ErrAccessDenied          = 1045
	ErrNoSuchTable           = 1146
	ErrUnknownTable          = 1051
	ErrTableExists           = 1050
	ErrBadDB                 = 1049
	ErrQueryInterrupted      = 1317
	ErrDBAccessDenied        = 1044
	ErrLockNowait            = 3572
	ErrTableAccessDenied     = 1142
)

// ErrorNumber returns the MySQL error number of err, or 0.
func ErrorNumber(err error) uint16 {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number
	}
	return 0
}

// Retryable reports whether a transaction that failed with err may simply be
// run again: a deadlock, a lock wait timeout, or MariaDB's "record has
// changed since last read" (innodb_snapshot_isolation, on by default from
// 11.8: a write met a row committed after the transaction's snapshot; run
// again, it reads a new one).
func Retryable(err error) bool {
	n := ErrorNumber(err)
	return n == ErrLockDeadlock || n == ErrLockWaitTimeout || n == ErrCheckRead
}

// Explain turns the driver errors a user can cause into one actionable sentence.
func Explain(err error) error {
	switch ErrorNumber(err) {
	case ErrAccessDenied:
		return fmt.Errorf("access denied: check the user and the password (MYSQL_PWD, --password-file or the option file): %w", err)
	case ErrBadDB:
		return fmt.Errorf("unknown database: check --database: %w", err)
	}
	return err
}

// Error numbers that mean the session is gone: the server shut down (1053),
// the connection was killed (1927; 3169 "session was killed") or timed out
// for inactivity (4031), and the client library's "server has gone away"
// (2006) and "lost connection during query" (2013).
var lostNumbers = map[uint16]bool{1053: true, 1927: true, 2006: true, 2013: true, 3169: true, 4031: true}

// ConnectionLost reports whether err means that the connection to the server
// broke: a network error, an unexpected EOF, the SQL driver's "invalid" or
// "bad" connection, the binlog client's "connection was bad", or a server
// error that ends the session. A statement that failed this way may or may
// not have committed. A cancelled or expired context is not a lost
// connection.
func ConnectionLost(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	for _, target := range []error{driver.ErrBadConn, mysql.ErrInvalidConn, gomysql.ErrBadConn,
		io.EOF, io.ErrUnexpectedEOF, net.ErrClosed, syscall.ECONNRESET, syscall.ECONNREFUSED,
		syscall.ECONNABORTED, syscall.EPIPE, syscall.ETIMEDOUT, syscall.EHOSTUNREACH, syscall.ENETUNREACH} {
		if errors.Is(err, target) {
			return true
		}
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	if lostNumbers[ErrorNumber(err)] {
		return true
	}
	var me *gomysql.MyError
	return errors.As(err, &me) && lostNumbers[me.Code]
}

// Backoff returns the pause before retry number attempt (from 1) after a
// lost connection: from about 100ms, doubling up to about 5s, with jitter.
func Backoff(attempt int) time.Duration {
	d := min(100*time.Millisecond<<min(max(attempt, 1)-1, 6), 5*time.Second)
	return d/2 + rand.N(d/2+1)
}

// RetryLost runs read, a statement that changes nothing, again while it
// fails by a lost connection, with Backoff, until it has failed so for
// within (0 or less: it is run once). onLost, if set, is told of each loss.
func RetryLost(ctx context.Context, within time.Duration, onLost func(attempt int, err error), read func() error) error {
	var lostAt time.Time
	for attempt := 1; ; attempt++ {
		err := read()
		if err == nil || within <= 0 || !ConnectionLost(err) || ctx.Err() != nil {
			return err
		}
		if lostAt.IsZero() {
			lostAt = time.Now()
		}
		left := within - time.Since(lostAt)
		if left <= 0 {
			return fmt.Errorf("connection lost, and not back within %s: %w", within, err)
		}
		if onLost != nil {
			onLost(attempt, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(min(Backoff(attempt), left)):
		}
	}
}

// ReaderHost is the host name sluice's binlog readers register with (the
// report host SHOW REPLICAS lists): replica discovery skips them, so that a
// run never takes another run's reader, or a sibling's in a group, for a
// replica it must wait for.
const ReaderHost = "sluice-binlog-reader"
