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
const maxLockedVerify = 20000

// verifyBatch is how many keys one comparison reads.
const verifyBatch = 500

// tee hands the binlog's keys to several sinks in turn.
type tee []binlog.Sink

// Add implements binlog.Sink.
func (t tee) Add(keys ...rowkey.Key) {
	for _, s := range t {
		s.Add(keys...)
	}
}

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
		differ, err := checksum.CompareKeys(ctx, tx, r.checksumConfig(), keysOf(batch))
		tx.Rollback()
		if err != nil {
			return err
		}
		equal := without(batch, differ)
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
		differ, err := checksum.CompareKeys(ctx, lock, r.checksumConfig(), keysOf(pending[:n]))
		if err != nil {
			return err
		}
		if len(differ) > 0 {
			return fmt.Errorf("%w: key %v (%d of %d keys in its batch differ)", errUnverified, differ[0], len(differ), n)
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

// without returns the entries of ts whose key is not in drop.
func without(ts []apply.Tracked, drop []rowkey.Key) []apply.Tracked {
	if len(drop) == 0 {
		return ts
	}
	skip := make(map[string]bool, len(drop))
	for _, k := range drop {
		skip[k.Encode()] = true
	}
	var out []apply.Tracked
	for _, t := range ts {
		if !skip[t.Key.Encode()] {
			out = append(out, t)
		}
	}
	return out
}
