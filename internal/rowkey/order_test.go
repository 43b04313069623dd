package rowkey

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/sluicedb/sluice/internal/schema"
)

// ascending checks that SortPart orders values of c as listed, values in one
// inner slice being equal.
func ascending(t *testing.T, c Col, groups [][]any) {
	t.Helper()
	var prev string
	for i, g := range groups {
		for j, v := range g {
			p, err := c.SortPart(v)
			if err != nil {
				t.Fatalf("%s %v: %v", c.DataType, v, err)
			}
			switch {
			case j > 0 && p != prev:
				t.Errorf("%s: %v must equal %v", c.DataType, v, g[0])
			case j == 0 && i > 0 && p <= prev:
				t.Errorf("%s: %v must sort after %v", c.DataType, v, groups[i-1][0])
			}
			prev = p
		}
	}
}

func col(t *testing.T, c schema.Column) Col {
	t.Helper()
	cs, err := NewCols([]schema.Column{c})
	if err != nil {
		t.Fatal(err)
	}
	return cs[0]
}

func TestSortPartIntegers(t *testing.T) {
	ascending(t, col(t, schema.Column{Name: "i", DataType: "bigint"}), [][]any{
		{int64(math.MinInt64)}, {int64(-256)}, {int64(-1)}, {int64(0)}, {int64(1)}, {int64(255)}, {int64(math.MaxInt64)}})
	ascending(t, col(t, schema.Column{Name: "u", DataType: "bigint", Unsigned: true}), [][]any{
		{uint64(0)}, {uint64(1)}, {uint64(1 << 63)}, {uint64(math.MaxUint64)}})
	ascending(t, col(t, schema.Column{Name: "y", DataType: "year"}), [][]any{{int64(0)}, {int64(1901)}, {int64(2155)}})
	ascending(t, col(t, schema.Column{Name: "e", DataType: "enum", ColumnType: "enum('b','a')"}), [][]any{{uint64(1)}, {uint64(2)}})
	if _, err := col(t, schema.Column{Name: "i", DataType: "int"}).SortPart(uint64(1)); err == nil {
		t.Error("an unsigned value of a signed column was encoded")
	}
}

func TestSortPartDecimal(t *testing.T) {
	ascending(t, col(t, schema.Column{Name: "d", DataType: "decimal", ColumnType: "decimal(12,4)"}), [][]any{
		{"-99999999.9999"}, {"-100"}, {"-99.99"}, {"-10.5", "-10.50", "-010.5000"}, {"-10.4999"}, {"-10"},
		{"-9.99999"}, {"-1.05"}, {"-1"}, {"-0.5"}, {"-0.05", "-.05"}, {"-0.0001"},
		{"0", "0.00", "-0", "-0.0000", "+0", "000.000"}, {"0.0001"}, {"0.05"}, {"0.5", ".5", "0.50"},
		{"1", "1.0", "01"}, {"1.05"}, {"9.99999"}, {"10", "10.000"}, {"10.0001"}, {"10.5"}, {"99.99"},
		{"100"}, {"99999999.9999"}})
	for _, bad := range []string{"", "-", ".", "1e5", "1.2.3", "--1", "abc"} {
		if _, err := decimalSort(bad); err == nil {
			t.Errorf("%q was encoded", bad)
		}
	}
}

func TestSortPartTemporal(t *testing.T) {
	ascending(t, col(t, schema.Column{Name: "d", DataType: "datetime"}), [][]any{
		{"0000-00-00 00:00:00", "0000-00-00 00:00:00.000000"}, {"0000-00-00 00:00:00.5"},
		{"0001-01-01 00:00:00"}, {"1999-12-31 23:59:59.999999"},
		{"2000-01-01 00:00:00", "2000-01-01 00:00:00.0"}, {"2000-01-01 00:00:00.000001"},
		{"2000-01-01 00:00:01"}, {"2000-01-01 00:01:00"}, {"2000-01-01 01:00:00"}, {"2000-01-02 00:00:00"},
		{"2000-02-00 00:00:00"}, {"2000-02-01 00:00:00"}, {"9999-12-31 23:59:59.999999"}})
	ascending(t, col(t, schema.Column{Name: "d", DataType: "date"}), [][]any{
		{"0000-00-00"}, {"1000-01-01"}, {"2024-02-29"}, {"9999-12-31"}})
	ascending(t, col(t, schema.Column{Name: "t", DataType: "time"}), [][]any{
		{"-838:59:59", "-838:59:59.000000"}, {"-100:00:00"}, {"-99:59:59.999"}, {"-01:00:00"},
		{"-00:00:01"}, {"-00:00:00.5", "-00:00:00.500"}, {"-00:00:00.000001"},
		{"00:00:00", "00:00:00.000", "-00:00:00"}, {"00:00:00.000001"}, {"00:00:00.1"}, {"00:00:59"},
		{"00:01:00"}, {"23:59:59"}, {"24:00:00"}, {"99:00:00"}, {"100:00:00"}, {"838:59:59"}})
	for _, c := range []struct{ typ, v string }{
		{"datetime", "2000-01-01T00:00:00"}, {"datetime", "2000-1-01 00:00:00"}, {"date", "20000101"},
		{"datetime", "2000-01-01 00:00:00.1234567"}, {"time", "1:2:3"}, {"time", "00:00"}, {"time", "a0:00:00"},
	} {
		if _, err := col(t, schema.Column{Name: "x", DataType: c.typ}).SortPart(c.v); err == nil {
			t.Errorf("%s %q was encoded", c.typ, c.v)
		}
	}
}

