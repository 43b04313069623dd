package migration_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/testdb"
	"github.com/sluicedb/sluice/migration"
)

// applyCopyRows is the table size of the tests below: enough for a copy of
// several seconds.
const applyCopyRows = 100000

// runApplyCopy fills w's table and a model of it with rows 0..rows-1 (fill is
// the SELECT list of testdb.Fill, whose n is row+1, and must give the values
// w.key and the model's generator would), migrates it while w's writers run,
// and checks the result against the replayed model and that changes were
// applied while the copy ran.
func runApplyCopy(t *testing.T, db *testdb.DB, w *workload, rows int64, fill, alter, cols, orderBy string) migration.Result {
	t.Helper()
	res := migrateUnderWorkload(t, db, w, rows, fill, alter, cols, orderBy, nil)
	if res.KeysAppliedInCopy == 0 {
		t.Errorf("no change was applied while the copy ran: %+v", res)
	}
	return res
}

// migrateUnderWorkload is runApplyCopy without its check of the changes
// applied during the copy; tune, if set, adjusts the configuration.
func migrateUnderWorkload(t *testing.T, db *testdb.DB, w *workload, rows int64, fill, alter, cols, orderBy string,
	tune func(*migration.Config)) migration.Result {
	t.Helper()
	const ref = "model_ref"
	db.MustExec(t, "CREATE TABLE "+ref+" LIKE "+dbconn.QuoteIdent(w.table))
	db.Fill(t, w.table, int(rows), fill)
	db.Fill(t, ref, int(rows), fill)
	// The writers' view of the rows, as workload.load leaves it.
	w.logs = make([][]stmt, w.writers)
	w.live = make([]map[int64]bool, w.writers)
	w.next = make([]int64, w.writers)
	for i := range w.writers {
		w.live[i] = map[int64]bool{}
		for row := int64(i); row < rows; row += int64(w.writers) {
			w.live[i][row] = true
			w.next[i] = row + int64(w.writers)
		}
	}

	stop := make(chan struct{})
	wait := w.run(t, db, stop)
	time.Sleep(100 * time.Millisecond)
	cfg := config(t, db, w.table, alter)
	if tune != nil {
		tune(&cfg)
	}
	r, err := migration.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	before := w.ops.Load()
	res, err := r.Run(context.Background())
	during := w.ops.Load() - before
	time.Sleep(100 * time.Millisecond)
	close(stop)
	wait()
	if err != nil {
		t.Fatalf("migration failed: %v", err)
	}
	phases := map[string]time.Duration{}
	for _, p := range res.Phases {
		phases[p.Name] = p.Duration
	}
	t.Logf("rows %d, writes during the migration %d, keys applied %d, during the copy %d; copy %s, catch-up %s, total %s",
		res.RowsCopied, during, res.KeysApplied, res.KeysAppliedInCopy, phases["copy"].Round(time.Millisecond),
		phases["catch-up"].Round(time.Millisecond), res.Total.Round(time.Millisecond))
	if during < 1000 {
		t.Errorf("only %d writes happened during the migration; the test proves little", during)
	}
	w.replay(t, db, ref)
	compare(t, db, w.table, ref, cols, orderBy)
	return res
}

// applyCopyUpdates are the workload's updates of the non-key columns.
var applyCopyUpdates = []func(r *rand.Rand) (string, []any){
	func(r *rand.Rand) (string, []any) { return "v = v + 1", nil },
	func(r *rand.Rand) (string, []any) { return "pad = ?", []any{strings.Repeat("u", r.IntN(90))} },
}

// TestApplyDuringCopyCompositeKey: a four-column key (integer, PAD SPACE
// string, DATETIME(6), DECIMAL) under inserts, updates, deletes and key
// changes all over the key; changes are applied while the copy runs.
func TestApplyDuringCopyCompositeKey(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, `CREATE TABLE comp4 (tenant INT NOT NULL,
		region VARCHAR(16) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL,
		at DATETIME(6) NOT NULL, seq DECIMAL(14,2) NOT NULL, v INT NOT NULL, pad VARCHAR(100),
		PRIMARY KEY (tenant, region, at, seq))`)
	regions := []string{"eu", "US-east", "Ásia", "ap ", "eu-West"}
	base := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	w := &workload{
		table: "comp4", pk: []string{"tenant", "region", "at", "seq"}, writers: 6,
		key: func(n int64) []any {
			return []any{n % 7, regions[(n/7)%5], base.Add(time.Duration(n*1001) * time.Microsecond).Format("2006-01-02 15:04:05.000000"),
				fmt.Sprintf("%d.%02d", n/4, n%4*25)}
		},
		cols:   []string{"v", "pad"},
		gen:    func(r *rand.Rand, n int64) []any { return []any{r.IntN(1e6), strings.Repeat("p", r.IntN(90))} },
		update: applyCopyUpdates,
	}
	fill := `(n-1) % 7, ELT(((n-1) DIV 7) % 5 + 1, 'eu', 'US-east', 'Ásia', 'ap ', 'eu-West'),
		TIMESTAMPADD(MICROSECOND, (n-1) * 1001, '2024-01-01 00:00:00.000000'), (n-1) / 4, n, REPEAT('f', n % 90)`
	runApplyCopy(t, db, w, applyCopyRows, fill, "MODIFY v BIGINT NOT NULL",
		"tenant, HEX(region), at, seq, v, pad", "tenant, region, at, seq")
}

