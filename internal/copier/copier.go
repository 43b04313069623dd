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
	"math"
	"strconv"
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
	// keys and keyRows count the key values and rows of the ranges cut by
	// arithmetic and copied so far: how dense the key is.
	keys, keyRows atomic.Uint64
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

// span is a key range (lo, hi]; a nil bound is open. width is the number of
// key values in a bounded range cut by arithmetic, else 0.
type span struct {
	lo, hi rowkey.Key
	width  uint64
}

// Run copies every row and returns when all ranges are done, or at the first
// error (ErrDuplicate for a unique-key collision).
func (c *Copier) Run(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	spans := make(chan span, c.cfg.Workers*2)
	g.Go(func() error {
		defer close(spans)
		if unsigned, ok := c.cfg.Key.Integer(); ok {
			return c.cutIntegers(gctx, spans, unsigned)
		}
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
			if sp.width > 0 {
				c.keys.Add(sp.width)
				c.keyRows.Add(uint64(n))
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

// cutIntegers cuts ranges of a single integer key by arithmetic between its
// current minimum and maximum, so the key is not walked a second time. Each
// range spans Size() rows divided by the key's density (rows per key value),
// which starts from the table's row estimate and then follows what the copied
// ranges actually held. The first range is open below and the last open above,
// so rows inserted outside [min, max] meanwhile are copied too.
func (c *Copier) cutIntegers(ctx context.Context, out chan<- span, unsigned bool) error {
	src := c.cfg.Mapping.Source
	col := dbconn.QuoteIdent(c.cfg.Key[0].Name)
	var lo, hi sql.NullString
	if err := c.cfg.DB.QueryRowContext(ctx, "SELECT MIN("+col+"), MAX("+col+") FROM "+src.Quoted()).Scan(&lo, &hi); err != nil {
		return fmt.Errorf("copy: read key bounds: %w", err)
	}
	send := func(sp span) error {
		select {
		case out <- sp:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if !lo.Valid {
		return send(span{}) // empty table: one open range
	}
	min, max, err := parseBounds(lo.String, hi.String, unsigned)
	if err != nil {
		return err
	}
	total := max - min // offsets from min, in uint64 arithmetic
	density := 1.0
	if est := src.EstimatedRows; est > 0 && total > 0 {
		density = math.Min(1, float64(est)/float64(total+1))
	}
	value := func(off uint64) rowkey.Key {
		if unsigned {
			return rowkey.Key{min + off}
		}
		return rowkey.Key{int64(min + off)}
	}
	var prev rowkey.Key
	var prevOff uint64
	first := true
	for {
		if k, r := c.keys.Load(), c.keyRows.Load(); k > 0 && r > 0 {
			density = math.Max(1e-9, math.Min(1, float64(r)/float64(k)))
		}
		step := uint64(math.Max(1, float64(c.sizer.Size())/density))
		var end uint64 // inclusive offset of this range's upper bound
		if first {
			end = step - 1
		} else {
			end = prevOff + step
		}
		if end >= total || end < prevOff { // past the maximum, or wrapped
			return send(span{lo: prev})
		}
		sp := span{lo: prev, hi: value(end)}
		if !first {
			sp.width = step
		}
		if err := send(sp); err != nil {
			return err
		}
		prev, prevOff, first = sp.hi, end, false
	}
}

// parseBounds reads MIN and MAX of an integer key as uint64 offsets base
// (two's complement for signed keys, so max-min is the range's width).
func parseBounds(lo, hi string, unsigned bool) (uint64, uint64, error) {
	if unsigned {
		a, err := strconv.ParseUint(lo, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("copy: key minimum %q: %w", lo, err)
		}
		b, err := strconv.ParseUint(hi, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("copy: key maximum %q: %w", hi, err)
		}
		return a, b, nil
	}
	a, err := strconv.ParseInt(lo, 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("copy: key minimum %q: %w", lo, err)
	}
	b, err := strconv.ParseInt(hi, 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("copy: key maximum %q: %w", hi, err)
	}
	return uint64(a), uint64(b), nil
}
