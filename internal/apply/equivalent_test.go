package apply

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/rowkey"
	"github.com/sluicedb/sluice/internal/testdb"
)

// TestEquivalentKeysInSeveralStatements applies, in one transaction of
// several statements (the resolver's and the cut-over's drain of every
// pending key), keys that differ in bytes but name the same row under the
// key's collation: 'a', 'A' and 'a  ' in a case-insensitive PAD SPACE
// collation. Each row must be copied once: copied by two statements, it made
// a false unique-key collision that stopped the migration. The oracle is the
// original table itself, compared byte for byte with the shadow.
// SLUICE_EQUIV_SEED replays a case.
func TestEquivalentKeysInSeveralStatements(t *testing.T) {
	db := testdb.New(t)
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("SLUICE_EQUIV_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (SLUICE_EQUIV_SEED)", seed)
	r := rand.New(rand.NewPCG(seed, 3))
	ctx := context.Background()
	for round := 0; round < 12; round++ {
		coll := []string{"utf8mb4_general_ci", "utf8mb4_unicode_ci", "latin1_swedish_ci"}[round%3]
		cs := strings.SplitN(coll, "_", 2)[0]
		db.MustExec(t, "DROP TABLE IF EXISTS src, dst",
			fmt.Sprintf(`CREATE TABLE src (k VARCHAR(6) CHARACTER SET %s COLLATE %s NOT NULL, n INT NOT NULL, v INT,
				PRIMARY KEY (k, n))`, cs, coll))
		words := []string{"", "a", "b", "ab", "Ba"}
		var marks []rowkey.Key
		for _, w := range words {
			for n := 0; n < 3; n++ {
				if r.IntN(4) > 0 {
					if _, err := db.Exec("INSERT INTO src VALUES (?, ?, ?)", variant(r, w), n, r.IntN(1000)); err != nil {
						t.Fatal(err)
					}
				}
				// Marks in bytes that all name the row (k, n), in any number.
				for range 1 + r.IntN(3) {
					marks = append(marks, rowkey.Key{[]byte(variant(r, w)), int64(n)})
				}
			}
		}
		// The shadow starts stale: some rows missing, some old, one that the
		// original no longer has.
		db.MustExec(t, "CREATE TABLE dst LIKE src", "INSERT INTO dst SELECT * FROM src WHERE v % 3 > 0",
			"UPDATE dst SET v = v + 1 WHERE v % 3 = 1", "INSERT IGNORE INTO dst VALUES ('zz', 9, 9)")
		marks = append(marks, rowkey.Key{[]byte("ZZ "), int64(9)})
		r.Shuffle(len(marks), func(i, j int) { marks[i], marks[j] = marks[j], marks[i] })

		m, key := db.Mapping(t, "src", "dst", false)
		sched := NewScheduler()
		batch := 1 + r.IntN(4)
		a, err := New(Config{DB: db.DB, Mapping: m, Key: key, Workers: 1, BatchSize: batch, Flavor: db.Flavor}, sched)
		if err != nil {
			t.Fatal(err)
		}
		sched.Add(marks...)
		if err := a.applyAll(ctx, txRunner{db.DB}, retries); err != nil {
			t.Fatalf("round %d (%s, %d marks, statements of %d keys): %v", round, coll, len(marks), batch, err)
		}
		want, got := rowsOf(t, db, "src"), rowsOf(t, db, "dst")
		if len(want) == 0 {
			t.Fatalf("round %d: the original is empty: the check compares nothing", round)
		}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Fatalf("round %d (%s, statements of %d keys): shadow\n%q\nwant\n%q", round, coll, batch, got, want)
		}
	}
}

// variant returns w in random case with up to two trailing spaces.
func variant(r *rand.Rand, w string) string {
	b := []byte(w)
	for i := range b {
		if r.IntN(2) == 0 {
			b[i] = strings.ToUpper(string(b[i]))[0]
		} else {
			b[i] = strings.ToLower(string(b[i]))[0]
		}
	}
	return string(b) + strings.Repeat(" ", r.IntN(3))
}

// rowsOf reads table's rows as hex bytes, in a fixed order.
func rowsOf(t *testing.T, db *testdb.DB, table string) []string {
	t.Helper()
	rows, err := db.Query("SELECT HEX(k), n, v FROM " + table + " ORDER BY HEX(k), n")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var k string
		var n, v int
		if err := rows.Scan(&k, &n, &v); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s/%d/%d", k, n, v))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
