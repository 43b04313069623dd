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

// CurrentPosition returns the end of the server's binary log: SHOW BINARY LOG
// STATUS (MySQL 8.2+), falling back to SHOW MASTER STATUS.
func CurrentPosition(ctx context.Context, q interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}) (Position, error) {
	var lastErr error
	for _, stmt := range []string{"SHOW BINARY LOG STATUS", "SHOW MASTER STATUS"} {
		rows, err := q.QueryContext(ctx, stmt)
		if err != nil {
			lastErr = err
			continue
		}
		p, err := scanPosition(rows)
		if err != nil {
			return Position{}, err
		}
		return p, nil
	}
	return Position{}, fmt.Errorf("read binary log position: %w", lastErr)
}

func scanPosition(rows *sql.Rows) (Position, error) {
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return Position{}, err
	}
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return Position{}, err
		}
		return Position{}, fmt.Errorf("the binary log is off: SHOW BINARY LOG STATUS returned nothing")
	}
	vals := make([]sql.RawBytes, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return Position{}, err
	}
	pos, err := strconv.ParseUint(string(vals[1]), 10, 32)
	if err != nil {
		return Position{}, fmt.Errorf("binary log position %q: %w", vals[1], err)
	}
	return Position{File: string(vals[0]), Pos: uint32(pos)}, rows.Err()
}

// Filters returns the server's binlog filters (--binlog-do-db and
// --binlog-ignore-db), as SHOW BINARY LOG STATUS shows them.
func Filters(ctx context.Context, q interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}) (do, ignore []string, err error) {
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
			return nil, nil, err
		}
		if !rows.Next() {
			return nil, nil, rows.Err()
		}
		vals := make([]sql.RawBytes, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, nil, err
		}
		list := func(v sql.RawBytes) []string {
			var out []string
			for _, d := range strings.Split(string(v), ",") {
				if d = strings.TrimSpace(d); d != "" {
					out = append(out, d)
				}
			}
			return out
		}
		for i, c := range cols {
			switch {
			case strings.EqualFold(c, "Binlog_Do_DB"):
				do = list(vals[i])
			case strings.EqualFold(c, "Binlog_Ignore_DB"):
				ignore = list(vals[i])
			}
		}
		return do, ignore, rows.Err()
	}
	return nil, nil, fmt.Errorf("read binary log filters: %w", lastErr)
}
