package apply

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/sluicedb/sluice/internal/rowkey"
)

// readyIDs drains every ready key (the scheduler is not held).
func readyIDs(s *Scheduler) []int64 {
	b := s.Next(1 << 20)
	s.Done(b)
	return ids(b)
}

func TestTrackCopyPlacesKeys(t *testing.T) {
	s := NewScheduler()
	s.TrackCopy()
	s.SpanCut(0, k(100)) // (-inf, 100]
	s.SpanCut(1, k(200)) // (100, 200]
	s.Add(k(50), k(150), k(250), k(-5))
	if got := readyIDs(s); len(got) != 0 {
		t.Fatalf("nothing is copied yet, but %v were ready", got)
	}
	if s.Backlog() != 3 {
		t.Fatalf("backlog = %d, want the 3 keys in cut ranges (250 is beyond the copy)", s.Backlog())
	}
	s.SpanCopied(1, false) // range 1 is done but range 0 is not: nothing moves
	if got := readyIDs(s); len(got) != 0 {
		t.Fatalf("range 0 is not copied, but %v were ready", got)
	}
	s.SpanCopied(0, false)
	if got := readyIDs(s); !slices.Equal(got, []int64{-5, 50, 150}) {
		t.Fatalf("ready = %v, want [-5 50 150]", got)
	}
	s.Add(k(120)) // below the low watermark: ready at once
	if got := readyIDs(s); !slices.Equal(got, []int64{120}) {
		t.Fatalf("ready = %v, want [120]", got)
	}
	s.SpanCut(2, k(300))
	s.SpanCopied(2, false)
	if got := readyIDs(s); len(got) != 0 {
		t.Fatalf("250 changed before its range was cut: the copy read it, yet %v were ready", got)
	}
	if s.Skipped() != 1 {
		t.Fatalf("skipped = %d, want 1", s.Skipped())
	}
	s.SpanCut(3, nil) // the last, open range
	s.Add(k(1 << 40))
	if s.Backlog() != 1 {
		t.Fatalf("a key in the open range must wait, backlog = %d", s.Backlog())
	}
	s.CopyDone()
	if got := readyIDs(s); !slices.Equal(got, []int64{1 << 40}) {
		t.Fatalf("ready after the copy = %v", got)
	}
	s.Add(k(7))
	if got := readyIDs(s); !slices.Equal(got, []int64{7}) {
		t.Fatalf("after the copy every key is ready, got %v", got)
	}
}

func TestTrackCopyUnlockedRangeKeepsParkedKeys(t *testing.T) {
	s := NewScheduler()
	s.TrackCopy()
	s.SpanCut(0, k(10))
	s.Add(k(15), k(25)) // beyond the copy: parked
	s.SpanCut(1, k(20)) // (10, 20]
	s.SpanCut(2, k(30)) // (20, 30]
	s.SpanCopied(0, false)
	s.SpanCopied(1, true)  // read without locks: may have missed 15's change
	s.SpanCopied(2, false) // copied with locks: 25's change was read
	if got := readyIDs(s); !slices.Equal(got, []int64{15}) {
		t.Fatalf("ready = %v, want [15]", got)
	}
	if s.Skipped() != 1 {
		t.Fatalf("skipped = %d, want 1", s.Skipped())
	}
}

func TestTrackCopyUnsignedAndNegativeOrder(t *testing.T) {
	if a, _ := ordinal(rowkey.Key{int64(-1)}); func() bool { b, _ := ordinal(rowkey.Key{int64(0)}); return a >= b }() {
		t.Fatal("-1 must order before 0")
	}
	s := NewScheduler()
	s.TrackCopy()
	s.SpanCut(0, rowkey.Key{uint64(1 << 63)})
	s.Add(rowkey.Key{uint64(1<<63 + 1)}, rowkey.Key{uint64(5)})
	s.SpanCopied(0, false)
	b := s.Next(10)
	if len(b) != 1 || b[0][0].(uint64) != 5 {
		t.Fatalf("ready = %v, want [5]", b)
	}
}

func TestTrackCopyInFlightKeyRunsAgain(t *testing.T) {
	s := NewScheduler()
	s.TrackCopy()
	s.SpanCut(0, k(10))
	s.SpanCopied(0, false)
	s.Add(k(3))
	b := s.Next(10)
	s.Add(k(3))
	if n := s.Next(10); n != nil {
		t.Fatal("a key in flight was handed out twice")
	}
	s.Done(b)
	if got := readyIDs(s); !slices.Equal(got, []int64{3}) {
		t.Fatalf("ready = %v, want [3] again", got)
	}
}

