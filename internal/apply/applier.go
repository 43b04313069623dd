package apply

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/rowkey"
	"github.com/sluicedb/sluice/internal/schema"
)

// ErrDuplicate means a row of the original table conflicts with another under
// a unique key of the new table. The migration must stop: sluice never drops
// or replaces a row to make it fit.
var ErrDuplicate = errors.New("duplicate key in the new table")

// Config configures an Applier.
type Config struct {
	DB      *sql.DB
	Mapping *schema.Mapping
	Key     rowkey.Cols
	// Workers is how many batches are applied at once (default 4).
	Workers int
	// BatchSize is the most keys per batch (default 500).
	BatchSize int
	// Settle, if set, is called when a unique-key conflict outlives applying
	// every pending key together. It must apply every change under a lock on
	// the original, where the shadow equals the original, and return an error
	// wrapping ErrDuplicate if the collision is still there, else nil.
	Settle func(ctx context.Context) error
	// Flavor is the server's: MariaDB spells the locking read LOCK IN SHARE
	// MODE and refuses a NOWAIT lock with a lock wait timeout.
	Flavor dbconn.Flavor
}

// Applier applies the keys a Scheduler holds. Run blocks until its context ends
// or an error stops it; ApplyLocked may be called from one other goroutine
// while the scheduler is held, so no worker runs.
type Applier struct {
	cfg     Config
	sched   *Scheduler
	applied atomic.Int64
	deleteSQL,
	insertSQL string
	// collated is whether a key column is a character string, whose
	// collation may equate keys that differ in bytes.
	collated bool
	// share and shareNowait are the locking clauses of the read of the
	// original, in the server's dialect.
	share, shareNowait string
	// starved counts, by encoded key, the reads in a row that found the
	// key's row locked (waitStarved).
	starveMu sync.Mutex
	starved  map[string]int
}

// New validates cfg and returns an Applier fed by sched.
func New(cfg Config, sched *Scheduler) (*Applier, error) {
	if cfg.DB == nil || cfg.Mapping == nil || len(cfg.Key) == 0 || sched == nil {
		return nil, errors.New("apply: DB, Mapping, Key and a scheduler are required")
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 4
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 500
	}
	a := &Applier{
		cfg:         cfg,
		sched:       sched,
		deleteSQL:   "DELETE FROM " + cfg.Mapping.Target.Quoted() + " WHERE ",
		insertSQL:   cfg.Mapping.CopySQL(),
		starved:     map[string]int{},
		share:       " FOR SHARE",
		shareNowait: " FOR SHARE NOWAIT",
	}
	for _, c := range cfg.Key {
		a.collated = a.collated || c.Collated()
	}
	if cfg.Flavor == dbconn.MariaDB {
		a.share, a.shareNowait = " LOCK IN SHARE MODE", " LOCK IN SHARE MODE NOWAIT"
	}
	return a, nil
}

// Applied returns how many key applications have committed.
func (a *Applier) Applied() int64 { return a.applied.Load() }

// Run starts the workers and applies batches until ctx ends (returning nil) or
// a batch fails for good (returning its error; ErrDuplicate for a unique-key
// conflict that persists when every pending key is applied together).
func (a *Applier) Run(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	conflict := make(chan []rowkey.Key, a.cfg.Workers)
	for w := 0; w < a.cfg.Workers; w++ {
		g.Go(func() error { return a.worker(gctx, conflict) })
	}
	g.Go(func() error { return a.resolver(gctx, conflict) })
	err := g.Wait()
	if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return nil
	}
	return err
}

// linger is how long a worker waits after a small batch.
const linger = 20 * time.Millisecond

