// Package copier copies a table's rows into the shadow table in primary-key
// ranges, with several workers at once. Each range is one server-side
// INSERT ... SELECT: one short transaction, no row data through sluice.
//
// The copy reads the original without locks: in READ COMMITTED (see dbconn)
// the SELECT of an INSERT ... SELECT is a consistent read of the latest
// committed rows, so the application never waits for the copy and the copy
// never waits for the application. A row changed while (or just before) its
// range is read may be copied in its previous version; the binlog reader saw
// that change, and the apply rewrites the row from the original once its
// range is copied (package apply's TrackCopy).
//
// One goroutine cuts ranges (package ranges) of the size a chunk.Sizer asks
// for; the workers copy them in any order. Ranges never overlap and the
// last one is open-ended, so every row present when its range is copied lands
// in the shadow exactly once; rows written later reach it through the binlog.
//
// A range whose connection breaks is copied again, in a way that does not
// depend on whether the lost statement committed (lost.go).
package copier

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
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
	// MaxWorkers is the most workers SetWorkers may let copy at once
	// (default Workers).
	MaxWorkers int
	Chunk      chunk.Config
	// Gate, if set, is entered before each range is taken and left after
	// its copy; Enter may block (pause) or return an error (stop).
	Gate Gate
	// Spans, if set, follows the ranges: SpanCut before a range's copy
	// starts (ranges are numbered from 0 in the order they are cut, in key
	// order within each lane: a large table with a single integer key is
	// copied in one lane per worker, see ranges.Cutter.Lanes), SpanCopied
	// once it is committed.
	Spans Spans
	// Within, if set, are the only key intervals to copy (see
	// ranges.Cutter.Within).
	Within []ranges.Span
	// ReconnectFor is how long a range is retried after its connection was
	// lost (0: DefaultReconnectFor; negative: not at all).
	ReconnectFor time.Duration
	// Logger, if set, gets a line for each range copied again after a lost
	// connection.
	Logger *slog.Logger
	// OnDuplicate, if set, is called when a range's copy collides under a
	// unique key of the new table (the statement rolled back, nothing of
	// the range is in it), with the number of the collision in this range
	// (from 1) and a function that copies the range on a connection. It
	// brings rows copied earlier and changed since up to date, and may copy
	// the range itself (copied: n rows); otherwise the range is copied
	// again. An error stops the copy. After MaxDuplicates collisions in one
	// range it is not called: the copy stops with ErrDuplicate.
	OnDuplicate func(ctx context.Context, attempt int, copyRange CopyRange) (n int64, copied bool, err error)
}

// CopyRange copies the range that collided on q, returning the rows copied.
type CopyRange func(ctx context.Context, q Execer) (int64, error)

// Execer runs a statement (a *sql.Conn, a *sql.Tx).
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// MaxDuplicates is how many times a range that collides is settled
// (Config.OnDuplicate) and copied again before the copy stops.
const MaxDuplicates = 5

// Gate admits the chunks (throttle.Throttler is one).
type Gate interface {
	Enter(ctx context.Context) error
	Leave()
}

// DefaultReconnectFor is Config.ReconnectFor's default.
const DefaultReconnectFor = 5 * time.Minute

// Spans follows the copy's ranges.
type Spans interface {
	SpanCut(seq, lane int, lo, hi rowkey.Key)
	SpanCopied(seq int)
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
	// exact: the key columns have the same types in the shadow, so a range's
	// predicate selects the same rows in both tables (see recopy).
	exact bool
	// turns lets the first limit workers copy (SetWorkers).
	turns turns
	meter meter // the rows copied over time (Rate)
}

