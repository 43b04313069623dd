// Package copier copies a table's rows into the shadow table in primary-key
// ranges, with several workers at once. Each range is one server-side
// INSERT ... SELECT: one short transaction, no row data through sluice.
//
// One goroutine cuts ranges (package ranges) of the size a chunk.Sizer asks
// for; the workers copy them in any order. Ranges never overlap and the
// last one is open-ended, so every row present when its range is copied lands
// in the shadow exactly once; rows written later reach it through the binlog.
package copier

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/sluicedb/sluice/internal/chunk"
	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/ranges"
	"github.com/sluicedb/sluice/internal/rowkey"
	"github.com/sluicedb/sluice/internal/schema"
)

// ErrDuplicate means two rows of the original collide under a unique key of the
// new table. sluice stops rather than drop one of them.
var ErrDuplicate = errors.New("duplicate key in the new table")

// Config configures a Copier.
type Config struct {
	DB      *sql.DB
	Mapping *schema.Mapping
	Key     rowkey.Cols
	Workers int // default 2
	Chunk   chunk.Config
	// Throttle, if set, is called before each chunk and may block (pause) or
	// return an error (stop).
	Throttle func(ctx context.Context) error
	// Defer, if set, takes the keys of a range that keeps meeting locked
	// rows, instead of a copy that would wait for the lock while holding
	// shared locks on the rest of the range (and so could be part of a
	// deadlock with the application). The caller applies them as changed
	// keys after the copy, one row's current state at a time.
	Defer func(keys ...rowkey.Key)
	// Spans, if set, follows the ranges: SpanCut before a range's copy
	// starts (ranges are numbered from 0 in key order), SpanCopied after it
	// is done (unlocked: its keys went to Defer instead).
	Spans Spans
}

// Spans follows the copy's ranges.
type Spans interface {
	SpanCut(seq int, hi rowkey.Key)
	SpanCopied(seq int, unlocked bool)
}

// span is a range with its number.
type span struct {
	ranges.Span
	seq int
}

// Copier copies once; Run may be called once.
type Copier struct {
	cfg    Config
	sizer  *chunk.Sizer
	rows   atomic.Int64
	chunks atomic.Int64
	cutter *ranges.Cutter
	// lockRetries counts ranges retried because a row was locked.
	lockRetries atomic.Int64
	deferred    atomic.Int64
}

// maxNowait is how many times a range meets a locked row before the copy
// defers its rows (Config.Defer) or, without Defer, waits for the lock.
const maxNowait = 100

// Deferred returns how many rows were handed to Config.Defer.
func (c *Copier) Deferred() int64 { return c.deferred.Load() }

// LockRetries returns how often a range was retried because the application
// held a lock on one of its rows.
func (c *Copier) LockRetries() int64 { return c.lockRetries.Load() }

// New validates cfg.
func New(cfg Config) (*Copier, error) {
	if cfg.DB == nil || cfg.Mapping == nil || len(cfg.Key) == 0 {
		return nil, errors.New("copier: DB, Mapping and Key are required")
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 2
	}
	return &Copier{cfg: cfg, sizer: chunk.NewSizer(cfg.Chunk)}, nil
}

// Rows returns how many rows have been copied so far.
func (c *Copier) Rows() int64 { return c.rows.Load() }

// Chunks returns how many chunks have been copied so far.
func (c *Copier) Chunks() int64 { return c.chunks.Load() }

// ChunkSize returns the current chunk size in rows.
func (c *Copier) ChunkSize() int { return c.sizer.Size() }

// Run copies every row and returns when all ranges are done, or at the first
// error (ErrDuplicate for a unique-key collision).
func (c *Copier) Run(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	cut := make(chan ranges.Span)
	spans := make(chan span, c.cfg.Workers)
	c.cutter = &ranges.Cutter{
		DB: c.cfg.DB, Table: c.cfg.Mapping.Source.Quoted(), Key: c.cfg.Key,
		Size: c.sizer.Size, EstimatedRows: c.cfg.Mapping.Source.EstimatedRows,
	}
	g.Go(func() error {
		defer close(cut)
		if err := c.cutter.Run(gctx, cut); err != nil {
			return fmt.Errorf("copy: %w", err)
		}
		return nil
	})
	// Number the ranges and announce each before any worker can start it.
	g.Go(func() error {
		defer close(spans)
		seq := 0
		for sp := range cut {
			if c.cfg.Spans != nil {
				c.cfg.Spans.SpanCut(seq, sp.Hi)
			}
			select {
			case spans <- span{Span: sp, seq: seq}:
			case <-gctx.Done():
				return gctx.Err()
			}
			seq++
		}
		return nil
	})
	for w := 0; w < c.cfg.Workers; w++ {
		g.Go(func() error {
			for sp := range spans {
				unlocked, err := c.copySpan(gctx, sp.Span)
				if err != nil {
					return err
				}
				if c.cfg.Spans != nil {
					c.cfg.Spans.SpanCopied(sp.seq, unlocked)
				}
			}
			return nil
		})
	}
	return g.Wait()
}