func (a *Applier) worker(ctx context.Context, conflict chan<- []rowkey.Key) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		changed := a.sched.Changed()
		batch := a.sched.Next(a.cfg.BatchSize)
		if batch == nil {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-changed:
			case <-tick.C:
			}
			continue
		}
		locked, err := a.applyNowait(ctx, batch)
		if err == nil {
			a.fed(batch, locked)
			locked, err = a.waitStarved(ctx, locked)
		}
		switch {
		case err == nil:
			if len(locked) == 0 {
				a.sched.Done(batch)
				if len(batch) < a.cfg.BatchSize/4 {
					// Changes trickle in: let them gather into fewer, larger
					// batches (each costs a transaction) rather than chase
					// every key. A wait ends early when the scheduler is
					// held and released (a cut-over or a drain).
					select {
					case <-ctx.Done():
						return ctx.Err()
					case <-time.After(linger):
					}
				}
				continue
			}
			a.sched.Done(without(batch, locked))
			// The application holds these rows; its commit will mark them again,
			// and they are retried after a pause in any case.
			a.sched.Requeue(locked)
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(2 * time.Millisecond):
			}
		case errors.Is(err, ErrDuplicate):
			// Maybe only a stale row in the shadow that another pending key
			// will fix: let the resolver apply everything at once.
			a.sched.Requeue(batch)
			select {
			case conflict <- batch:
			case <-ctx.Done():
				return ctx.Err()
			}
		default:
			a.sched.Requeue(batch)
			return err
		}
	}
}

// resolver handles unique-key conflicts. A conflict is often only a stale
// row in the shadow that another pending key will fix, so the resolver pauses
// the workers, waits for the batches in flight, and applies every pending key
// in one transaction. If the conflict is still there, a change may not have
// been read from the binlog yet: Settle (if set) applies every change under a
// lock on the original, where a collision is one the original really holds.
// While the caller holds the scheduler, its own drain applies everything at
// once, and the resolver leaves the keys to it.
func (a *Applier) resolver(ctx context.Context, conflict <-chan []rowkey.Key) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-conflict:
		}
		if err := a.resolve(ctx); err != nil {
			return err
		}
	}
}

func (a *Applier) resolve(ctx context.Context) error {
	a.sched.Pause()
	defer a.sched.Resume()
	for a.sched.InFlight() > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	keys := a.sched.TakeAllUnlessHeld()
	if len(keys) == 0 {
		return nil
	}
	conn, err := a.cfg.DB.Conn(ctx)
	if err != nil {
		a.sched.Requeue(keys)
		return fmt.Errorf("apply: %w", err)
	}
	err = a.applyWithRetry(ctx, txRunner{conn}, keys, a.share, retries)
	conn.Close()
	if err != nil {
		a.sched.Requeue(keys)
		if errors.Is(err, ErrDuplicate) && a.cfg.Settle != nil {
			return a.cfg.Settle(ctx)
		}
		return err
	}
	a.fed(keys, nil)
	a.sched.Done(keys)
	return nil
}

// ApplyPending applies every ready key now, even while the scheduler is held
// (not while the operator stopped it), in batches as the workers do, rows
// the application holds locked left pending: a copy that collides under a
// unique key of the new table may only meet a row copied earlier whose
// change is pending. A key whose row collides is left pending too (a batch
// that collides is split until the keys that do are found). With lock (a
// connection holding LOCK TABLES on both tables, see ApplyLocked) the keys
// are applied on it, each batch in autocommit: a batch that fails after its
// delete is left pending, its rows missing from the shadow until it is
// applied.
func (a *Applier) ApplyPending(ctx context.Context, lock *sql.Conn) error {
	keys := a.sched.TakeAllUnlessStopped()
	for i := 0; i < len(keys); i += a.cfg.BatchSize {
		end := min(i+a.cfg.BatchSize, len(keys))
		if err := a.applySplit(ctx, lock, keys[i:end:end]); err != nil {
			a.sched.Requeue(keys[end:])
			return err
		}
	}
	return nil
}

