package apply

import (
	"container/heap"
	"slices"
	"sort"

	"github.com/sluicedb/sluice/internal/rowkey"
)

// frontier follows the copy over a single integer key, so that changes can be
// applied while the copy runs instead of all after it. The copy may split the
// key into lanes, consecutive key intervals it copies side by side (lane 0
// from the bottom, the last lane open above), and cuts each lane into ranges
// in key order (each (previous bound, bound]); it finishes them in any order.
// A changed key belongs to the lane whose interval holds it, and is then in
// one of two places:
//
//   - below its lane's low watermark (every range of the lane up to it is
//     copied): its row is in the shadow, so the change is applied now;
//   - anywhere else (in a range not yet copied, or beyond every range cut so
//     far): it waits until the watermark passes it, then is applied.
//
// A key beyond the ranges cut so far cannot be dropped on the ground that the
// copy will read its row later: the copy reads without locks, and the binlog
// hands sluice a transaction's rows when the transaction is written to it,
// before its InnoDB commit makes them visible. The copy may then read the
// row's previous version; only the apply (a locking read, which waits for the
// commit) is sure to see the change.
//
// A lane is known once its first range is cut. A key that arrives before the
// lane holding it is known waits in a lower lane, whose ranges never reach
// it, until the copy ends: late, never early.
//
// Keys are compared as uint64 ordinals: unsigned values as they are, signed
// ones with the sign bit flipped, which keeps their order.
type frontier struct {
	lanes []*lane // by lane number
	// starts holds the known lanes above lane 0 by their exclusive lower
	// bound, ascending.
	starts []laneStart
	ranges map[int]rangeRef // range number -> its lane and place in it
	all    bool             // the copy is done
	blind  bool             // a range bound was not an integer: keys wait for the end
	// unknown holds keys that are not a single integer, which a tracked copy
	// never sees; they wait for the end of the copy.
	unknown []rowkey.Key
}

type laneStart struct {
	after uint64
	lane  *lane
}

type rangeRef struct {
	lane *lane
	i    int
}

// lane is one key interval, cut into ranges in key order.
type lane struct {
	bounds []uint64 // upper bound of the lane's range i; open for the last lane's last
	open   []bool
	done   map[int]bool
	next   int // the lowest range of the lane not yet copied

	low            uint64 // every key of the lane <= low is copied (if lowAny)
	lowAny, lowAll bool

	waiting keyHeap
}

func newFrontier() *frontier {
	f := &frontier{ranges: map[int]rangeRef{}}
	f.lane(0)
	return f
}

// lane returns lane n, creating the lanes up to it.
func (f *frontier) lane(n int) *lane {
	for len(f.lanes) <= n {
		f.lanes = append(f.lanes, &lane{done: map[int]bool{}, waiting: newKeyHeap()})
	}
	return f.lanes[n]
}

// startIndex returns the index in starts of the first lane whose exclusive
// lower bound is at or above ordinal o.
func (f *frontier) startIndex(o uint64) int {
	return sort.Search(len(f.starts), func(i int) bool { return f.starts[i].after >= o })
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

// laneOf returns the known lane whose interval holds ordinal o.
func (f *frontier) laneOf(o uint64) *lane {
	i := f.startIndex(o)
	if i == 0 {
		return f.lanes[0]
	}
	return f.starts[i-1].lane
}

// copiedUpTo reports whether the lane's ranges up to ordinal o are copied.
func (l *lane) copiedUpTo(o uint64) bool {
	return l.lowAll || (l.lowAny && o <= l.low)
}

// add places a changed key: it reports true if the key is ready now, else
// keeps it until the copy passes it (a key that is not a single integer:
// until the copy ends).
func (f *frontier) add(k rowkey.Key) bool {
	o, ok := ordinal(k)
	if !ok || f.blind {
		f.unknown = append(f.unknown, k)
		return false
	}
	l := f.laneOf(o)
	if l.copiedUpTo(o) {
		return true
	}
	l.waiting.push(o, k)
	return false
}

// cutRange records range number seq (numbered across lanes), the next range
// of lane n, with upper bound hi (open: the last lane's last range). The
// first range of a lane above lane 0 gives the lane's exclusive lower bound
// after. A lane's ranges must be recorded in key order, each before its copy
// starts.
func (f *frontier) cutRange(seq, n int, after, hi uint64, open bool) {
	l := f.lane(n)
	if len(l.bounds) == 0 && n > 0 {
		f.starts = slices.Insert(f.starts, f.startIndex(after), laneStart{after: after, lane: l})
	}
	f.ranges[seq] = rangeRef{lane: l, i: len(l.bounds)}
	l.bounds = append(l.bounds, hi)
	l.open = append(l.open, open)
}

// cutBlind records range seq of lane n whose bounds are not integers (which a
// single integer key never gives): the lane's watermark stops before it, and
// every key from now on waits for the end of the copy.
func (f *frontier) cutBlind(n int) {
	l := f.lane(n)
	l.bounds = append(l.bounds, 0)
	l.open = append(l.open, false)
	f.blind = true
}

// copied records that range seq is copied and reports whether a low
// watermark moved.
func (f *frontier) copied(seq int) bool {
	r, ok := f.ranges[seq]
	if !ok {
		return false
	}
	delete(f.ranges, seq)
	l := r.lane
	l.done[r.i] = true
	moved := false
	for l.done[l.next] {
		delete(l.done, l.next)
		if l.open[l.next] {
			l.lowAll = true
		} else {
			l.low, l.lowAny = l.bounds[l.next], true
		}
		l.next++
		moved = true
	}
	return moved
}

// waiting returns how many integer keys wait for their lane's watermark.
func (f *frontier) waiting() int {
	n := 0
	for _, l := range f.lanes {
		n += l.waiting.len()
	}
	return n
}

// finish records that the whole copy is done.
func (f *frontier) finish() {
	f.all = true
	for _, l := range f.lanes {
		l.lowAll = true
	}
}

// release passes every waiting key a watermark has reached to ready.
func (f *frontier) release(ready func(rowkey.Key)) {
	if f.all {
		for _, k := range f.unknown {
			ready(k)
		}
		f.unknown = nil
	}
	for _, l := range f.lanes {
		l.waiting.popWhile(l.copiedUpTo, func(_ uint64, k rowkey.Key) { ready(k) })
	}
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
