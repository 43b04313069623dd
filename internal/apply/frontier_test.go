package apply

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/big"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/rowkey"
	"github.com/sluicedb/sluice/internal/schema"
)

// keyCols returns the key of columns cs, numbered in order.
func keyCols(t testing.TB, cs ...schema.Column) rowkey.Cols {
	t.Helper()
	for i := range cs {
		cs[i].Ordinal = i + 1
	}
	key, err := rowkey.NewCols(cs)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// intOrder is the order of a single BIGINT key.
func intOrder(t testing.TB, unsigned bool) *Order {
	t.Helper()
	o, err := NewOrder(context.Background(), nil, keyCols(t, schema.Column{Name: "id", DataType: "bigint", Unsigned: unsigned}))
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// trackInts makes s follow a copy over a signed BIGINT key.
func trackInts(t testing.TB, s *Scheduler) { s.TrackCopy(context.Background(), intOrder(t, false)) }

// readyIDs drains every ready key (the scheduler is not held).
func readyIDs(s *Scheduler) []int64 {
	b := s.Next(1 << 20)
	s.Done(b)
	return ids(b)
}

func TestTrackCopyPlacesKeys(t *testing.T) {
	s := NewScheduler()
	trackInts(t, s)
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
	o := intOrder(t, false)
	if a, _ := o.sortKey(rowkey.Key{int64(-1)}); func() bool { b, _ := o.sortKey(rowkey.Key{int64(0)}); return a.Compare(b) >= 0 }() {
		t.Fatal("-1 must order before 0")
	}
	s := NewScheduler()
	s.TrackCopy(context.Background(), intOrder(t, true))
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
	trackInts(t, s)
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

// keySpace is a primary key for TestTrackCopyModel: how to draw a key, the
// model's own comparison of keys (not sluice's sort keys), and sluice's
// order.
type keySpace struct {
	name  string
	order func(t *testing.T) *Order
	draw  func(rng *rand.Rand) rowkey.Key
	cmp   func(a, b rowkey.Key) int
}

// ciWeights is a stand-in for the server's weights: a case-insensitive
// collation. A value with '!' has no weight (a failed conversion).
func ciWeights(cols rowkey.Cols) func(context.Context, []rowkey.Key) ([][]string, error) {
	return func(_ context.Context, keys []rowkey.Key) ([][]string, error) {
		out := make([][]string, len(keys))
		for i, k := range keys {
			for j, c := range cols {
				if !c.Collated() {
					continue
				}
				v := string(k[j].([]byte))
				if strings.Contains(v, "!") {
					return nil, errors.New("no weight")
				}
				out[i] = append(out[i], strings.ToUpper(v))
			}
		}
		return out, nil
	}
}

var keySpaces = []keySpace{{
	name:  "bigint",
	order: func(t *testing.T) *Order { return intOrder(t, false) },
	draw:  func(rng *rand.Rand) rowkey.Key { return k(int64(rng.IntN(300)) - 60) },
	cmp:   func(a, b rowkey.Key) int { return cmp.Compare(a[0].(int64), b[0].(int64)) },
}, {
	name: "int, varchar ci, bigint unsigned",
	order: func(t *testing.T) *Order {
		key := keyCols(t, schema.Column{Name: "tenant", DataType: "int"},
			schema.Column{Name: "name", DataType: "varchar", Charset: "utf8mb4", Collation: "ci", MaxLength: 8},
			schema.Column{Name: "id", DataType: "bigint", Unsigned: true})
		return &Order{cols: key, weigh: ciWeights(key)}
	},
	draw: func(rng *rand.Rand) rowkey.Key {
		name := make([]byte, rng.IntN(4))
		for i := range name {
			name[i] = "aAbB "[rng.IntN(5)]
		}
		if rng.IntN(40) == 0 {
			name = append(name, '!')
		}
		return rowkey.Key{int64(rng.IntN(4)), name, uint64(rng.IntN(4))}
	},
	cmp: func(a, b rowkey.Key) int {
		return cmp.Or(cmp.Compare(a[0].(int64), b[0].(int64)),
			strings.Compare(strings.ToUpper(string(a[1].([]byte))), strings.ToUpper(string(b[1].([]byte)))),
			cmp.Compare(a[2].(uint64), b[2].(uint64)))
	},
}, {
	name: "decimal, datetime(6), time(1)",
	order: func(t *testing.T) *Order {
		o, err := NewOrder(context.Background(), nil, keyCols(t,
			schema.Column{Name: "d", DataType: "decimal", ColumnType: "decimal(6,2)"},
			schema.Column{Name: "at", DataType: "datetime"}, schema.Column{Name: "t", DataType: "time"}))
		if err != nil {
			t.Fatal(err)
		}
		return o
	},
	draw: func(rng *rand.Rand) rowkey.Key {
		ds := []string{"-10.00", "-1.5", "-1.50", "-0.05", "0", "0.00", "0.5", "1", "1.25", "10.1"}
		ats := []string{"0000-00-00 00:00:00", "1999-12-31 23:59:59.999999", "2000-01-01 00:00:00",
			"2000-01-01 00:00:00.000001", "2024-02-29 12:00:00.5", "2024-02-29 12:00:00.500000"}
		ts := []string{"-838:59:59.0", "-01:00:00", "-00:00:00.5", "00:00:00", "00:00:00.1", "10:00:00", "838:59:59"}
		return rowkey.Key{ds[rng.IntN(len(ds))], ats[rng.IntN(len(ats))], ts[rng.IntN(len(ts))]}
	},
	cmp: func(a, b rowkey.Key) int {
		return cmp.Or(modelDecimal(a[0].(string)).Cmp(modelDecimal(b[0].(string))),
			slices.Compare(modelFields(a[1].(string)), modelFields(b[1].(string))),
			cmp.Compare(modelTime(a[2].(string)), modelTime(b[2].(string))))
	},
}}

var modelDecimals = map[string]*big.Rat{}

func modelDecimal(s string) *big.Rat {
	if r, ok := modelDecimals[s]; ok {
		return r
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		panic(s)
	}
	modelDecimals[s] = r
	return r
}

// modelFields reads a date and time as its numbers, the fraction in
// microseconds.
var modelDates = map[string][]int{}

func modelFields(s string) []int {
	if f, ok := modelDates[s]; ok {
		return f
	}
	var y, mo, d, h, mi, sec int
	var frac string
	fmt.Sscanf(strings.Replace(s, ".", " ", 1), "%d-%d-%d %d:%d:%d %s", &y, &mo, &d, &h, &mi, &sec, &frac)
	us, _ := strconv.Atoi((frac + "000000")[:6])
	modelDates[s] = []int{y, mo, d, h, mi, sec, us}
	return modelDates[s]
}

// modelTime reads a TIME as signed microseconds.
func modelTime(s string) float64 {
	if v, ok := modelTimes[s]; ok {
		return v
	}
	neg := strings.HasPrefix(s, "-")
	var h, m int
	var sec float64
	fmt.Sscanf(strings.TrimPrefix(s, "-"), "%d:%d:%f", &h, &m, &sec)
	v := float64(h*3600+m*60) + sec
	if neg {
		v = -v
	}
	modelTimes[s] = v
	return v
}

var modelTimes = map[string]float64{}

// waitResolved waits until the scheduler has converted every pending key.
func waitResolved(t *testing.T, s *Scheduler) {
	t.Helper()
	for i := 0; ; i++ {
		s.mu.Lock()
		n := 0
		if c := s.copy; c != nil {
			n = len(c.pending) + len(c.converting)
		}
		s.mu.Unlock()
		if n == 0 {
			return
		}
		if i == 5000 {
			t.Fatalf("%d keys were never converted", n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestTrackCopyModel drives random ranges split into 1 to 4 lanes, changes,
// cut and completion orders, for integer, composite, collated string,
// decimal and temporal keys, and checks the two properties that matter
// against a direct model: every changed key is applied after the copy of its
// range (whenever the range was cut), and no key is applied before its range
// is copied.
func TestTrackCopyModel(t *testing.T) {
	for _, ks := range keySpaces {
		t.Run(ks.name, func(t *testing.T) {
			early := 0
			for seed := uint64(0); seed < 300; seed++ {
				early += trackCopyModel(t, ks, seed)
			}
			if early == 0 {
				t.Error("no key was applied before the end of the copy")
			}
		})
	}
}

// trackCopyModel runs one seed and returns how many keys were applied before
// the end of the copy.
func trackCopyModel(t *testing.T, ks keySpace, seed uint64) int {
	rng := rand.New(rand.NewPCG(seed, 1))
	s := NewScheduler()
	s.weighLinger = 0
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s.TrackCopy(ctx, ks.order(t))
	var bounds []rowkey.Key
	for range 8 {
		b := ks.draw(rng)
		if strings.Contains(b.String(), "!") {
			continue
		}
		bounds = append(bounds, b)
	}
	slices.SortFunc(bounds, ks.cmp)
	bounds = slices.CompactFunc(bounds, func(a, b rowkey.Key) bool { return ks.cmp(a, b) == 0 })
	rangeOf := func(key rowkey.Key) int {
		for i, hi := range bounds {
			if ks.cmp(key, hi) <= 0 {
				return i
			}
		}
		return len(bounds) // the open range
	}
	n := len(bounds) + 1
	// Lanes: consecutive groups of ranges, each cut in key order, the lanes'
	// cuts interleaved at random.
	lanes := 1 + rng.IntN(min(4, n))
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
		key  rowkey.Key
		step int
	}
	var changes []change
	applied := map[string][]int{} // key -> steps at which it was handed out
	early := 0
	take := func(step int) {
		for _, key := range s.Next(1 << 20) {
			applied[key.Encode()] = append(applied[key.Encode()], step)
			s.Done([]rowkey.Key{key})
			if step < 1<<30 {
				early++
			}
		}
	}
	cut, pending := 0, []int{}
	for step := 0; step < 400 && (cut < n || len(pending) > 0); step++ {
		switch r := rng.IntN(10); {
		case r < 4:
			key := ks.draw(rng)
			changes = append(changes, change{key, step})
			s.Add(key)
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
				lo = bounds[ri-1]
			}
			if ri < len(bounds) {
				hi = bounds[ri]
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
		if rng.IntN(8) == 0 {
			waitResolved(t, s)
		}
		take(step)
	}
	s.CopyDone()
	for i := 0; s.Backlog() > 0; i++ {
		take(1 << 30)
		if i == 5000 {
			t.Fatalf("seed %d: %d keys never became ready after the copy", seed, s.Backlog())
		}
		time.Sleep(time.Millisecond)
	}
	for _, c := range changes {
		ri := rangeOf(c.key)
		ok := false
		for _, at := range applied[c.key.Encode()] {
			if at >= c.step && at >= copiedAt[ri] {
				ok = true
			}
		}
		if !ok {
			t.Fatalf("seed %d, %d lanes: key %v changed at step %d (range %d cut at %d, copied at %d) was never applied after its copy: %v",
				seed, lanes, c.key, c.step, ri, cutAt[ri], copiedAt[ri], applied[c.key.Encode()])
		}
	}
	for _, c := range changes {
		ri := rangeOf(c.key)
		for _, at := range applied[c.key.Encode()] {
			if copiedAt[ri] == -1 && at < 1<<30 || at < copiedAt[ri] {
				t.Fatalf("seed %d, %d lanes: key %v applied at step %d before its range was copied (step %d)", seed, lanes, c.key, at, copiedAt[ri])
			}
		}
	}
	return early
}

// TestTrackCopyHoldsKeysMarkedBefore: keys marked before the copy is tracked
// (the binlog reader may start first) must not be applied before the copy
// reaches them (a run under load once applied one early and the copy then
// met it as a duplicate primary key), and must be applied once it has.
func TestTrackCopyHoldsKeysMarkedBefore(t *testing.T) {
	s := NewScheduler()
	s.Add(k(5), k(500))
	trackInts(t, s)
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
	trackInts(t, s)
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
