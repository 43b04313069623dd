package apply

import (
	"context"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"github.com/sluicedb/sluice/internal/binlog"
	"github.com/sluicedb/sluice/internal/ranges"
	"github.com/sluicedb/sluice/internal/rowkey"
)

// TestProgressModel checks the checkpoint invariant against a model: keys
// 0..999 are copied in 1 to 3 lanes of ranges finished in any order (or, in
// half the cases, only inside random intervals, as a resumed copy), while
// transactions mark keys and workers apply batches. At random moments
// Progress gives (Todo, position); then every key outside Todo must have
// been copied, and every change to it in a transaction at or before the
// position must be reflected in its row (by the copy's read or by an
// application taken after the change), and every change its row does not
// reflect must still be in a queue trimmed by Pending (capture by triggers).
// SLUICE_PROGRESS_SEED replays a case.
func TestProgressModel(t *testing.T) {
	seeds := []uint64{rand.Uint64(), rand.Uint64(), rand.Uint64(), 1, 2, 3}
	if s := os.Getenv("SLUICE_PROGRESS_SEED"); s != "" {
		n, _ := strconv.ParseUint(s, 10, 64)
		seeds = []uint64{n}
	}
	checks := 0
	for _, seed := range seeds {
		checks += progressModel(t, seed)
	}
	if checks < 100 {
		t.Fatalf("only %d checkpoints were checked", checks)
	}
}