// applySplit is ApplyPending for one batch: it reports the applied keys done
// and requeues the others, halving a batch that collides.
func (a *Applier) applySplit(ctx context.Context, lock *sql.Conn, batch []rowkey.Key) error {
	var locked []rowkey.Key
	var err error
	if lock == nil {
		locked, err = a.applyNowait(ctx, batch)
	} else {
		err = a.applyOnce(ctx, directRunner{lock}, batch, a.share)
	}
	switch {
	case err == nil:
		a.fed(batch, locked)
		a.sched.Done(without(batch, locked))
		a.sched.Requeue(locked)
		return nil
	case errors.Is(err, ErrDuplicate) && len(batch) > 1:
		half := len(batch) / 2
		if err := a.applySplit(ctx, lock, batch[:half:half]); err != nil {
			a.sched.Requeue(batch[half:])
			return err
		}
		return a.applySplit(ctx, lock, batch[half:])
	case errors.Is(err, ErrDuplicate):
		a.sched.Requeue(batch)
		return nil
	}
	a.sched.Requeue(batch)
	return err
}

// ApplyLocked applies every ready key on conn, which holds LOCK TABLES on both
// tables. No transaction is opened: START TRANSACTION would release the table
// locks. Nobody else can read the shadow meanwhile. It makes one attempt: a
// row lock it waits for can only be a prepared XA transaction's (every other
// writer of the original ended before the table lock was granted), which
// may stay for hours, so a lock wait is the caller's to handle (it releases
// the table locks and tries again later), not retried under them.
func (a *Applier) ApplyLocked(ctx context.Context, conn *sql.Conn) error {
	return a.applyAll(ctx, directRunner{conn}, 1)
}

func (a *Applier) applyAll(ctx context.Context, db runner, attempts int) error {
	keys := a.sched.TakeAll()
	if len(keys) == 0 {
		return nil
	}
	err := a.applyWithRetry(ctx, db, keys, a.share, attempts)
	if err != nil {
		a.sched.Requeue(keys)
		return err
	}
	a.fed(keys, nil)
	a.sched.Done(keys)
	return nil
}

type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// runner runs fn with an execer and commits, or runs it directly.
type runner interface {
	run(ctx context.Context, fn func(execer) error) error
}

type beginner interface {
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
}

// txRunner runs fn in one transaction.
type txRunner struct{ db beginner }

func (r txRunner) run(ctx context.Context, fn func(execer) error) error {
	tx, err := r.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("apply: begin: %w", err)
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("apply: commit: %w", err)
	}
	return nil
}

// directRunner runs fn on a connection in autocommit mode.
type directRunner struct{ conn execer }

func (r directRunner) run(ctx context.Context, fn func(execer) error) error { return fn(r.conn) }

// locked reports whether err is a NOWAIT read's refusal of a locked row:
// MySQL's own error, or MariaDB's lock wait timeout.
func (a *Applier) locked(err error) bool {
	n := dbconn.ErrorNumber(err)
	return n == dbconn.ErrLockNowait || (a.cfg.Flavor == dbconn.MariaDB && n == dbconn.ErrLockWaitTimeout)
}

// applyNowait applies keys without ever waiting for a row lock the
// application holds: sluice then never takes part in a lock-wait cycle, so
// the application never becomes a deadlock victim because of it. A batch that
// meets a locked row is split in halves; it returns the keys whose rows were
// locked, which the caller requeues.
func (a *Applier) applyNowait(ctx context.Context, keys []rowkey.Key) ([]rowkey.Key, error) {
	err := a.applyWithRetry(ctx, txRunner{a.cfg.DB}, keys, a.shareNowait, retries)
	if !a.locked(err) {
		return nil, err
	}
	if len(keys) == 1 {
		// A new slice: never alias the caller's batch.
		return []rowkey.Key{keys[0]}, nil
	}
	half := len(keys) / 2
	l1, err := a.applyNowait(ctx, keys[:half:half])
	if err != nil {
		return nil, err
	}
	l2, err := a.applyNowait(ctx, keys[half:])
	if err != nil {
		return nil, err
	}
	return slices.Concat(l1, l2), nil
}

// starveAfter is how many reads in a row may find a key's row locked before
// the next one waits for the lock; waitLock bounds that wait (seconds).
const (
	starveAfter = 3
	waitLock    = 2
)

