package checksum

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/sluicedb/sluice/internal/rowkey"
	"github.com/sluicedb/sluice/internal/testdb"
)

// keyShape is a table shape for the generated CompareKeys cases: its key
// columns, a generator of one key's SQL literals, and an ALTER (if any) that
// gives the new table's key another collation.
type keyShape struct {
	name, key string
	gen       func(r *rand.Rand) string
	alterDst  string
}

func caseyString(r *rand.Rand, alphabet []string) string {
	var sb strings.Builder
	for range 1 + r.IntN(4) {
		sb.WriteString(alphabet[r.IntN(len(alphabet))])
	}
	if r.IntN(4) == 0 {
		sb.WriteString(strings.Repeat(" ", 1+r.IntN(2)))
	}
	return "'" + sb.String() + "'"
}

var keyShapes = []keyShape{
	{name: "varchar uca ai_ci", key: "id VARCHAR(12) COLLATE utf8mb4_0900_ai_ci NOT NULL",
		gen: func(r *rand.Rand) string {
			return caseyString(r, []string{"a", "A", "á", "b", "B", "ß", "ss", "c", "d"})
		}},
	{name: "varchar latin1 PAD SPACE", key: "id VARCHAR(12) CHARACTER SET latin1 COLLATE latin1_swedish_ci NOT NULL",
		gen: func(r *rand.Rand) string {
			return caseyString(r, []string{"a", "A", "é", "E", "e", "b", "c", "d", "f"})
		}},
	{name: "char general_ci", key: "id CHAR(8) COLLATE utf8mb4_general_ci NOT NULL",
		gen: func(r *rand.Rand) string { return caseyString(r, []string{"a", "A", "ä", "b", "B", "c", "d", "e"}) }},
	{name: "int and varchar as_cs", key: "a INT NOT NULL, b VARCHAR(10) COLLATE utf8mb4_0900_as_cs NOT NULL",
		gen: func(r *rand.Rand) string {
			return fmt.Sprintf("%d, %s", r.IntN(3)-1, caseyString(r, []string{"a", "A", "á", "b"}))
		}},
	{name: "varbinary", key: "id VARBINARY(8) NOT NULL",
		gen: func(r *rand.Rand) string { return caseyString(r, []string{"a", "A", "\\0", "b"}) }},
	{name: "enum and int", key: "e ENUM('x','y','z') NOT NULL, n INT NOT NULL",
		gen: func(r *rand.Rand) string { return fmt.Sprintf("'%c', %d", 'x'+rune(r.IntN(3)), r.IntN(30)) }},
	{name: "datetime", key: "d DATETIME(3) NOT NULL",
		gen: func(r *rand.Rand) string {
			return fmt.Sprintf("'2024-02-29 12:%02d:0%d.%d'", r.IntN(10), r.IntN(6), r.IntN(3))
		}},
	{name: "new table's key case-sensitive", key: "id VARCHAR(12) COLLATE utf8mb4_0900_ai_ci NOT NULL",
		// No trailing spaces: utf8mb4_bin pads them, the original's key does not.
		gen: func(r *rand.Rand) string {
			return strings.TrimRight(caseyString(r, []string{"a", "A", "b", "B", "c", "d"}), " '") + "'"
		},
		alterDst: "MODIFY id VARCHAR(12) COLLATE utf8mb4_bin NOT NULL"},
}

// TestCompareKeysMatchesEachKeysPredicate generates tables whose keys differ
// in case, accent and trailing spaces, an original and a new table that
// differ by deleted, changed and stale rows (and, in some rounds, a new table
// whose key is not unique), and requested keys that are present, deleted,
// never there, or another case of a row's key. The oracle reads each key on
// its own: the rows its predicate selects in each table. CompareKeys must
// report the same presence and equality for every key, or fail where a key
// selects two rows. The seed is printed.
func TestCompareKeysMatchesEachKeysPredicate(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 1))
	for _, sh := range keyShapes {
		t.Run(sh.name, func(t *testing.T) {
			before := settledByBytes.Load()
			var all keyCounts
			for _, unique := range []bool{true, false} {
				c := compareKeysRound(t, r, sh, unique)
				t.Logf("unique=%v: %d keys compared (%d in the original, %d differ), %d batches with a key selecting two rows",
					unique, c.checked, c.present, c.differ, c.failed)
				if !unique && c.failed == 0 {
					t.Errorf("no key selected two rows of the new table whose key is not unique")
				}
				all.checked, all.present, all.differ = all.checked+c.checked, all.present+c.present, all.differ+c.differ
			}
			if all.present == 0 || all.differ == 0 || all.checked == all.differ {
				t.Fatalf("the generated cases test nothing: %d keys, %d present, %d differ", all.checked, all.present, all.differ)
			}
			bytes := settledByBytes.Load() - before
			if exact := sh.alterDst == "" && !strings.Contains(sh.key, "DATETIME"); exact != (bytes > 0) {
				t.Errorf("%d keys settled by their bytes, want some: %v", bytes, exact)
			}
		})
	}
}

