package schema

import (
	"slices"
	"testing"
)

func TestMembers(t *testing.T) {
	for ct, want := range map[string][]string{
		"set('a','b')":           {"a", "b"},
		"set('a,b','it''s','c')": {"a,b", "it's", "c"},
		"enum('')":               {""},
		`set('x\'y','z')`:        {"x'y", "z"},
		"enum('s0','s1','s2')":   {"s0", "s1", "s2"},
	} {
		if got := Members(ct); !slices.Equal(got, want) {
			t.Errorf("Members(%q) = %q, want %q", ct, got, want)
		}
	}
}
