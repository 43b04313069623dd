package bench

import (
	"context"
	"database/sql"
	"strings"
	"sync"
	"time"
)

// Deadlocks watches InnoDB's latest detected deadlock while a timed ALTER runs
// under load, and counts the deadlocks it sees, and those with one of sluice's
// statements in them. A statement of sluice's names the shadow table or reads
// with FOR SHARE, which sysbench's oltp_read_write never does. InnoDB keeps only
// the latest deadlock, so two within one poll count as one.
type Deadlocks struct {
	mu          sync.Mutex
	last        string
	seen, their int
	stop        context.CancelFunc
	done        chan struct{}
}

// WatchDeadlocks polls SHOW ENGINE INNODB STATUS every 200ms until Stop.
func WatchDeadlocks(ctx context.Context, db *sql.DB, markers ...string) *Deadlocks {
	ctx, cancel := context.WithCancel(ctx)
	d := &Deadlocks{stop: cancel, done: make(chan struct{})}
	d.last, _ = latestDeadlock(ctx, db) // one from before the watch is not counted
	go func() {
		defer close(d.done)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			dl, err := latestDeadlock(ctx, db)
			if err != nil || dl == "" {
				continue
			}
			d.mu.Lock()
			if dl != d.last {
				d.last = dl
				d.seen++
				if involves(dl, markers) {
					d.their++
				}
			}
			d.mu.Unlock()
		}
	}()
	return d
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
