// Package ranges cuts a table's primary key into consecutive ranges of about
// a requested number of rows, for the copier and the checksum. A single
// integer key is cut by arithmetic between its minimum and maximum; any other
// key is walked with keyset queries (WHERE key > last ORDER BY key LIMIT 1
// OFFSET n). The first range is open below and the last open above, so the
// ranges cover every key, including keys inserted outside the bounds while
// the ranges are being used.
package ranges

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/rowkey"
)

// Span is the key range (Lo, Hi]; a nil bound is open. Width is the number of
// key values of a bounded range cut by arithmetic, else 0. Lane is the lane
// it belongs to (see Cutter.Lanes).
type Span struct {
	Lo, Hi rowkey.Key
	Width  uint64
	Lane   int
}

// Where returns the predicate selecting the span's rows, and its arguments.
func (s Span) Where(key rowkey.Cols) (string, []any) {
	var preds []string
	var args []any
	if s.Lo != nil {
		p, a := key.Predicate(">", s.Lo)
		preds, args = append(preds, p), append(args, a...)
	}
	if s.Hi != nil {
		p, a := key.Predicate("<=", s.Hi)
		preds, args = append(preds, p), append(args, a...)
	}
	if len(preds) == 0 {
		return "1=1", nil
	}
	return strings.Join(preds, " AND "), args
}

// Querier runs a query: a *sql.DB, or a *sql.Conn inside a snapshot.
type Querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Cutter produces spans. Size is asked before each span; Observe feeds back how
// many rows a bounded span really held, which corrects the density estimate
// of an integer key. Observe is safe for concurrent use with Run.
type Cutter struct {
	DB    Querier
	Table string // quoted `db`.`table`
	// Hint reads Table by Key's index: " FORCE INDEX (PRIMARY)" when empty
	// (schema.Table.KeyHint).
	Hint string
	Key  rowkey.Cols
	// ReconnectFor, if positive, runs a boundary query again while its
	// connection is lost, for up to that long (DB must then be a pool, not
	// a connection holding a snapshot); OnLost is told of each loss.
	ReconnectFor time.Duration
	OnLost       func(attempt int, err error)
	Size         func() int
	// EstimatedRows seeds the density of an integer key (0: assume dense).
	EstimatedRows int64
	// Lanes, if above 1, splits a single integer key of a large enough
	// table into that many lanes of equal key width and hands out their
	// ranges in turn: ranges copied at the same time then lie far apart in
	// the key, so that concurrent inserts into the new table's primary key
	// do not contend for the same index pages. Ranges are in key order
	// within a lane; other keys are always one lane.
	Lanes int
	// Within, if set, are the only key intervals to cover, in key order
	// (a resumed copy: what was not copied yet). Each is its own lane,
	// cut in turn; Lanes is then ignored.
	Within []Span

	keys, rows atomic.Uint64
	lanes      atomic.Int32
}

// Observe records that a span of width key values held rows rows.
func (c *Cutter) Observe(width uint64, rows int64) {
	if width > 0 && rows >= 0 {
		c.keys.Add(width)
		c.rows.Add(uint64(rows))
	}
}

// LanesUsed returns how many lanes Run cut the key into (0 before it
// decided).
func (c *Cutter) LanesUsed() int { return int(c.lanes.Load()) }

