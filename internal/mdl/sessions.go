// Package mdl finds who holds or waits for metadata locks on a table, and
// decides, without a server, whether a statement that needs an exclusive
// metadata lock should go on waiting, give up its attempt, or (by policy)
// kill a blocker.
//
// While a statement waits for an exclusive metadata lock, every new query on
// the table queues behind it: a harmless long SELECT becomes an outage. The
// sessions here come from performance_schema.metadata_locks (which locks, held
// or pending), performance_schema.threads (who, doing what, for how long) and
// information_schema.innodb_trx (the open transaction's age and the rows it
// modified).
package mdl

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sluicedb/sluice/internal/dbconn"
)

// Session is another connection with a metadata lock on the table, granted or
// pending.
type Session struct {
	ID      int64 // processlist id, the target of KILL
	User    string
	Host    string
	Command string        // Query, Sleep, ...
	Time    time.Duration // in its current state
	State   string        // e.g. "User sleep", "Waiting for table metadata lock"
	Query   string        // the statement it runs now, shortened
	// Held and Pending list the lock types, e.g. SHARED_READ.
	Held, Pending []string
	// Explicit is set when a held lock comes from LOCK TABLES (or FLUSH
	// TABLES ... WITH READ LOCK).
	Explicit bool
	// TrxAge and RowsModified describe its open InnoDB transaction, if any.
	TrxAge       time.Duration
	RowsModified int64
	// TrxUnknown is set when the transactions could not be read: MySQL fails
	// to read information_schema.INNODB_TRX (utf8mb3) while any session's
	// statement holds a 4-byte character (error 3854); or when a session
	// holds a write lock for its transaction and INNODB_TRX, a cache up to
	// 100ms old, does not list the transaction yet.
	TrxUnknown bool
	// InTrx is set when it holds a lock for the length of a transaction: it
	// is inside one, whether INNODB_TRX lists it or not (MariaDB does not
	// list a transaction that only read).
	InTrx bool
}

// Blocking reports whether the session holds a lock on the table: it is in
// the way of an exclusive request.
func (s Session) Blocking() bool { return len(s.Held) > 0 }

// Queued reports whether the session only waits for a lock on the table.
func (s Session) Queued() bool { return len(s.Pending) > 0 && len(s.Held) == 0 }

// HeldFor is how long the session has been in the way at least: its running
// statement's time, or its open transaction's age, whichever is longer. Both
// are counted from a whole second (PROCESSLIST_TIME, trx_started), so a
// session a few milliseconds old may show 1s: one second is taken off.
func (s Session) HeldFor() time.Duration { return max(s.age()-time.Second, 0) }

// age is how long the session has held what it holds, as the server counts
// it (whole seconds): its open transaction's age or its statement's time,
// whichever is longer.
func (s Session) age() time.Duration {
	d := s.TrxAge
	if s.Command == "Query" || (s.InTrx && s.Command == "Sleep") {
		// Idle inside its transaction that long, holding the lock.
		d = max(d, s.Time)
	}
	return d
}

// Wrote reports whether the session's open transaction modified rows.
func (s Session) Wrote() bool { return s.RowsModified > 0 || s.TrxUnknown }

// String describes the session in one line for the log and errors. It never
// includes more than the first 120 characters of the statement.
func (s Session) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "connection %d (%s@%s", s.ID, s.User, s.Host)
	if s.Command != "" {
		fmt.Fprintf(&b, ", %s %s", s.Command, s.Time.Round(time.Second))
	}
	b.WriteString(")")
	if len(s.Held) > 0 {
		fmt.Fprintf(&b, " holds %s", strings.Join(s.Held, ","))
	}
	if len(s.Pending) > 0 {
		fmt.Fprintf(&b, " waits for %s", strings.Join(s.Pending, ","))
	}
	if s.Explicit {
		b.WriteString(" under LOCK TABLES")
	}
	switch {
	case s.TrxAge > 0:
		fmt.Fprintf(&b, "; transaction open %s, %d rows modified", s.TrxAge.Round(time.Second), s.RowsModified)
	case s.InTrx:
		b.WriteString("; transaction open (InnoDB does not list it: its age and rows are unknown)")
	}
	if q := strings.Join(strings.Fields(s.Query), " "); q != "" {
		if len(q) > 120 {
			q = q[:117] + "..."
		}
		fmt.Fprintf(&b, "; running: %s", q)
	} else if s.State != "" {
		fmt.Fprintf(&b, "; state: %s", s.State)
	}
	return b.String()
}

// Querier runs queries: a *sql.DB or a *sql.Conn.
type Querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

