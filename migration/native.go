package migration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/mdl"
)

// errRefused means the server will not run the ALTER with the algorithm
// sluice asked for; an automatic plan then takes the copy path.
var errRefused = errors.New("the server refuses this algorithm")

// Server errors that mean "not with this algorithm".
const (
	errAlterNotSupported       = 1845 // ER_ALTER_OPERATION_NOT_SUPPORTED
	errAlterNotSupportedReason = 1846 // ER_ALTER_OPERATION_NOT_SUPPORTED_REASON
	errMaxRowVersions          = 4092 // ER_INNODB_MAX_ROW_VERSION
	errInstantAddNotSupported  = 4080 // ER_INNODB_INSTANT_ADD_NOT_SUPPORTED_MAX_SIZE
)

// runInstant changes the table with ALGORITHM=INSTANT.
func (r *Runner) runInstant(ctx context.Context) error {
	return r.nativeAlter(ctx, "ALGORITHM=INSTANT", nil)
}

// runInplace changes the table in place, without blocking writes, with the
// planner's parallel index-build settings, and records InnoDB's peak DDL
// memory while it runs.
func (r *Runner) runInplace(ctx context.Context) error {
	if r.vars.Flavor == dbconn.MariaDB {
		// MariaDB has neither the parallel build's settings nor its memory
		// instrument: the server's own build, reported as such.
		return r.nativeAlter(ctx, "ALGORITHM=INPLACE, LOCK=NONE", nil)
	}
	d := r.ddl
	r.res.DDL = &d
	peak := watchDDLMemory(ctx, r.db)
	err := r.nativeAlter(ctx, "ALGORITHM=INPLACE, LOCK=NONE", []string{
		fmt.Sprintf("SET SESSION innodb_ddl_threads = %d", d.Threads),
		fmt.Sprintf("SET SESSION innodb_ddl_buffer_size = %d", d.BufferBytes),
		fmt.Sprintf("SET SESSION innodb_parallel_read_threads = %d", d.ReadThreads),
	})
	r.res.DDLPeakBytes = peak()
	return err
}

// nativeAlter runs the user's ALTER on the table itself with the given
// algorithm, through the metadata-lock guard (package mdl): each wait for the
// lock is bounded by LockWait, so no query queues behind sluice longer than
// that; an attempt ends early when MaxQueued queries pile up behind it;
// blockers are named in the log and the final error, and killed only as
// KillAfter allows; attempts are retried with backoff and jitter until
// LockDeadline. If ctx ends while the ALTER runs, the statement is killed:
// InnoDB DDL is atomic, so the table stays as it was.
func (r *Runner) nativeAlter(ctx context.Context, algorithm string, settings []string) error {
	q := "ALTER TABLE " + r.orig.Quoted() + " " + r.alter.Clause + ", " + algorithm
	g := r.lockGuard(r.orig.Name)
	err := g.Run(ctx, "ALTER TABLE "+r.orig.Name+" "+algorithm, func(ctx context.Context, conn *sql.Conn) error {
		r.lockAttempts.Add(1)
		var id int64
		if err := conn.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
			return err
		}
		for _, s := range settings {
			if _, err := conn.ExecContext(ctx, s); err != nil {
				r.log.Info("cannot tune the index build; using the server's defaults", "setting", s, "err", err)
			}
		}
		return r.execKillable(ctx, conn, id, q)
	})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, mdl.ErrDeadline):
		return fmt.Errorf("%w; the table is unchanged", err)
	}
	switch dbconn.ErrorNumber(err) {
	case errAlterNotSupported, errAlterNotSupportedReason, errMaxRowVersions, errInstantAddNotSupported:
		return fmt.Errorf("%w: %v", errRefused, err)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return preflightErr("the ALTER does not apply to %s: %v", r.orig.Name, err)
}

// lockGuard returns the metadata-lock guard for statements on tables.
func (r *Runner) lockGuard(tables ...string) *mdl.Guard {
	return &mdl.Guard{DB: r.db, Database: r.cfg.Database, Tables: tables, Log: r.log, OwnRun: r.cfg.Conn.RunID, Policy: mdl.Policy{
		Budget: r.cfg.LockWait, Deadline: r.cfg.LockDeadline, MaxQueued: r.cfg.MaxQueued,
		KillAfter: r.cfg.KillAfter, KillMaxRows: r.cfg.KillMaxRows,
	}}
}

// execKillable runs q on conn; if ctx ends first it kills the statement from
// another connection and waits for it to end, so no DDL outlives sluice.
func (r *Runner) execKillable(ctx context.Context, conn *sql.Conn, id int64, q string) error {
	done := make(chan error, 1)
	go func() {
		_, err := conn.ExecContext(context.WithoutCancel(ctx), q)
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if _, err := r.db.ExecContext(kctx, fmt.Sprintf("KILL QUERY %d", id)); err != nil {
			r.log.Warn("could not kill the ALTER", "err", err)
		}
		select {
		case <-done:
		case <-kctx.Done():
		}
		return ctx.Err()
	}
}

// watchDDLMemory samples InnoDB's DDL memory (performance_schema,
// memory/innodb/ddl) until the returned function is called, which returns
// the peak seen: the larger of the samples and of the high-water mark when
// that rose while watching. 0 when performance_schema cannot be read.
func watchDDLMemory(ctx context.Context, db *sql.DB) func() int64 {
	const q = `SELECT CURRENT_NUMBER_OF_BYTES_USED, HIGH_NUMBER_OF_BYTES_USED
		FROM performance_schema.memory_summary_global_by_event_name WHERE EVENT_NAME = 'memory/innodb/ddl'`
	var cur, high0 int64
	if db.QueryRowContext(ctx, q).Scan(&cur, &high0) != nil {
		return func() int64 { return 0 }
	}
	var mu sync.Mutex
	peak := int64(0)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				var c, h int64
				if db.QueryRowContext(ctx, q).Scan(&c, &h) == nil {
					mu.Lock()
					peak = max(peak, c)
					if h > high0 {
						peak = max(peak, h)
					}
					mu.Unlock()
				}
			}
		}
	}()
	return func() int64 {
		close(stop)
		<-done
		var c, h int64
		if db.QueryRowContext(context.WithoutCancel(ctx), q).Scan(&c, &h) == nil && h > high0 {
			mu.Lock()
			peak = max(peak, h)
			mu.Unlock()
		}
		mu.Lock()
		defer mu.Unlock()
		return peak
	}
}
