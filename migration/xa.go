package migration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/sluicedb/sluice/internal/dbconn"
)

// Prepared XA transactions. The server logs the rows of an XA transaction
// when it is prepared; its XA COMMIT, logged later, carries none. One
// prepared before the binlog position the capture starts from has its rows
// before that position, and the copy (a consistent read) does not see them
// until it commits: were it to commit during the copy, no change would ever
// bring its rows to the new table. So the copy starts only once every XA
// transaction prepared before the capture's start has ended; one prepared
// after it is read from the binlog like any other change.

// errPreparedXA: an XA transaction prepared before the start did not end in
// time.
var errPreparedXA = errors.New("XA transactions prepared before sluice started are still neither committed nor rolled back")

// xaPoll is how often the list of prepared XA transactions is read again.
const xaPoll = 100 * time.Millisecond

// The errors of XA RECOVER without the privilege to list other sessions'
// transactions: XAER_RMERR (MySQL 9.7), or access denied.
const (
	errXARMErr              = 1401
	errSpecificAccessDenied = 1227
)

// preparedXA returns the server's prepared XA transactions (XA RECOVER),
// each as one string. ok is false when the account may not list them (MySQL
// needs XA_RECOVER_ADMIN).
func preparedXA(ctx context.Context, db *sql.DB) (xids []string, ok bool, err error) {
	rows, err := db.QueryContext(ctx, "XA RECOVER")
	if err != nil {
		if n := dbconn.ErrorNumber(err); n == errXARMErr || n == errSpecificAccessDenied {
			return nil, false, nil // MySQL without XA_RECOVER_ADMIN
		}
		return nil, false, fmt.Errorf("list prepared XA transactions: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var format, gtridLen, bqualLen int64
		var data []byte
		if err := rows.Scan(&format, &gtridLen, &bqualLen, &data); err != nil {
			return nil, false, fmt.Errorf("list prepared XA transactions: %w", err)
		}
		xids = append(xids, formatXID(format, int(gtridLen), data))
	}
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("list prepared XA transactions: %w", err)
	}
	return xids, true, nil
}

// formatXID writes an XID as XA COMMIT takes it: 'gtrid','bqual',formatID,
// each part quoted when printable and in hex otherwise.
func formatXID(format int64, gtridLen int, data []byte) string {
	gtridLen = min(max(gtridLen, 0), len(data))
	part := func(b []byte) string {
		for _, r := range string(b) {
			if !unicode.IsPrint(r) || r == '\'' || r == '\\' {
				return fmt.Sprintf("X'%X'", b)
			}
		}
		return "'" + string(b) + "'"
	}
	return part(data[:gtridLen]) + "," + part(data[gtridLen:]) + "," + strconv.FormatInt(format, 10)
}

// waitPreparedXA waits, up to the lock deadline, until none of the XA
// transactions prepared now is prepared any more. Called once the capture's
// start position is taken, before the copy.
func (r *Runner) waitPreparedXA(ctx context.Context) error {
	before, ok, err := preparedXA(ctx, r.db)
	if err != nil {
		return err
	}
	if !ok {
		r.log.Warn("cannot list prepared XA transactions (XA RECOVER needs the XA_RECOVER_ADMIN privilege): " +
			"one prepared before the start and committed during the copy would make the checksum fail")
		return nil
	}
	if len(before) == 0 {
		return nil
	}
	r.log.Info("waiting for XA transactions prepared before the start to commit or roll back", "xids", strings.Join(before, " "))
	deadline := time.Now().Add(r.cfg.LockDeadline)
	for {
		now, _, err := preparedXA(ctx, r.db)
		if err != nil {
			return err
		}
		before = slices.DeleteFunc(before, func(x string) bool { return !slices.Contains(now, x) })
		if len(before) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w after %s (XA RECOVER lists %s): commit or roll them back (XA COMMIT or XA ROLLBACK with that XID), then run sluice again",
				errPreparedXA, r.cfg.LockDeadline, strings.Join(before, " "))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(xaPoll):
		}
	}
}
