package apply

import (
	"context"
	"fmt"
	"sort"

	"github.com/sluicedb/sluice/internal/binlog"
	"github.com/sluicedb/sluice/internal/ranges"
	"github.com/sluicedb/sluice/internal/rowkey"
)

// Checkpoints. A run records a pair (Todo, position) from which a later run
// resumes: it copies the key intervals Todo again (emptied first) and reads
// the binlog again from the position. The pair must hold this invariant:
// every row of the shadow outside Todo reflects every change committed
// before the position. Progress makes it hold:
//
//   - Todo is what the copy has not passed in each lane: above the lane's
//     low watermark, up to the next lane (or the end of the interval a
//     resumed copy was given);
//   - every key the scheduler holds (to apply, in flight, waiting for the
//     copy or for its sort key) carries the binlog position at which it was
//     marked: the stream's position then, the end of the last whole
//     transaction read, which is at or before the transaction that marked
//     it. A key marked again while its batch is in flight keeps the later
//     mark's position for its next application. The position reported is
//     the earliest of them, leaving out keys inside Todo (their rows are
//     copied again), or the stream's position when no key is held.
//
// A key not yet applied outside Todo thus has its change after the
// position, and is read again; a key applied has its row as fresh as the
// application's locking read, which came after its mark.

// Progress is one consistent view of the copy and the apply.
type Progress struct {
	// Tracked is false when the scheduler has no clock (SetClock): it then
	// cannot tell a position, and nothing should be recorded.
	Tracked bool
	// Copied: the copy is done (CopyDone). Todo is then empty.
	Copied bool
	// Todo are the key intervals not yet copied, in key order.
	Todo []ranges.Span
	// Since, if HasSince, is the earliest position of a change to a row
	// outside Todo not yet applied.
	Since    binlog.Position
	HasSince bool
}

// SetClock gives the scheduler the binlog stream's position (the end of the
// last whole transaction read); it is asked once per Add. Set it before the
// first Add.
func (s *Scheduler) SetClock(clock func() binlog.Position) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clock = clock
	s.since, s.againSince = map[string]binlog.Position{}, map[string]binlog.Position{}
}

// sinceAddLocked records the position of a new mark of key e.
func (s *Scheduler) sinceAddLocked(e string, now binlog.Position) {
	if s.since == nil {
		return
	}
	if s.inflight[e] {
		if _, ok := s.againSince[e]; !ok {
			s.againSince[e] = now
		}
		return
	}
	if _, ok := s.since[e]; !ok {
		s.since[e] = now
	}
}

// sinceDoneLocked records that key e was applied (its batch may have been
// taken before its last mark: that mark's position stays).
func (s *Scheduler) sinceDoneLocked(e string) {
	if s.since == nil {
		return
	}
	delete(s.since, e)
	if p, ok := s.againSince[e]; ok {
		s.since[e] = p
		delete(s.againSince, e)
	}
}

// sinceRequeueLocked records that key e was not applied: its first mark
// still counts.
func (s *Scheduler) sinceRequeueLocked(e string) {
	if s.since != nil {
		delete(s.againSince, e)
	}
}

// interval is a key interval (lo, hi] of a resumed copy; a nil bound is
// open.
type interval struct {
	lo, hi       rowkey.SortKey
	loKey, hiKey rowkey.Key
}

// holds reports whether sk is in the interval.
func (iv *interval) holds(sk rowkey.SortKey) bool {
	return (iv.loKey == nil || sk.Compare(iv.lo) > 0) && (iv.hiKey == nil || sk.Compare(iv.hi) <= 0)
}

