package apply

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/rowkey"
	"github.com/sluicedb/sluice/internal/schema"
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

// blockingWeigher is a case-insensitive stand-in for the server's weights
// whose calls wait on gate; calls counts them.
type blockingWeigher struct {
	gate  chan struct{}
	calls chan int // the number of keys of each call
}

func (b *blockingWeigher) weigh(ctx context.Context, keys []rowkey.Key) ([][]string, error) {
	b.calls <- len(keys)
	select {
	case <-b.gate:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	out := make([][]string, len(keys))
	for i, k := range keys {
		if bytes.Contains(k[0].([]byte), []byte("!")) {
			return nil, errors.New("no weight")
		}
		out[i] = []string{strings.ToUpper(string(k[0].([]byte)))}
	}
	return out, nil
}

func skey(s string) rowkey.Key { return rowkey.Key{[]byte(s)} }

func names(keys []rowkey.Key) []string {
	var out []string
	for _, k := range keys {
		out = append(out, string(k[0].([]byte)))
	}
	slices.Sort(out)
	return out
}

// trackStrings makes s follow a copy over a VARCHAR key whose weights come
// from b.
func trackStrings(t *testing.T, s *Scheduler, b *blockingWeigher) context.CancelFunc {
	key := keyCols(t, schema.Column{Name: "s", DataType: "varchar", Charset: "utf8mb4", Collation: "ci", MaxLength: 8})
	ctx, cancel := context.WithCancel(context.Background())
	s.weighLinger = 0
	s.TrackCopy(ctx, &Order{cols: key, weigh: b.weigh})
	return cancel
}

// TestTrackCopyWeighsAside: keys whose sort keys need the server never make
// Add wait for it; they are converted aside, in batches, and count in the
// backlog meanwhile. A key whose conversion fails waits for the end of the
// copy; CopyDone makes every key ready, those being converted included.
func TestTrackCopyWeighsAside(t *testing.T) {
	s := NewScheduler()
	b := &blockingWeigher{gate: make(chan struct{}), calls: make(chan int, 100)}
	defer trackStrings(t, s, b)()
	go func() { b.gate <- struct{}{} }() // the bounds of range 0
	s.SpanCut(0, 0, nil, skey("m"))
	<-b.calls
	s.SpanCopied(0)
	done := make(chan struct{})
	go func() {
		s.Add(skey("a"), skey("B"), skey("z"))
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Add waited for the server")
	}
	<-b.calls // the converter holds its batch at the gate
	s.Add(skey("a"), skey("y"))
	if got := s.Backlog(); got != 4 {
		t.Fatalf("backlog = %d, want 4 keys pending or being converted", got)
	}
	if s.Next(10) != nil {
		t.Fatal("a key was handed out before its sort key was known")
	}
	b.gate <- struct{}{}
	<-b.calls // y
	b.gate <- struct{}{}
	waitResolved(t, s)
	first := s.Next(10)
	if got := names(first); !slices.Equal(got, []string{"B", "a"}) {
		t.Fatalf("ready = %v, want the keys at or below m", got)
	}
	s.Done(first)
	s.Add(skey("c!")) // its conversion fails: it waits for the end of the copy
	<-b.calls
	b.gate <- struct{}{}
	waitResolved(t, s)
	if got := s.Next(10); got != nil {
		t.Fatalf("%v handed out", names(got))
	}
	s.Add(skey("x"))
	<-b.calls // held at the gate during CopyDone
	s.CopyDone()
	rest := s.Next(10)
	if got, want := names(rest), []string{"c!", "x", "y", "z"}; !slices.Equal(got, want) {
		t.Fatalf("after the copy %v, want %v", got, want)
	}
	close(b.gate) // the converter returns after CopyDone: nothing is lost or added
	time.Sleep(20 * time.Millisecond)
	if s.Backlog() != 4 || s.Next(10) != nil {
		t.Fatalf("backlog %d after the copy, want the 4 keys in flight only", s.Backlog())
	}
	s.Done(rest)
	if s.Backlog() != 0 {
		t.Fatalf("backlog %d", s.Backlog())
	}
}

// TestTrackCopyBlindBound: a range bound without a sort key stops every
// lane's progress from counting: keys wait for the end of the copy.
func TestTrackCopyBlindBound(t *testing.T) {
	s := NewScheduler()
	b := &blockingWeigher{gate: make(chan struct{}), calls: make(chan int, 100)}
	close(b.gate)
	defer trackStrings(t, s, b)()
	s.SpanCut(0, 0, nil, skey("m!"))
	s.SpanCopied(0)
	s.Add(skey("a"))
	waitResolved(t, s)
	if got := s.Next(10); got != nil {
		t.Fatalf("%v handed out though no range bound is known", names(got))
	}
	s.CopyDone()
	if got := names(s.Next(10)); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("after the copy: %v", got)
	}
}

// TestSortKeysInStatements: keys are weighed perQuery at a time, and each
// keeps its own weights.
func TestSortKeysInStatements(t *testing.T) {
	key := keyCols(t, schema.Column{Name: "n", DataType: "int"},
		schema.Column{Name: "s", DataType: "varchar", Charset: "utf8mb4", Collation: "ci", MaxLength: 8})
	var calls []int
	o := &Order{cols: key, perQuery: 3, weigh: func(_ context.Context, keys []rowkey.Key) ([][]string, error) {
		calls = append(calls, len(keys))
		out := make([][]string, len(keys))
		for i, k := range keys {
			out[i] = []string{strings.ToUpper(string(k[1].([]byte)))}
		}
		return out, nil
	}}
	var keys []rowkey.Key
	for i := range 7 {
		keys = append(keys, rowkey.Key{int64(i), []byte{'a' + byte(i)}})
	}
	sks, err := o.sortKeys(context.Background(), keys)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(calls, []int{3, 3, 1}) {
		t.Errorf("statements of %v keys, want [3 3 1]", calls)
	}
	for i, sk := range sks {
		if sk[1] != string([]byte{'A' + byte(i)}) || sk[0] != string([]byte{0x80, 0, 0, 0, 0, 0, 0, byte(i)}) {
			t.Errorf("key %d: sort key %q", i, sk)
		}
	}
}

// TestSchedulerStop: the operator's stop keeps keys from the workers and the
// resolver, not from the cut-over's TakeAll, and is apart from holds.
func TestSchedulerStop(t *testing.T) {
	s := NewScheduler()
	s.Add(k(1), k(2))
	s.Stop(true)
	if b := s.Next(10); b != nil {
		t.Fatalf("Next while stopped: %v", b)
	}
	if b := s.TakeAllUnlessHeld(); b != nil {
		t.Fatalf("TakeAllUnlessHeld while stopped: %v", b)
	}
	s.Hold(true)
	s.Hold(false) // lifting a hold does not lift the stop
	if b := s.Next(10); b != nil {
		t.Fatalf("Next after a hold was lifted, still stopped: %v", b)
	}
	changed := s.Changed()
	s.Stop(false)
	select {
	case <-changed:
	default:
		t.Error("the workers were not woken when the stop was lifted")
	}
	if b := s.Next(1); len(b) != 1 {
		t.Fatalf("Next after the stop: %v", b)
	}
	s.Stop(true)
	if b := s.TakeAll(); len(b) != 1 {
		t.Fatalf("TakeAll while stopped: %v", b)
	}
}
