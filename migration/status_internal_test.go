package migration

import (
	"context"
	"errors"
	"strings"
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

// TestOperatorStateMachine: postpone and cutover before and after the run
// decides, pause refused once the cut-over began, abort refused once the
// swap began and the swap refused once aborted. No server is needed.
func TestOperatorStateMachine(t *testing.T) {
	newRun := func() *Runner {
		r, err := New(Config{Conn: dbconn.Config{Host: "127.0.0.1", Port: 1, User: "u"}, Database: "d", Table: "t", Alter: "ADD COLUMN x INT"})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	r := newRun()
	if _, err := r.Cutover(); err == nil {
		t.Error("cutover of a run that is not postponed was accepted")
	}
	if _, err := r.Postpone(); err != nil || !r.Status().Postponed {
		t.Fatalf("postpone: %v, %+v", err, r.Status())
	}
	if msg, err := r.Cutover(); err != nil || !strings.Contains(msg, "as soon as the checksum passes") {
		t.Fatalf("cutover before the run decides: %q, %v", msg, err)
	}
	if r.postponing() {
		t.Error("the run waits after the operator released it")
	}
	if _, err := r.Postpone(); err == nil {
		t.Error("postpone after the run decided not to wait was accepted")
	}

	r = newRun()
	r.Postpone()
	if !r.postponing() || r.released() {
		t.Fatal("a postponed run does not wait")
	}
	if msg, err := r.Cutover(); err != nil || msg != "cut-over triggered" || !r.released() {
		t.Fatalf("cutover while waiting: %q, %v", msg, err)
	}
	if _, err := r.Postpone(); err == nil {
		t.Error("postpone after the cut-over was released was accepted")
	}

	r = newRun()
	ctx := context.Background()
	if err := r.attemptBegin(); err != nil {
		t.Fatalf("a lock attempt refused without a pause: %v", err)
	}
	r.attemptEnd()
	if _, err := r.Pause(ctx); err != nil || !r.Status().Paused {
		t.Fatalf("pause: %v", err)
	}
	if err := r.attemptBegin(); !errors.Is(err, errPausedAttempt) {
		t.Fatalf("a lock attempt while paused: %v", err)
	}
	r.attemptEnd()
	if n := r.busy(); n != 0 {
		t.Fatalf("%d attempts counted after each ended", n)
	}
	done := make(chan error, 1)
	go func() { done <- r.waitResumed(ctx, "cut-over") }()
	select {
	case err := <-done:
		t.Fatalf("the cut-over began while paused: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	r.Resume()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := r.Pause(ctx); err == nil || !errors.Is(err, errTooLate) {
		t.Errorf("pause after the cut-over began: %v", err)
	}

	r = newRun()
	if _, err := r.Abort(); err == nil {
		t.Error("abort before the run started was accepted")
	}
	var cause error
	r.live.cancel = func(err error) { cause = err }
	if !r.beginRename() {
		t.Fatal("the swap was refused without an abort")
	}
	if _, err := r.Abort(); err == nil || cause != nil {
		t.Errorf("abort after the swap began: %v, cancelled with %v", err, cause)
	}
	r = newRun()
	r.live.cancel = func(err error) { cause = err }
	if _, err := r.Abort(); err != nil || !errors.Is(cause, ErrAborted) {
		t.Fatalf("abort: %v, cause %v", err, cause)
	}
	if r.beginRename() {
		t.Error("the swap began after an abort")
	}
	if retentionStep(time.Hour, 0) != 0 || retentionStep(49*time.Minute, 100*time.Minute) != 0 ||
		retentionStep(50*time.Minute, 100*time.Minute) != 1 || retentionStep(80*time.Minute, 100*time.Minute) != 2 ||
		retentionStep(95*time.Minute, 100*time.Minute) != 3 {
		t.Error("retentionStep")
	}
}