// waitStarved applies, one key per transaction and waiting for the row's
// lock (waitOne), the keys of locked whose rows were found locked
// starveAfter times in a row, and returns the others and those still locked.
// Writers that lock the rows again and again without a pause between them (a
// scan of the whole table, one statement after another) leave no moment to a
// read that never waits, and the backlog would never shrink. It stops once
// the scheduler is held (a cut-over waits for the keys in flight).
func (a *Applier) waitStarved(ctx context.Context, locked []rowkey.Key) ([]rowkey.Key, error) {
	if len(locked) == 0 {
		return nil, nil
	}
	var due, rest []rowkey.Key
	a.starveMu.Lock()
	for _, k := range locked {
		e := k.Encode()
		if a.starved[e]++; a.starved[e] >= starveAfter {
			delete(a.starved, e)
			due = append(due, k)
		} else {
			rest = append(rest, k)
		}
	}
	a.starveMu.Unlock()
	for i, k := range due {
		if a.sched.Holding() {
			return append(rest, due[i:]...), nil
		}
		err := a.waitOne(ctx, k)
		switch {
		case err == nil:
		case dbconn.ErrorNumber(err) == dbconn.ErrLockWaitTimeout || dbconn.Retryable(err):
			rest = append(rest, k)
		default:
			return append(rest, due[i:]...), err
		}
	}
	return rest, nil
}

// waitOne applies key k alone, on a connection whose lock waits last at
// most waitLock seconds. Its first statement is the waiting read of k's row
// in the original: while it waits the transaction holds no lock at all, so
// it cannot close a cycle of waits that would make the application a
// deadlock victim; the shadow's rows are touched once the row is locked.
func (a *Applier) waitOne(ctx context.Context, k rowkey.Key) error {
	conn, err := a.cfg.DB.Conn(ctx)
	if err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	defer conn.Close()
	var was int64
	if err := conn.QueryRowContext(ctx, "SELECT @@SESSION.innodb_lock_wait_timeout").Scan(&was); err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	if _, err := conn.ExecContext(ctx, fmt.Sprintf("SET SESSION innodb_lock_wait_timeout = %d", waitLock)); err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	keys := []rowkey.Key{k}
	err = txRunner{conn}.run(ctx, func(tx execer) error {
		in, args := a.cfg.Key.InList(keys)
		rows, err := tx.QueryContext(ctx, "SELECT 1 FROM "+a.cfg.Mapping.Source.Quoted()+" WHERE "+in+a.share, args...)
		if err != nil {
			return err
		}
		rows.Close()
		return a.applyKeys(ctx, tx, keys, a.share)
	})
	// The wait as it was for the next user of the connection, or the
	// connection goes.
	if _, rerr := conn.ExecContext(context.WithoutCancel(ctx), fmt.Sprintf("SET SESSION innodb_lock_wait_timeout = %d", was)); rerr != nil {
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	}
	if err == nil {
		a.applied.Add(1)
	}
	return err
}

// fed forgets the count of waitStarved for the keys of batch applied (those
// not in locked).
func (a *Applier) fed(batch, locked []rowkey.Key) {
	a.starveMu.Lock()
	defer a.starveMu.Unlock()
	if len(a.starved) == 0 {
		return
	}
	for _, k := range without(batch, locked) {
		delete(a.starved, k.Encode())
	}
}

// without returns the keys of all that are not in drop.
func without(all, drop []rowkey.Key) []rowkey.Key {
	skip := make(map[string]bool, len(drop))
	for _, k := range drop {
		skip[k.Encode()] = true
	}
	out := make([]rowkey.Key, 0, len(all)-len(drop))
	for _, k := range all {
		if !skip[k.Encode()] {
			out = append(out, k)
		}
	}
	return out
}

// retries is how many times a batch is tried when a deadlock or a lock wait
// ends it.
const retries = 20

func (a *Applier) applyWithRetry(ctx context.Context, db runner, keys []rowkey.Key, lock string, attempts int) error {
	var err error
	for attempt := 0; attempt < attempts; attempt++ {
		err = a.applyOnce(ctx, db, keys, lock)
		if err == nil || !dbconn.Retryable(err) || (lock == a.shareNowait && a.locked(err)) {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(attempt+1) * 10 * time.Millisecond):
		}
	}
	return err
}