// copySpan copies one range; unlocked reports that its keys went to
// Config.Defer instead.
func (c *Copier) copySpan(ctx context.Context, sp ranges.Span) (unlocked bool, err error) {
	if c.cfg.Throttle != nil {
		if err := c.cfg.Throttle(ctx); err != nil {
			return false, err
		}
	}
	where, args := sp.Where(c.cfg.Key)
	// FOR SHARE: wait for rows whose change is in the binlog but not yet
	// committed, so the copy never reads a stale version (see dbconn).
	// NOWAIT first: while sluice never waits for a lock the application
	// holds, it is never part of a lock-wait cycle, so the application is
	// never made a deadlock victim by it. A range that meets a locked row is
	// retried after a pause (application locks last milliseconds); only
	// after many tries does the copy wait for the lock.
	//
	// A retry first takes the range's row locks with a count (a locking read
	// that copies nothing), then copies in the same transaction: a row still
	// locked then costs a count, not a copy half done and rolled back again.
	// (The first attempt copies at once: most ranges meet no lock, and the
	// count costs a few percent.)
	base := c.cfg.Mapping.CopySQL() + where
	probe := "SELECT COUNT(*) FROM " + c.cfg.Mapping.Source.Quoted() + " FORCE INDEX (PRIMARY) WHERE " + where
	nowaits := 0
	for attempt := 0; attempt < 20; {
		lock := " FOR SHARE NOWAIT"
		if nowaits >= maxNowait {
			if c.cfg.Defer != nil {
				return true, c.deferSpan(ctx, where, args)
			}
			lock = " FOR SHARE"
		}
		start := time.Now()
		var n int64
		if nowaits == 0 {
			var res sql.Result
			if res, err = c.cfg.DB.ExecContext(ctx, base+lock, args...); err == nil {
				n, err = res.RowsAffected()
			}
		} else {
			n, err = c.copyOnce(ctx, probe+lock, base+lock, args)
		}
		if err == nil {
			c.rows.Add(n)
			c.chunks.Add(1)
			if sp.Hi != nil {
				c.sizer.Observe(int(n), time.Since(start))
			}
			c.cutter.Observe(sp.Width, n)
			return false, nil
		}
		var pause time.Duration
		switch n := dbconn.ErrorNumber(err); {
		case n == dbconn.ErrDupEntry:
			return false, fmt.Errorf("%w: %v", ErrDuplicate, err)
		case n == dbconn.ErrLockNowait:
			nowaits++
			c.lockRetries.Add(1)
			pause = time.Duration(1+rand.IntN(5)) * time.Millisecond
		case dbconn.Retryable(err):
			attempt++
			pause = time.Duration(attempt) * 20 * time.Millisecond
		default:
			return false, fmt.Errorf("copy: range (%v, %v]: %w", sp.Lo, sp.Hi, err)
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(pause):
		}
	}
	return false, fmt.Errorf("copy: range (%v, %v]: %w", sp.Lo, sp.Hi, err)
}

// copyOnce locks the range's rows with probe, then copies them with copySQL, in
// one transaction, and returns the rows copied.
func (c *Copier) copyOnce(ctx context.Context, probe, copySQL string, args []any) (int64, error) {
	tx, err := c.cfg.DB.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	var locked int64
	if err := tx.QueryRowContext(ctx, probe, args...).Scan(&locked); err != nil {
		return 0, err
	}
	res, err := tx.ExecContext(ctx, copySQL, args...)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, err
	}
	return n, tx.Commit()
}

// deferSpan hands the keys of a range to Config.Defer instead of copying it.
// The keys are read without locks: a row committed after this read is in the
// binlog, whose reading began before the copy, so its key comes anyway.
func (c *Copier) deferSpan(ctx context.Context, where string, args []any) error {
	q := "SELECT " + c.cfg.Key.SelectExprs() + " FROM " + c.cfg.Mapping.Source.Quoted() + " FORCE INDEX (PRIMARY) WHERE " +
		where + " ORDER BY " + c.cfg.Key.OrderBy()
	rows, err := c.cfg.DB.QueryContext(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("copy: read the keys of a range to defer: %w", err)
	}
	defer rows.Close()
	var keys []rowkey.Key
	for rows.Next() {
		raw := make([][]byte, len(c.cfg.Key))
		dest := make([]any, len(raw))
		for i := range raw {
			dest[i] = &raw[i]
		}
		if err := rows.Scan(dest...); err != nil {
			return err
		}
		k, err := c.cfg.Key.FromScan(raw)
		if err != nil {
			return err
		}
		keys = append(keys, k)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	c.cfg.Defer(keys...)
	c.deferred.Add(int64(len(keys)))
	c.rows.Add(int64(len(keys)))
	return nil
}