// Run sends spans to out until the key is covered or ctx ends. It does not
// close out.
func (c *Cutter) Run(ctx context.Context, out chan<- Span) error {
	unsigned, integer := c.Key.Integer()
	if c.Within == nil {
		if integer {
			return c.integers(ctx, out, unsigned, Span{})
		}
		return c.keyset(ctx, out, Span{})
	}
	c.lanes.Store(int32(len(c.Within)))
	for i, iv := range c.Within {
		iv.Lane = i
		var err error
		if integer {
			err = c.integers(ctx, out, unsigned, iv)
		} else {
			err = c.keyset(ctx, out, iv)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// read scans the one row of query into dest, again after a lost connection
// (ReconnectFor).
func (c *Cutter) read(ctx context.Context, query string, args []any, dest ...any) error {
	return dbconn.RetryLost(ctx, c.ReconnectFor, c.OnLost, func() error {
		return c.DB.QueryRowContext(ctx, query, args...).Scan(dest...)
	})
}

func send(ctx context.Context, out chan<- Span, s Span) error {
	select {
	case out <- s:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// keyset walks the key within iv (the whole key when iv has no bounds).
func (c *Cutter) keyset(ctx context.Context, out chan<- Span, iv Span) error {
	last := iv.Lo
	var t tail
	for {
		sp := Span{Lo: last, Hi: iv.Hi, Lane: iv.Lane}
		probe, ok, err := c.capped(ctx, sp, &t)
		if err != nil {
			return err
		}
		var hi rowkey.Key
		if ok {
			if hi, err = c.boundary(ctx, probe, max(1, c.Size())); err != nil {
				return err
			}
		}
		if ok && hi == nil && t.again(sp) {
			continue
		}
		end := hi == nil // no boundary left: the interval's last span
		if !end {
			sp.Hi = hi
		}
		if err := send(ctx, out, sp); err != nil {
			return err
		}
		if end {
			return nil
		}
		last = sp.Hi
	}
}

// tail caps the probes of a span open above at its greatest key, read when
// it is first probed and read again once when the probes reach it. Rows the
// application appends beyond it meanwhile go to the last span, open above:
// a cut ends however fast they come.
type tail struct {
	top   rowkey.Key
	reads int
}

// again reports whether the probes of sp, which reached the top, go on to
// a new top (once).
func (t *tail) again(sp Span) bool {
	if sp.Hi != nil || t.reads >= 2 {
		return false
	}
	t.top = nil
	return true
}

// capped returns sp as the next probe reads it: a span open above is capped
// at t's top. ok is false when such a span holds no row.
func (c *Cutter) capped(ctx context.Context, sp Span, t *tail) (probe Span, ok bool, err error) {
	if sp.Hi != nil {
		return sp, true, nil
	}
	if t.top == nil {
		if t.reads >= 2 {
			return sp, false, nil
		}
		t.reads++
		if t.top, err = c.lastKey(ctx, sp); err != nil || t.top == nil {
			return sp, false, err
		}
	}
	sp.Hi = t.top
	return sp, true, nil
}

// boundary returns the key of the n-th row of sp in key order, or nil when
// sp holds fewer rows.
func (c *Cutter) boundary(ctx context.Context, sp Span, n int) (rowkey.Key, error) {
	k, err := c.keyAt(ctx, sp, c.Key.OrderBy(), n-1)
	if err != nil {
		return nil, fmt.Errorf("find a range boundary after %v: %w", sp.Lo, err)
	}
	return k, nil
}

// lastKey returns the greatest key of sp, or nil when sp holds no row.
func (c *Cutter) lastKey(ctx context.Context, sp Span) (rowkey.Key, error) {
	desc := make([]string, len(c.Key))
	for i, col := range c.Key {
		desc[i] = dbconn.QuoteIdent(col.Name) + " DESC"
	}
	k, err := c.keyAt(ctx, sp, strings.Join(desc, ", "), 0)
	if err != nil {
		return nil, fmt.Errorf("read the last key after %v: %w", sp.Lo, err)
	}
	return k, nil
}

// keyAt returns the key of the row of sp after skip others in the order
// given, read by the key's index, or nil when there is none.
func (c *Cutter) keyAt(ctx context.Context, sp Span, order string, skip int) (rowkey.Key, error) {
	hint := c.Hint
	if hint == "" {
		hint = " FORCE INDEX (PRIMARY)"
	}
	where, args := sp.Where(c.Key)
	q := "SELECT " + c.Key.SelectExprs() + " FROM " + c.Table + hint + " WHERE " + where +
		" ORDER BY " + order + " LIMIT 1 OFFSET ?"
	args = append(args, skip)
	raw := make([][]byte, len(c.Key))
	ptrs := make([]any, len(raw))
	for i := range raw {
		ptrs[i] = &raw[i]
	}
	err := c.read(ctx, q, args, ptrs...)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return c.Key.FromScan(raw)
}

// probeAbove is how many times the rows asked for an integer span must be
// able to hold (its width, distinct values) before its rows are counted:
// a span cut by a density learned over sparse keys may hold a dense cluster.
const probeAbove = 4

// sendBounded sends sp, cut where it holds more than size rows: pieces of
// size rows, by keyset, that tile it exactly. A span narrower than
// probeAbove x size (it cannot hold more rows than that) is sent as it is;
// so are the spans of a dense key.
func (c *Cutter) sendBounded(ctx context.Context, out chan<- Span, sp Span, unsigned bool) error {
	if sp.Lo != nil && sp.Hi != nil && sp.Width <= uint64(probeAbove*max(1, c.Size())) {
		return send(ctx, out, sp)
	}
	var t tail // the last span, open above, is probed up to a top
	for {
		probe, ok, err := c.capped(ctx, sp, &t)
		if err != nil {
			return err
		}
		if !ok {
			return send(ctx, out, sp)
		}
		// The size is asked again for each piece: the copy's chunks adapt
		// while one wide span is cut.
		hi, err := c.boundary(ctx, probe, max(1, c.Size()))
		if err != nil {
			return err
		}
		if hi == nil || !keyBelow(hi, probe.Hi, unsigned) {
			if t.again(sp) {
				continue
			}
			return send(ctx, out, sp) // the rest holds at most size rows, or is open above
		}
		piece := Span{Lo: sp.Lo, Hi: hi, Lane: sp.Lane}
		if sp.Lo != nil {
			piece.Width = keyOffset(hi, unsigned) - keyOffset(sp.Lo, unsigned)
		}
		if err := send(ctx, out, piece); err != nil {
			return err
		}
		sp.Lo = hi
		if sp.Hi != nil {
			sp.Width = keyOffset(sp.Hi, unsigned) - keyOffset(hi, unsigned)
		}
	}
}

// keyOffset is an integer key's value as a uint64 (two's complement for a
// signed key): differences of offsets are widths.
func keyOffset(k rowkey.Key, unsigned bool) uint64 {
	if unsigned {
		return k[0].(uint64)
	}
	return uint64(k[0].(int64))
}

// keyBelow reports whether integer key a is below b.
func keyBelow(a, b rowkey.Key, unsigned bool) bool {
	if unsigned {
		return a[0].(uint64) < b[0].(uint64)
	}
	return a[0].(int64) < b[0].(int64)
}

// integers cuts a single integer key by arithmetic, within iv (the whole
// key when iv has no bounds). Values are handled as uint64 offsets from the
// minimum (two's complement for signed keys).
func (c *Cutter) integers(ctx context.Context, out chan<- Span, unsigned bool, iv Span) error {
	col := dbconn.QuoteIdent(c.Key[0].Name)
	var lo, hi sql.NullString
	where, args := iv.Where(c.Key)
	if err := c.read(ctx, "SELECT MIN("+col+"), MAX("+col+") FROM "+c.Table+" WHERE "+where, args, &lo, &hi); err != nil {
		return fmt.Errorf("read key bounds: %w", err)
	}
	if !lo.Valid {
		return send(ctx, out, iv) // empty: one range
	}
	min, max, err := parseBounds(lo.String, hi.String, unsigned)
	if err != nil {
		return err
	}
	total := max - min
	density := 1.0
	if c.EstimatedRows > 0 && total > 0 {
		density = math.Min(1, float64(c.EstimatedRows)/float64(total+1))
	}
	value := func(off uint64) rowkey.Key {
		if unsigned {
			return rowkey.Key{min + off}
		}
		return rowkey.Key{int64(min + off)}
	}
	lanes := 1
	if size := float64(c.Size()); c.Within == nil && c.Lanes > 1 && float64(total)*density >= float64(c.Lanes)*minLaneRanges*math.Max(size, 1) {
		lanes = c.Lanes
	}
	p := NewLanePlanner(total, density, lanes)
	if c.Within == nil {
		c.lanes.Store(int32(len(p.lanes)))
	}
	for {
		d, ok := c.density()
		s, lane, more := p.Next(c.Size(), d, ok)
		if !more {
			return nil
		}
		sp := Span{Width: s.Width, Lane: lane + iv.Lane}
		switch {
		case s.HasLo:
			sp.Lo = value(s.Lo)
		default:
			sp.Lo = iv.Lo // the interval's own bound (nil: open)
		}
		switch {
		case s.HasHi:
			sp.Hi = value(s.Hi)
		default:
			sp.Hi = iv.Hi
		}
		if sp.Lo != nil && sp.Hi != nil {
			// A bound of iv's (a resumed copy) has no width from the
			// planner: the span's own, so that a wide one is probed.
			sp.Width = keyOffset(sp.Hi, unsigned) - keyOffset(sp.Lo, unsigned)
		}
		if err := c.sendBounded(ctx, out, sp, unsigned); err != nil {
			return err
		}
	}
}

// minLaneRanges is how many ranges a lane must hold at least, as first
// estimated, for a key to be split into lanes.
const minLaneRanges = 8

// density returns the observed rows per key value, or ok=false before any
// range has been observed. Empty ranges count: (rows+1)/(keys+1) falls fast
// over empty key space, so a sparse key is crossed in few ranges even when
// the row estimate was wrong (information_schema caches it).
func (c *Cutter) density() (float64, bool) {
	k, r := c.keys.Load(), c.rows.Load()
	if k == 0 {
		return 0, false
	}
	return Density(k, r), true
}

// Density is the smoothed rows-per-key-value of ranges spanning keys values
// and holding rows rows, in (0, 1].
func Density(keys, rows uint64) float64 {
	return math.Max(1e-18, math.Min(1, (float64(rows)+1)/(float64(keys)+1)))
}

// OffsetSpan is a span over offsets 0..total from the key's minimum.
type OffsetSpan struct {
	Lo, Hi       uint64 // exclusive lower and inclusive upper offset
	HasLo, HasHi bool
	Width        uint64
}

// Planner yields, one at a time, the spans covering offsets 0..Total. It is
// pure: Next's inputs decide each span.
type Planner struct {
	Total   uint64
	Density float64 // rows per key value, in (0, 1]
	prev    uint64
	started bool
	done    bool
}

// Next returns the next span of about size rows, using observed as the
// density when ok, and false once the last (open-ended) span was returned.
func (p *Planner) Next(size int, observed float64, ok bool) (OffsetSpan, bool) {
	if p.done {
		return OffsetSpan{}, false
	}
	if ok {
		p.Density = observed
	}
	d := p.Density
	if d <= 0 || d > 1 {
		d = 1
	}
	step := uint64(math.Min(math.Max(1, float64(max(size, 1))/d), float64(math.MaxUint64/2)))
	var end uint64
	if !p.started {
		end = step - 1
	} else {
		end = p.prev + step
	}
	if end >= p.Total || end < p.prev {
		p.done = true
		return OffsetSpan{Lo: p.prev, HasLo: p.started}, true
	}
	s := OffsetSpan{Lo: p.prev, HasLo: p.started, Hi: end, HasHi: true}
	if p.started {
		s.Width = step
	}
	p.prev, p.started = end, true
	return s, true
}

// LanePlanner yields the spans covering offsets 0..Total split into lanes of
// equal width, each cut by its own Planner, taking one span from each
// unfinished lane in turn. Lane 0's first span is open below and the last
// lane's last span open above; every other lane boundary is a closed bound.
// It is pure.
type LanePlanner struct {
	lanes []lanePlan
	next  int
}

type lanePlan struct {
	p    Planner
	base uint64 // the lane's first offset
	end  uint64 // the lane's last offset
}

// NewLanePlanner splits offsets 0..total into n lanes (fewer if total is
// smaller than n).
func NewLanePlanner(total uint64, density float64, n int) *LanePlanner {
	if n < 1 {
		n = 1
	}
	if total < uint64(n) {
		n = int(max(total, 1))
	}
	per := total / uint64(n)
	lp := &LanePlanner{}
	for i := range n {
		base := uint64(i) * per
		end := total
		if i < n-1 {
			end = uint64(i+1)*per - 1
		}
		lp.lanes = append(lp.lanes, lanePlan{p: Planner{Total: end - base, Density: density}, base: base, end: end})
	}
	return lp
}

// Next returns the next span of about size rows and its lane, using observed
// as the density when ok, and false once every lane is done.
func (lp *LanePlanner) Next(size int, observed float64, ok bool) (OffsetSpan, int, bool) {
	for range lp.lanes {
		i := lp.next
		lp.next = (lp.next + 1) % len(lp.lanes)
		l := &lp.lanes[i]
		s, more := l.p.Next(size, observed, ok)
		if !more {
			continue
		}
		out := OffsetSpan{Lo: l.base + s.Lo, HasLo: s.HasLo, Hi: l.base + s.Hi, HasHi: s.HasHi}
		if !s.HasLo && i > 0 {
			out.Lo, out.HasLo = l.base-1, true
		}
		if !s.HasHi && i < len(lp.lanes)-1 {
			out.Hi, out.HasHi = l.end, true
		}
		if out.HasLo && out.HasHi {
			out.Width = out.Hi - out.Lo
		}
		return out, i, true
	}
	return OffsetSpan{}, 0, false
}

// parseBounds reads MIN and MAX of an integer key as uint64 (two's complement
// for a signed key, so that max-min is the width of the range either way).
func parseBounds(lo, hi string, unsigned bool) (uint64, uint64, error) {
	parse := func(what, v string) (uint64, error) {
		if unsigned {
			u, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("key %s %q: %w", what, v, err)
			}
			return u, nil
		}
		i, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("key %s %q: %w", what, v, err)
		}
		return uint64(i), nil
	}
	a, err := parse("minimum", lo)
	if err != nil {
		return 0, 0, err
	}
	b, err := parse("maximum", hi)
	return a, b, err
}
