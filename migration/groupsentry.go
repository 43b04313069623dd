package migration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/mdl"
)

// A group's cut-over on MariaDB, which refuses RENAME TABLE under LOCK
// TABLES. One table's swap by sentry (sentry.go) rests on the RENAME waiting
// on the original: a waiting exclusive request is granted before the writes
// queued with it. A statement takes its metadata locks one at a time in the
// order of their keys, so a RENAME of several tables can wait on one original
// only, the first locked one it meets; the writes queued on the others would
// be let in the moment their locks went, before the RENAME asks for them.
// So the originals are let go one at a time, each when the RENAME is seen
// waiting on it:
//
//  1. Each table has its sentry (makeSentry). Each original is read-locked
//     by a connection of its own, all in one guarded attempt (the first by
//     the guard's own connection, the others by holdEach: a READ lock
//     cannot be shared once writes queue behind it, since a waiting write
//     goes ahead of a later READ request). Writes stop on every table; the
//     last changes are applied and checked (finishLocked).
//  2. Another connection sends one RENAME TABLE: every original to its
//     sentry's name first, then every shadow to its original's, then every
//     sentry's name to the old one.
//  3. Probes find the one original the RENAME waits on (a read of it is
//     refused at once). Its sentry is dropped and its connection unlocks:
//     the RENAME takes it ahead of the writes queued there, and goes on to
//     wait on the next held original (the sentries sort right after their
//     originals: it has not taken any still to drop). Again until none is
//     held; the RENAME then runs.
//
// If sluice or any of the holding connections is lost before the last
// sentry is dropped, the RENAME meets a sentry that still exists and fails
// whole (MariaDB undoes the renames it made before the failing one): nothing
// is renamed, and the writes land in the originals, still the tables the
// binlog is read for. Probed on MariaDB 10.11 and 11.8.

// holdEach read-locks the originals of rs[1:], each on a connection of its
// own, while lock holds rs[0]'s (step 1). Their waits are the attempt's:
// the guard watches them, and a lock wait fails the attempt, which is
// tried again. The connections come in the order of rs, lock first; close
// lets go of every lock they hold.
func holdEach(ctx context.Context, rs []*Runner, lock *sql.Conn) (holds []*sql.Conn, release func(), err error) {
	lead := rs[0]
	holds = []*sql.Conn{lock}
	release = func() {
		for _, h := range holds[1:] {
			discard(h) // its lock goes with it
		}
	}
	for _, r := range rs[1:] {
		h, err := lead.db.Conn(ctx)
		if err != nil {
			return holds, release, err
		}
		holds = append(holds, h)
		var id int64
		if err := h.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
			return holds, release, err
		}
		mdl.AlsoWaits(ctx, id)
		if _, err := h.ExecContext(ctx, fmt.Sprintf("SET SESSION lock_wait_timeout = %d", lead.lockGuard().Policy.LockWaitSeconds())); err != nil {
			return holds, release, err
		}
		if _, err := h.ExecContext(ctx, "LOCK TABLES "+r.orig.Quoted()+" READ"); err != nil {
			return holds, release, err
		}
	}
	return holds, release, nil
}

