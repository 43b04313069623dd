package copier

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/rowkey"
	"github.com/sluicedb/sluice/internal/schema"
)

// A copy statement whose connection breaks may or may not have committed:
// the shadow then holds either none of the range's rows or all of them, as
// the lost statement read them (a statement is atomic). Run again as it is,
// the INSERT would stop on a duplicate key. recopy instead clears the range
// in the shadow and copies it again, in one transaction.
//
// Clearing the range deletes nothing but the copy's own rows: the apply
// writes a key only once every range of its lane up to the key is reported
// copied (apply's frontier: a key waits until its lane's low watermark
// passes it), and this range is reported copied only after recopy commits.
// The range's predicate selects the same rows in the shadow as in the
// original only when the key columns have the same types in both (exact);
// otherwise the range is only inserted again, and a duplicate stops the
// copy.

// insert copies a range with one INSERT ... SELECT on a connection of its
// own, and returns the rows copied and the connection's id (0 if unknown).
func (c *Copier) insert(ctx context.Context, where string, args []any) (int64, int64, error) {
	conn, id, err := c.conn(ctx)
	if err != nil {
		return 0, id, err
	}
	defer conn.Close()
	return c.exec(ctx, conn, where, args, id)
}

// recopy copies a range again after the connections of sessions gone broke
// while copying it: it waits (until the time until at most) for those
// sessions to leave their statements, then, in one transaction, deletes the
// range in the shadow and copies it.
func (c *Copier) recopy(ctx context.Context, gone []int64, until time.Time, where string, args []any) (int64, int64, error) {
	conn, id, err := c.conn(ctx)
	if err != nil {
		return 0, id, err
	}
	defer conn.Close()
	if err := c.settle(ctx, conn, gone, until); err != nil {
		return 0, id, err
	}
	if !c.exact {
		return c.exec(ctx, conn, where, args, id)
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return 0, id, err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "DELETE FROM "+c.cfg.Mapping.Target.Quoted()+" WHERE "+where, args...); err != nil {
		return 0, id, err
	}
	n, _, err := c.exec(ctx, tx, where, args, id)
	if err != nil {
		return 0, id, err
	}
	return n, id, tx.Commit()
}

func (c *Copier) conn(ctx context.Context) (*sql.Conn, int64, error) {
	conn, err := c.cfg.DB.Conn(ctx)
	if err != nil {
		return nil, 0, err
	}
	var id int64
	if err := conn.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
		conn.Close()
		return nil, 0, err
	}
	return conn, id, nil
}

func (c *Copier) exec(ctx context.Context, q Execer, where string, args []any, id int64) (int64, int64, error) {
	res, err := q.ExecContext(ctx, c.cfg.Mapping.CopySQL()+where, args...)
	if err != nil {
		return 0, id, err
	}
	n, err := res.RowsAffected()
	return n, id, err
}

// settle waits until none of the sessions ids runs a copy statement into
// the shadow, or until the time until. A connection that broke on sluice's
// side (a network fault) can leave its statement running on the server,
// which commits it when it ends. Only a lost connection is returned as an
// error: without the answer the copy goes on (see copySpan's duplicate
// retry).
func (c *Copier) settle(ctx context.Context, q *sql.Conn, ids []int64, until time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	prefix := "INSERT INTO " + c.cfg.Mapping.Target.Quoted()
	args := []any{prefix, prefix}
	for _, id := range ids {
		args = append(args, id)
	}
	query := `SELECT COUNT(*) FROM performance_schema.threads
		WHERE PROCESSLIST_COMMAND = 'Query' AND LEFT(PROCESSLIST_INFO, CHAR_LENGTH(?)) = ?
		AND PROCESSLIST_ID IN (?` + strings.Repeat(", ?", len(ids)-1) + ")"
	for time.Now().Before(until) {
		var n int
		if err := q.QueryRowContext(ctx, query, args...).Scan(&n); err != nil {
			if dbconn.ConnectionLost(err) || ctx.Err() != nil {
				return err
			}
			return nil
		}
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// sameKeyTypes reports whether every key column has the same type (and
// character set and collation) in the shadow as in the original, or is an
// integer in both (the copy keeps an integer's value or fails).
func sameKeyTypes(m *schema.Mapping, key rowkey.Cols) bool {
	if m == nil {
		return false
	}
	for _, k := range key {
		to, ok := m.Target.Column(k.Name)
		if !ok {
			return false
		}
		same := to.ColumnType == k.ColumnType && to.Charset == k.Charset && to.Collation == k.Collation
		if !same && !(integer(k.DataType) && integer(to.DataType)) {
			return false
		}
	}
	return true
}

func integer(dataType string) bool {
	switch dataType {
	case "tinyint", "smallint", "mediumint", "int", "integer", "bigint":
		return true
	}
	return false
}

// keyDup reports whether err is a duplicate on the row key, index (PRIMARY,
// or a unique index on a table without a primary key), or on the primary key:
// when the ALTER changed it, rows are found by another index, and a row
// written twice meets itself on the clustered index first. MySQL names the
// index table.index in the message, MariaDB index alone.
func keyDup(err error, index string) bool {
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != dbconn.ErrDupEntry {
		return false
	}
	for _, ix := range []string{index, "PRIMARY"} {
		if ix != "" && (strings.HasSuffix(me.Message, "."+ix+"'") || strings.HasSuffix(me.Message, "'"+ix+"'")) {
			return true
		}
	}
	return false
}