// New validates cfg.
func New(cfg Config) (*Copier, error) {
	if cfg.DB == nil || cfg.Mapping == nil || len(cfg.Key) == 0 {
		return nil, errors.New("copier: DB, Mapping and Key are required")
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 2
	}
	cfg.MaxWorkers = max(cfg.MaxWorkers, cfg.Workers)
	if cfg.ReconnectFor == 0 {
		cfg.ReconnectFor = DefaultReconnectFor
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	c := &Copier{cfg: cfg, sizer: chunk.NewSizer(cfg.Chunk), exact: sameKeyTypes(cfg.Mapping, cfg.Key)}
	c.turns.init(cfg.Workers)
	return c, nil
}

// SetWorkers changes how many workers copy at once, from 1 to MaxWorkers,
// while the copy runs: a worker over the limit finishes its chunk and waits.
func (c *Copier) SetWorkers(n int) error {
	if n < 1 || n > c.cfg.MaxWorkers {
		return fmt.Errorf("threads=%d: give 1 to %d", n, c.cfg.MaxWorkers)
	}
	c.turns.set(n)
	return nil
}

// Workers returns how many workers may copy at once.
func (c *Copier) Workers() int { return c.turns.get() }

// SetChunkTime changes the wanted duration of one chunk.
func (c *Copier) SetChunkTime(d time.Duration) { c.sizer.SetTarget(d) }

// ChunkTime returns the wanted duration of one chunk.
func (c *Copier) ChunkTime() time.Duration { return c.sizer.Target() }

// Rows returns how many rows have been copied so far.
func (c *Copier) Rows() int64 { return c.rows.Load() }

// Rate returns the rows copied a second over the last five seconds (or
// since the first chunk), 0 before the first chunk.
func (c *Copier) Rate() float64 { return c.meter.rate(time.Now(), c.rows.Load()) }

// Slowest returns the longest a chunk took to copy and its rows.
func (c *Copier) Slowest() (time.Duration, int64) { return c.meter.slowest() }

// Chunks returns how many chunks have been copied so far.
func (c *Copier) Chunks() int64 { return c.chunks.Load() }

// Lanes returns how many lanes the key was cut into (1 for a key that is
// not a single integer, or a small table). Call it after Run.
func (c *Copier) Lanes() int {
	if cut := c.cutter; cut != nil {
		if n := cut.LanesUsed(); n > 0 {
			return n
		}
	}
	return 1
}

// ChunkSize returns the current chunk size in rows.
func (c *Copier) ChunkSize() int { return c.sizer.Size() }

// Run copies every row and returns when all ranges are done, or at the first
// error (ErrDuplicate for a unique-key collision).
func (c *Copier) Run(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	cut := make(chan ranges.Span)
	spans := make(chan span, c.cfg.Workers)
	c.cutter = &ranges.Cutter{
		DB: c.cfg.DB, Table: c.cfg.Mapping.Source.Quoted(), Hint: c.cfg.Mapping.Source.KeyHint(), Key: c.cfg.Key,
		Size: c.sizer.Size, EstimatedRows: c.cfg.Mapping.Source.EstimatedRows,
		Lanes: c.cfg.Workers, Within: c.cfg.Within,
		ReconnectFor: max(c.cfg.ReconnectFor, 0),
		OnLost: func(attempt int, err error) {
			c.cfg.Logger.Warn("copy: connection lost while finding a range boundary; reading it again", "error", err.Error(), "attempt", attempt)
		},
	}
	g.Go(func() error {
		defer close(cut)
		if err := c.cutter.Run(gctx, cut); err != nil {
			return fmt.Errorf("copy: %w", err)
		}
		return nil
	})
	// Number the ranges and announce each before any worker can start it.
	fed := make(chan struct{}) // closed once every range is handed out
	g.Go(func() error {
		defer close(fed)
		defer close(spans)
		seq := 0
		for sp := range cut {
			if c.cfg.Spans != nil {
				c.cfg.Spans.SpanCut(seq, sp.Lane, sp.Lo, sp.Hi)
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
	// fedCtx ends once every range is handed out: a worker waiting at the
	// gate then stops waiting unless a range is left for it.
	fedCtx, cancelFed := context.WithCancel(gctx)
	defer cancelFed()
	go func() {
		select {
		case <-fed:
		case <-gctx.Done():
		}
		cancelFed()
	}()
	for w := 0; w < c.cfg.MaxWorkers; w++ {
		g.Go(func() error {
			for {
				if !c.turns.wait(gctx, w, fed) {
					return nil
				}
				sp, ok, err := c.take(gctx, fedCtx, w, spans)
				if err != nil || !ok {
					return err
				}
				if sp == nil {
					continue // its turn was taken away while it waited
				}
				err = c.copySpan(gctx, sp.Span)
				if c.cfg.Gate != nil {
					c.cfg.Gate.Leave()
				}
				if err != nil {
					return err
				}
				if c.cfg.Spans != nil {
					c.cfg.Spans.SpanCopied(sp.seq)
				}
			}
		})
	}
	return g.Wait()
}

// take gives worker w its next range, with the gate entered (the caller
// leaves it after the copy): the gate first, so that a worker a pause holds
// holds no range. ok is false once every range is taken; sp is nil when the
// worker lost its turn while it waited at the gate.
func (c *Copier) take(ctx, fedCtx context.Context, w int, spans <-chan span) (*span, bool, error) {
	if c.cfg.Gate == nil {
		sp, ok := <-spans
		return &sp, ok, nil
	}
	if err := c.cfg.Gate.Enter(fedCtx); err != nil {
		if ctx.Err() != nil {
			return nil, false, err
		}
		// Every range is handed out and spans is closed: this never
		// blocks. A range still in its buffer waits at the gate as long
		// as the gate says.
		sp, ok := <-spans
		if !ok {
			return nil, false, nil
		}
		if err := c.cfg.Gate.Enter(ctx); err != nil {
			return nil, false, err
		}
		return &sp, true, nil
	}
	if w >= c.turns.get() {
		c.cfg.Gate.Leave()
		return nil, true, nil
	}
	sp, ok := <-spans
	if !ok {
		c.cfg.Gate.Leave()
		return nil, false, nil
	}
	return &sp, true, nil
}

// copySpan copies one range, retrying it after a deadlock or a lock wait
// timeout on the shadow table, and copying it again after a lost connection
// (see recopy) until Config.ReconnectFor has passed since the first loss.
func (c *Copier) copySpan(ctx context.Context, sp ranges.Span) error {
	where, args := sp.Where(c.cfg.Key)
	fail := func(err error) error { return fmt.Errorf("copy: range (%v, %v]: %w", sp.Lo, sp.Hi, err) }
	var (
		locks  int       // retries after a deadlock or a lock wait timeout
		dups   int       // collisions under a unique key, settled
		lost   int       // retries after a lost connection
		lostAt time.Time // the first loss; zero: none
		gone   []int64   // the sessions of the attempts that lost their connection
	)
	for {
		start := time.Now()
		var n, id int64
		var err error
		if lostAt.IsZero() {
			n, id, err = c.insert(ctx, where, args)
		} else {
			n, id, err = c.recopy(ctx, gone, lostAt.Add(c.cfg.ReconnectFor), where, args)
		}
		if err == nil {
			c.copied(sp, n, start, lostAt.IsZero())
			return nil
		}
		if ctx.Err() != nil {
			return fail(err)
		}
		var wait time.Duration
		switch {
		case dbconn.ConnectionLost(err) || !lostAt.IsZero() && c.exact && keyDup(err, c.cfg.Mapping.Target.KeyIndex):
			// A duplicate on the primary key while copying again: the lost
			// statement was still running and committed after this attempt
			// cleared the range.
			if c.cfg.ReconnectFor < 0 {
				return fail(fmt.Errorf("connection lost (retries are off): %w", err))
			}
			if lostAt.IsZero() {
				lostAt = time.Now()
			}
			if id > 0 && !slices.Contains(gone, id) {
				gone = append(gone, id)
			}
			left := c.cfg.ReconnectFor - time.Since(lostAt)
			if left <= 0 {
				return fail(fmt.Errorf("connection lost, and the range could not be copied again within %s: %w", c.cfg.ReconnectFor, err))
			}
			lost++
			wait = min(dbconn.Backoff(lost), left)
			c.cfg.Logger.Warn("copy: connection lost; copying the range again", "range", fmt.Sprintf("(%v, %v]", sp.Lo, sp.Hi),
				"error", err.Error(), "attempt", lost)
		case dbconn.ErrorNumber(err) == dbconn.ErrDupEntry && !lostAt.IsZero() && !c.exact:
			return fail(fmt.Errorf("a lost connection may have committed the range's copy, and the key's type changes in the new table, so sluice cannot clear the range to copy it again: %w", err))
		case dbconn.ErrorNumber(err) == dbconn.ErrDupEntry && c.cfg.OnDuplicate != nil && dups < MaxDuplicates:
			// A row copied earlier may have moved into this range since:
			// its stale copy collides with it until its change is applied.
			dups++
			start := time.Now()
			n, copied, serr := c.cfg.OnDuplicate(ctx, dups, func(ctx context.Context, q Execer) (int64, error) {
				n, _, err := c.exec(ctx, q, where, args, 0)
				return n, err
			})
			if serr != nil {
				return fail(serr)
			}
			if copied {
				c.copied(sp, n, start, false)
				return nil
			}
			continue
		case dbconn.ErrorNumber(err) == dbconn.ErrDupEntry:
			return fmt.Errorf("%w: %v", ErrDuplicate, err)
		case !dbconn.Retryable(err) || locks == 19:
			return fail(err)
		default:
			locks++
			wait = time.Duration(locks) * 20 * time.Millisecond
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}

// copied records a range's copy of n rows that began at start; sized: its
// time says how long such a range takes (not a copy after a lost connection
// or under another's lock).
func (c *Copier) copied(sp ranges.Span, n int64, start time.Time, sized bool) {
	c.meter.record(time.Now(), c.rows.Add(n))
	c.meter.chunk(time.Since(start), n)
	c.chunks.Add(1)
	if sp.Hi != nil && sized {
		c.sizer.Observe(int(n), time.Since(start))
	}
	c.cutter.Observe(sp.Width, n)
}

// turns lets the workers numbered below a limit copy; the others wait.
type turns struct {
	mu     sync.Mutex
	limit  int
	change chan struct{} // closed (and replaced) when the limit changes
}

func (t *turns) init(n int) { t.limit, t.change = n, make(chan struct{}) }

func (t *turns) set(n int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.limit = n
	close(t.change)
	t.change = make(chan struct{})
}

func (t *turns) get() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.limit
}

// wait returns true once worker w may copy, false once every range is
// handed out or ctx is done while it waits.
func (t *turns) wait(ctx context.Context, w int, fed <-chan struct{}) bool {
	for {
		t.mu.Lock()
		ok, change := w < t.limit, t.change
		t.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-change:
		case <-fed:
			return false
		case <-ctx.Done():
			return false
		}
	}
}