// renameBySentries is steps 2 and 3: holds[i] read-locks the original of
// rs[i], whose last changes were applied. It returns once the RENAME has
// ended, with its error.
func renameBySentries(ctx context.Context, rs []*Runner, holds []*sql.Conn) error {
	lead := rs[0]
	var conns []*sql.Conn
	defer func() {
		for _, c := range conns {
			discard(c)
		}
	}()
	open := func(wait int) (*sql.Conn, error) {
		c, err := lead.db.Conn(ctx)
		if err != nil {
			return nil, err
		}
		conns = append(conns, c)
		_, err = c.ExecContext(ctx, fmt.Sprintf("SET SESSION lock_wait_timeout = %d", wait))
		return c, err
	}
	conn, err := open(lead.lockGuard().Policy.LockWaitSeconds())
	if err != nil {
		return err
	}
	var id int64
	if err := conn.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
		return err
	}
	mdl.AlsoWaits(ctx, id)
	probe, err := open(0)
	if err != nil {
		return err
	}
	drop, err := open(1)
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() {
		_, err := conn.ExecContext(context.WithoutCancel(ctx), groupSentryRename(rs))
		done <- err
	}()
	abandon := func(why error) error {
		// The RENAME must not run: kill it while a sentry still stops it,
		// and wait for it to end before the locks go.
		kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		lead.db.ExecContext(kctx, fmt.Sprintf("KILL QUERY %d", id))
		if err := <-done; err == nil {
			return fmt.Errorf("%w (and the RENAME ran)", why)
		}
		return why
	}
	if ended, err := lead.waitMDLWait(ctx, id, done); ended {
		return err
	} else if err != nil {
		return abandon(err)
	}
	left := make([]int, len(rs))
	for i := range left {
		left[i] = i
	}
	for len(left) > 0 {
		j, ended, err := waitingOn(ctx, rs, left, probe, done)
		if ended {
			return err // the RENAME's own end: it cannot have run while an original was held
		} else if err != nil {
			return abandon(err)
		}
		r := rs[j]
		if _, err := drop.ExecContext(ctx, "DROP TABLE "+dbconn.QuoteTable(r.cfg.Database, r.sentry)); err != nil {
			return abandon(fmt.Errorf("drop the cut-over sentry %s: %w", r.sentry, err))
		}
		if _, err := holds[j].ExecContext(ctx, "UNLOCK TABLES"); err != nil {
			return abandon(fmt.Errorf("unlock %s: %w", r.orig.Name, err))
		}
		left = slices.DeleteFunc(left, func(i int) bool { return i == j })
		if len(left) > 0 {
			failpoint("group-sentry-let-go") // a death here renames nothing (kill tests)
		}
	}
	return <-done
}

// groupSentryRename is the group's RENAME TABLE on MariaDB: each original to
// its sentry's name first, so that a sentry that still exists fails the
// statement before any shadow is renamed.
func groupSentryRename(rs []*Runner) string {
	var away, in, old []string
	for _, r := range rs {
		sentryQ := dbconn.QuoteTable(r.cfg.Database, r.sentry)
		away = append(away, r.orig.Quoted()+" TO "+sentryQ)
		in = append(in, dbconn.QuoteTable(r.cfg.Database, r.names.Shadow)+" TO "+r.orig.Quoted())
		old = append(old, sentryQ+" TO "+dbconn.QuoteTable(r.cfg.Database, r.names.Old))
	}
	return "RENAME TABLE " + strings.Join(slices.Concat(away, in, old), ", ")
}

// waitingOn finds the one original among rs[left] the RENAME waits on: a
// read of it, which the holding connections' READ locks allow, is refused at
// once while an exclusive request is queued there. It gives up with
// mdl.ErrRetry if none is found within a moment, or more than one (another
// session's DDL waits too). If the RENAME ends first, ended is true and err
// is its result.
func waitingOn(ctx context.Context, rs []*Runner, left []int, probe *sql.Conn, done <-chan error) (j int, ended bool, err error) {
	for try := 0; ; try++ {
		var queued []int
		for _, i := range left {
			_, err := probe.ExecContext(ctx, "SELECT 1 FROM "+rs[i].orig.Quoted()+" LIMIT 0")
			var me *mysql.MySQLError
			switch {
			case errors.As(err, &me) && me.Number == 1205:
				queued = append(queued, i)
			case err != nil:
				return 0, false, fmt.Errorf("probe the cut-over's RENAME: %w", err)
			}
		}
		switch {
		case len(queued) == 1:
			return queued[0], false, nil
		case len(queued) > 1:
			return 0, false, fmt.Errorf("%w: exclusive lock requests wait on %d of the group's tables: another session's DDL waits too", mdl.ErrRetry, len(queued))
		case try == 20:
			return 0, false, fmt.Errorf("%w: the RENAME waits on a lock other than the originals' (another session holds a table it renames)", mdl.ErrRetry)
		}
		select {
		case err := <-done:
			if err != nil {
				err = fmt.Errorf("the RENAME ended before the group's tables were let go: %w", err)
			}
			return 0, true, err
		case <-ctx.Done():
			return 0, false, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}
