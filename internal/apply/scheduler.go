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
	"sync"

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
	// changed is closed (and replaced) when workers may find new work.
	changed chan struct{}
	added   int64
	// copy, while set, follows the copy (TrackCopy): keys are applied as
	// soon as their rows are copied instead of after the whole copy.
	copy *frontier
}

// NewScheduler returns an empty scheduler.
func NewScheduler() *Scheduler {
	return &Scheduler{
		ready:    map[string]rowkey.Key{},
		inflight: map[string]bool{},
		again:    map[string]rowkey.Key{},
		changed:  make(chan struct{}),
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
	s.mu.Lock()
	for _, k := range keys {
		s.added++
		if s.copy != nil && !s.copy.add(k) {
			continue
		}
		s.readyLocked(k)
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

// TrackCopy makes the scheduler follow a copy over a single integer key
// (SpanCut, SpanCopied, CopyDone): a changed key is applied as soon as every
// range up to it is copied, and waits while its range is still to be copied
// (or cut). Without TrackCopy, hold the scheduler during the copy.
func (s *Scheduler) TrackCopy() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.copy = newFrontier()
	// Keys marked before: nothing is copied yet, so they wait like any key
	// beyond the copy.
	for e, k := range s.ready {
		s.copy.add(k)
		delete(s.ready, e)
	}
}

// SpanCut records that copy range seq (numbered from 0 across lanes), the
// next range of lane lane in key order, is about to be copied: (lo, hi], a
// nil bound open. A lane's first range gives its lower bound (lane 0 is open
// below); the last lane's last range is open above. It must be called before
// the range's copy starts.
func (s *Scheduler) SpanCut(seq, lane int, lo, hi rowkey.Key) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.copy == nil {
		return
	}
	var after uint64
	if lo != nil {
		o, ok := ordinal(lo)
		if !ok {
			s.copy.cutBlind(lane)
			return
		}
		after = o
	}
	if hi == nil {
		s.copy.cutRange(seq, lane, after, 0, true)
		return
	}
	o, ok := ordinal(hi)
	if !ok {
		s.copy.cutBlind(lane)
		return
	}
	s.copy.cutRange(seq, lane, after, o, false)
}

// SpanCopied records that copy range seq is done (committed).
func (s *Scheduler) SpanCopied(seq int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.copy == nil || !s.copy.copied(seq) {
		return
	}
	s.releaseLocked()
}

// CopyDone ends TrackCopy: every waiting key becomes ready.
func (s *Scheduler) CopyDone() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.copy == nil {
		return
	}
	s.copy.finish()
	s.releaseLocked()
	s.copy = nil
}

func (s *Scheduler) releaseLocked() {
	n := len(s.ready)
	s.copy.release(s.readyLocked)
	if len(s.ready) > n && s.held == 0 && s.paused == 0 {
		s.broadcastLocked()
	}
}

// Next takes up to max keys that are not in flight and marks them in flight.
// It returns nil while the scheduler is held or has nothing ready.
func (s *Scheduler) Next(max int) []rowkey.Key {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held > 0 || s.paused > 0 {
		return nil
	}
	return s.takeLocked(max)
}

// TakeAllUnlessHeld takes every ready key unless the caller holds the
// scheduler (its own drain then applies them). Pauses do not count.
func (s *Scheduler) TakeAllUnlessHeld() []rowkey.Key {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held > 0 {
		return nil
	}
	return s.takeLocked(len(s.ready))
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

// Backlog returns how many keys are waiting or in flight, including those
// waiting for their range to be copied.
func (s *Scheduler) Backlog() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.ready) + len(s.inflight)
	if s.copy != nil {
		n += s.copy.waiting() + len(s.copy.unknown)
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
