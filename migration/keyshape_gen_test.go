package migration_test

// Key column types, value generators and concurrent writers for
// keyshape_test.go: every type rowkey.NewCols accepts as a key part, with
// skewed values (extremes, zero, negatives, empty and all-space strings, zero
// bytes, values equal under the collation).

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/testdb"
)

// ksType is one key column type.
type ksType struct {
	ddl     string
	special []any                  // boundary values, drawn often
	random  func(r *rand.Rand) any // any value of the type
	domain  float64                // roughly how many distinct values it has
	// ph is the placeholder the writers compare a bound value with: a
	// DECIMAL compared with a string is compared as a DOUBLE, so it is cast.
	ph string
	// recase lists expressions of the column (%s) that change the stored
	// bytes but not the key under the collation (a writer's key update that
	// keeps the row's identity).
	recase []string
	// canon turns a generated value into the one the server stores, so
	// the writers' WHERE finds the row (CHAR drops trailing spaces,
	// BINARY(n) pads with zero bytes).
	canon func(any) any
	// refuse is the preflight error sluice must give for this key type
	// ("": the type is supported).
	refuse string
	part   string // a prefix length in the key, "(3)"
}

// ksDist is how a column draws its values.
type ksDist struct {
	hot  any     // a value drawn with probability hotP (a long run of one key part)
	hotP float64 //
	spec float64 // probability of a special value
}

func (ty ksType) draw(r *rand.Rand, d ksDist) any {
	var v any
	switch p := r.Float64(); {
	case d.hotP > 0 && p < d.hotP:
		v = d.hot
	case len(ty.special) > 0 && p < d.hotP+d.spec:
		v = ty.special[r.IntN(len(ty.special))]
	default:
		v = ty.random(r)
	}
	if ty.canon != nil {
		v = ty.canon(v)
	}
	return v
}

// ksRandomType draws a key column type. n is the table's target size: dense
// integer windows are about that wide.
func ksRandomType(r *rand.Rand, n int) ksType {
	switch p := r.IntN(100); {
	case p < 30:
		return ksInteger(r, n, -1, r.IntN(2) == 0)
	case p < 52:
		return ksString(r)
	case p < 61:
		return ksBinary(r)
	case p < 68:
		return ksDecimal(r)
	case p < 84:
		return ksTemporal(r, n)
	default:
		return ksSmallDomain(r)
	}
}

var ksIntNames = []string{"TINYINT", "SMALLINT", "MEDIUMINT", "INT", "BIGINT"}
var ksIntBits = []int{8, 16, 24, 32, 64}

// ksInteger is an integer type (width index w, or random if w < 0).
func ksInteger(r *rand.Rand, n, w int, unsigned bool) ksType {
	if w < 0 {
		w = r.IntN(len(ksIntNames))
	}
	bits := ksIntBits[w]
	window := uint64(4*n + 16)
	ty := ksType{ddl: ksIntNames[w], domain: math.Pow(2, float64(bits)), ph: "?"}
	if unsigned {
		ty.ddl += " UNSIGNED"
		hi := uint64(math.MaxUint64) >> (64 - bits)
		half := hi/2 + 1 // 2^(bits-1)
		ty.special = []any{uint64(0), uint64(1), half - 1, half, half + 1, hi - 1, hi}
		base := []uint64{0, half - min(half, window/2), hi - min(hi, window-1)}[r.IntN(3)]
		ty.random = func(r *rand.Rand) any {
			if r.IntN(3) == 0 {
				return r.Uint64() >> (64 - bits) // anywhere
			}
			return min(hi, base+r.Uint64N(window)) // dense
		}
		return ty
	}
	lo, hi := int64(-1)<<(bits-1), int64(uint64(1)<<(bits-1)-1)
	ty.special = []any{lo, lo + 1, int64(-1), int64(0), int64(1), hi - 1, hi}
	base := []int64{lo, -int64(min(window/2, uint64(hi))), hi - int64(min(uint64(hi), window-1))}[r.IntN(3)]
	ty.random = func(r *rand.Rand) any {
		if r.IntN(3) == 0 {
			return int64(r.Uint64()) >> (64 - bits)
		}
		return max(lo, min(hi, base+r.Int64N(int64(window))))
	}
	return ty
}