const locksSQL = `SELECT t.PROCESSLIST_ID, COALESCE(t.PROCESSLIST_USER, ''), COALESCE(t.PROCESSLIST_HOST, ''),
	COALESCE(t.PROCESSLIST_COMMAND, ''), COALESCE(t.PROCESSLIST_TIME, 0), COALESCE(t.PROCESSLIST_STATE, ''),
	COALESCE(LEFT(t.PROCESSLIST_INFO, 400), ''), ml.LOCK_TYPE, ml.LOCK_STATUS, ml.LOCK_DURATION,
	` + trxCols + `
FROM performance_schema.metadata_locks ml
JOIN performance_schema.threads t ON t.THREAD_ID = ml.OWNER_THREAD_ID
` + trxJoin + `
WHERE ml.OBJECT_TYPE = 'TABLE' AND ml.OBJECT_SCHEMA = ? AND ml.OBJECT_NAME IN (%s)
	AND t.PROCESSLIST_ID IS NOT NULL AND t.PROCESSLIST_ID NOT IN (%s)
	AND NOT EXISTS (SELECT 1 FROM performance_schema.session_connect_attrs a
		WHERE a.PROCESSLIST_ID = t.PROCESSLIST_ID AND a.ATTR_NAME = '` + RunAttr + `' AND a.ATTR_VALUE = ?)
ORDER BY t.PROCESSLIST_ID`

const (
	trxCols = "COALESCE(TIMESTAMPDIFF(MICROSECOND, x.trx_started, NOW(6)), 0), COALESCE(x.trx_rows_modified, 0), x.trx_id IS NULL"
	trxJoin = "LEFT JOIN information_schema.INNODB_TRX x ON x.trx_mysql_thread_id = t.PROCESSLIST_ID"
	// errCannotConvert is MySQL's ER_CANNOT_CONVERT_STRING.
	errCannotConvert = 3854
)

// RunAttr is the connection attribute that marks the connections of one
// sluice run (dbconn.Config.RunID): they are sluice's own, never blockers.
const RunAttr = "sluice_run"

// Sessions lists the connections other than self, and other than those of
// the sluice run ownRun (if not ""), with a metadata lock, granted or pending,
// on any of tables in database db, ordered by id.
func Sessions(ctx context.Context, q Querier, db string, tables []string, ownRun string, self ...int64) ([]Session, error) {
	if len(tables) == 0 {
		return nil, nil
	}
	args := []any{db}
	for _, t := range tables {
		args = append(args, t)
	}
	ids := []string{"0"}
	for _, id := range self {
		ids = append(ids, fmt.Sprint(id))
	}
	args = append(args, ownRun)
	query := fmt.Sprintf(locksSQL, strings.TrimSuffix(strings.Repeat("?, ", len(tables)), ", "), strings.Join(ids, ", "))
	out, err := readSessions(ctx, q, query, args, false)
	if dbconn.ErrorNumber(err) == errCannotConvert {
		// Without the transactions: their age and size stay unknown.
		query = strings.Replace(strings.Replace(query, trxJoin, "", 1), trxCols, "0, 0, 1", 1)
		out, err = readSessions(ctx, q, query, args, true)
	}
	return out, err
}

// readSessions runs the sessions query; the error may come with the rows.
func readSessions(ctx context.Context, q Querier, query string, args []any, unknown bool) ([]Session, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("read metadata locks (performance_schema.metadata_locks): %w", err)
	}
	defer rows.Close()
	var out []Session
	for rows.Next() {
		var s Session
		var secs, trxMicros int64
		var typ, status, duration string
		var noTrx bool
		if err := rows.Scan(&s.ID, &s.User, &s.Host, &s.Command, &secs, &s.State, &s.Query, &typ, &status, &duration,
			&trxMicros, &s.RowsModified, &noTrx); err != nil {
			return nil, err
		}
		s.Time, s.TrxAge = time.Duration(secs)*time.Second, time.Duration(trxMicros)*time.Microsecond
		// A session that holds a write lock for its transaction has written
		// in it; if INNODB_TRX does not list it (the server serves that table
		// from a cache up to 100ms old), what it wrote is not known.
		s.TrxUnknown = unknown || (noTrx && status == "GRANTED" && duration == "TRANSACTION" && strings.HasPrefix(typ, "SHARED_WRITE"))
		s.InTrx = status == "GRANTED" && duration == "TRANSACTION"
		if n := len(out); n > 0 && out[n-1].ID == s.ID {
			out[n-1].addLock(typ, status, duration)
			out[n-1].TrxUnknown = out[n-1].TrxUnknown || s.TrxUnknown
			out[n-1].InTrx = out[n-1].InTrx || s.InTrx
			continue
		}
		s.addLock(typ, status, duration)
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read metadata locks (performance_schema.metadata_locks): %w", err)
	}
	return out, nil
}

func (s *Session) addLock(typ, status, duration string) {
	switch status {
	case "GRANTED":
		if !slices.Contains(s.Held, typ) {
			s.Held = append(s.Held, typ)
		}
		if duration == "EXPLICIT" {
			s.Explicit = true
		}
	case "PENDING":
		if !slices.Contains(s.Pending, typ) {
			s.Pending = append(s.Pending, typ)
		}
	}
}
