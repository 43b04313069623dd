package bench

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// TestUUIDKey: the string table's key of row n is SHA2(n, 256), cut to a
// UUID's 32 digits, as the template's fill computes it with MySQL's SHA2().
func TestUUIDKey(t *testing.T) {
	// SELECT SHA2('1', 256) = 6b86b273ff34fce19d6b804eff5a3f5747ada4eaa22f1d49c01e52ddb7875b4b
	if got := uuidKey(1); got != "6b86b273-ff34-fce1-9d6b-804eff5a3f57" {
		t.Errorf("uuidKey(1) = %q", got)
	}
	if len(uuidKey(1_000_000)) != 36 {
		t.Errorf("not 36 characters: %q", uuidKey(1_000_000))
	}
}

func TestStatementsFor(t *testing.T) {
	st := statementsFor(keyTableNamed("sbtest_comp"))
	for _, c := range []struct{ got, want string }{
		{st.update, "UPDATE sbtest.sbtest_comp SET k = k + 1, c = ? WHERE tenant_id = ? AND id = ?"},
		{st.insert, "INSERT INTO sbtest.sbtest_comp (tenant_id, id, k, c, pad) VALUES (?, ?, ?, ?, ?)"},
		{st.delete, "DELETE FROM sbtest.sbtest_comp WHERE tenant_id = ? AND id = ?"},
		{st.move, "UPDATE sbtest.sbtest_comp SET tenant_id = ?, id = ? WHERE tenant_id = ? AND id = ?"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
	if got := keyTableNamed("sbtest_comp").keyOf(250); got[0] != int64(51) || got[1] != int64(250) {
		t.Errorf("composite key of 250: %v", got)
	}
	if keyTableNamed("nope").name != "sbtest1" {
		t.Error("an unknown table is not sbtest1's")
	}
}

func TestPickWriteMix(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	n := map[keyWrite]int{}
	for range 100_000 {
		n[pickWrite(r)]++
	}
	for _, m := range keyMix {
		if got := float64(n[m.kind]) / 1000; got < float64(m.pct)-1 || got > float64(m.pct)+1 {
			t.Errorf("write %d: %.1f%%, want %d%%", m.kind, got, m.pct)
		}
	}
	if d := digits(r, 10); len(d) != 119 || strings.Count(d, "-") != 9 {
		t.Errorf("digits: %q", d)
	}
}

// TestTally: a second without a write counts, as zero.
func TestTally(t *testing.T) {
	l := &Load{}
	l.tally(500*time.Millisecond, 1, 0)
	l.tally(1500*time.Millisecond, 1, 1)
	l.tally(3200*time.Millisecond, 0, 0)
	w := l.Between(0, 4*time.Second)
	if w.Seconds != 4 || w.Zero != 2 || w.Mean != 0.5 || w.Errors != 1 {
		t.Errorf("got %+v", w)
	}
}