// TestApplyDuringCopyAccentInsensitiveKey: a VARCHAR(64) key in
// utf8mb4_0900_ai_ci (NO PAD; on MariaDB its UCA 14.0 collation,
// utf8mb4_uca1400_ai_ci, PAD SPACE) whose values differ from their
// neighbours in case and accents, which the collation ignores.
func TestApplyDuringCopyAccentInsensitiveKey(t *testing.T) {
	db := testdb.New(t)
	coll := "utf8mb4_0900_ai_ci"
	if db.Flavor == dbconn.MariaDB {
		coll = "utf8mb4_uca1400_ai_ci"
	}
	db.MustExec(t, `CREATE TABLE ai (k VARCHAR(64) CHARACTER SET utf8mb4 COLLATE `+coll+` NOT NULL PRIMARY KEY,
		v INT NOT NULL, pad VARCHAR(100))`)
	prefixes := []string{"alpha", "Alpha", "ÄLPHA", "beta", "Beta", "ßeta", "zeta", "Zeta", "émile", "Emile 😀"}
	w := &workload{
		table: "ai", pk: []string{"k"}, writers: 6,
		key:    func(n int64) []any { return []any{fmt.Sprintf("%s-%07d", prefixes[n%10], (n*7919)%10000019)} },
		cols:   []string{"v", "pad"},
		gen:    func(r *rand.Rand, n int64) []any { return []any{r.IntN(1e6), strings.Repeat("p", r.IntN(90))} },
		update: applyCopyUpdates,
	}
	fill := `CONCAT(ELT((n-1) % 10 + 1, 'alpha', 'Alpha', 'ÄLPHA', 'beta', 'Beta', 'ßeta', 'zeta', 'Zeta', 'émile', 'Emile 😀'),
		'-', LPAD(((n-1) * 7919) % 10000019, 7, '0')), n, REPEAT('f', n % 90)`
	runApplyCopy(t, db, w, applyCopyRows, fill, "MODIFY v BIGINT NOT NULL", "HEX(k), v, pad", "k")
}

// TestApplyDuringCopyPadSpaceKey: a VARCHAR key in utf8mb4_general_ci (PAD
// SPACE) whose values differ in case and accents, which the collation
// ignores, and, four at a time, only in their ends: nothing, a tab (which
// sorts below the padding spaces), a tab and a letter, or trailing spaces.
func TestApplyDuringCopyPadSpaceKey(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, `CREATE TABLE ps (k VARCHAR(40) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL PRIMARY KEY,
		v INT NOT NULL, pad VARCHAR(100))`)
	prefixes := []string{"abc", "ABC", "Abc", "àbc", "ÀBC", "xyz"}
	suffixes := []string{"", "\t", "\ta", "!  "}
	w := &workload{
		table: "ps", pk: []string{"k"}, writers: 6,
		key: func(n int64) []any {
			return []any{fmt.Sprintf("%s %07d%s", prefixes[n%6], (n/4*7919)%10000019, suffixes[n%4])}
		},
		cols:   []string{"v", "pad"},
		gen:    func(r *rand.Rand, n int64) []any { return []any{r.IntN(1e6), strings.Repeat("p", r.IntN(90))} },
		update: applyCopyUpdates,
	}
	fill := `CONCAT(ELT((n-1) % 6 + 1, 'abc', 'ABC', 'Abc', 'àbc', 'ÀBC', 'xyz'), ' ',
		LPAD((((n-1) DIV 4) * 7919) % 10000019, 7, '0'), ELT((n-1) % 4 + 1, '', '\t', '\ta', '!  ')), n, REPEAT('f', n % 90)`
	runApplyCopy(t, db, w, applyCopyRows, fill, "MODIFY v BIGINT NOT NULL", "HEX(k), v, pad", "k, HEX(k)")
}