// ksColl is a character set and collation with an alphabet that exercises it.
type ksColl struct {
	cs, coll string
	alpha    []string
	ci, pad  bool // case-insensitive; PAD SPACE
}

var (
	ksLatin = []string{"a", "A", "b", "á", "Á", "ä", "ß", "s", "ss", "0", "9", " ", "~", "é", "ÿ", "\t", "\x00", "_", "y", "ü", "\\", "'"}
	ksUTF   = append(append([]string{}, ksLatin...), "😀", "𝄞", "中", "Ω", "ǅ", "ǆ", "\u00a0", "e\u0301")
	ksASCII = []string{"a", "A", "b", "z", "Z", "0", " ", "\t", "\x00", "~", "\\", "'"}
	// cp932: ソ, 表 and 能 end in byte 0x5C, a backslash in ASCII.
	ksSJIS  = []string{"a", "A", "ソ", "表", "能", "予", "ｱ", "ー", " ", "0", "\\"}
	ksGBK   = []string{"a", "A", "b", "中", "文", "字", " ", "0", "\x00"}
	ksColls = []ksColl{
		{"latin1", "latin1_swedish_ci", ksLatin, true, true},
		{"latin1", "latin1_bin", ksLatin, false, true},
		{"utf8mb4", "utf8mb4_0900_ai_ci", ksUTF, true, false},
		{"utf8mb4", "utf8mb4_0900_as_cs", ksUTF, false, false},
		{"utf8mb4", "utf8mb4_bin", ksUTF, false, true},
		{"utf8mb4", "utf8mb4_0900_bin", ksUTF, false, false},
		{"utf8mb4", "utf8mb4_general_ci", ksUTF, true, true},
		{"ascii", "ascii_general_ci", ksASCII, true, true},
		{"gbk", "gbk_chinese_ci", ksGBK, true, true},
		{"gbk", "gbk_bin", ksGBK, false, true},
		{"cp932", "cp932_japanese_ci", ksSJIS, true, true},
		{"utf16", "utf16_general_ci", ksUTF, true, true},
		{"utf32", "utf32_bin", ksUTF, false, true},
	}
)

// ksStr builds a string of at most n characters from alpha.
func ksStr(r *rand.Rand, alpha []string, n int) string {
	l := r.IntN(min(n, 6) + 1)
	if r.IntN(5) == 0 {
		l = r.IntN(n + 1)
	}
	var b strings.Builder
	for chars := 0; ; {
		a := alpha[r.IntN(len(alpha))]
		c := len([]rune(a))
		if chars+c > l {
			return b.String()
		}
		b.WriteString(a)
		chars += c
	}
}

func ksString(r *rand.Rand) ksType {
	return ksStringOf(r, ksColls[r.IntN(len(ksColls))], []int{1, 2, 5, 16, 64}[r.IntN(5)], r.IntN(3) == 0)
}

// ksStringOf is CHAR(n) or VARCHAR(n) in collation c.
func ksStringOf(r *rand.Rand, c ksColl, n int, char bool) ksType {
	kind := "VARCHAR"
	if char {
		kind = "CHAR"
	}
	ty := ksType{ddl: fmt.Sprintf("%s(%d) CHARACTER SET %s COLLATE %s", kind, n, c.cs, c.coll), ph: "?",
		domain: math.Pow(float64(len(c.alpha)), float64(min(n, 8)))}
	for _, s := range []string{"", " ", "  ", "a", "A", "a ", " a", "\x00", "0", "ß", "ss",
		strings.Repeat(c.alpha[len(c.alpha)-1], n), strings.Repeat(" ", n), strings.Repeat("a", n)} {
		if len([]rune(s)) <= n && ksFits(s, c.alpha) {
			ty.special = append(ty.special, s)
		}
	}
	ty.random = func(r *rand.Rand) any { return ksStr(r, c.alpha, n) }
	if char {
		ty.canon = func(v any) any { return strings.TrimRight(v.(string), " ") }
	}
	if c.ci {
		ty.recase = append(ty.recase, "UPPER(%[1]s)", "LOWER(%[1]s)")
	}
	if c.pad && !char {
		// Under PAD SPACE 'a' and 'a ' are one key.
		ty.recase = append(ty.recase, fmt.Sprintf("IF(%%[1]s LIKE '%%%% ', TRIM(TRAILING ' ' FROM %%[1]s), IF(CHAR_LENGTH(%%[1]s) < %d, CONCAT(%%[1]s, ' '), %%[1]s))", n))
	}
	return ty
}

