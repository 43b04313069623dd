package copier

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/chunk"
	"github.com/sluicedb/sluice/internal/testdb"
)

// shutGate admits the first open entries, then holds every other one until
// its context ends (a throttle that never clears).
type shutGate struct {
	mu      sync.Mutex
	open    int
	entered int
}

func (g *shutGate) Enter(ctx context.Context) error {
	g.mu.Lock()
	if g.entered < g.open {
		g.entered++
		g.mu.Unlock()
		return nil
	}
	g.mu.Unlock()
	<-ctx.Done()
	return ctx.Err()
}

func (g *shutGate) Leave() {}

// TestCopyEndsWhileTheGateHoldsIdleWorkers: once every range is copied, the
// copy ends even though its other workers wait at a gate that stays shut;
// and threads changed meanwhile copy every row once.
func TestCopyEndsWhileTheGateHoldsIdleWorkers(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE src (id INT PRIMARY KEY, v INT)")
	db.Fill(t, "src", 300, "n, n")
	m, key := db.Mapping(t, "src", "dst", true)
	// One range (a small table, big chunks), four workers: one copies it,
	// three wait at the gate.
	c, err := New(Config{DB: db.DB, Key: key, Workers: 4, Mapping: m, Chunk: chunk.Config{Initial: 10000}, Gate: &shutGate{open: 1}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the copy did not end: idle workers wait at the shut gate")
	}
	var n int
	db.QueryRow("SELECT COUNT(*) FROM dst").Scan(&n)
	if n != 300 || c.Rows() != 300 {
		t.Fatalf("copied %d rows (counted %d), want 300", n, c.Rows())
	}
}