// applyOnce deletes keys from the shadow and copies them from the original in
// one transaction, in statements of at most BatchSize keys.
func (a *Applier) applyOnce(ctx context.Context, db runner, keys []rowkey.Key, lock string) error {
	err := db.run(ctx, func(tx execer) error { return a.applyKeys(ctx, tx, keys, lock) })
	if err != nil {
		return err
	}
	a.applied.Add(int64(len(keys)))
	return nil
}

func (a *Applier) applyKeys(ctx context.Context, tx execer, keys []rowkey.Key, lock string) error {
	for i := 0; i < len(keys); i += a.cfg.BatchSize {
		part := keys[i:min(i+a.cfg.BatchSize, len(keys))]
		in, args := a.cfg.Key.InList(part)
		if _, err := tx.ExecContext(ctx, a.deleteSQL+in, args...); err != nil {
			return fmt.Errorf("apply: delete %d keys: %w", len(part), err)
		}
	}
	copies := keys
	if len(keys) > a.cfg.BatchSize && a.collated {
		// Keys that differ in bytes name one row where the collation equates
		// them ('a', 'A', 'a  '); copied by two statements, the row would
		// collide with itself. The statements copy the rows named by the
		// original's own keys instead, each once.
		var err error
		if copies, err = a.storedKeys(ctx, tx, keys, lock); err != nil {
			return err
		}
	}
	for i := 0; i < len(copies); i += a.cfg.BatchSize {
		part := copies[i:min(i+a.cfg.BatchSize, len(copies))]
		in, args := a.cfg.Key.InList(part)
		if _, err := tx.ExecContext(ctx, a.insertSQL+in+lock, args...); err != nil {
			if dbconn.ErrorNumber(err) == dbconn.ErrDupEntry {
				return fmt.Errorf("%w: %v", ErrDuplicate, err)
			}
			if lock == a.shareNowait && a.locked(err) {
				return err // unwrapped: applyNowait splits the batch
			}
			return fmt.Errorf("apply: copy %d keys: %w", len(part), err)
		}
	}
	return nil
}

// storedKeys reads, with lock, the keys as the original stores them of the
// rows that keys name, each once: the original's primary key is unique under
// its collation, so a stored key names its own row and no other. A row that
// appears after the read is marked again by its own binlog event.
func (a *Applier) storedKeys(ctx context.Context, tx execer, keys []rowkey.Key, lock string) ([]rowkey.Key, error) {
	seen := make(map[string]bool, len(keys))
	out := make([]rowkey.Key, 0, len(keys))
	for i := 0; i < len(keys); i += a.cfg.BatchSize {
		part := keys[i:min(i+a.cfg.BatchSize, len(keys))]
		in, args := a.cfg.Key.InList(part)
		rows, err := tx.QueryContext(ctx, "SELECT "+a.cfg.Key.SelectExprs()+" FROM "+a.cfg.Mapping.Source.Quoted()+
			a.cfg.Mapping.Source.KeyHint()+" WHERE "+in+lock, args...)
		if err != nil {
			if lock == a.shareNowait && a.locked(err) {
				return nil, err // unwrapped: applyNowait splits the batch
			}
			return nil, fmt.Errorf("apply: read %d keys: %w", len(part), err)
		}
		raw := make([][]byte, len(a.cfg.Key))
		dest := make([]any, len(raw))
		for j := range raw {
			dest[j] = &raw[j]
		}
		for rows.Next() {
			if err := rows.Scan(dest...); err != nil {
				rows.Close()
				return nil, fmt.Errorf("apply: read keys: %w", err)
			}
			k, err := a.cfg.Key.FromScan(raw)
			if err != nil {
				rows.Close()
				return nil, fmt.Errorf("apply: read keys: %w", err)
			}
			if e := k.Encode(); !seen[e] {
				seen[e] = true
				out = append(out, k)
			}
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			if lock == a.shareNowait && a.locked(err) {
				return nil, err
			}
			return nil, fmt.Errorf("apply: read keys: %w", err)
		}
	}
	return out, nil
}