type keyCounts struct{ checked, present, differ, failed int }

func compareKeysRound(t *testing.T, r *rand.Rand, sh keyShape, unique bool) keyCounts {
	db := testdb.New(t)
	var names []string
	for _, def := range strings.Split(sh.key, ", ") {
		names = append(names, strings.Fields(def)[0])
	}
	cols := strings.Join(names, ", ")
	db.MustExec(t, db.Dialect("CREATE TABLE src ("+sh.key+", v INT NOT NULL, PRIMARY KEY ("+cols+"))"))
	db.MustExec(t, db.Dialect("CREATE TABLE cand ("+sh.key+")"))
	var vals []string
	for range 80 {
		vals = append(vals, "("+sh.gen(r)+")")
	}
	db.MustExec(t, "INSERT INTO cand VALUES "+strings.Join(vals, ", "))
	db.Mapping(t, "src", "dst", true)
	if !unique {
		db.MustExec(t, "ALTER TABLE dst DROP PRIMARY KEY, ADD KEY ("+cols+")")
	}
	if sh.alterDst != "" {
		db.MustExec(t, db.Dialect("ALTER TABLE dst "+sh.alterDst))
	}
	m, key := db.Mapping(t, "src", "dst", false)
	pick := func(pct int) string { return fmt.Sprintf("RAND(%d) * 100 < %d", r.IntN(1<<30), pct) }
	db.MustExec(t,
		"INSERT IGNORE INTO src SELECT "+cols+", FLOOR(RAND(7) * 3) FROM cand WHERE "+pick(60),
		"INSERT INTO dst SELECT * FROM src",
		"DELETE FROM dst WHERE "+pick(15),
		"UPDATE dst SET v = v + 1 WHERE "+pick(15),
		"DELETE FROM src WHERE "+pick(15),
	)
	// Stale rows in the new table: other cases of the original's keys, and
	// (when its key is not unique) second rows of one key.
	stale := 20
	if !unique {
		stale = 3
		db.MustExec(t, "INSERT INTO dst SELECT * FROM dst LIMIT 2")
	}
	db.MustExec(t, "INSERT IGNORE INTO dst SELECT "+cols+", 0 FROM cand WHERE "+pick(stale))
	// The requested keys: every candidate, spelled as the server stores it.
	rows, err := db.Query("SELECT " + key.SelectExprs() + " FROM cand")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var keys []rowkey.Key
	for rows.Next() {
		raw := make([][]byte, len(key))
		dest := make([]any, len(raw))
		for i := range raw {
			dest[i] = &raw[i]
		}
		if err := rows.Scan(dest...); err != nil {
			t.Fatal(err)
		}
		k, err := key.FromScan(raw)
		if err != nil {
			t.Fatal(err)
		}
		if !seen[k.Encode()] {
			seen[k.Encode()] = true
			keys = append(keys, k)
		}
	}
	rows.Close()
	r.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	cfg := Config{Mapping: m, Key: key}
	h := hashes(cfg)
	ctx := context.Background()
	var c keyCounts
	for len(keys) > 0 {
		n := min(len(keys), 1+r.IntN(30))
		if !unique {
			n = min(len(keys), 1+r.IntN(8))
		}
		batch := keys[:n]
		keys = keys[n:]
		type side struct {
			n    int
			hash string
		}
		one := func(table, hash string, k rowkey.Key) side {
			where, args := key.InList([]rowkey.Key{k})
			var s side
			var hv []byte
			if err := db.QueryRow("SELECT COUNT(*), MAX("+hash+") FROM "+table+" WHERE "+where, args...).Scan(&s.n, &hv); err != nil {
				t.Fatal(err)
			}
			s.hash = string(hv)
			return s
		}
		wantErr := false
		var want []KeyOutcome
		for _, k := range batch {
			a, b := one("src", h.src, k), one("dst", h.dst, k)
			wantErr = wantErr || a.n > 1 || b.n > 1
			want = append(want, KeyOutcome{Key: k, Source: a.n == 1, Target: b.n == 1, Same: a.n == b.n && a.hash == b.hash})
		}
		got, err := CompareKeys(ctx, db.DB, cfg, batch)
		if wantErr {
			if err == nil || !strings.Contains(err.Error(), "selects more than one row") {
				t.Fatalf("a key of the batch selects two rows of a table: want that error, got %v", err)
			}
			c.failed++
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for i := range want {
			if !(got[i].Source == want[i].Source && got[i].Target == want[i].Target && got[i].Same == want[i].Same) {
				t.Fatalf("key %v: CompareKeys says source=%v target=%v same=%v, each key's predicate says source=%v target=%v same=%v",
					want[i].Key, got[i].Source, got[i].Target, got[i].Same, want[i].Source, want[i].Target, want[i].Same)
			}
			c.checked++
			if want[i].Source {
				c.present++
			}
			if !want[i].Same {
				c.differ++
			}
		}
	}
	return c
}
