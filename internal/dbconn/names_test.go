package dbconn

import (
	"strings"
	"testing"
)

func TestSameName(t *testing.T) {
	for _, c := range []struct {
		a, b string
		same bool
	}{
		{"id", "ID", true},
		{"Straße", "STRAßE", true},
		{"ÉTÉ", "été", true},
		{"ΣΊΣ", "σίσ", true},
		{"ДОМ", "дом", true},
		{"İ", "i", true},
		{"s", "ſ", false},
		{"σ", "ς", false},
		{"µ", "μ", false},
		{"ß", "ẞ", false},
		{"θ", "ϑ", false},
		{"ε", "ϵ", false},
		{"\u212a", "k", false}, // the Kelvin sign: the server may join them; sluice then refuses, never mixes
		{"a", "ab", false},
		{"x_1", "X_1", true},
		{"😀", "?", true}, // MySQL stores it so
		{"a😀", "a𝄞", true},
		{"😀", "x", false},
	} {
		if got := SameName(c.a, c.b); got != c.same {
			t.Errorf("SameName(%q, %q) = %v, want %v", c.a, c.b, got, c.same)
		}
		if got := SameName(c.b, c.a); got != c.same {
			t.Errorf("SameName(%q, %q) = %v, want %v", c.b, c.a, got, c.same)
		}
	}
	// Never joins what case folding would not: SameName is stricter.
	for r := rune(0); r < 0x3000; r++ {
		for _, s := range []rune{r + 1, r + 32, r - 32, r + 1, 0x73, 0x3C3} {
			if SameName(string(r), string(s)) && !strings.EqualFold(string(r), string(s)) {
				t.Fatalf("SameName joins %U and %U, which case folding keeps apart", r, s)
			}
		}
	}
}
