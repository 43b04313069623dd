package bench

import (
	"context"
	"database/sql"
	"strings"
	"sync"
	"time"
)

// Deadlocks counts the deadlocks InnoDB detects while a timed ALTER runs under
// load, and those with one of the tool's statements in them. A statement of
// sluice's names the shadow table or reads with FOR SHARE, which sysbench's
// oltp_read_write never does.
//
// The count comes from the lock_deadlocks counter of
// information_schema.INNODB_METRICS, an in-memory counter that is cheap to
// read. Only when it has grown is SHOW ENGINE INNODB STATUS read, for the
// latest deadlock's statements: that command holds InnoDB's lock-system latch
// while it prints, so polling it all the time would slow the very workload
// being measured. When several deadlocks come within one poll, only the
// latest one's statements are examined.
type Deadlocks struct {
	mu          sync.Mutex
	seen, their int
	stop        context.CancelFunc
	done        chan struct{}
}

// WatchDeadlocks polls the deadlock counter every 200ms until Stop.
func WatchDeadlocks(ctx context.Context, db *sql.DB, markers ...string) *Deadlocks {
	ctx, cancel := context.WithCancel(ctx)
	d := &Deadlocks{stop: cancel, done: make(chan struct{})}
	last, err := deadlockCount(ctx, db) // those from before the watch are not counted
	go func() {
		defer close(d.done)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for err == nil {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			n, cerr := deadlockCount(ctx, db)
			if cerr != nil || n <= last {
				continue
			}
			dl, _ := latestDeadlock(ctx, db)
			d.mu.Lock()
			d.seen += int(n - last)
			if involves(dl, markers) {
				d.their++
			}
			d.mu.Unlock()
			last = n
		}
	}()
	return d
}

// deadlockCount reads InnoDB's count of deadlocks since the server started.
func deadlockCount(ctx context.Context, db *sql.DB) (int64, error) {
	var n int64
	err := db.QueryRowContext(ctx, "SELECT `COUNT` FROM information_schema.INNODB_METRICS WHERE NAME = 'lock_deadlocks'").Scan(&n)
	return n, err
}

// Stop ends the watch and returns the deadlocks seen and how many involved
// a statement with one of the markers.
func (d *Deadlocks) Stop() (seen, involving int) {
	d.stop()
	<-d.done
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.seen, d.their
}

func involves(deadlock string, markers []string) bool {
	for _, m := range markers {
		if strings.Contains(deadlock, m) {
			return true
		}
	}
	return false
}

// latestDeadlock returns the LATEST DETECTED DEADLOCK section of the InnoDB
// status, or "" if there is none.
func latestDeadlock(ctx context.Context, db *sql.DB) (string, error) {
	var typ, name, status string
	if err := db.QueryRowContext(ctx, "SHOW ENGINE INNODB STATUS").Scan(&typ, &name, &status); err != nil {
		return "", err
	}
	return deadlockSection(status), nil
}

// deadlockSection cuts the LATEST DETECTED DEADLOCK section out of an InnoDB
// status text.
func deadlockSection(status string) string {
	const head = "LATEST DETECTED DEADLOCK"
	i := strings.Index(status, head)
	if i < 0 {
		return ""
	}
	rest := status[i+len(head):]
	// The section ends where the next one's title begins: a line of dashes,
	// a title, a line of dashes.
	if j := strings.Index(rest, "\n------------\nTRANSACTIONS\n"); j >= 0 {
		rest = rest[:j]
	}
	return rest
}
