package apply

import (
	"container/heap"
	"slices"
	"sort"

	"github.com/sluicedb/sluice/internal/rowkey"
)

// frontier follows the copy over the primary key, so that changes can be
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
// Keys and bounds are compared as rowkey.SortKeys, in the order of the key's
// index (see Order). A key or a bound without one makes keys wait for the end
// of the copy.
type frontier struct {
	lanes []*lane // by lane number
	// starts holds the known lanes above lane 0 by their exclusive lower
	// bound, ascending.
	starts []laneStart
	ranges map[int]rangeRef // range number -> its lane and place in it
	all    bool             // the copy is done
	blind  bool             // a range bound had no sort key: keys wait for the end
	within []*interval      // a resumed copy's intervals, one lane each (nil: the whole key)
	// unknown holds keys without a sort key; they wait for the end of the
	// copy.
	unknown map[string]rowkey.Key
}

type laneStart struct {
	after rowkey.SortKey
	lane  *lane
}

type rangeRef struct {
	lane *lane
	i    int
}

// lane is one key interval, cut into ranges in key order.
type lane struct {
	bounds []rowkey.SortKey // upper bound of the lane's range i; nil for the last lane's last
	done   map[int]bool
	next   int // the lowest range of the lane not yet copied

	low            rowkey.SortKey // every key of the lane <= low is copied (if lowAny)
	lowAny, lowAll bool

	waiting keyHeap

	// The same bounds as keys, for checkpoints (progress.go): keys[i] is
	// range i's upper bound (nil: open), start the lane's exclusive lower
	// bound (nil for lane 0), known once a range is cut.
	keys  []rowkey.Key
	start rowkey.Key
	known bool
	// within, if set, is the interval a resumed copy covers in this lane
	// (Scheduler.Within): keys outside it were copied by an earlier run.
	within *interval
}

func newFrontier() *frontier {
	f := &frontier{ranges: map[int]rangeRef{}, unknown: map[string]rowkey.Key{}}
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
// lower bound is at or above sk.
func (f *frontier) startIndex(sk rowkey.SortKey) int {
	return sort.Search(len(f.starts), func(i int) bool { return f.starts[i].after.Compare(sk) >= 0 })
}

// laneOf returns the known lane whose interval holds sk.
func (f *frontier) laneOf(sk rowkey.SortKey) *lane {
	i := f.startIndex(sk)
	if i == 0 {
		return f.lanes[0]
	}
	return f.starts[i-1].lane
}

// copiedUpTo reports whether the lane's ranges up to sk are copied.
func (l *lane) copiedUpTo(sk rowkey.SortKey) bool {
	return l.lowAll || (l.lowAny && sk.Compare(l.low) <= 0)
}

// add places changed key k of sort key sk (nil: none): it reports true if
// the key is ready now, else keeps it until the copy passes it (a key
// without a sort key: until the copy ends).
func (f *frontier) add(k rowkey.Key, sk rowkey.SortKey) bool {
	if sk == nil || f.blind {
		if f.all {
			return true
		}
		f.unknown[k.Encode()] = k
		return false
	}
	if !f.inWithin(sk) {
		return true // copied by an earlier run (Scheduler.Within)
	}
	l := f.laneOf(sk)
	if l.copiedUpTo(sk) {
		return true
	}
	l.waiting.push(sk, k)
	return false
}

// cutRange records range number seq (numbered across lanes), the next range
// of lane n, with upper bound hi (nil: open, the last lane's last range). The
// first range of a lane above lane 0 gives the lane's exclusive lower bound
// after. A lane's ranges must be recorded in key order, each before its copy
// starts.
func (f *frontier) cutRange(seq, n int, after, hi rowkey.SortKey, loKey, hiKey rowkey.Key) {
	l := f.lane(n)
	if len(l.bounds) == 0 && n > 0 {
		f.starts = slices.Insert(f.starts, f.startIndex(after), laneStart{after: after, lane: l})
	}
	f.ranges[seq] = rangeRef{lane: l, i: len(l.bounds)}
	l.bounds = append(l.bounds, hi)
	l.cutKeys(loKey, hiKey)
}

// cutKeys records a range's bounds as keys.
func (l *lane) cutKeys(lo, hi rowkey.Key) {
	if !l.known {
		l.start, l.known = lo, true
	}
	l.keys = append(l.keys, hi)
}

// cutBlind records the next range of lane n, whose bounds have no sort key:
// the lane's watermark stops before it, and every key from now on waits for
// the end of the copy.
func (f *frontier) cutBlind(n int, loKey, hiKey rowkey.Key) {
	l := f.lane(n)
	l.bounds = append(l.bounds, nil)
	l.cutKeys(loKey, hiKey)
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
		if hi := l.bounds[l.next]; hi == nil {
			l.lowAll = true
		} else {
			l.low, l.lowAny = hi, true
		}
		l.bounds[l.next] = nil // passed: no longer needed
		l.next++
		moved = true
	}
	return moved
}

// waiting returns how many keys wait for the copy.
func (f *frontier) waiting() int {
	n := len(f.unknown)
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
		for e, k := range f.unknown {
			ready(k)
			delete(f.unknown, e)
		}
	}
	for _, l := range f.lanes {
		l.waiting.popWhile(l.copiedUpTo, ready)
	}
}

// keyHeap is a set of keys ordered by sort key, each held once.
type keyHeap struct {
	h sortHeap
	m map[string]rowkey.Key // by rowkey.Key.Encode
}

func newKeyHeap() keyHeap { return keyHeap{m: map[string]rowkey.Key{}} }

func (kh *keyHeap) push(sk rowkey.SortKey, k rowkey.Key) {
	e := k.Encode()
	if _, ok := kh.m[e]; ok {
		return
	}
	kh.m[e] = k
	heap.Push(&kh.h, sortItem{sk: sk, enc: e})
}

func (kh *keyHeap) len() int { return len(kh.m) }

func (kh *keyHeap) popWhile(ok func(rowkey.SortKey) bool, fn func(rowkey.Key)) {
	for len(kh.h) > 0 && ok(kh.h[0].sk) {
		it := heap.Pop(&kh.h).(sortItem)
		k := kh.m[it.enc]
		delete(kh.m, it.enc)
		fn(k)
	}
}

type sortItem struct {
	sk  rowkey.SortKey
	enc string
}

type sortHeap []sortItem

func (h sortHeap) Len() int           { return len(h) }
func (h sortHeap) Less(i, j int) bool { return h[i].sk.Compare(h[j].sk) < 0 }
func (h sortHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *sortHeap) Push(x any)        { *h = append(*h, x.(sortItem)) }
func (h *sortHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
