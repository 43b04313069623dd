package migration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/sluicedb/sluice/internal/apply"
	"github.com/sluicedb/sluice/internal/binlog"
	"github.com/sluicedb/sluice/internal/checksum"
	"github.com/sluicedb/sluice/internal/mdl"
	"github.com/sluicedb/sluice/internal/rowkey"
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

func (r *Runner) checksumConfig() checksum.Config {
	return checksum.Config{Mapping: r.mapping, Key: r.key}
}

// verifyChanged compares, in consistent snapshots, the rows of the keys
// changed since the checksum, and forgets those found equal. Rows whose
// change is not applied yet differ and stay recorded.
func (r *Runner) verifyChanged(ctx context.Context) error {
	pending := r.tracker.Take(0)
	for len(pending) > 0 {
		n := min(verifyBatch, len(pending))
		batch := pending[:n]
		pending = pending[n:]
		tx, err := r.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
		if err != nil {
			return fmt.Errorf("compare changed rows: %w", err)
		}
		outcomes, err := checksum.CompareKeys(ctx, tx, r.checksumConfig(), keysOf(batch))
		tx.Rollback()
		if err != nil {
			return err
		}
		// Equal, and in the original as the binlog says (a row the binlog
		// calls present must be found by its key, or sluice could not find
		// it to apply it either).
		var equal []apply.Tracked
		for i, o := range outcomes {
			if o.Same && (o.Source || !batch[i].Present) {
				equal = append(equal, batch[i])
			}
		}
		r.tracker.Verified(equal)
		r.res.ChangedRowsVerified += int64(len(equal))
	}
	return nil
}

// verifyLocked compares, on the connection that holds both tables locked
// after the last changes were applied, the rows of every key changed since
// the checksum and not yet found equal.
func (r *Runner) verifyLocked(ctx context.Context, lock *sql.Conn) error {
	pending := r.tracker.Take(0)
	if len(pending) > maxLockedVerify {
		return fmt.Errorf("%w: %d changed rows to compare", mdl.ErrRetry, len(pending))
	}
	for len(pending) > 0 {
		n := min(verifyBatch, len(pending))
		outcomes, err := checksum.CompareKeys(ctx, lock, r.checksumConfig(), keysOf(pending[:n]))
		if err != nil {
			return err
		}
		for i, o := range outcomes {
			switch {
			case !o.Same:
				return fmt.Errorf("%w: key %v (in the original: %v, in the new table: %v)", errUnverified, o.Key, o.Source, o.Target)
			case pending[i].Present && !o.Source:
				return fmt.Errorf("%w: the binlog says the row of key %v exists, but that key selects no row of the original: sluice cannot find rows by this key", errUnverified, o.Key)
			}
		}
		r.tracker.Verified(pending[:n])
		r.res.ChangedRowsVerified += int64(n)
		pending = pending[n:]
	}
	return nil
}

func keysOf(ts []apply.Tracked) []rowkey.Key {
	out := make([]rowkey.Key, len(ts))
	for i, t := range ts {
		out[i] = t.Key
	}
	return out
}
