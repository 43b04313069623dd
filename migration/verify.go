package migration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/sluicedb/sluice/internal/apply"
	"github.com/sluicedb/sluice/internal/binlog"
	"github.com/sluicedb/sluice/internal/checksum"
	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/mdl"
	"github.com/sluicedb/sluice/internal/rowkey"
	"golang.org/x/sync/errgroup"
)

// The final guard. The checksum proves the tables equal at its snapshot;
// every change after it is applied, but a bug below the apply (a key that
// selects nothing, a conversion) would go unseen. So each key changed after
// the snapshot is recorded (apply.Tracker) and its row compared in both
// tables: before the cut-over's lock in a consistent snapshot (a key found
// equal is forgotten unless it changes again), and under the lock, where
// both tables stand still, for the keys left. A row that differs under the
// lock stops the migration: there is no cut-over.

// errUnverified means a row changed after the checksum differs between the
// tables under the cut-over's lock.
var errUnverified = errors.New("a row changed after the checksum differs between the original and the new table, so there is no cut-over")

// maxLockedVerify is the most changed keys compared under the cut-over's
// lock; with more, the lock is released and the keys compared outside it
// first.
const maxLockedVerify = 1000

// verifyBatch is how many keys one comparison reads.
const verifyBatch = 200

// sinks hands the binlog's keys to the apply's scheduler and, with whether
// each row exists after its change, to the final guard's tracker.
type sinks struct {
	sched   *apply.Scheduler
	tracker *apply.Tracker
}

var _ binlog.PresenceSink = sinks{}

// Add implements binlog.Sink.
func (s sinks) Add(keys ...rowkey.Key) { s.sched.Add(keys...) }

// Present implements binlog.PresenceSink.
func (s sinks) Present(keys []rowkey.Key, present []bool) { s.tracker.Record(keys, present) }

// checksOut reports whether a changed row is equal in both tables and is in
// the original if the binlog says it exists: a row the binlog calls present
// that its key cannot find could not be found by the apply either.
func checksOut(o checksum.KeyOutcome, t apply.Tracked) bool {
	return o.Same && (o.Source || !t.Present)
}

// compareTracked compares the rows of pending in batches on q (from begin,
// which may open a snapshot for each batch), workers batches at once, and
// hands each batch and its outcomes to judge, which returns the entries to
// forget (judge may run on several batches at once).
func (r *Runner) compareTracked(ctx context.Context, pending []apply.Tracked, workers int, q func() (dbconn.Querier, func(), error),
	judge func(batch []apply.Tracked, out []checksum.KeyOutcome) ([]apply.Tracked, error)) error {
	var verified atomic.Int64
	defer func() { r.res.ChangedRowsVerified += verified.Load() }()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(1, workers))
	for len(pending) > 0 {
		n := min(verifyBatch, len(pending))
		batch := pending[:n]
		pending = pending[n:]
		g.Go(func() error {
			conn, done, err := q()
			if err != nil {
				return fmt.Errorf("compare changed rows: %w", err)
			}
			out, err := checksum.CompareKeys(gctx, conn, checksum.Config{Mapping: r.mapping, Key: r.key}, keysOf(batch))
			done()
			if err != nil {
				return err
			}
			equal, err := judge(batch, out)
			if err != nil {
				return err
			}
			r.tracker.Verified(equal)
			verified.Add(int64(len(equal)))
			return nil
		})
	}
	return g.Wait()
}

// verifyChanged compares, in consistent snapshots (one a batch, several
// batches at once), the rows of the keys changed since the checksum, and
// forgets those that check out. Rows whose
// change is not applied yet differ and stay recorded.
func (r *Runner) verifyChanged(ctx context.Context) error {
	snapshot := func() (dbconn.Querier, func(), error) {
		tx, err := r.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
		if err != nil {
			return nil, nil, err
		}
		return tx, func() { tx.Rollback() }, nil
	}
	return r.compareTracked(ctx, r.tracker.Take(0), r.cfg.ChecksumWorkers, snapshot, func(batch []apply.Tracked, out []checksum.KeyOutcome) ([]apply.Tracked, error) {
		var equal []apply.Tracked
		for i, o := range out {
			if checksOut(o, batch[i]) {
				equal = append(equal, batch[i])
			}
		}
		return equal, nil
	})
}

// verifyLocked compares, on the connection that holds both tables locked
// after the last changes were applied, the rows of every key changed since
// the checksum and not yet found equal; one that does not check out stops
// the cut-over.
func (r *Runner) verifyLocked(ctx context.Context, lock *sql.Conn) error {
	pending := r.tracker.Take(0)
	if len(pending) > maxLockedVerify {
		return fmt.Errorf("%w: %d changed rows to compare", mdl.ErrRetry, len(pending))
	}
	locked := func() (dbconn.Querier, func(), error) { return lock, func() {}, nil }
	return r.compareTracked(ctx, pending, 1, locked, func(batch []apply.Tracked, out []checksum.KeyOutcome) ([]apply.Tracked, error) {
		for i, o := range out {
			switch {
			case checksOut(o, batch[i]):
			case !o.Same:
				return nil, fmt.Errorf("%w: key %v (in the original: %v, in the new table: %v)", errUnverified, o.Key, o.Source, o.Target)
			default:
				return nil, fmt.Errorf("%w: the binlog says the row of key %v exists, but that key selects no row of the original: sluice cannot find rows by this key", errUnverified, o.Key)
			}
		}
		return batch, nil
	})
}

func keysOf(ts []apply.Tracked) []rowkey.Key {
	out := make([]rowkey.Key, len(ts))
	for i, t := range ts {
		out[i] = t.Key
	}
	return out
}
