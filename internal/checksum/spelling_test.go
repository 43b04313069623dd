package checksum

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/rowkey"
	"github.com/sluicedb/sluice/internal/testdb"
)

// spellingCols are columns whose texts can be confused when joined: strings
// and bytes holding the separator, a ':' or digits, NULLs, a FLOAT whose
// text has six digits, a BIT whose byte is '#'.
const spellingCols = "a VARCHAR(10) COLLATE utf8mb4_bin NULL, b VARBINARY(10) NULL, n INT NULL, f FLOAT NULL, " +
	"bt BIT(8) NULL, c VARCHAR(10) COLLATE utf8mb4_bin NOT NULL"

func spellingValue(r *rand.Rand, col int) any {
	pieces := []string{"", "#", "a", "a#", "#a", ":", "1", "0", "01", "1:", "x"}
	text := func() string { return pieces[r.IntN(len(pieces))] + pieces[r.IntN(len(pieces))] }
	if col != 5 && r.IntN(5) == 0 {
		return nil
	}
	switch col {
	case 0, 5:
		return text()
	case 1:
		return []byte(text())
	case 2:
		return []int64{0, 1, 7, 10, 71}[r.IntN(5)]
	case 3:
		return []float64{1, 1.0000001, 123456.78, 123456.79}[r.IntN(4)]
	default:
		return []int64{0, 35, 49, 58}[r.IntN(4)]
	}
}

// TestHashSpellsRowsApart generates an original and a new table whose rows
// are equal or differ in one column, with values whose joined texts could be
// confused (a '#' moved from one column to the next, NULL against '1', a
// FLOAT past its sixth digit). The oracle is the generator's own values:
// CompareKeys must call a row the same exactly when they are equal, and the
// table checksum must pass equal tables and fail on any one row that
// differs. The seed is printed.
func TestHashSpellsRowsApart(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 3))
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE src (id INT PRIMARY KEY, "+spellingCols+")", "CREATE TABLE dst LIKE src")
	const rows = 400
	ins := func(table string, id int, vals []any) {
		if _, err := db.Exec("INSERT INTO "+table+" VALUES (?, ?, ?, ?, ?, ?, ?)", append([]any{id}, vals...)...); err != nil {
			t.Fatal(err)
		}
	}
	same := make([]bool, rows+1)
	var keys []rowkey.Key
	differ := 0
	for id := 1; id <= rows; id++ {
		a := make([]any, 6)
		for c := range a {
			a[c] = spellingValue(r, c)
		}
		b := append([]any(nil), a...)
		if r.IntN(2) == 0 {
			c := r.IntN(6)
			for tries := 0; tries < 20 && reflect.DeepEqual(a[c], b[c]); tries++ {
				b[c] = spellingValue(r, c)
			}
		}
		same[id] = reflect.DeepEqual(a, b)
		if !same[id] {
			differ++
		}
		ins("src", id, a)
		ins("dst", id, b)
		keys = append(keys, rowkey.Key{int64(id)})
	}
	m, key := db.Mapping(t, "src", "dst", false)
	cfg := Config{Mapping: m, Key: key}
	ctx := context.Background()
	for lo := 0; lo < len(keys); lo += 100 {
		out, err := CompareKeys(ctx, db.DB, cfg, keys[lo:min(lo+100, len(keys))])
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range out {
			id := o.Key[0].(int64)
			if o.Same != same[id] {
				var sa, sb string
				db.QueryRow("SELECT CONCAT_WS('|', a, HEX(b), n, f * 1e0, HEX(bt), c) FROM src WHERE id = ?", id).Scan(&sa)
				db.QueryRow("SELECT CONCAT_WS('|', a, HEX(b), n, f * 1e0, HEX(bt), c) FROM dst WHERE id = ?", id).Scan(&sb)
				t.Errorf("row %d: CompareKeys says same=%v, the values say %v (original %q, new %q)", id, o.Same, same[id], sa, sb)
			}
		}
	}
	t.Logf("%d rows, %d differ", rows, differ)
	if differ == 0 || differ == rows {
		t.Fatalf("the generated case tests nothing: %d of %d rows differ", differ, rows)
	}
	// The checksum: each differing row alone makes the tables differ.
	db.MustExec(t, "CREATE TABLE good LIKE src", "INSERT INTO good SELECT * FROM src")
	checks := 0
	for id := 1; id <= rows && checks < 12; id++ {
		if same[id] {
			continue
		}
		checks++
		db.MustExec(t, "DELETE FROM good WHERE id = "+fmt.Sprint(id), "INSERT INTO good SELECT * FROM dst WHERE id = "+fmt.Sprint(id))
		gm, gkey := db.Mapping(t, "src", "good", false)
		_, err := Compare(ctx, snapshotConns(t, db, 2), Config{Mapping: gm, Key: gkey})
		if !errors.Is(err, ErrMismatch) {
			t.Errorf("row %d alone differs, the checksum says %v", id, err)
		}
		db.MustExec(t, "DELETE FROM good WHERE id = "+fmt.Sprint(id), "INSERT INTO good SELECT * FROM src WHERE id = "+fmt.Sprint(id))
	}
	gm, gkey := db.Mapping(t, "src", "good", false)
	if res, err := Compare(ctx, snapshotConns(t, db, 2), Config{Mapping: gm, Key: gkey}); err != nil || res.Rows != rows {
		t.Fatalf("equal tables: %v, %d rows compared", err, res.Rows)
	}
}

