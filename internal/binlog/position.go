// Package binlog reads the server's binary log from a given position and turns
// every row change of one table into the primary keys it touched. It also stops
// with an error when it sees something that would make those keys incomplete:
// a DDL statement on the table, or a statement-format write to it.
package binlog

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"

	"github.com/sluicedb/sluice/internal/dbconn"
)

// Position is a place in the binary log.
type Position struct {
	File string
	Pos  uint32
}

func (p Position) String() string { return fmt.Sprintf("%s:%d", p.File, p.Pos) }

// Compare returns -1, 0 or 1 as p is before, at or after q. Binlog files are
// ordered by their numeric suffix.
func (p Position) Compare(q Position) int {
	pf, qf := fileSeq(p.File), fileSeq(q.File)
	switch {
	case pf < qf:
		return -1
	case pf > qf:
		return 1
	case p.Pos < q.Pos:
		return -1
	case p.Pos > q.Pos:
		return 1
	}
	return 0
}

func fileSeq(name string) int64 {
	i := strings.LastIndexByte(name, '.')
	if i < 0 {
		return 0
	}
	n, err := strconv.ParseInt(name[i+1:], 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// status returns the row of SHOW BINARY LOG STATUS (MySQL 8.2+, falling
// back to SHOW MASTER STATUS) by column name, or nil when the binary log is
// off.
func status(ctx context.Context, q dbconn.Querier) (map[string]string, error) {
	var lastErr error
	for _, stmt := range []string{"SHOW BINARY LOG STATUS", "SHOW MASTER STATUS"} {
		rows, err := q.QueryContext(ctx, stmt)
		if err != nil {
			lastErr = err
			continue
		}
		defer rows.Close()
		cols, err := rows.Columns()
		if err != nil {
			return nil, err
		}
		if !rows.Next() {
			return nil, rows.Err()
		}
		vals := make([]sql.RawBytes, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		out := make(map[string]string, len(cols))
		for i, c := range cols {
			out[strings.ToLower(c)] = string(vals[i])
		}
		return out, rows.Err()
	}
	return nil, fmt.Errorf("read the binary log status: %w", lastErr)
}

// CurrentPosition returns the end of the server's binary log.
func CurrentPosition(ctx context.Context, q dbconn.Querier) (Position, error) {
	st, err := status(ctx, q)
	if err != nil {
		return Position{}, err
	}
	if st == nil {
		return Position{}, fmt.Errorf("the binary log is off: SHOW BINARY LOG STATUS returned nothing")
	}
	pos, err := strconv.ParseUint(st["position"], 10, 32)
	if err != nil {
		return Position{}, fmt.Errorf("binary log position %q: %w", st["position"], err)
	}
	return Position{File: st["file"], Pos: uint32(pos)}, nil
}

// Filters returns the server's binlog filters (--binlog-do-db and
// --binlog-ignore-db), as SHOW BINARY LOG STATUS shows them.
func Filters(ctx context.Context, q dbconn.Querier) (do, ignore []string, err error) {
	st, err := status(ctx, q)
	if err != nil {
		return nil, nil, err
	}
	list := func(v string) []string {
		var out []string
		for _, d := range strings.Split(v, ",") {
			if d = strings.TrimSpace(d); d != "" {
				out = append(out, d)
			}
		}
		return out
	}
	return list(st["binlog_do_db"]), list(st["binlog_ignore_db"]), nil
}
