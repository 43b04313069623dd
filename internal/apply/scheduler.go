// Package apply keeps the shadow table in step with the original while changes
// arrive from the binlog.
//
// sluice does not replay binlog row images. A change to a row only marks its
// primary key; applying a key copies that row's current committed state from
// the original table into the shadow (delete the key in the shadow, then
// INSERT ... SELECT it from the original, in one transaction, with a locking
// read that waits for any transaction still committing). Applying a key is
// therefore idempotent and needs no event order, which is what lets many
// workers apply at once: the Scheduler only guarantees that one key is never
// in two batches at the same time, and that a key marked again while its batch
// runs is applied once more afterwards.
package apply

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/sluicedb/sluice/internal/binlog"
	"github.com/sluicedb/sluice/internal/rowkey"
)

// Scheduler holds the keys waiting to be applied. It is safe for concurrent
// use. The binlog reader calls Add; apply workers call Next, then Done or
// Requeue for every batch they took.
type Scheduler struct {
	mu       sync.Mutex // protects every field below
	ready    map[string]rowkey.Key
	inflight map[string]bool
	// again holds keys marked while their batch was in flight.
	again map[string]rowkey.Key
	held  int // holds placed by callers (Hold), which may nest
	// paused counts the applier's own pauses (Pause), kept apart from held so
	// that the applier never lifts a hold it did not place.
	paused int
	// stopped: the operator paused the run (Stop); neither the workers nor
	// the resolver take keys.
	stopped bool
	// changed is closed (and replaced) when workers may find new work.
	changed chan struct{}
	added   int64
	// copy, while set, follows the copy (TrackCopy): keys are applied as
	// soon as their rows are copied instead of after the whole copy.
	copy *tracking
	// weighLinger is how long the key converter waits after a small batch.
	weighLinger time.Duration
	copyDone    bool // CopyDone was called
	// clock, since and againSince follow the binlog position of each held
	// key's mark, for checkpoints (progress.go).
	clock             func() binlog.Position
	since, againSince map[string]binlog.Position
}

// NewScheduler returns an empty scheduler.
func NewScheduler() *Scheduler {
	return &Scheduler{
		ready:       map[string]rowkey.Key{},
		inflight:    map[string]bool{},
		again:       map[string]rowkey.Key{},
		changed:     make(chan struct{}),
		weighLinger: linger,
	}
}

// broadcastLocked wakes every goroutine waiting on Changed. s.mu must be held.
func (s *Scheduler) broadcastLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// Changed returns a channel that is closed once keys become ready while the
// scheduler is not held, or the hold is lifted.
func (s *Scheduler) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

// Add marks keys as changed.
func (s *Scheduler) Add(keys ...rowkey.Key) {
	var now binlog.Position
	s.mu.Lock()
	if s.clock != nil {
		now = s.clock()
	}
	for _, k := range keys {
		s.added++
		s.sinceAddLocked(k.Encode(), now)
		s.markLocked(k)
	}
	if s.held == 0 && s.paused == 0 && len(s.ready) > 0 {
		s.broadcastLocked()
	}
	s.mu.Unlock()
}

// readyLocked makes k ready, or marks it again if its batch is in flight.
// s.mu must be held.
func (s *Scheduler) readyLocked(k rowkey.Key) {
	e := k.Encode()
	if s.inflight[e] {
		s.again[e] = k
		return
	}
	s.ready[e] = k
}

// TrackCopy makes the scheduler follow the copy (SpanCut, SpanCopied,
// CopyDone): a changed key is applied as soon as every range up to it is
// copied, and waits while its range is still to be copied (or cut). ord
// places keys and range bounds in the key's order; a key ord needs the
// server for waits in a pending list, converted in batches by a goroutine of
// the scheduler's own until CopyDone or ctx ends, so that Add never waits
// for the server. Without TrackCopy, hold the scheduler during the copy.
func (s *Scheduler) TrackCopy(ctx context.Context, ord *Order) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := &tracking{f: newFrontier(), ord: ord, ctx: ctx, done: make(chan struct{}), linger: s.weighLinger}
	if !ord.Immediate() {
		t.pending, t.converting = map[string]rowkey.Key{}, map[string]rowkey.Key{}
		t.wake = make(chan struct{}, 1)
		go s.resolve(t)
	}
	s.copy = t
	// Keys marked before: nothing is copied yet, so they wait like any key
	// beyond the copy.
	for e, k := range s.ready {
		delete(s.ready, e)
		s.placeLocked(k)
	}
}

// tracking is the state of TrackCopy.
type tracking struct {
	f   *frontier
	ord *Order
	ctx context.Context
	// pending holds keys waiting for their sort keys, converting those being
	// converted (by Encode). A key marked again while it is converted is
	// placed once converted, which is after the new mark.
	pending, converting map[string]rowkey.Key
	wake                chan struct{} // signalled when pending is not empty
	done                chan struct{} // closed by CopyDone
	linger              time.Duration
}