func TestSortPartBinary(t *testing.T) {
	ascending(t, col(t, schema.Column{Name: "b", DataType: "varbinary", MaxLength: 4}), [][]any{
		{[]byte{}}, {[]byte{0}}, {[]byte{0, 0}}, {[]byte{0, 1}}, {[]byte{1}}, {[]byte("a")}, {[]byte("a\x00")},
		{[]byte("ab")}, {[]byte{0xff}}})
	ascending(t, col(t, schema.Column{Name: "b", DataType: "binary", MaxLength: 3}), [][]any{
		{[]byte{}, []byte{0}, []byte{0, 0, 0}}, {[]byte{0, 0, 1}}, {[]byte("a"), []byte("a\x00\x00")}, {[]byte("a\x00\x01")}})
}

func TestSortKeyComparesByColumn(t *testing.T) {
	// As one concatenated string ("a"+"\x02" vs "a\x01"+"\x00") the order
	// would be the other way round.
	a, b := SortKey{"a", "\x02"}, SortKey{"a\x01", "\x00"}
	if a.Compare(b) >= 0 || b.Compare(a) <= 0 || a.Compare(SortKey{"a", "\x02"}) != 0 {
		t.Error("sort keys must compare column by column")
	}
}

func TestWeightExpr(t *testing.T) {
	c := col(t, schema.Column{Name: "s", DataType: "varchar", Charset: "utf8mb4", Collation: "utf8mb4_general_ci", MaxLength: 64})
	if !c.Collated() {
		t.Fatal("a VARCHAR is ordered by its collation")
	}
	if got, want := c.WeightExpr(), "WEIGHT_STRING(CONVERT(? USING utf8mb4) COLLATE `utf8mb4_general_ci`)"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	if _, err := c.SortPart([]byte("x")); err == nil {
		t.Error("a collated column was encoded without the server")
	}
}

// TestPadSpaceWeight compares weight strings of two-byte units, a space
// weighing "_ ", as a PAD SPACE collation does: padded with spaces.
func TestPadSpaceWeight(t *testing.T) {
	const sp = "_ "
	const lo, hi = "_\x01", "_!" // below and above a space
	groups := [][]string{
		{lo + lo}, {lo, lo + sp}, {lo + sp + hi}, {"", sp, sp + sp}, {sp + sp + hi}, {sp + hi},
		{hi, hi + sp}, {hi + sp + hi}, {hi + hi}, {"_a"},
	}
	var prev string
	for i, g := range groups {
		for j, w := range g {
			e, err := PadSpaceWeight(w, sp)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case j > 0 && e != prev:
				t.Errorf("%q must equal %q", w, g[0])
			case j == 0 && i > 0 && e <= prev:
				t.Errorf("%q must sort after %q", w, groups[i-1][0])
			}
			prev = e
		}
	}
	// Random weights against the rule itself: pad both with spaces, compare.
	rng := rand.New(rand.NewPCG(1, 2))
	units := []string{lo, sp, hi, "_a"}
	gen := func() string {
		var w string
		for range rng.IntN(6) {
			w += units[rng.IntN(len(units))]
		}
		return w
	}
	for range 20000 {
		a, b := gen(), gen()
		pa, pb := a, b
		for len(pa) < len(pb) {
			pa += sp
		}
		for len(pb) < len(pa) {
			pb += sp
		}
		ea, _ := PadSpaceWeight(a, sp)
		eb, _ := PadSpaceWeight(b, sp)
		if strings.Compare(ea, eb) != strings.Compare(pa, pb) {
			t.Fatalf("%q vs %q: encoded %d, padded %d", a, b, strings.Compare(ea, eb), strings.Compare(pa, pb))
		}
	}
	if _, err := PadSpaceWeight("abc", sp); err == nil {
		t.Error("a weight that is not in whole units was encoded")
	}
}
