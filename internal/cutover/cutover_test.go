package cutover

import (
	"fmt"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

func TestPolicy(t *testing.T) {
	p := Policy{Timeout: 1500 * time.Millisecond, Backoff: time.Second}
	if got := p.LockWaitSeconds(); got != 2 {
		t.Errorf("LockWaitSeconds = %d, want 2 (rounded up)", got)
	}
	if got := (Policy{Timeout: 100 * time.Millisecond}).LockWaitSeconds(); got != 1 {
		t.Errorf("LockWaitSeconds = %d, want at least 1", got)
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}
	for i, w := range want {
		if got := p.Delay(i); got != w {
			t.Errorf("Delay(%d) = %v, want %v", i, got, w)
		}
	}
	if got := p.Delay(20); got != 30*time.Second {
		t.Errorf("Delay is capped: got %v", got)
	}
}

func TestRetry(t *testing.T) {
	if !Retry(fmt.Errorf("x: %w", &mysql.MySQLError{Number: 1205})) {
		t.Error("a lock wait timeout is worth a retry")
	}
	if !Retry(fmt.Errorf("drain: %w", ErrRetry)) {
		t.Error("ErrRetry is worth a retry")
	}
	if Retry(&mysql.MySQLError{Number: 1146}) {
		t.Error("a missing table is not")
	}
}