// placeLocked gives k to the copy's frontier, or to the pending list when
// its sort key needs the server; it reports whether k is ready now. s.mu
// must be held and s.copy set.
func (s *Scheduler) placeLocked(k rowkey.Key) bool {
	t := s.copy
	if t.pending == nil {
		sk, _ := t.ord.sortKey(k)
		return t.f.add(k, sk)
	}
	e := k.Encode()
	if _, ok := t.converting[e]; ok {
		return false
	}
	t.pending[e] = k
	select {
	case t.wake <- struct{}{}:
	default:
	}
	return false
}

// markLocked makes k ready, or places it while the copy is tracked. s.mu
// must be held.
func (s *Scheduler) markLocked(k rowkey.Key) {
	if s.copy != nil && !s.placeLocked(k) {
		return
	}
	s.readyLocked(k)
}

// resolve converts pending keys to sort keys, WeightBatch at a time, and
// places them in the frontier, until the copy is done or t.ctx ends. A key
// whose conversion fails waits for the end of the copy.
func (s *Scheduler) resolve(t *tracking) {
	for {
		select {
		case <-t.ctx.Done():
			return
		case <-t.done:
			return
		case <-t.wake:
		}
		for {
			s.mu.Lock()
			if s.copy != t {
				s.mu.Unlock()
				return
			}
			batch := make([]rowkey.Key, 0, min(len(t.pending), WeightBatch))
			for e, k := range t.pending {
				if len(batch) == WeightBatch {
					break
				}
				batch = append(batch, k)
				delete(t.pending, e)
				t.converting[e] = k
			}
			s.mu.Unlock()
			if len(batch) == 0 {
				break
			}
			sks, err := t.ord.sortKeys(t.ctx, batch)
			s.mu.Lock()
			if s.copy != t {
				// CopyDone came first and made the batch ready.
				s.mu.Unlock()
				return
			}
			n := len(s.ready)
			for i, k := range batch {
				delete(t.converting, k.Encode())
				switch {
				case err != nil:
					t.f.add(k, nil)
				case t.f.add(k, sks[i]):
					s.readyLocked(k)
				}
			}
			if len(s.ready) > n && s.held == 0 && s.paused == 0 {
				s.broadcastLocked()
			}
			s.mu.Unlock()
			if len(batch) < WeightBatch/4 && t.linger > 0 {
				// Keys trickle in: let them gather into fewer queries.
				select {
				case <-t.ctx.Done():
					return
				case <-time.After(t.linger):
				}
			}
		}
	}
}

// SpanCut records that copy range seq (numbered from 0 across lanes), the
// next range of lane lane in key order, is about to be copied: (lo, hi], a
// nil bound open. A lane's first range gives its lower bound (lane 0 is open
// below); the last lane's last range is open above. It must be called before
// the range's copy starts, and for one range at a time. Bounds that need the
// server are converted here, in one query; a range whose bounds cannot be
// converted makes every key wait for the end of the copy.
func (s *Scheduler) SpanCut(seq, lane int, lo, hi rowkey.Key) {
	s.mu.Lock()
	t := s.copy
	s.mu.Unlock()
	if t == nil {
		return
	}
	var bounds []rowkey.Key
	for _, b := range []rowkey.Key{lo, hi} {
		if b != nil {
			bounds = append(bounds, b)
		}
	}
	sks, err := t.ord.sortKeys(t.ctx, bounds)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.copy != t {
		return
	}
	if err != nil || slices.ContainsFunc(sks, func(sk rowkey.SortKey) bool { return sk == nil }) {
		t.f.cutBlind(lane, lo, hi)
		return
	}
	var after, top rowkey.SortKey
	if lo != nil {
		after, sks = sks[0], sks[1:]
	}
	if hi != nil {
		top = sks[0]
	}
	t.f.cutRange(seq, lane, after, top, lo, hi)
}

// SpanCopied records that copy range seq is done (committed).
func (s *Scheduler) SpanCopied(seq int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.copy == nil || !s.copy.f.copied(seq) {
		return
	}
	s.releaseLocked()
}

// CopyDone ends TrackCopy: every waiting key becomes ready.
func (s *Scheduler) CopyDone() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.copyDone = true
	t := s.copy
	if t == nil {
		return
	}
	t.f.finish()
	s.releaseLocked()
	for _, m := range []map[string]rowkey.Key{t.pending, t.converting} {
		for e, k := range m {
			delete(m, e)
			s.readyLocked(k)
		}
	}
	s.copy = nil
	close(t.done)
	if len(s.ready) > 0 && s.held == 0 && s.paused == 0 {
		s.broadcastLocked()
	}
}

