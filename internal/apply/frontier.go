package apply

import (
	"container/heap"

	"github.com/sluicedb/sluice/internal/rowkey"
)

// frontier follows the copy over a single integer key, so that changes can be
// applied while the copy runs instead of all after it. The copy cuts ranges
// in key order (each (previous bound, bound]) and finishes them in any order.
// A changed key is then in one of three places:
//
//   - below the low watermark (every range up to it is copied): its row is
//     in the shadow, so the change is applied now;
//   - in a range already cut but not yet copied, or copied while a lower one
//     is not: it waits until the low watermark passes it;
//   - beyond every range cut so far: the copy has not read that row yet and
//     will read it with a locking read, so after this change. It is parked,
//     not applied, and forgotten once the range holding it is copied.
//
// A range whose rows were read without locks (the copier defers a range that
// keeps meeting the application's locks, reading only its keys) may have
// missed a parked change whose transaction was written to the binlog but not
// yet committed; parked keys in such a range are applied after all.
//
// Keys are compared as uint64 ordinals: unsigned values as they are, signed
// ones with the sign bit flipped, which keeps their order.
type frontier struct {
	cut            uint64 // the highest range bound cut so far
	cutAny, cutAll bool

	bounds []uint64 // upper bound of range number i; open for the last
	open   []bool   // bounds[i] is open (the last range)
	done   map[int]bool
	next   int // the lowest range number not yet copied

	low            uint64 // every key <= low is copied (if lowAny)
	lowAny, lowAll bool

	deferred []interval // ranges whose rows were read without locks

	waiting keyHeap
	parked  keyHeap
	// unknown holds keys that are not a single integer, which a tracked copy
	// never sees; they wait for the end of the copy.
	unknown []rowkey.Key
	skipped int64 // parked keys forgotten: the copy read their change
}

type interval struct {
	lo, hi         uint64 // (lo, hi]
	fromMin, toMax bool   // open below, above
}

func (iv interval) contains(o uint64) bool {
	return (iv.fromMin || o > iv.lo) && (iv.toMax || o <= iv.hi)
}

func newFrontier() *frontier {
	return &frontier{done: map[int]bool{}, waiting: newKeyHeap(), parked: newKeyHeap()}
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

type place int

const (
	placeReady place = iota
	placeWaiting
	placeParked
)

// place says where a changed key goes now.
func (f *frontier) place(o uint64) place {
	switch {
	case f.lowAll || (f.lowAny && o <= f.low):
		return placeReady
	case f.cutAll || (f.cutAny && o <= f.cut):
		return placeWaiting
	}
	return placeParked
}

// add places a changed key: it reports true if the key is ready now, else
// keeps it (waiting, parked, or, not a single integer, until the copy ends).
func (f *frontier) add(k rowkey.Key) bool {
	o, ok := ordinal(k)
	if !ok {
		f.unknown = append(f.unknown, k)
		return false
	}
	switch f.place(o) {
	case placeWaiting:
		f.waiting.push(o, k)
		return false
	case placeParked:
		f.parked.push(o, k)
		return false
	}
	return true
}

// cutRange records range number seq, cut with upper bound hi (open: the
// last range). Ranges must be recorded in order, before their copy starts.
func (f *frontier) cutRange(seq int, hi uint64, open bool) {
	for len(f.bounds) <= seq {
		f.bounds = append(f.bounds, 0)
		f.open = append(f.open, false)
	}
	f.bounds[seq], f.open[seq] = hi, open
	if open {
		f.cutAll = true
	} else if !f.cutAny || hi > f.cut {
		f.cut, f.cutAny = hi, true
	}
}

// copied records that range seq is copied (deferred: its rows were read
// without locks) and reports whether the low watermark moved.
func (f *frontier) copied(seq int, deferred bool) bool {
	if seq < 0 || seq >= len(f.bounds) {
		return false
	}
	f.done[seq] = true
	if deferred {
		iv := interval{hi: f.bounds[seq], toMax: f.open[seq]}
		if seq == 0 {
			iv.fromMin = true
		} else {
			iv.lo = f.bounds[seq-1]
		}
		f.deferred = append(f.deferred, iv)
	}
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
	f.cutAll, f.lowAll = true, true
}

// release passes every waiting or parked key the low watermark has reached to
// ready: waiting keys all, parked keys only in ranges read without locks.
func (f *frontier) release(ready func(rowkey.Key)) {
	below := func(o uint64) bool { return f.lowAll || (f.lowAny && o <= f.low) }
	if f.lowAll {
		for _, k := range f.unknown {
			ready(k)
		}
		f.unknown = nil
	}
	f.waiting.popWhile(below, func(_ uint64, k rowkey.Key) { ready(k) })
	f.parked.popWhile(below, func(o uint64, k rowkey.Key) {
		for _, iv := range f.deferred {
			if iv.contains(o) {
				ready(k)
				return
			}
		}
		f.skipped++
	})
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
