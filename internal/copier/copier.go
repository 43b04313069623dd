// Package copier copies a table's rows into the shadow table in primary-key
// ranges, with several workers at once. Each range is one server-side
// INSERT ... SELECT: one short transaction, no row data through sluice.
//
// One goroutine walks the primary key to cut ranges of the size a chunk.Sizer
// asks for; the workers copy them in any order. Ranges never overlap and the
// last one is open-ended, so every row present when its range is copied lands
// in the shadow exactly once; rows written later reach it through the binlog.
package copier

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/sluicedb/sluice/internal/chunk"
	"github.com/sluicedb/sluice/internal/dbconn"
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
}

// Copier copies once; Run may be called once.
type Copier struct {
	cfg    Config
	sizer  *chunk.Sizer
	rows   atomic.Int64
	chunks atomic.Int64
}

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

// span is a key range (lo, hi]; a nil bound is open.
type span struct {
	lo, hi rowkey.Key
}

// Run copies every row and returns when all ranges are done, or at the first
// error (ErrDuplicate for a unique-key collision).
func (c *Copier) Run(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	spans := make(chan span, c.cfg.Workers*2)
	g.Go(func() error {
		defer close(spans)
		return c.cut(gctx, spans)
	})
	for w := 0; w < c.cfg.Workers; w++ {
		g.Go(func() error {
			for sp := range spans {
				if err := c.copySpan(gctx, sp); err != nil {
					return err
				}
			}
			return nil
		})
	}
	return g.Wait()
}

// cut walks the primary key and sends ranges of about Size() rows.
func (c *Copier) cut(ctx context.Context, out chan<- span) error {
	src := c.cfg.Mapping.Source
	base := "SELECT " + c.cfg.Key.SelectExprs() + " FROM " + src.Quoted() + " FORCE INDEX (PRIMARY) "
	order := " ORDER BY " + c.cfg.Key.OrderBy() + " LIMIT 1 OFFSET ?"
	var last rowkey.Key
	for {
		size := c.sizer.Size()
		q, args := base, []any{}
		if last != nil {
			pred, pargs := c.cfg.Key.Predicate(">", last)
			q += "WHERE " + pred
			args = append(args, pargs...)
		}
		args = append(args, size-1)
		raw := make([][]byte, len(c.cfg.Key))
		ptrs := make([]any, len(raw))
		for i := range raw {
			ptrs[i] = &raw[i]
		}
		err := c.cfg.DB.QueryRowContext(ctx, q+order, args...).Scan(ptrs...)
		var sp span
		switch {
		case errors.Is(err, sql.ErrNoRows):
			sp = span{lo: last}
		case err != nil:
			return fmt.Errorf("copy: find chunk boundary after %v: %w", last, err)
		default:
			hi, err := c.cfg.Key.FromScan(raw)
			if err != nil {
				return fmt.Errorf("copy: chunk boundary: %w", err)
			}
			sp = span{lo: last, hi: hi}
		}
		select {
		case out <- sp:
		case <-ctx.Done():
			return ctx.Err()
		}
		if sp.hi == nil {
			return nil
		}
		last = sp.hi
	}
}

func (c *Copier) copySpan(ctx context.Context, sp span) error {
	if c.cfg.Throttle != nil {
		if err := c.cfg.Throttle(ctx); err != nil {
			return err
		}
	}
	q := c.cfg.Mapping.CopySQL()
	var args []any
	var preds []string
	if sp.lo != nil {
		p, a := c.cfg.Key.Predicate(">", sp.lo)
		preds, args = append(preds, p), append(args, a...)
	}
	if sp.hi != nil {
		p, a := c.cfg.Key.Predicate("<=", sp.hi)
		preds, args = append(preds, p), append(args, a...)
	}
	switch len(preds) {
	case 0:
		q += "1=1"
	case 1:
		q += preds[0]
	default:
		q += preds[0] + " AND " + preds[1]
	}
	var err error
	for attempt := 0; attempt < 20; attempt++ {
		start := time.Now()
		var res sql.Result
		res, err = c.cfg.DB.ExecContext(ctx, q, args...)
		if err == nil {
			n, _ := res.RowsAffected()
			c.rows.Add(n)
			c.chunks.Add(1)
			if sp.hi != nil {
				c.sizer.Observe(int(n), time.Since(start))
			}
			return nil
		}
		if dbconn.ErrorNumber(err) == dbconn.ErrDupEntry {
			return fmt.Errorf("%w: %v", ErrDuplicate, err)
		}
		if !dbconn.Retryable(err) {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(attempt+1) * 20 * time.Millisecond):
		}
	}
	return fmt.Errorf("copy: range (%v, %v]: %w", sp.lo, sp.hi, err)
}