// TestTrackCopyModel drives random ranges, changes and completion orders and
// checks the one property that matters against a direct model: every changed
// key is applied after the copy of its range, unless it changed before its
// range was cut and that range was copied with locks.
func TestTrackCopyModel(t *testing.T) {
	for seed := uint64(0); seed < 200; seed++ {
		rng := rand.New(rand.NewPCG(seed, 1))
		s := NewScheduler()
		s.TrackCopy()
		var bounds []int64
		b := int64(-50)
		for i := 0; i < 8; i++ {
			b += 1 + rng.Int64N(30)
			bounds = append(bounds, b)
		}
		rangeOf := func(key int64) int {
			for i, hi := range bounds {
				if key <= hi {
					return i
				}
			}
			return len(bounds) // the open range
		}
		n := len(bounds) + 1
		cutAt := make([]int, n) // step at which range i was cut
		copiedAt := make([]int, n)
		unlocked := make([]bool, n)
		for i := range cutAt {
			cutAt[i], copiedAt[i] = -1, -1
		}
		type change struct {
			key  int64
			step int
		}
		var changes []change
		applied := map[int64][]int{} // key -> steps at which it was handed out
		cut, pending := 0, []int{}
		for step := 0; step < 400 && (cut < n || len(pending) > 0); step++ {
			switch r := rng.IntN(10); {
			case r < 4:
				key := int64(rng.IntN(300)) - 60
				changes = append(changes, change{key, step})
				s.Add(k(key))
			case r < 6 && cut < n:
				if cut < len(bounds) {
					s.SpanCut(cut, k(bounds[cut]))
				} else {
					s.SpanCut(cut, nil)
				}
				cutAt[cut] = step
				pending = append(pending, cut)
				cut++
			case len(pending) > 0:
				i := rng.IntN(len(pending))
				seq := pending[i]
				pending = append(pending[:i], pending[i+1:]...)
				unlocked[seq] = rng.IntN(4) == 0
				copiedAt[seq] = step
				s.SpanCopied(seq, unlocked[seq])
			}
			for _, key := range s.Next(1 << 20) {
				applied[key[0].(int64)] = append(applied[key[0].(int64)], step)
				s.Done([]rowkey.Key{key})
			}
		}
		s.CopyDone()
		for _, key := range s.Next(1 << 20) {
			applied[key[0].(int64)] = append(applied[key[0].(int64)], 1<<30)
		}
		for _, c := range changes {
			ri := rangeOf(c.key)
			needed := !(cutAt[ri] == -1 || c.step < cutAt[ri]) || unlocked[ri]
			if !needed {
				continue
			}
			ok := false
			for _, at := range applied[c.key] {
				if at >= c.step && at >= copiedAt[ri] {
					ok = true
				}
			}
			if !ok {
				t.Fatalf("seed %d: key %d changed at step %d (range %d cut at %d, copied at %d, unlocked %v) was never applied after its copy: %v",
					seed, c.key, c.step, ri, cutAt[ri], copiedAt[ri], unlocked[ri], applied[c.key])
			}
		}
		for key, steps := range applied {
			ri := rangeOf(key)
			for _, at := range steps {
				if copiedAt[ri] == -1 && at < 1<<30 || at < copiedAt[ri] {
					t.Fatalf("seed %d: key %d applied at step %d before its range was copied (step %d)", seed, key, at, copiedAt[ri])
				}
			}
		}
	}
}

// TestTrackCopyParksKeysMarkedBefore: keys marked before the copy is tracked
// (the binlog reader may start first) must not be applied before the copy
// reaches them; a run under load once applied one early and the copy then
// met it as a duplicate primary key.
func TestTrackCopyParksKeysMarkedBefore(t *testing.T) {
	s := NewScheduler()
	s.Add(k(5), k(500))
	s.TrackCopy()
	if got := readyIDs(s); len(got) != 0 {
		t.Fatalf("keys %v handed out before any range was copied", got)
	}
	s.SpanCut(0, k(100))
	s.SpanCopied(0, false)
	s.SpanCut(1, nil)
	s.SpanCopied(1, false)
	s.CopyDone()
	if got := readyIDs(s); len(got) != 0 {
		t.Fatalf("ready = %v: both changed before their ranges were cut, so the copy read them", got)
	}
	if s.Skipped() != 2 {
		t.Fatalf("skipped = %d, want 2", s.Skipped())
	}
}
