package apply

import (
	"container/heap"

	"github.com/sluicedb/sluice/internal/rowkey"
)

// frontier follows the copy over a single integer key, so that changes can be
// applied while the copy runs instead of all after it. The copy cuts ranges
// in key order (each (previous bound, bound]) and finishes them in any order.
// A changed key is then in one of two places:
//
//   - below the low watermark (every range up to it is copied): its row is
//     in the shadow, so the change is applied now;
//   - anywhere else (in a range not yet copied, or beyond every range cut so
//     far): it waits until the low watermark passes it, then is applied.
//
// A key beyond the ranges cut so far cannot be dropped on the ground that the
// copy will read its row later: the copy reads without locks, and the binlog
// hands sluice a transaction's rows when the transaction is written to it,
// before its InnoDB commit makes them visible. The copy may then read the
// row's previous version; only the apply (a locking read, which waits for the
// commit) is sure to see the change.
//
// Keys are compared as uint64 ordinals: unsigned values as they are, signed
// ones with the sign bit flipped, which keeps their order.
type frontier struct {
	bounds []uint64 // upper bound of range number i; open for the last
	open   []bool   // bounds[i] is open (the last range)
	done   map[int]bool
	next   int // the lowest range number not yet copied

	low            uint64 // every key <= low is copied (if lowAny)
	lowAny, lowAll bool

	waiting keyHeap
	// unknown holds keys that are not a single integer, which a tracked copy
	// never sees; they wait for the end of the copy.
	unknown []rowkey.Key
}

func newFrontier() *frontier {
	return &frontier{done: map[int]bool{}, waiting: newKeyHeap()}
}

// ordinal maps a single integer key to an order-preserving uint64.
func ordinal(k rowkey.Key) (uint64, bool) {
	if len(k) != 1 {
		return 0, false
	}
	switch v := k[0].(type) {
	case int64:
		return uint64(v) ^ (1 << 63), true
	case uint64:
		return v, true
	}
	return 0, false
}

// copiedUpTo reports whether every range holding ordinal o is copied.
func (f *frontier) copiedUpTo(o uint64) bool {
	return f.lowAll || (f.lowAny && o <= f.low)
}

// add places a changed key: it reports true if the key is ready now, else
// keeps it until the copy passes it (a key that is not a single integer:
// until the copy ends).
func (f *frontier) add(k rowkey.Key) bool {
	o, ok := ordinal(k)
	if !ok {
		f.unknown = append(f.unknown, k)
		return false
	}
	if f.copiedUpTo(o) {
		return true
	}
	f.waiting.push(o, k)
	return false
}

// cutRange records range number seq, cut with upper bound hi (open: the
// last range). Ranges must be recorded in order, before their copy starts.
func (f *frontier) cutRange(seq int, hi uint64, open bool) {
	for len(f.bounds) <= seq {
		f.bounds = append(f.bounds, 0)
		f.open = append(f.open, false)
	}
	f.bounds[seq], f.open[seq] = hi, open
}

// copied records that range seq is copied and reports whether the low
// watermark moved.
func (f *frontier) copied(seq int) bool {
	if seq < 0 || seq >= len(f.bounds) {
		return false
	}
	f.done[seq] = true
	moved := false
	for f.done[f.next] {
		delete(f.done, f.next)
		if f.open[f.next] {
			f.lowAll = true
		} else {
			f.low, f.lowAny = f.bounds[f.next], true
		}
		f.next++
		moved = true
	}
	return moved
}

// finish records that the whole copy is done.
func (f *frontier) finish() {
	f.lowAll = true
}

// release passes every waiting key the low watermark has reached to ready.
func (f *frontier) release(ready func(rowkey.Key)) {
	if f.lowAll {
		for _, k := range f.unknown {
			ready(k)
		}
		f.unknown = nil
	}
	f.waiting.popWhile(f.copiedUpTo, func(_ uint64, k rowkey.Key) { ready(k) })
}

// keyHeap is a set of keys ordered by ordinal.
type keyHeap struct {
	h ordHeap
	m map[uint64]rowkey.Key
}

func newKeyHeap() keyHeap { return keyHeap{m: map[uint64]rowkey.Key{}} }

func (kh *keyHeap) push(o uint64, k rowkey.Key) {
	if _, ok := kh.m[o]; ok {
		return
	}
	kh.m[o] = k
	heap.Push(&kh.h, o)
}

func (kh *keyHeap) len() int { return len(kh.m) }

func (kh *keyHeap) popWhile(ok func(uint64) bool, fn func(uint64, rowkey.Key)) {
	for len(kh.h) > 0 && ok(kh.h[0]) {
		o := heap.Pop(&kh.h).(uint64)
		k := kh.m[o]
		delete(kh.m, o)
		fn(o, k)
	}
}

type ordHeap []uint64

func (h ordHeap) Len() int           { return len(h) }
func (h ordHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h ordHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *ordHeap) Push(x any)        { *h = append(*h, x.(uint64)) }
func (h *ordHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
