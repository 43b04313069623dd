package replica

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestSplitHostPort(t *testing.T) {
	for _, c := range []struct {
		in   string
		host string
		port int
		err  string
	}{
		{"db2:3306", "db2", 3306, ""},
		{"[::1]:3307", "::1", 3307, ""},
		{"127.0.0.1:13317", "127.0.0.1", 13317, ""},
		{"db2", "", 0, "not host:port"},
		{"db2:0", "", 0, "1 to 65535"},
		{"db2:70000", "", 0, "1 to 65535"},
		{":3306", "", 0, "1 to 65535"},
		{"root:pw@tcp(db2:3306)/", "", 0, "host:port only"},
		{"user@db2:3306", "", 0, "host:port only"},
	} {
		h, p, err := SplitHostPort(c.in)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%q: err = %v, want %q", c.in, err, c.err)
		case c.err == "" && (err != nil || h != c.host || p != c.port):
			t.Errorf("%q: %q %d %v, want %q %d", c.in, h, p, err, c.host, c.port)
		}
	}
}

// TestSlowestAndOver: a replica that cannot be measured outranks any
// measured lag; among measured ones the highest wins; Over pauses for either.
func TestSlowestAndOver(t *testing.T) {
	m := &Monitor{}
	if _, ok := m.Slowest(); ok {
		t.Fatal("Slowest with no replicas reports one")
	}
	if why := Over(Lag{}, false, time.Second); why != "" {
		t.Errorf("no replicas: %q", why)
	}
	m.lags = []Lag{{Name: "a:1", Lag: 200 * time.Millisecond}, {Name: "b:1", Lag: 2 * time.Second}, {Name: "c:1", Lag: time.Second}}
	l, _ := m.Slowest()
	if l.Name != "b:1" {
		t.Errorf("slowest = %s, want b:1", l.Name)
	}
	if why := Over(l, true, 1500*time.Millisecond); !strings.Contains(why, "b:1 lags 2s") {
		t.Errorf("Over = %q", why)
	}
	if why := Over(l, true, 3*time.Second); why != "" {
		t.Errorf("under the limit: Over = %q", why)
	}
	m.lags[0].Err = errors.New("cannot be reached")
	l, _ = m.Slowest()
	if l.Name != "a:1" {
		t.Errorf("slowest = %s, want the unreachable a:1", l.Name)
	}
	if why := Over(l, true, time.Hour); !strings.Contains(why, "a:1: cannot be reached") {
		t.Errorf("an unreachable replica must pause the copy: Over = %q", why)
	}
}
