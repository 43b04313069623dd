package migration

import (
	"sync"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/dbconn"
)

// TestStatusBeforeTheRun: a run's Status may be read as soon as New returns
// (Observe hands it out there), before anything of the run exists.
func TestStatusBeforeTheRun(t *testing.T) {
	var status func() Status
	_, err := New(Config{Conn: dbconn.Config{Host: "127.0.0.1", Port: 1, User: "u"}, Database: "d", Table: "t",
		Alter: "ADD COLUMN x INT", Observe: func(s func() Status) { status = s }})
	if err != nil {
		t.Fatal(err)
	}
	if status == nil {
		t.Fatal("New did not hand out the run's Status")
	}
	if s := status(); s.Phase != "new" || s.Database != "d" || s.Table != "t" || s.RowsCopied != 0 || s.Elapsed != 0 {
		t.Fatalf("status before the run: %+v", s)
	}
}

// TestLongestLockWait keeps the longest of waits recorded at once.
func TestLongestLockWait(t *testing.T) {
	var l lockWaits
	var wg sync.WaitGroup
	for i := 1; i <= 200; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.record(time.Duration(i) * time.Millisecond)
		}()
	}
	wg.Wait()
	if got := time.Duration(l.longest.Load()); got != 200*time.Millisecond {
		t.Fatalf("longest wait %v, want 200ms", got)
	}
}
