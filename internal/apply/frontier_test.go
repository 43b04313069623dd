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
	s.SpanCut(0, 0, nil, k(100))    // (-inf, 100]
	s.SpanCut(1, 0, k(100), k(200)) // (100, 200]
	s.Add(k(50), k(150), k(250), k(-5))
	if got := readyIDs(s); len(got) != 0 {
		t.Fatalf("nothing is copied yet, but %v were ready", got)
	}
	if s.Backlog() != 4 {
		t.Fatalf("backlog = %d, want all 4 keys, 250 (beyond the ranges cut) included", s.Backlog())
	}
	s.SpanCopied(1) // range 1 is done but range 0 is not: nothing moves
	if got := readyIDs(s); len(got) != 0 {
		t.Fatalf("range 0 is not copied, but %v were ready", got)
	}
	s.SpanCopied(0)
	if got := readyIDs(s); !slices.Equal(got, []int64{-5, 50, 150}) {
		t.Fatalf("ready = %v, want [-5 50 150]", got)
	}
	s.Add(k(120)) // below the low watermark: ready at once
	if got := readyIDs(s); !slices.Equal(got, []int64{120}) {
		t.Fatalf("ready = %v, want [120]", got)
	}
	s.SpanCut(2, 0, k(200), k(300))
	if got := readyIDs(s); len(got) != 0 {
		t.Fatalf("250's range is cut but not copied, yet %v were ready", got)
	}
	s.SpanCopied(2)
	// 250 changed before its range was cut, but the copy's read may still
	// have missed the change (see frontier): it is applied all the same.
	if got := readyIDs(s); !slices.Equal(got, []int64{250}) {
		t.Fatalf("ready = %v, want [250]", got)
	}
	s.SpanCut(3, 0, k(300), nil) // the last, open range
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

func TestTrackCopyUnsignedAndNegativeOrder(t *testing.T) {
	if a, _ := ordinal(rowkey.Key{int64(-1)}); func() bool { b, _ := ordinal(rowkey.Key{int64(0)}); return a >= b }() {
		t.Fatal("-1 must order before 0")
	}
	s := NewScheduler()
	s.TrackCopy()
	s.SpanCut(0, 0, nil, rowkey.Key{uint64(1 << 63)})
	s.Add(rowkey.Key{uint64(1<<63 + 1)}, rowkey.Key{uint64(5)})
	s.SpanCopied(0)
	b := s.Next(10)
	if len(b) != 1 || b[0][0].(uint64) != 5 {
		t.Fatalf("ready = %v, want [5]", b)
	}
}

func TestTrackCopyInFlightKeyRunsAgain(t *testing.T) {
	s := NewScheduler()
	s.TrackCopy()
	s.SpanCut(0, 0, nil, k(10))
	s.SpanCopied(0)
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

// TestTrackCopyModel drives random ranges split into 1 to 4 lanes, changes,
// cut and completion orders and checks the two properties that matter
// against a direct model: every changed key is applied after the copy of its
// range (whenever the range was cut), and no key is applied before its range
// is copied.
func TestTrackCopyModel(t *testing.T) {
	for seed := uint64(0); seed < 500; seed++ {
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
		// Lanes: consecutive groups of ranges, each cut in key order, the
		// lanes' cuts interleaved at random.
		lanes := 1 + rng.IntN(4)
		firsts := []int{0}
		for _, f := range rng.Perm(n - 1)[:lanes-1] {
			firsts = append(firsts, f+1)
		}
		slices.Sort(firsts)
		laneOf := func(ri int) int {
			l := 0
			for j, f := range firsts {
				if ri >= f {
					l = j
				}
			}
			return l
		}
		nextOfLane := slices.Clone(firsts) // the next range each lane cuts
		endOfLane := append(slices.Clone(firsts[1:]), n)
		rangeOfSeq := map[int]int{}
		cutAt := make([]int, n) // step at which range i was cut
		copiedAt := make([]int, n)
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
				var open []int
				for j := range nextOfLane {
					if nextOfLane[j] < endOfLane[j] {
						open = append(open, j)
					}
				}
				lane := open[rng.IntN(len(open))]
				ri := nextOfLane[lane]
				nextOfLane[lane]++
				var lo, hi rowkey.Key
				if ri > 0 {
					lo = k(bounds[ri-1])
				}
				if ri < len(bounds) {
					hi = k(bounds[ri])
				}
				if laneOf(ri) != lane {
					t.Fatalf("model: range %d is not in lane %d", ri, lane)
				}
				s.SpanCut(cut, lane, lo, hi)
				rangeOfSeq[cut] = ri
				cutAt[ri] = step
				pending = append(pending, cut)
				cut++
			case len(pending) > 0:
				i := rng.IntN(len(pending))
				seq := pending[i]
				pending = append(pending[:i], pending[i+1:]...)
				copiedAt[rangeOfSeq[seq]] = step
				s.SpanCopied(seq)
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
			ok := false
			for _, at := range applied[c.key] {
				if at >= c.step && at >= copiedAt[ri] {
					ok = true
				}
			}
			if !ok {
				t.Fatalf("seed %d, %d lanes: key %d changed at step %d (range %d cut at %d, copied at %d) was never applied after its copy: %v",
					seed, lanes, c.key, c.step, ri, cutAt[ri], copiedAt[ri], applied[c.key])
			}
		}
		for key, steps := range applied {
			ri := rangeOf(key)
			for _, at := range steps {
				if copiedAt[ri] == -1 && at < 1<<30 || at < copiedAt[ri] {
					t.Fatalf("seed %d, %d lanes: key %d applied at step %d before its range was copied (step %d)", seed, lanes, key, at, copiedAt[ri])
				}
			}
		}
	}
}

