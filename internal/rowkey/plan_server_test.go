package rowkey_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/rowkey"
	"github.com/sluicedb/sluice/internal/schema"
	"github.com/sluicedb/sluice/internal/testdb"
)

// TestKeyStatementsUseThePrimaryKey: the statements sluice runs by key (the
// apply's DELETE of a batch of keys from the new table, its INSERT ...
// SELECT of them from the original, the copy's and checksum's range reads)
// are planned on the primary key, never as a table scan, for key shapes
// whose values the server might read as another type. A scan would make
// every batch cost the whole table and, for a DELETE, lock every row it
// passes. MariaDB planned a DELETE whose IN list mixed BIGINT UNSIGNED
// values above 2^63-1 (DECIMAL literals) with smaller ones as a scan.
func TestKeyStatementsUseThePrimaryKey(t *testing.T) {
	db := testdb.New(t)
	ctx := context.Background()
	cases := []struct {
		create string
		fill   string // the SELECT list for n = 1..3000
		keys   [][]any
	}{
		{"k BIGINT UNSIGNED NOT NULL PRIMARY KEY", "n", [][]any{{uint64(53985)}, {uint64(4238)}, {uint64(16788052644000000000)}, {uint64(1)}}},
		{"k BIGINT NOT NULL PRIMARY KEY", "n", [][]any{{int64(-9223372036854775808)}, {int64(7)}, {int64(9223372036854775807)}}},
		{"a INT UNSIGNED NOT NULL, b BIGINT UNSIGNED NOT NULL, PRIMARY KEY (a, b)", "n % 7, n",
			[][]any{{uint64(1), uint64(18000000000000000000)}, {uint64(2), uint64(5)}, {uint64(3), uint64(9)}}},
		{"k VARCHAR(20) NOT NULL PRIMARY KEY", "CONCAT('k', n)", [][]any{{[]byte("k1")}, {[]byte("k22")}, {[]byte("")}}},
		{"k DECIMAL(30,10) NOT NULL PRIMARY KEY", "n * 0.5", [][]any{{"0.5"}, {"1500"}, {"-3.25"}}},
		// No primary key: the rows are found by a unique index of NOT NULL
		// columns (schema.Table.KeyIndex); a nullable one before it is not it.
		{"k BIGINT UNSIGNED NOT NULL, UNIQUE KEY uk (k)", "n", [][]any{{uint64(53985)}, {uint64(16788052644000000000)}, {uint64(1)}}},
		{"z INT NULL, a VARCHAR(20) NOT NULL, b INT NOT NULL, UNIQUE KEY uz (z), UNIQUE KEY uk (a, b)", "n, CONCAT('k', n % 9), n",
			[][]any{{[]byte("k1"), int64(1)}, {[]byte("k3"), int64(30)}, {[]byte(""), int64(2)}}},
	}
	for i, c := range cases {
		t.Run(c.create, func(t *testing.T) {
			table := fmt.Sprintf("t%d", i)
			db.MustExec(t, "CREATE TABLE "+table+" ("+c.create+", v INT)")
			db.Fill(t, table, 3000, c.fill+", n")
			db.MustExec(t, "ANALYZE TABLE "+table)
			tbl, err := schema.Load(ctx, db.DB, db.Name, table)
			if err != nil {
				t.Fatal(err)
			}
			key, err := rowkey.NewCols(tbl.PKColumns())
			if err != nil {
				t.Fatal(err)
			}
			want := "PRIMARY"
			if strings.Contains(c.create, "UNIQUE KEY uk") {
				want = "uk"
			}
			if tbl.KeyIndex != want {
				t.Fatalf("the rows are found by %q, want %q", tbl.KeyIndex, want)
			}
			keys := make([]rowkey.Key, len(c.keys))
			for j, k := range c.keys {
				keys[j] = k
			}
			in, args := key.InList(keys)
			gt, gtArgs := key.Predicate(">", keys[0])
			for _, q := range []struct {
				what, sql string
				args      []any
			}{
				{"the apply's DELETE", "DELETE FROM " + table + " WHERE " + in, args},
				{"the apply's read", "SELECT * FROM " + table + tbl.KeyHint() + " WHERE " + in + lockClause(db), args},
				{"a range read", "SELECT * FROM " + table + tbl.KeyHint() + " WHERE " + gt, gtArgs},
			} {
				typ, idx := explain(t, db, q.sql, q.args)
				if typ == "ALL" || typ == "index" || idx != want {
					t.Errorf("%s is planned as %s on %q (want a range on %s): %s", q.what, typ, idx, want, q.sql)
				}
			}
		})
	}
}

func lockClause(db *testdb.DB) string {
	if db.Flavor == dbconn.MariaDB {
		return " LOCK IN SHARE MODE"
	}
	return " FOR SHARE"
}

// explain returns the access type and key of the statement's one table.
func explain(t *testing.T, db *testdb.DB, q string, args []any) (typ, key string) {
	t.Helper()
	prefix := "EXPLAIN FORMAT=TRADITIONAL "
	if db.Flavor == dbconn.MariaDB {
		prefix = "EXPLAIN "
	}
	rows, err := db.Query(prefix+q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	if !rows.Next() {
		t.Fatalf("%s: EXPLAIN returned no row", q)
	}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		t.Fatal(err)
	}
	for i, c := range cols {
		switch strings.ToLower(c) {
		case "type":
			typ = vals[i].String
		case "key":
			key = vals[i].String
		}
	}
	return typ, key
}
