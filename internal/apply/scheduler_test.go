package apply

import (
	"sort"
	"sync"
	"testing"

	"github.com/sluicedb/sluice/internal/rowkey"
)

func k(n int64) rowkey.Key { return rowkey.Key{n} }

func ids(keys []rowkey.Key) []int64 {
	out := make([]int64, len(keys))
	for i, key := range keys {
		out[i] = key[0].(int64)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func TestSchedulerDeduplicates(t *testing.T) {
	s := NewScheduler()
	s.Add(k(1), k(2), k(1), k(1))
	if s.Backlog() != 2 {
		t.Fatalf("backlog = %d, want 2", s.Backlog())
	}
	got := ids(s.Next(10))
	if len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Fatalf("next = %v", got)
	}
	if s.Next(10) != nil {
		t.Fatal("keys in flight must not be handed out twice")
	}
}

func TestSchedulerKeyMarkedWhileInFlightRunsAgain(t *testing.T) {
	s := NewScheduler()
	s.Add(k(1))
	b := s.Next(10)
	s.Add(k(1)) // changed again while being applied
	if n := s.Next(10); n != nil {
		t.Fatalf("key 1 handed out while in flight: %v", ids(n))
	}
	s.Done(b)
	if got := ids(s.Next(10)); len(got) != 1 || got[0] != 1 {
		t.Fatalf("key 1 must be applied again after its batch, got %v", got)
	}
}

func TestSchedulerRequeueAndHold(t *testing.T) {
	s := NewScheduler()
	s.Add(k(1), k(2), k(3))
	b := s.Next(2)
	if len(b) != 2 || s.Backlog() != 3 || s.InFlight() != 2 {
		t.Fatalf("batch %v backlog %d inflight %d", ids(b), s.Backlog(), s.InFlight())
	}
	s.Requeue(b)
	s.Hold(true)
	if s.Next(10) != nil {
		t.Fatal("held scheduler handed out keys")
	}
	if got := ids(s.TakeAll()); len(got) != 3 {
		t.Fatalf("TakeAll = %v", got)
	}
	s.Hold(false)
	if s.Next(10) != nil {
		t.Fatal("TakeAll must leave nothing ready")
	}
}

func TestSchedulerConcurrentNeverDoubleHandsOut(t *testing.T) {
	s := NewScheduler()
	var mu sync.Mutex
	active := map[int64]bool{}
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				s.Add(k(int64(i % 17)))
				b := s.Next(5)
				mu.Lock()
				for _, key := range b {
					id := key[0].(int64)
					if active[id] {
						t.Errorf("key %d in two batches at once", id)
					}
					active[id] = true
				}
				mu.Unlock()
				mu.Lock()
				for _, key := range b {
					delete(active, key[0].(int64))
				}
				mu.Unlock()
				s.Done(b)
			}
		}()
	}
	wg.Wait()
	for b := s.Next(100); b != nil; b = s.Next(100) {
		s.Done(b)
	}
	if s.Backlog() != 0 {
		t.Errorf("backlog = %d after draining", s.Backlog())
	}
}

// TestSchedulerHoldsNestAndPausesAreSeparate: a hold lifted by one party does
// not lift another's, and the applier's own pause never lifts a hold.
func TestSchedulerHoldsNestAndPausesAreSeparate(t *testing.T) {
	s := NewScheduler()
	s.Add(k(1), k(2))
	s.Hold(true) // the copy
	s.Hold(true) // a lock attempt
	s.Hold(false)
	if s.Next(10) != nil {
		t.Fatal("one of two holds lifted, and keys were handed out")
	}
	if s.TakeAllUnlessHeld() != nil {
		t.Fatal("TakeAllUnlessHeld took keys while held")
	}
	s.Pause()
	s.Resume()
	if s.Next(10) != nil {
		t.Fatal("a pause and resume lifted a hold")
	}
	s.Hold(false)
	s.Pause()
	if s.Next(10) != nil {
		t.Fatal("a paused scheduler handed out keys")
	}
	if got := ids(s.TakeAllUnlessHeld()); len(got) != 2 {
		t.Fatalf("TakeAllUnlessHeld while only paused = %v, want both keys", got)
	}
	s.Resume()
	s.Hold(false) // one too many: ignored
	s.Add(k(3))
	if got := ids(s.Next(10)); len(got) != 1 {
		t.Fatalf("after every hold and pause were lifted, Next = %v", got)
	}
}