// TestInvisibleColumns: a table with an INVISIBLE column, changed by a copy
// that adds another and (on MySQL) hides one more with ALTER COLUMN ... SET
// INVISIBLE, under writers that insert and update the hidden column: its
// values are copied and applied like any other, and the columns stay hidden.
func TestInvisibleColumns(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, `CREATE TABLE inv (id BIGINT NOT NULL PRIMARY KEY, v INT NOT NULL,
		pad VARCHAR(100) INVISIBLE DEFAULT 'd', w INT DEFAULT 3)`)
	w := &workload{
		table: "inv", pk: []string{"id"}, writers: 6,
		key:    func(n int64) []any { return []any{n} },
		cols:   []string{"v", "pad"},
		gen:    func(r *rand.Rand, n int64) []any { return []any{r.IntN(1e6), strings.Repeat("p", r.IntN(90))} },
		update: applyCopyUpdates,
	}
	alter := "MODIFY v BIGINT NOT NULL, ADD COLUMN m INT INVISIBLE DEFAULT 7, MODIFY pad VARCHAR(120) INVISIBLE DEFAULT 'd'"
	if db.Flavor == dbconn.MySQL {
		alter += ", ALTER COLUMN w SET INVISIBLE"
	}
	migrateUnderWorkload(t, db, w, 3*applyCopyRows, "n - 1, n, n % 5", alter, "id, v, pad, w", "id", nil)
	var hidden string
	if err := db.QueryRow(`SELECT GROUP_CONCAT(COLUMN_NAME ORDER BY COLUMN_NAME) FROM information_schema.COLUMNS
		WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'inv' AND EXTRA LIKE '%INVISIBLE%'`).Scan(&hidden); err != nil {
		t.Fatal(err)
	}
	want := "m,pad"
	if db.Flavor == dbconn.MySQL {
		want = "m,pad,w"
	}
	if hidden != want {
		t.Errorf("hidden columns %q, want %q", hidden, want)
	}
	var n, sevens int
	if err := db.QueryRow("SELECT COUNT(*), SUM(m = 7) FROM inv").Scan(&n, &sevens); err != nil || n == 0 || sevens != n {
		t.Errorf("the added column: %d of %d rows hold its default (%v)", sevens, n, err)
	}
}

// TestDefaultExpressionAdded: ADD COLUMN with a DEFAULT expression that
// reads the row (MySQL 8.0.13+, MariaDB 10.2+), which the parser alone does
// not read, under writers: every row, copied, changed or inserted during the
// copy, holds the expression's value for its own columns.
func TestDefaultExpressionAdded(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, `CREATE TABLE dex (id BIGINT NOT NULL PRIMARY KEY, v INT NOT NULL, pad VARCHAR(100))`)
	w := &workload{
		table: "dex", pk: []string{"id"}, writers: 6,
		key:    func(n int64) []any { return []any{n} },
		cols:   []string{"v", "pad"},
		gen:    func(r *rand.Rand, n int64) []any { return []any{r.IntN(1e6), strings.Repeat("p", r.IntN(90))} },
		update: applyCopyUpdates[1:], // pad only: n reads id, which no update changes
	}
	res := migrateUnderWorkload(t, db, w, 3*applyCopyRows, "n - 1, n, REPEAT('f', n % 90)",
		"ADD COLUMN n BIGINT NOT NULL DEFAULT (id * 2 + 1), ADD COLUMN s VARCHAR(30) DEFAULT (CONCAT('k', id % 7))",
		"id, v, pad", "id", func(cfg *migration.Config) {
			// A change after the swap keeps n as it was, as it would after
			// the server's own ALTER: the writers stop before the swap.
			prev := cfg.OnPhase
			cfg.OnPhase = func(name string) {
				if name == "checksum" {
					w.halt.Store(true)
				}
				if prev != nil {
					prev(name)
				}
			}
		})
	if res.Path != "copy" {
		t.Errorf("path %s, want copy", res.Path)
	}
	var rows, good int
	if err := db.QueryRow("SELECT COUNT(*), SUM(n = id * 2 + 1 AND s = CONCAT('k', id % 7)) FROM dex").Scan(&rows, &good); err != nil || rows == 0 || good != rows {
		t.Errorf("%d of %d rows hold the added columns' values (%v)", good, rows, err)
	}
}
