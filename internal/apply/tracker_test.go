package apply

import (
	"testing"

	"github.com/sluicedb/sluice/internal/rowkey"
)

func TestTracker(t *testing.T) {
	tr := NewTracker()
	k := func(i int64) rowkey.Key { return rowkey.Key{i} }
	add := func(keys ...rowkey.Key) { tr.Record(keys, []bool{true, true, true}) }
	add(k(1))
	if tr.Len() != 0 {
		t.Fatal("recorded before Start")
	}
	tr.Start()
	add(k(1), k(2), k(3))
	got := tr.Take(2)
	if len(got) != 2 || tr.Len() != 3 {
		t.Fatalf("Take(2) = %d keys, %d left", len(got), tr.Len())
	}
	all := tr.Take(0)
	if len(all) != 3 {
		t.Fatalf("Take(0) = %d keys", len(all))
	}
	// Key 2 changes again after Take: verifying the old version keeps it.
	add(k(2))
	tr.Verified(all)
	left := tr.Take(0)
	if len(left) != 1 || left[0].Key[0] != int64(2) {
		t.Fatalf("after Verified: %v", left)
	}
	tr.Verified(left)
	if tr.Len() != 0 {
		t.Fatalf("%d keys left", tr.Len())
	}
	add(k(9))
	tr.Start()
	if tr.Len() != 0 {
		t.Fatal("Start kept old keys")
	}
}

func TestTrackerPresence(t *testing.T) {
	tr := NewTracker()
	tr.Start()
	k := rowkey.Key{int64(7)}
	tr.Record([]rowkey.Key{k, k}, []bool{false, true}) // an update's before and after image
	if got := tr.Take(0); len(got) != 1 || !got[0].Present {
		t.Fatalf("after an update: %+v", got)
	}
	tr.Record([]rowkey.Key{k}, []bool{false}) // deleted
	if got := tr.Take(0); len(got) != 1 || got[0].Present {
		t.Fatalf("after a delete: %+v", got)
	}
}
