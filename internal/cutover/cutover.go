// Package cutover takes table locks without letting the application queue
// behind sluice for long. Every LOCK TABLES attempt is bounded by
// lock_wait_timeout: while it waits for a long transaction, new queries on the
// table wait behind it, so the bound is also the longest stall sluice can
// cause. A failed attempt is retried after a backoff that lets the queue drain.
package cutover

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/sluicedb/sluice/internal/dbconn"
)

// ErrLockTimeout means no attempt got the lock within its bound.
var ErrLockTimeout = errors.New("could not lock the tables within the bound")

// Policy bounds and spaces the lock attempts.
type Policy struct {
	Timeout  time.Duration // longest wait of one attempt (default 2s; whole seconds, at least 1)
	Attempts int           // default 10
	Backoff  time.Duration // wait after the first failed attempt (default 1s), doubling, at most 30s
}

func (p Policy) withDefaults() Policy {
	if p.Timeout <= 0 {
		p.Timeout = 2 * time.Second
	}
	if p.Attempts <= 0 {
		p.Attempts = 10
	}
	if p.Backoff <= 0 {
		p.Backoff = time.Second
	}
	return p
}

// LockWaitSeconds is the lock_wait_timeout for one attempt: the bound rounded
// up to whole seconds, at least 1.
func (p Policy) LockWaitSeconds() int {
	p = p.withDefaults()
	return max(1, int(math.Ceil(p.Timeout.Seconds())))
}

// Delay is the pause after failed attempt number attempt (0-based).
func (p Policy) Delay(attempt int) time.Duration {
	p = p.withDefaults()
	d := p.Backoff << uint(min(attempt, 10))
	return min(d, 30*time.Second)
}

// Retry reports whether err, from one attempt, is worth another: the lock wait
// ran out, or the work under the lock gave up in time (ErrRetry).
func Retry(err error) bool {
	return dbconn.ErrorNumber(err) == dbconn.ErrLockWaitTimeout || errors.Is(err, ErrRetry)
}

// ErrRetry is returned by work under the lock that could not finish in time;
// the lock is released and taken again later.
var ErrRetry = errors.New("retry under a new lock")

// Hooks run around every lock attempt: Before (which may fail the whole call)
// just before the lock is requested, After once the attempt is over, whatever
// its outcome. Either may be nil.
type Hooks struct {
	Before func(ctx context.Context) error
	After  func()
}

// WithLock runs fn on a dedicated connection holding "LOCK TABLES spec", then
// unlocks. It retries as Policy says while Retry(err) holds. Whatever happens,
// the connection's locks are released before WithLock returns: by UNLOCK
// TABLES, or by discarding the connection.
func WithLock(ctx context.Context, db *sql.DB, spec string, p Policy, log *slog.Logger, h Hooks, fn func(ctx context.Context, conn *sql.Conn) error) error {
	p = p.withDefaults()
	var err error
	for attempt := 0; attempt < p.Attempts; attempt++ {
		if attempt > 0 {
			d := p.Delay(attempt - 1)
			log.Info("lock attempt failed; retrying", "attempt", attempt, "of", p.Attempts, "in", d, "err", err)
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(d):
			}
		}
		if h.Before != nil {
			if err := h.Before(ctx); err != nil {
				if h.After != nil {
					h.After()
				}
				return err
			}
		}
		err = once(ctx, db, spec, p, fn)
		if h.After != nil {
			h.After()
		}
		if err == nil || !Retry(err) {
			return err
		}
	}
	return fmt.Errorf("%w (%d attempts of %s): %v", ErrLockTimeout, p.Attempts, p.Timeout, err)
}

func once(ctx context.Context, db *sql.DB, spec string, p Policy, fn func(ctx context.Context, conn *sql.Conn) error) (err error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("lock: connect: %w", err)
	}
	defer func() {
		// Unlock even if ctx is done; discard the connection if that fails.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, uerr := conn.ExecContext(cctx, "UNLOCK TABLES"); uerr != nil {
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		}
		conn.Close()
	}()
	if _, err := conn.ExecContext(ctx, fmt.Sprintf("SET SESSION lock_wait_timeout = %d", p.LockWaitSeconds())); err != nil {
		return fmt.Errorf("lock: %w", err)
	}
	if _, err := conn.ExecContext(ctx, "LOCK TABLES "+spec); err != nil {
		return fmt.Errorf("lock tables: %w", err)
	}
	return fn(ctx, conn)
}