// TestTrackCopyHoldsKeysMarkedBefore: keys marked before the copy is tracked
// (the binlog reader may start first) must not be applied before the copy
// reaches them (a run under load once applied one early and the copy then
// met it as a duplicate primary key), and must be applied once it has.
func TestTrackCopyHoldsKeysMarkedBefore(t *testing.T) {
	s := NewScheduler()
	s.Add(k(5), k(500))
	s.TrackCopy()
	if got := readyIDs(s); len(got) != 0 {
		t.Fatalf("keys %v handed out before any range was copied", got)
	}
	s.SpanCut(0, 0, nil, k(100))
	s.SpanCopied(0)
	if got := readyIDs(s); !slices.Equal(got, []int64{5}) {
		t.Fatalf("ready after range 0 = %v, want [5]", got)
	}
	s.SpanCut(1, 0, k(100), nil)
	s.SpanCopied(1)
	s.CopyDone()
	if got := readyIDs(s); !slices.Equal(got, []int64{500}) {
		t.Fatalf("ready after the copy = %v, want [500]", got)
	}
}

// TestTrackCopyLanes: with the key split into lanes, a change is applied as
// soon as its own lane's ranges up to it are copied, whatever the other
// lanes' progress; a change that arrives before its lane is known waits for
// the end of the copy.
func TestTrackCopyLanes(t *testing.T) {
	s := NewScheduler()
	s.TrackCopy()
	s.SpanCut(0, 0, nil, k(100))    // lane 0: (-inf, 100]
	s.Add(k(250))                   // lane 1 is not known yet
	s.SpanCut(1, 1, k(200), k(300)) // lane 1: (200, 300]
	s.SpanCut(2, 0, k(100), k(200)) // lane 0: (100, 200]
	s.SpanCut(3, 1, k(300), nil)    // lane 1: (300, +inf)
	s.Add(k(150), k(260), k(1000), k(-7))
	s.SpanCopied(1)
	if got := readyIDs(s); !slices.Equal(got, []int64{260}) {
		t.Fatalf("after lane 1's first range: ready = %v, want [260]", got)
	}
	s.SpanCopied(2) // lane 0's second range, before its first
	if got := readyIDs(s); len(got) != 0 {
		t.Fatalf("lane 0's first range is not copied, yet %v were ready", got)
	}
	s.SpanCopied(0)
	if got := readyIDs(s); !slices.Equal(got, []int64{-7, 150}) {
		t.Fatalf("after lane 0: ready = %v, want [-7 150]", got)
	}
	s.SpanCopied(3)
	if got := readyIDs(s); !slices.Equal(got, []int64{1000}) {
		t.Fatalf("after lane 1's open range: ready = %v, want [1000]", got)
	}
	s.Add(k(120), k(5000))
	if got := readyIDs(s); !slices.Equal(got, []int64{120, 5000}) {
		t.Fatalf("keys behind both watermarks: ready = %v", got)
	}
	if s.Backlog() != 1 {
		t.Fatalf("backlog = %d, want 250 still waiting", s.Backlog())
	}
	s.CopyDone()
	if got := readyIDs(s); !slices.Equal(got, []int64{250}) {
		t.Fatalf("after the copy: ready = %v, want [250]", got)
	}
}