func (s *Scheduler) releaseLocked() {
	n := len(s.ready)
	s.copy.f.release(s.readyLocked)
	if len(s.ready) > n && s.held == 0 && s.paused == 0 {
		s.broadcastLocked()
	}
}

// Next takes up to max keys that are not in flight and marks them in flight.
// It returns nil while the scheduler is held or has nothing ready.
func (s *Scheduler) Next(max int) []rowkey.Key {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held > 0 || s.paused > 0 || s.stopped {
		return nil
	}
	return s.takeLocked(max)
}

// TakeAllUnlessHeld takes every ready key unless the caller holds the
// scheduler (its own drain then applies them) or the operator stopped it.
// The applier's own pauses do not count.
func (s *Scheduler) TakeAllUnlessHeld() []rowkey.Key {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held > 0 || s.stopped {
		return nil
	}
	return s.takeLocked(len(s.ready))
}

// TakeAllUnlessStopped takes every ready key, even while held, unless the
// operator stopped the scheduler.
func (s *Scheduler) TakeAllUnlessStopped() []rowkey.Key {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return nil
	}
	return s.takeLocked(len(s.ready))
}

// Tracking reports whether the scheduler follows the copy (TrackCopy, until
// CopyDone).
func (s *Scheduler) Tracking() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.copy != nil
}

// Pause stops Next from handing out keys until the matching Resume, whether
// or not the scheduler is held.
func (s *Scheduler) Pause() {
	s.mu.Lock()
	s.paused++
	s.mu.Unlock()
}

// Resume lifts one Pause.
func (s *Scheduler) Resume() {
	s.mu.Lock()
	s.paused--
	if s.paused == 0 && s.held == 0 {
		s.broadcastLocked()
	}
	s.mu.Unlock()
}

// Stop(true) stops the workers and the resolver from taking keys until
// Stop(false), for the operator's pause; TakeAll (under the cut-over's lock)
// still takes them. Changes are still recorded meanwhile.
func (s *Scheduler) Stop(stopped bool) {
	s.mu.Lock()
	s.stopped = stopped
	if !stopped && s.held == 0 && s.paused == 0 {
		s.broadcastLocked()
	}
	s.mu.Unlock()
}

// TakeAll takes every ready key, even while held; the caller applies them
// itself (the cut-over applies the last keys on its locking connection).
func (s *Scheduler) TakeAll() []rowkey.Key {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.takeLocked(len(s.ready))
}

func (s *Scheduler) takeLocked(max int) []rowkey.Key {
	if max <= 0 || len(s.ready) == 0 {
		return nil
	}
	out := make([]rowkey.Key, 0, min(max, len(s.ready)))
	for e, k := range s.ready {
		if len(out) == max {
			break
		}
		out = append(out, k)
		s.inflight[e] = true
		delete(s.ready, e)
	}
	return out
}

// Done reports that keys were applied; keys marked again meanwhile become ready.
func (s *Scheduler) Done(keys []rowkey.Key) {
	s.mu.Lock()
	for _, k := range keys {
		e := k.Encode()
		delete(s.inflight, e)
		s.sinceDoneLocked(e)
		if again, ok := s.again[e]; ok {
			delete(s.again, e)
			s.ready[e] = again
		}
	}
	if s.held == 0 && s.paused == 0 && len(s.ready) > 0 {
		s.broadcastLocked()
	}
	s.mu.Unlock()
}

// Requeue reports that keys were not applied: they become ready again.
func (s *Scheduler) Requeue(keys []rowkey.Key) {
	s.mu.Lock()
	for _, k := range keys {
		e := k.Encode()
		delete(s.inflight, e)
		delete(s.again, e)
		s.sinceRequeueLocked(e)
		s.ready[e] = k
	}
	if s.held == 0 && s.paused == 0 {
		s.broadcastLocked()
	}
	s.mu.Unlock()
}

// Hold(true) stops Next from handing out keys; Hold(false) lifts one such
// hold. Holds nest: the keys flow again when every hold is lifted.
func (s *Scheduler) Hold(held bool) {
	s.mu.Lock()
	if held {
		s.held++
	} else if s.held > 0 {
		s.held--
	}
	if s.held == 0 && s.paused == 0 {
		s.broadcastLocked()
	}
	s.mu.Unlock()
}

// Holding reports whether the scheduler is held, paused or stopped: keys
// handed out should be finished quickly.
func (s *Scheduler) Holding() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held > 0 || s.paused > 0 || s.stopped
}

// Backlog returns how many keys are waiting or in flight, including those
// waiting for their range to be copied.
func (s *Scheduler) Backlog() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.ready) + len(s.inflight)
	if t := s.copy; t != nil {
		n += t.f.waiting() + len(t.pending) + len(t.converting)
	}
	return n
}

// InFlight returns how many keys are being applied now.
func (s *Scheduler) InFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.inflight)
}

// Marked returns how many key marks Add has received in all.
func (s *Scheduler) Marked() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.added
}
