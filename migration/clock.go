package migration

import (
	"context"
	"database/sql"
	"fmt"
	"maps"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/ddl"
)

// A column the ALTER adds with the current time for its default
// (CURRENT_TIMESTAMP, NOW(), CURDATE()...) holds, after the server's own
// ALTER, the moment of that ALTER in every row. The copy inserts each row,
// and again whenever the application changes it, so each would hold the
// moment sluice last copied it. Instead, the sessions that write the new
// table read the clock stopped at one moment, chosen once for the migration
// and kept in its checkpoint: the server's timestamp session variable, which
// those functions follow (SYSDATE() does not: it is refused, ddl.Volatile).

// stoppedClock reports whether the ALTER adds a column whose value is the
// current time.
func (r *Runner) stoppedClock() bool {
	for _, v := range r.alter.NonDeterministic {
		if v.Kind == ddl.VolatileTime {
			return true
		}
	}
	return false
}

// openWriters sets r.wdb, the pool whose sessions write the new table (the
// copy and the apply): r.db, or, where stoppedClock, a pool whose sessions'
// clock stands at the migration's moment (the checkpoint's, or now).
func (r *Runner) openWriters(ctx context.Context) error {
	r.wdb = r.db
	if !r.stoppedClock() {
		return nil
	}
	r.ckptMu.Lock()
	at := ""
	if r.ckpt != nil {
		at = r.ckpt.Clock
	}
	r.ckptMu.Unlock()
	if at == "" {
		if err := r.db.QueryRowContext(ctx, "SELECT CAST(UNIX_TIMESTAMP(NOW(6)) AS CHAR)").Scan(&at); err != nil {
			return fmt.Errorf("read the server's clock: %w", err)
		}
		r.ckptMu.Lock()
		if r.ckpt != nil {
			r.ckpt.Clock = at
		}
		r.clock = at
		r.ckptMu.Unlock()
	}
	conn := r.cfg.Conn
	conn.Params = maps.Clone(conn.Params)
	if conn.Params == nil {
		conn.Params = map[string]string{}
	}
	conn.Params["timestamp"] = at
	r.clock = at
	db, err := dbconn.Open(ctx, conn, r.cfg.Database, r.poolSize())
	if err != nil {
		return err
	}
	r.wdb = db
	r.log.Info("the new columns' current-time defaults take one moment for every row, as the server's own ALTER gives them", "unix_time", at)
	return nil
}

// closeWriters closes r.wdb if it is a pool of its own.
func (r *Runner) closeWriters() {
	if r.wdb != nil && r.wdb != r.db {
		r.wdb.Close()
	}
}

// stopClock sets conn's clock to the migration's moment (where stoppedClock)
// for the apply under the cut-over's lock; the returned func sets it going.
func (r *Runner) stopClock(ctx context.Context, conn *sql.Conn) (func(), error) {
	if r.wdb == nil || r.wdb == r.db {
		return func() {}, nil
	}
	if _, err := conn.ExecContext(ctx, "SET SESSION timestamp = "+r.clock); err != nil {
		return nil, err
	}
	return func() { conn.ExecContext(context.WithoutCancel(ctx), "SET SESSION timestamp = DEFAULT") }, nil
}
