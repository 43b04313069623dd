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

// TestAheadOfRename: which sessions the cut-over must not let go ahead of its
// RENAME on MariaDB. A statement that takes the whole table is caught while
// it waits on any lock or names the table, past comments and in any case;
// reads and row writes never are; a name inside a longer one is not the
// table's.
func TestAheadOfRename(t *testing.T) {
	const wait = "Waiting for table metadata lock"
	cases := []struct {
		state, info string
		want        bool
	}{
		{wait, "TRUNCATE TABLE t", true},
		{wait, "truncate `t`", true},
		{wait, "/* app */ ALTER TABLE other ADD COLUMN c INT", true}, // waits on a lock in t's database: which table is not known
		{wait, "LOCK TABLES t WRITE", true},
		{wait, "-- x\nOPTIMIZE TABLE t", true},
		{wait, "CALL p()", true},
		{"Waiting for table flush", "FLUSH TABLES", false},
		{"altering table", "ALTER TABLE db.t ENGINE=InnoDB", true},
		{"altering table", "alter table `db`.`T` force", true},
		{"altering table", "ALTER TABLE tt ADD INDEX (a)", false},
		{"altering table", "ALTER TABLE t_2 ADD INDEX (a)", false},
		{"altering table", "ALTER TABLE orders ADD INDEX (t)", true}, // a name as a word: caught, the safe side
		{wait, "UPDATE t SET v = 1", false},
		{wait, " (SELECT * FROM t)", false},
		{wait, "/* x */ INSERT INTO t VALUES (1)", false},
		{wait, "delete from t", false},
		{wait, "REPLACE INTO t VALUES (1)", false},
		{wait, "WITH c AS (SELECT 1) UPDATE t SET v = 1", false},
		{"Sending data", "SHOW CREATE TABLE t", false},
		{"", "COMMIT", false},
		{wait, "SET STATEMENT lock_wait_timeout=60 FOR TRUNCATE TABLE t", true},
		{wait, "set statement max_statement_time=5, lock_wait_timeout=1 for\nALTER TABLE t ADD COLUMN c INT", true},
		{wait, "SET STATEMENT lock_wait_timeout=60 FOR UPDATE t SET v = 1", false},
		{wait, "SET @x = 1", false},
		{wait, "/*!TRUNCATE*/ TABLE t", true},
		{wait, "/*M!100000 TRUNCATE */ TABLE t", true},
		{wait, "/* unterminated TRUNCATE TABLE t", true},
	}
	for _, c := range cases {
		if got := aheadOfRename(c.state, c.info, "t", true); got != c.want {
			t.Errorf("aheadOfRename(%q, %q) = %v, want %v", c.state, c.info, got, c.want)
		}
		// In another database only a statement naming t counts.
		if got, want := aheadOfRename(c.state, c.info, "t", false), c.want && namesTable(c.info, "t"); got != want {
			t.Errorf("aheadOfRename(%q, %q) elsewhere = %v, want %v", c.state, c.info, got, want)
		}
	}
	if !namesTable("ALTER TABLE `a``b` FORCE", "a`b") || namesTable("ALTER TABLE `a``bc` FORCE", "a`b") {
		t.Error("a name with a backtick, doubled when quoted, is not found as a word")
	}
	// Generated: a table's name in a statement, with random neighbours, is
	// found exactly when no identifier character touches it (seed printed).
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	around := []string{"", " ", "`", ".", "(", ",", "_", "a", "9", "$", "é", "Z"}
	for i := 0; i < 2000; i++ {
		name := []string{"t", "orders", "T1", "a$b", "x_y"}[rng.IntN(5)]
		l, r := around[rng.IntN(len(around))], around[rng.IntN(len(around))]
		s := "DROP TABLE " + l + name + r
		word := func(x string) bool { return x == "" || strings.ContainsAny(x, " `.(,") }
		want := word(l) && word(r)
		if got := namesTable(s, name); got != want {
			t.Fatalf("namesTable(%q, %q) = %v, want %v (seed %d)", s, name, got, want, seed)
		}
	}
}
