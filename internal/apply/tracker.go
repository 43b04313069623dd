package apply

import (
	"sync"

	"github.com/sluicedb/sluice/internal/rowkey"
)

// Tracker remembers the keys changed since the checksum's snapshot, until a
// comparison of both tables has seen each of them equal. The checksum proves
// the tables equal at its snapshot; every difference after it must be in a
// row changed after it, so comparing these rows under the cut-over's lock
// proves the tables equal at the swap. It is safe for concurrent use: the
// binlog reader calls Record, the runner Start, Take and Verified.
type Tracker struct {
	mu   sync.Mutex // protects every field below
	on   bool
	keys map[string]Tracked
	seq  uint64
}

// Tracked is one changed key, whether its row exists after its last change
// (as the binlog says), and the version of that change.
type Tracked struct {
	Key     rowkey.Key
	Present bool
	version uint64
}

// NewTracker returns a tracker that records nothing until Start.
func NewTracker() *Tracker { return &Tracker{keys: map[string]Tracked{}} }

// Start forgets every key and records the keys added from now on. The caller
// calls it at the checksum's snapshot, when no change is in flight.
func (t *Tracker) Start() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.on = true
	clear(t.keys)
}

// Record records keys as changed, each with a new version and whether its
// row exists after the change (present[i]).
func (t *Tracker) Record(keys []rowkey.Key, present []bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.on {
		return
	}
	for i, k := range keys {
		t.seq++
		t.keys[k.Encode()] = Tracked{Key: k, Present: i < len(present) && present[i], version: t.seq}
	}
}

// Take returns up to max recorded keys (all when max <= 0), leaving them
// recorded.
func (t *Tracker) Take(max int) []Tracked {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Tracked, 0, min(len(t.keys), max0(max, len(t.keys))))
	for _, k := range t.keys {
		if max > 0 && len(out) == max {
			break
		}
		out = append(out, k)
	}
	return out
}

func max0(max, n int) int {
	if max <= 0 {
		return n
	}
	return max
}

// Verified forgets the keys a comparison found equal, unless one changed again
// since Take returned it (its version moved): that change may not have been
// compared.
func (t *Tracker) Verified(keys []Tracked) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, k := range keys {
		e := k.Key.Encode()
		if cur, ok := t.keys[e]; ok && cur.version == k.version {
			delete(t.keys, e)
		}
	}
}

// Len returns how many keys wait to be compared.
func (t *Tracker) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.keys)
}
