package copier

import (
	"context"
	"testing"
	"time"
)

// TestTurns: workers under the limit go, the others wait until the limit
// rises, the feed ends, or ctx is done.
func TestTurns(t *testing.T) {
	var tr turns
	tr.init(2)
	fed := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if !tr.wait(ctx, 1, fed) {
		t.Fatal("worker 1 of 2 waited")
	}
	got := make(chan bool, 1)
	go func() { got <- tr.wait(ctx, 3, fed) }()
	select {
	case <-got:
		t.Fatal("worker 3 of 2 did not wait")
	case <-time.After(20 * time.Millisecond):
	}
	tr.set(4)
	if !<-got {
		t.Fatal("worker 3 did not go once the limit was 4")
	}
	tr.set(1)
	go func() { got <- tr.wait(ctx, 1, fed) }()
	close(fed)
	if <-got {
		t.Fatal("a waiting worker went on after the feed ended")
	}
	go func() { got <- tr.wait(ctx, 2, make(chan struct{})) }()
	cancel()
	if <-got {
		t.Fatal("a waiting worker went on after ctx ended")
	}
}