// TestHashSpellsHandCases: rows that an earlier spelling joined into one
// string: a NULL against the flag text, a value shifted into the NULL's
// place, a '#' moved across columns, a FLOAT past its sixth digit.
func TestHashSpellsHandCases(t *testing.T) {
	for _, tc := range []struct{ name, cols, src, dst string }{
		{"null against the flag", "name VARCHAR(20) NOT NULL, flag TINYINT NULL", "(1, 'x', NULL)", "(1, 'x', 1)"},
		{"null against text", "a VARCHAR(20) NULL, b VARCHAR(20) NULL", "(1, 'x', NULL)", "(1, 'x', '01')"},
		{"shifted into the null", "a VARCHAR(20) NULL, b INT NOT NULL", "(1, NULL, 7)", "(1, '7', 1)"},
		{"separator moved", "a VARCHAR(20) NOT NULL, b VARCHAR(20) NOT NULL", "(1, 'a#', 'b')", "(1, 'a', '#b')"},
		{"float past six digits", "f FLOAT NOT NULL", "(1, 1)", "(1, 1.0000001)"},
		{"float negative zero", "f FLOAT NOT NULL", "(1, -0e0)", "(1, 0e0)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := testdb.New(t)
			if strings.Contains(tc.src, "-0e0") {
				db.SkipUnless(t, dbconn.MySQL, "MariaDB stores a FLOAT -0 as 0")
			}
			db.MustExec(t, "CREATE TABLE src (id INT PRIMARY KEY, "+tc.cols+")", "CREATE TABLE dst LIKE src",
				"INSERT INTO src VALUES "+tc.src, "INSERT INTO dst VALUES "+tc.dst)
			m, key := db.Mapping(t, "src", "dst", false)
			cfg := Config{Mapping: m, Key: key}
			ctx := context.Background()
			if _, err := Compare(ctx, snapshotConns(t, db, 2), cfg); !errors.Is(err, ErrMismatch) {
				t.Errorf("the checksum says %v for %s against %s", err, tc.src, tc.dst)
			}
			out, err := CompareKeys(ctx, db.DB, cfg, []rowkey.Key{{int64(1)}})
			if err != nil {
				t.Fatal(err)
			}
			if out[0].Same {
				t.Errorf("CompareKeys calls %s and %s the same", tc.src, tc.dst)
			}
		})
	}
}