func progressModel(t *testing.T, seed uint64) int {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 5))
	const keys = 1000
	s := NewScheduler()
	tx := 0 // transactions read whole: the stream's position
	pos := func(n int) binlog.Position { return binlog.Position{File: "binlog.000001", Pos: uint32(n)} }
	s.SetClock(func() binlog.Position { return pos(tx) })
	s.TrackCopy(context.Background(), intOrder(t, false))

	// The copy's plan: intervals (a resumed copy) or the whole key, each
	// cut into ranges in key order; lanes of the whole key split it evenly.
	type rng struct {
		lane   int
		lo, hi int // (lo, hi]; lo -1: open below, hi keys: open above
	}
	inside := func(int) bool { return true }
	var plan []rng
	if r.IntN(2) == 0 {
		var spans []ranges.Span
		var ivs [][2]int
		at := -1
		for at < keys-1 && len(ivs) < 4 {
			lo := at + r.IntN(200)
			hi := lo + 1 + r.IntN(300)
			if hi >= keys-1 || r.IntN(5) == 0 {
				hi = keys // open
			}
			ivs = append(ivs, [2]int{lo, hi})
			sp := ranges.Span{}
			if lo >= 0 {
				sp.Lo = k(int64(lo))
			}
			if hi < keys {
				sp.Hi = k(int64(hi))
			}
			spans = append(spans, sp)
			at = hi
		}
		if err := s.Within(context.Background(), spans); err != nil {
			t.Fatal(err)
		}
		inside = func(n int) bool {
			for _, iv := range ivs {
				if n > iv[0] && n <= iv[1] {
					return true
				}
			}
			return false
		}
		for i, iv := range ivs {
			for lo := iv[0]; lo < iv[1]; {
				hi := min(lo+1+r.IntN(80), iv[1])
				plan = append(plan, rng{lane: i, lo: lo, hi: hi})
				lo = hi
			}
		}
	} else {
		lanes := 1 + r.IntN(3)
		per := keys / lanes
		var byLane [][]rng
		for l := range lanes {
			lo, end := l*per-1, (l+1)*per-1
			if l == lanes-1 {
				end = keys
			}
			var rs []rng
			for lo < end {
				hi := min(lo+1+r.IntN(80), end)
				rs = append(rs, rng{lane: l, lo: lo, hi: hi})
				lo = hi
			}
			byLane = append(byLane, rs)
		}
		// Ranges handed out in turn across lanes.
		for i := 0; len(plan) < keys; i++ {
			more := false
			for _, rs := range byLane {
				if i < len(rs) {
					plan = append(plan, rs[i])
					more = true
				}
			}
			if !more {
				break
			}
		}
	}
	bound := func(n int) rowkey.Key {
		if n < 0 || n >= keys {
			return nil
		}
		return k(int64(n))
	}

	copiedAt := map[int]int{}   // key -> transactions visible to the copy's read
	appliedAt := map[int]int{}  // key -> transactions visible to its last application
	marks := map[int][]int{}    // key -> transactions that changed it
	taken := map[string]int{}   // batch key -> transactions visible when taken
	var inflight [][]rowkey.Key // batches taken, not yet done
	cut, copiedSeq := 0, map[int]bool{}
	cutAt := map[int]int{}
	forgotten := map[[2]int]bool{} // (key, transaction) marks a trimmed queue no longer holds
	checks := 0
	for step := 0; step < 3000; step++ {
		switch p := r.IntN(100); {
		case p < 10 && cut < len(plan):
			rg := plan[cut]
			s.SpanCut(cut, rg.lane, bound(rg.lo), bound(rg.hi))
			cutAt[cut] = tx // the copy may read as soon as it is cut
			cut++
		case p < 20 && cut > len(copiedSeq):
			seq := r.IntN(cut)
			if copiedSeq[seq] {
				continue
			}
			copiedSeq[seq] = true
			rg := plan[seq]
			for n := rg.lo + 1; n <= rg.hi && n < keys; n++ {
				copiedAt[n] = cutAt[seq]
			}
			s.SpanCopied(seq)
		case p < 55: // a transaction marks one to three keys
			tx++
			var ks []rowkey.Key
			for range 1 + r.IntN(3) {
				n := r.IntN(keys)
				marks[n] = append(marks[n], tx)
				ks = append(ks, k(int64(n)))
			}
			// The clock is the position before this transaction.
			tx--
			s.Add(ks...)
			tx++
		case p < 75:
			b := s.Next(1 + r.IntN(8))
			for _, key := range b {
				taken[key.Encode()] = tx
			}
			if len(b) > 0 {
				inflight = append(inflight, b)
			}
		case p < 92 && len(inflight) > 0:
			i := r.IntN(len(inflight))
			b := inflight[i]
			inflight = append(inflight[:i], inflight[i+1:]...)
			if r.IntN(10) == 0 {
				s.Requeue(b)
				continue
			}
			for _, key := range b {
				appliedAt[int(key[0].(int64))] = taken[key.Encode()]
			}
			s.Done(b)
		case p < 96:
			// Capture by triggers trims its queue: a mark goes once
			// Pending (or, with nothing held, the clock) is past it.
			since, ok := s.Pending()
			if !ok || int(since.Pos) > tx {
				since = pos(tx)
			}
			for n, ms := range marks {
				for _, m := range ms {
					if m-1 < int(since.Pos) { // its Add saw the clock at m-1
						forgotten[[2]int{n, m}] = true
					}
				}
			}
		default:
			pr := s.Progress()
			if !pr.Tracked || pr.Copied {
				t.Fatalf("seed %d: Progress %+v during the copy", seed, pr)
			}
			p := tx
			if pr.HasSince {
				p = int(pr.Since.Pos)
			}
			inTodo := func(n int) bool {
				for _, sp := range pr.Todo {
					if (sp.Lo == nil || int64(n) > sp.Lo[0].(int64)) && (sp.Hi == nil || int64(n) <= sp.Hi[0].(int64)) {
						return true
					}
				}
				return false
			}
			for n := range keys {
				if inTodo(n) || !inside(n) {
					continue
				}
				at, copied := copiedAt[n]
				if !copied {
					t.Fatalf("seed %d step %d: key %d is outside Todo %v but was never copied", seed, step, n, pr.Todo)
				}
				fresh := max(at, appliedAt[n])
				for _, m := range marks[n] {
					if m <= p && m > fresh {
						t.Fatalf("seed %d step %d: key %d changed in transaction %d, at or before the position %d, but its row reflects only %d",
							seed, step, n, m, p, fresh)
					}
					// A run taking up the queue instead of a position reads
					// all of it: a change the row does not reflect must be
					// in it still.
					if m > fresh && forgotten[[2]int{n, m}] {
						t.Fatalf("seed %d step %d: key %d changed in transaction %d, which its row does not reflect (only %d), and the queue forgot it",
							seed, step, n, m, fresh)
					}
				}
			}
			checks++
		}
	}
	return checks
}