// Within tells a tracked copy (TrackCopy) that it covers only the intervals
// spans, lane i being spans[i] (a resumed copy, ranges.Cutter.Within): a
// key outside them was copied by an earlier run and is applied at once.
// Call it after TrackCopy, before the copy starts. It fails when a bound
// has no sort key; the caller must then not resume.
func (s *Scheduler) Within(ctx context.Context, spans []ranges.Span) error {
	s.mu.Lock()
	t := s.copy
	s.mu.Unlock()
	if t == nil {
		return fmt.Errorf("apply: Within without TrackCopy")
	}
	var bounds []rowkey.Key
	for _, sp := range spans {
		for _, b := range []rowkey.Key{sp.Lo, sp.Hi} {
			if b != nil {
				bounds = append(bounds, b)
			}
		}
	}
	sks, err := t.ord.sortKeys(ctx, bounds)
	if err != nil {
		return err
	}
	ivs := make([]*interval, len(spans))
	for i, sp := range spans {
		iv := &interval{loKey: sp.Lo, hiKey: sp.Hi}
		if sp.Lo != nil {
			iv.lo, sks = sks[0], sks[1:]
			if iv.lo == nil {
				return fmt.Errorf("apply: no sort key for %v", sp.Lo)
			}
		}
		if sp.Hi != nil {
			iv.hi, sks = sks[0], sks[1:]
			if iv.hi == nil {
				return fmt.Errorf("apply: no sort key for %v", sp.Hi)
			}
		}
		ivs[i] = iv
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.copy == t {
		t.f.within = ivs
		for i, iv := range ivs {
			t.f.lane(i).within = iv
		}
	}
	return nil
}

// inWithin reports whether sk is inside the resumed copy's intervals (always
// true for a copy of the whole key).
func (f *frontier) inWithin(sk rowkey.SortKey) bool {
	if f.within == nil {
		return true
	}
	i := sort.Search(len(f.within), func(i int) bool {
		iv := f.within[i]
		return iv.hiKey == nil || sk.Compare(iv.hi) <= 0
	})
	return i < len(f.within) && f.within[i].holds(sk)
}

// inTodo reports whether a key of sort key sk lies in an interval the copy
// has not passed (see todo).
func (f *frontier) inTodo(sk rowkey.SortKey) bool {
	if f.all || !f.inWithin(sk) {
		return false
	}
	return !f.laneOf(sk).copiedUpTo(sk)
}

// todo returns the key intervals the copy has not passed.
func (f *frontier) todo() []ranges.Span {
	if f.all {
		return nil
	}
	var out []ranges.Span
	low := func(l *lane) (rowkey.Key, bool) {
		if l.next > 0 {
			return l.keys[l.next-1], true
		}
		return nil, false
	}
	if f.within != nil {
		for i, iv := range f.within {
			sp := ranges.Span{Lo: iv.loKey, Hi: iv.hiKey}
			if i < len(f.lanes) {
				l := f.lanes[i]
				if l.lowAll {
					continue
				}
				if k, ok := low(l); ok {
					if iv.hiKey != nil && k.Encode() == iv.hiKey.Encode() {
						continue // the lane reached the interval's end
					}
					sp.Lo = k
				}
			}
			out = append(out, sp)
		}
		return out
	}
	for i, l := range f.lanes {
		if i > 0 && !l.known {
			continue // not cut yet: in the interval of the lane below
		}
		if l.lowAll {
			continue
		}
		sp := ranges.Span{Lo: l.start}
		if k, ok := low(l); ok {
			sp.Lo = k
		}
		for _, m := range f.lanes[i+1:] {
			if m.known {
				sp.Hi = m.start
				break
			}
		}
		if sp.Lo != nil && sp.Hi != nil && sp.Lo.Encode() == sp.Hi.Encode() {
			continue // passed up to the next lane
		}
		out = append(out, sp)
	}
	return out
}

// Pending returns the earliest position of a mark of any key not yet
// applied, those waiting for the copy inside Todo included (Progress leaves
// them out: their rows are copied again on resume, but only while they are
// inside Todo; once the copy passes them they count again, with their old
// marks). Capture by triggers keeps a queue row until this passes its round,
// so that the queue holds every change not yet applied whatever the copy
// has done since.
func (s *Scheduler) Pending() (binlog.Position, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var earliest binlog.Position
	has := false
	for _, pos := range s.since {
		if !has || pos.Compare(earliest) < 0 {
			earliest, has = pos, true
		}
	}
	return earliest, has
}

// Progress returns the copy's intervals still to do and the earliest
// position of a change not yet applied outside them (see the top of this
// file).
func (s *Scheduler) Progress() Progress {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := Progress{Tracked: s.since != nil}
	t := s.copy
	switch {
	case t != nil:
		p.Todo = t.f.todo()
	case s.copyDone:
		p.Copied = true
	default:
		p.Todo = []ranges.Span{{}} // not followed: all of it
	}
	skip := map[string]bool{}
	if t != nil {
		for _, l := range t.f.lanes {
			for _, it := range l.waiting.h {
				if t.f.inTodo(it.sk) {
					skip[it.enc] = true
				}
			}
		}
	}
	for e, pos := range s.since {
		if skip[e] {
			continue
		}
		if !p.HasSince || pos.Compare(p.Since) < 0 {
			p.Since, p.HasSince = pos, true
		}
	}
	return p
}
