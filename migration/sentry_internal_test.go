package migration

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// mdlKey is the part of a table's metadata-lock key the server sorts by:
// its name, lower-cased when lower_case_table_names is set, and a zero byte.
func mdlKey(name string, lower bool) []byte {
	if lower {
		name = strings.ToLower(name)
	}
	return append([]byte(name), 0)
}

// TestSentrySortsAfterOriginal: for any table name, the sentry's name sorts
// after the original's and is a legal name (at most 64 characters, valid
// UTF-8), with and without case folding: the cut-over's RENAME must meet the
// original's lock first. Names are generated (the seed is printed).
func TestSentrySortsAfterOriginal(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	alphabet := []rune("abcXYZ_09$~éßЖ😀}|{")
	names := []string{"t", "T", "orders", "_t_new", strings.Repeat("a", 52), strings.Repeat("a", 53), strings.Repeat("a", 64),
		strings.Repeat("é", 64), strings.Repeat("~", 63) + "a", strings.Repeat("a", 60) + "~~~~"}
	for range 2000 {
		n := 1 + rng.IntN(64)
		var b strings.Builder
		for range n {
			b.WriteRune(alphabet[rng.IntN(len(alphabet))])
		}
		names = append(names, b.String())
	}
	for _, name := range names {
		s := sentryName(name)
		if s == "" {
			if strings.ContainsFunc(name, func(r rune) bool { return r < '~' }) {
				t.Errorf("no sentry name for %q, which has a character below '~'", name)
			}
			continue
		}
		if utf8.RuneCountInString(s) > 64 || !utf8.ValidString(s) || s == name {
			t.Errorf("sentry %q of %q: %d characters, valid %v", s, name, utf8.RuneCountInString(s), utf8.ValidString(s))
		}
		for _, lower := range []bool{false, true} {
			if bytes.Compare(mdlKey(s, lower), mdlKey(name, lower)) <= 0 {
				t.Errorf("sentry %q does not sort after %q (lower-cased %v)", s, name, lower)
			}
		}
	}
	if got := sentryName(strings.Repeat("é", 64)); got != "" {
		t.Errorf("sentry %q for a name with no character below '~'", got)
	}
}