// ksFits reports whether s is made of alpha's characters only.
func ksFits(s string, alpha []string) bool {
	for _, ch := range s {
		ok := false
		for _, a := range alpha {
			if strings.ContainsRune(a, ch) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

var ksBytes = []byte{0x00, 0x01, 0x20, 'a', 'A', 0x7f, 0x80, 0xff}

func ksBinary(r *rand.Rand) ksType {
	return ksBinaryOf([]int{1, 4, 16}[r.IntN(3)], r.IntN(2) == 0, r.IntN(3) == 0)
}

// ksBinaryOf is BINARY(n) (fixed) or VARBINARY(n); alt spells BINARY(n) as
// CHAR(n) CHARACTER SET binary.
func ksBinaryOf(n int, fixed, alt bool) ksType {
	ddl := fmt.Sprintf("VARBINARY(%d)", n)
	if fixed {
		ddl = fmt.Sprintf("BINARY(%d)", n)
		if alt {
			ddl = fmt.Sprintf("CHAR(%d) CHARACTER SET binary", n)
		}
	}
	ty := ksType{ddl: ddl, ph: "?", domain: math.Pow(float64(len(ksBytes)), float64(min(n, 8)))}
	for _, b := range [][]byte{{}, {0}, {0, 0}, {'a', 0}, {0, 'a'}, {0x20}, {0xff}, []byte(strings.Repeat("\xff", n)), make([]byte, n)} {
		if len(b) <= n {
			ty.special = append(ty.special, b)
		}
	}
	ty.random = func(r *rand.Rand) any {
		b := make([]byte, r.IntN(n+1))
		for i := range b {
			b[i] = ksBytes[r.IntN(len(ksBytes))]
		}
		return b
	}
	ty.canon = func(v any) any {
		b := append([]byte{}, v.([]byte)...)
		for fixed && len(b) < n {
			b = append(b, 0)
		}
		return b
	}
	return ty
}

func ksDecimal(r *rand.Rand) ksType {
	p := []int{1, 4, 10, 19, 30, 65}[r.IntN(6)]
	s := r.IntN(min(p, 30) + 1)
	if r.IntN(4) == 0 {
		s = 0
	}
	ty := ksType{ddl: fmt.Sprintf("DECIMAL(%d,%d)", p, s), ph: fmt.Sprintf("CAST(? AS DECIMAL(%d,%d))", p, s), domain: math.Pow(10, float64(p))}
	num := func(neg bool, ip, fp string) string {
		if ip == "" {
			ip = "0"
		}
		v := ip
		if s > 0 {
			v += "." + fp
		}
		if neg {
			v = "-" + v
		}
		return v
	}
	nines := func(k int) string { return strings.Repeat("9", k) }
	tiny := strings.Repeat("0", max(s-1, 0)) + "1"
	ty.special = []any{num(false, "", strings.Repeat("0", s)), num(false, nines(p-s), nines(s)), num(true, nines(p-s), nines(s))}
	if s > 0 {
		ty.special = append(ty.special, num(false, "", tiny), num(true, "", tiny))
	}
	if p > s {
		ty.special = append(ty.special, num(false, "1", strings.Repeat("0", s)), num(true, "1", strings.Repeat("0", s)))
	}
	digits := func(r *rand.Rand, k int) string {
		b := make([]byte, k)
		for i := range b {
			b[i] = byte('0' + r.IntN(10))
		}
		return string(b)
	}
	ty.random = func(r *rand.Rand) any {
		ip := strings.TrimLeft(digits(r, r.IntN(p-s+1)), "0")
		return num(r.IntN(2) == 0, ip, digits(r, s))
	}
	return ty
}

// ksTemporal is DATE, TIME(fsp), DATETIME(fsp) or TIMESTAMP(fsp).
func ksTemporal(r *rand.Rand, n int) ksType {
	fsp := []int{0, 0, 1, 3, 6}[r.IntN(5)]
	frac := func(r *rand.Rand) string {
		if fsp == 0 {
			return ""
		}
		return "." + fmt.Sprintf("%06d", r.IntN(1e6))[:fsp]
	}
	fixed := func(digits string) string {
		if fsp == 0 {
			return ""
		}
		return "." + strings.Repeat(digits, fsp)
	}
	window := int64(4*n + 16)
	span := func(lo, hi int64) func(r *rand.Rand) int64 {
		base := []int64{lo, (lo + hi) / 2, hi - window}[r.IntN(3)]
		return func(r *rand.Rand) int64 {
			if r.IntN(3) == 0 {
				return lo + r.Int64N(hi-lo+1)
			}
			return max(lo, min(hi, base+r.Int64N(window)))
		}
	}
	day := func(s int64) time.Time { return time.Unix(s, 0).UTC() }
	dateLo := time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	dateHi := time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC).Unix()
	switch r.IntN(4) {
	case 0:
		pick := span(dateLo/86400, dateHi/86400)
		return ksType{ddl: "DATE", ph: "?", domain: 3e6,
			special: []any{"1000-01-01", "9999-12-31", "1970-01-01", "2000-02-29", "2024-12-31"},
			random:  func(r *rand.Rand) any { return day(pick(r) * 86400).Format("2006-01-02") }}
	case 1:
		pick := span(-(838*3600 + 59*60 + 58), 838*3600+59*60+58)
		ty := ksType{ddl: fmt.Sprintf("TIME(%d)", fsp), ph: "?", domain: 6e6,
			special: []any{"-838:59:59", "838:59:59", "00:00:00", "-00:00:01", "00:00:01"}}
		if fsp > 0 {
			ty.special = append(ty.special, "-00:00:00"+fixed("0")[:fsp]+"1", "00:00:00"+fixed("0")[:fsp]+"1",
				"-00:00:00"+fixed("9"), "-838:59:58"+fixed("9"))
		}
		ty.random = func(r *rand.Rand) any {
			s, sign := pick(r), ""
			if s < 0 {
				s, sign = -s, "-"
			}
			return fmt.Sprintf("%s%02d:%02d:%02d%s", sign, s/3600, s/60%60, s%60, frac(r))
		}
		return ty
	case 2:
		pick := span(dateLo, dateHi)
		return ksType{ddl: fmt.Sprintf("DATETIME(%d)", fsp), ph: "?", domain: 3e11,
			special: []any{"1000-01-01 00:00:00", "9999-12-31 23:59:59" + fixed("9"), "1970-01-01 00:00:00", "2038-01-19 03:14:08"},
			random:  func(r *rand.Rand) any { return day(pick(r)).Format("2006-01-02 15:04:05") + frac(r) }}
	default:
		pick := span(1, math.MaxInt32)
		return ksType{ddl: fmt.Sprintf("TIMESTAMP(%d)", fsp), ph: "?", domain: 2e9,
			special: []any{"1970-01-01 00:00:01", "2038-01-19 03:14:07" + fixed("9"), "2000-01-01 00:00:00", "2024-03-31 01:00:00"},
			random:  func(r *rand.Rand) any { return day(pick(r)).Format("2006-01-02 15:04:05") + frac(r) }}
	}
}

// ksSmallDomain is YEAR, ENUM, SET or BIT(n).
func ksSmallDomain(r *rand.Rand) ksType {
	switch r.IntN(4) {
	case 0:
		return ksType{ddl: "YEAR", ph: "?", domain: 256, special: []any{int64(0), int64(1901), int64(2155), int64(2000), int64(1970)},
			random: func(r *rand.Rand) any { return int64(1901 + r.IntN(255)) }}
	case 1:
		// Members out of alphabetical order: ENUM sorts and compares by index.
		members := []string{"zz", "", "b", "a", "x y", "0", "Ω"}
		if r.IntN(2) == 0 {
			members = nil
			for i := 299; i >= 0; i-- { // over 255 members: two bytes in the binlog
				members = append(members, fmt.Sprintf("m%03d", i))
			}
		}
		quoted := make([]string, len(members))
		for i, m := range members {
			quoted[i] = "'" + m + "'"
		}
		return ksType{ddl: "ENUM(" + strings.Join(quoted, ",") + ")", ph: "?", domain: float64(len(members)),
			special: []any{members[0], members[1], members[len(members)-1]},
			random:  func(r *rand.Rand) any { return members[r.IntN(len(members))] }}
	case 2:
		return ksSet([]int{3, 8, 64}[r.IntN(3)])
	default:
		n := []int{1, 7, 8, 33, 64}[r.IntN(5)]
		mask := uint64(math.MaxUint64) >> (64 - n)
		return ksType{ddl: fmt.Sprintf("BIT(%d)", n), ph: "?", domain: math.Pow(2, float64(n)),
			special: []any{uint64(0), uint64(1), mask, uint64(1) << (n - 1)},
			random:  func(r *rand.Rand) any { return r.Uint64() & mask }}
	}
}

// ksSet is SET('s0', ..., 's<n-1>'), bound as its number.
func ksSet(n int) ksType {
	var names []string
	for i := 0; i < n; i++ {
		names = append(names, fmt.Sprintf("'s%d'", i))
	}
	mask := uint64(math.MaxUint64) >> (64 - n)
	refuse := ""
	if n > 53 {
		// The server compares a SET with a number as a double.
		refuse = "cannot compare exactly"
	}
	return ksType{ddl: "SET(" + strings.Join(names, ",") + ")", ph: "?", domain: math.Pow(2, float64(n)), refuse: refuse,
		special: []any{uint64(0), mask, uint64(1), uint64(1) << (n - 1)},
		random:  func(r *rand.Rand) any { return r.Uint64() & mask }}
}

// ksUnsupported is a key type sluice must refuse at preflight.
func ksUnsupported(r *rand.Rand) ksType {
	ty := ksType{ddl: []string{"FLOAT", "DOUBLE"}[r.IntN(2)], ph: "?", domain: 1e9, refuse: "cannot compare exactly",
		special: []any{0.0, -1.5, 1e30}}
	ty.random = func(r *rand.Rand) any { return float64(r.IntN(1 << 20)) }
	return ty
}

// ksPrefixed is a string key part indexed by a prefix, which sluice must
// refuse.
func ksPrefixed(r *rand.Rand) ksType {
	ty := ksStringOf(r, ksColls[r.IntN(len(ksColls))], 16, false)
	ty.part, ty.refuse = "(3)", "column prefix"
	return ty
}

// ksPayload returns values for the non-key columns x, p, b.
func ksPayload(r *rand.Rand) []any {
	vals := []any{nil, nil, nil}
	if r.IntN(6) > 0 {
		vals[0] = int64(int32(r.Uint32()))
	}
	if r.IntN(6) > 0 {
		vals[1] = ksStr(r, ksUTF, 40)
	}
	if r.IntN(6) > 0 {
		b := make([]byte, r.IntN(17))
		for i := range b {
			b[i] = ksBytes[r.IntN(len(ksBytes))]
		}
		vals[2] = b
	}
	return vals
}

// ksDump returns every row of table, each column as its stored bytes (CAST
// AS BINARY; TIMESTAMP in UTC), quoted, joined by " | ", sorted in Go. A
// table's rows have no order, and the server's own sort is no oracle: MariaDB
// sorts utf8mb4_0900_bin under a DESC key one way by the index and another by
// a sort, and sizes CAST(DECIMAL(1,1) AS BINARY) at 3 bytes, so its sort key
// cuts "-0.5" to "-0." and leaves ties in any order.
func ksDump(t *testing.T, db *testdb.DB, table string, cols []string) []string {
	t.Helper()
	exprs := make([]string, len(cols))
	for i, c := range cols {
		exprs[i] = "CAST(`" + c + "` AS BINARY)"
	}
	rows, err := db.Query("SELECT " + strings.Join(exprs, ", ") + " FROM `" + table + "`")
	if err != nil {
		t.Fatalf("dump %s: %v", table, err)
	}
	defer rows.Close()
	var out []string
	raw := make([]sql.RawBytes, len(cols))
	ptrs := make([]any, len(cols))
	for i := range raw {
		ptrs[i] = &raw[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		vals := make([]string, len(raw))
		for i, v := range raw {
			vals[i] = "NULL"
			if v != nil {
				vals[i] = strconv.Quote(string(v))
			}
		}
		out = append(out, strings.Join(vals, " | "))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// ksCompare reports rows missing from got, rows only in got, and rows out of
// order.
func ksCompare(t *testing.T, what string, got, want []string) {
	t.Helper()
	if slices.Equal(got, want) {
		return
	}
	count := map[string]int{}
	for _, w := range want {
		count[w]++
	}
	var extra, missing []string
	for _, g := range got {
		if count[g] > 0 {
			count[g]--
		} else {
			extra = append(extra, g)
		}
	}
	for _, w := range want {
		if count[w] > 0 {
			count[w]--
			missing = append(missing, w)
		}
	}
	t.Errorf("%s %d rows, want %d: %d missing, %d unexpected", what, len(got), len(want), len(missing), len(extra))
	for i := range min(len(missing), 5) {
		t.Errorf("  missing:    %s", missing[i])
	}
	for i := range min(len(extra), 5) {
		t.Errorf("  unexpected: %s", extra[i])
	}
	if len(missing) == 0 && len(extra) == 0 {
		t.Errorf("  same rows in another order")
	}
}

// ksWriters write concurrently to ks. Writer i owns the keys whose index in
// the key list is i modulo the writer count; those keys are distinct under
// the collation, so no two writers touch one row and replaying each writer's
// statements in its order onto the reference table gives the final table.
// Keys move between a writer's live and free sets: inserted, moved to a free
// key, re-cased (same key under the collation, other bytes), deleted.
type ksWriters struct {
	sh    *ksShape
	keys  [][]any
	logs  [][]stmt
	ops   atomic.Int64
	alive atomic.Int32
	done  chan struct{}
	once  sync.Once
	wg    sync.WaitGroup
	t     *testing.T
}

func ksStartWriters(t *testing.T, db *testdb.DB, sh *ksShape, keys [][]any, loaded int) *ksWriters {
	w := &ksWriters{sh: sh, keys: keys, logs: make([][]stmt, sh.writers), done: make(chan struct{}), t: t}
	t.Cleanup(w.stop) // a test that fails early stops its writers too
	for i := 0; i < sh.writers; i++ {
		var live, free []int
		for j := i; j < len(keys); j += sh.writers {
			if j < loaded {
				live = append(live, j)
			} else {
				free = append(free, j)
			}
		}
		if len(live)+len(free) == 0 {
			continue
		}
		conn, err := db.Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		w.alive.Add(1)
		w.wg.Add(1)
		go w.run(i, conn, live, free)
	}
	return w
}

func (w *ksWriters) run(i int, conn *sql.Conn, live, free []int) {
	defer w.wg.Done()
	defer w.alive.Add(-1)
	defer conn.Close()
	sh := w.sh
	r := rand.New(rand.NewPCG(sh.seed, uint64(i)))
	where := " WHERE " + ksWhere(sh)
	names := sh.cols()
	insert := "INSERT INTO `ks` (`" + strings.Join(names, "`, `") + "`) VALUES (" + strings.TrimSuffix(strings.Repeat("?, ", len(names)), ", ") + ")"
	sets := make([]string, len(sh.key))
	for j := range sets {
		sets[j] = fmt.Sprintf("`k%d` = ?", j)
	}
	move := "UPDATE `ks` SET " + strings.Join(sets, ", ") + where
	take := func(s *[]int) int { // removes and returns a random element
		j := r.IntN(len(*s))
		v := (*s)[j]
		(*s)[j] = (*s)[len(*s)-1]
		*s = (*s)[:len(*s)-1]
		return v
	}
	for {
		select {
		case <-w.done:
			return
		default:
		}
		var s stmt
		exact := true // the statement must affect exactly one row
		p := r.IntN(100)
		switch {
		case len(free) > 0 && (p < 25 || len(live) == 0):
			j := take(&free)
			s = stmt{insert, append(slices.Clone(w.keys[j]), ksPayload(r)...)}
			live = append(live, j)
		case len(live) > 0 && p < 55:
			j := live[r.IntN(len(live))]
			s, exact = stmt{"UPDATE `ks` SET `x` = ?, `p` = ?, `b` = ?" + where, append(ksPayload(r), w.keys[j]...)}, false
		case len(live) > 0 && len(free) > 0 && p < 75:
			j, m := take(&live), take(&free)
			s = stmt{move, append(slices.Clone(w.keys[m]), w.keys[j]...)}
			live, free = append(live, m), append(free, j)
		case len(live) > 0 && p < 85:
			c := r.IntN(len(sh.key))
			if len(sh.key[c].recase) == 0 {
				continue
			}
			col := fmt.Sprintf("`k%d`", c)
			expr := fmt.Sprintf(sh.key[c].recase[r.IntN(len(sh.key[c].recase))], col)
			s, exact = stmt{"UPDATE `ks` SET " + col + " = " + expr + where, w.keys[live[r.IntN(len(live))]]}, false
		case len(live) > 0:
			j := take(&live)
			s = stmt{"DELETE FROM `ks`" + where, w.keys[j]}
			free = append(free, j)
		default:
			continue
		}
		res, err := conn.ExecContext(context.Background(), s.sql, s.args...)
		for retry := 0; err != nil && dbconn.Retryable(err) && retry < 20; retry++ {
			res, err = conn.ExecContext(context.Background(), s.sql, s.args...)
		}
		if err == nil && exact {
			if n, _ := res.RowsAffected(); n != 1 {
				err = fmt.Errorf("affected %d rows, want 1", n)
			}
		}
		if err != nil {
			w.t.Errorf("%s writer %d: %s %v: %v", sh.tag(), i, s.sql, s.args, err)
			return
		}
		w.logs[i] = append(w.logs[i], s)
		w.ops.Add(1)
	}
}

// progress waits until the writers made n more writes, or for at most d.
func (w *ksWriters) progress(n int64, d time.Duration) {
	target, deadline := w.ops.Load()+n, time.Now().Add(d)
	for w.ops.Load() < target && w.alive.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
}

func (w *ksWriters) stop() {
	w.once.Do(func() { close(w.done) })
	w.wg.Wait()
}

func (w *ksWriters) count() int64 {
	if w == nil {
		return 0
	}
	return w.ops.Load()
}

// replay applies each writer's statements, in its order, to table ref.
func (w *ksWriters) replay(t *testing.T, db *testdb.DB, ref string) {
	t.Helper()
	for i, log := range w.logs {
		for _, s := range log {
			q := strings.Replace(s.sql, "`ks`", "`"+ref+"`", 1)
			if _, err := db.Exec(q, s.args...); err != nil {
				t.Fatalf("%s replay writer %d: %s: %v", w.sh.tag(), i, q, err)
			}
		}
	}
}
