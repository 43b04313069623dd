package bench

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// The key-type round: sluice's MODIFY k BIGINT on three tables of the same
// rows and width that differ only in their primary key: sysbench's sbtest1
// (INT), a composite key (tenant_id INT, id INT) and a string key
// (VARCHAR(36), a UUID-like text). sysbench cannot drive the last two, so
// the round's load is the bench's own generator (keyload.go), on all three.

// keyTable is one table of the key round.
type keyTable struct {
	name string // in sbtest_tpl, restored into sbtest
	key  string // its primary key, for the report
	// columns is its CREATE TABLE body ("" for sbtest1: sysbench's own).
	columns string
	// fill selects its rows from the template sbtest1's whose id is between
	// two values: the same k, c and pad.
	fill    string
	keyCols []string
	// keyOf is the key of the row made from sbtest1's row n (and of the
	// generator's new row n).
	keyOf func(n int64) []any
}

const sbColumns = "k INT NOT NULL DEFAULT '0', c CHAR(120) NOT NULL DEFAULT '', pad CHAR(60) NOT NULL DEFAULT ''"

// tenants is the composite table's number of tenants.
const tenants = 100

var keyTables = []keyTable{
	{name: "sbtest1", key: "id INT (sysbench)", keyCols: []string{"id"},
		keyOf: func(n int64) []any { return []any{n} }},
	{name: "sbtest_comp", key: "(tenant_id INT, id INT)", keyCols: []string{"tenant_id", "id"},
		columns: "tenant_id INT NOT NULL, id INT NOT NULL, " + sbColumns + ", PRIMARY KEY (tenant_id, id), KEY k_1 (k)",
		fill:    fmt.Sprintf("SELECT 1 + id %% %d, id, k, c, pad FROM %s.sbtest1 WHERE id BETWEEN ? AND ?", tenants, tplDB),
		keyOf:   func(n int64) []any { return []any{1 + n%tenants, n} }},
	{name: "sbtest_str", key: "VARCHAR(36) UUID-like", keyCols: []string{"id"},
		columns: "id VARCHAR(36) CHARACTER SET utf8mb4 COLLATE utf8mb4_0900_ai_ci NOT NULL, " + sbColumns + ", PRIMARY KEY (id), KEY k_1 (k)",
		fill: "SELECT CONCAT_WS('-', SUBSTR(h, 1, 8), SUBSTR(h, 9, 4), SUBSTR(h, 13, 4), SUBSTR(h, 17, 4), SUBSTR(h, 21, 12)), k, c, pad " +
			"FROM (SELECT SHA2(id, 256) AS h, k, c, pad FROM " + tplDB + ".sbtest1 WHERE id BETWEEN ? AND ?) x",
		keyOf: func(n int64) []any { return []any{uuidKey(n)} }},
}

// uuidKey is the string table's key of row n: the first 32 hex digits of
// the SHA-256 of n's decimal text in the 8-4-4-4-12 form of a UUID, as the
// template's fill computes it (MySQL 9.7 has no MD5()).
func uuidKey(n int64) string {
	h := sha256.Sum256([]byte(strconv.FormatInt(n, 10)))
	x := hex.EncodeToString(h[:])
	return x[0:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:32]
}

// keyTableNamed returns the key round's table of that name (sbtest1's for
// any other).
func keyTableNamed(name string) keyTable {
	for _, kt := range keyTables {
		if kt.name == name {
			return kt
		}
	}
	return keyTables[0]
}

// prepareKeyTemplates makes sure the key round's templates hold rows rows,
// made from the sbtest1 template's (once).
func (s *Server) prepareKeyTemplates(ctx context.Context, rows int) error {
	for _, kt := range keyTables {
		if kt.columns == "" {
			continue
		}
		var n int64
		err := s.DB.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+tplDB+"."+kt.name).Scan(&n)
		if err == nil && n == int64(rows) {
			continue
		}
		fmt.Fprintf(os.Stderr, "bench: preparing the %d-row %s (once)\n", rows, kt.name)
		for _, q := range []string{
			"DROP TABLE IF EXISTS " + tplDB + "." + kt.name,
			"CREATE TABLE " + tplDB + "." + kt.name + " (" + kt.columns + ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_0900_ai_ci",
		} {
			if _, err := s.DB.ExecContext(ctx, q); err != nil {
				return fmt.Errorf("%s: %w", kt.name, err)
			}
		}
		const batch = 50_000
		for lo := 1; lo <= rows; lo += batch {
			q := "INSERT INTO " + tplDB + "." + kt.name + " " + kt.fill
			if _, err := s.DB.ExecContext(ctx, q, lo, min(lo+batch-1, rows)); err != nil {
				return fmt.Errorf("%s: %w", kt.name, err)
			}
		}
		if _, err := s.DB.ExecContext(ctx, "ANALYZE TABLE "+tplDB+"."+kt.name); err != nil {
			return err
		}
	}
	return nil
}

// keyRound times sluice on each key type idle and, with load, under the
// bench's own load generator at the load ratio of what it sustains on
// sbtest1. Each half begins with F.
func (b *benchRun) keyRound(ctx context.Context, withLoad bool) error {
	b.round, b.lastF = "keys", 0
	defer func() { b.round = "" }()
	list := func(load string) []step {
		out := []step{b.fStep()}
		if load == "idle" {
			// Each table's own native rebuild: what its size and key cost
			// any tool, beside what they cost sluice.
			for _, kt := range keyTables[1:] {
				out = append(out, step{name: ownRebuild(kt.name), load: load, table: kt.name, op: b.native(kt.name, rebuild)})
			}
		}
		for _, kt := range keyTables {
			out = append(out, step{name: "sluice MODIFY k BIGINT on " + kt.name, load: load, table: kt.name, ownLoad: true,
				op: b.sluiceWith(kt.name, modifyK, nil)})
			for _, bin := range b.o.Baselines {
				out = append(out, step{name: "sluice MODIFY k BIGINT on " + kt.name + " [" + bin + "]", load: load, table: kt.name, ownLoad: true,
					op: b.sluiceBin(bin, kt.name, modifyK, nil, false)})
			}
		}
		return out
	}
	if err := b.run(ctx, list("idle"), 0); err != nil {
		return err
	}
	if !withLoad {
		return nil
	}
	// What the generator sustains on sbtest1, like the sysbench capacity.
	if err := b.s.resetTable(ctx, "sbtest1"); err != nil {
		return err
	}
	l, err := b.s.StartKeyLoad(ctx, keyTables[0], b.o.LoadThreads, 0, b.o.Rows)
	if err != nil {
		return err
	}
	time.Sleep(12 * time.Second)
	b.keyCapacity = l.Between(3*time.Second, l.Since()).Mean
	l.Stop()
	b.keyRate = b.keyCapacity * b.o.LoadRatio
	logf("key round: the load generator sustains %.0f tps on sbtest1; %.0f%% is %.0f tps", b.keyCapacity, b.o.LoadRatio*100, b.keyRate)
	return b.run(ctx, list(b.loadName()), b.keyRate)
}

// ownRebuild names a key table's own native rebuild step.
func ownRebuild(table string) string { return rebuildName + " on " + table }

// reportKeys prints the key round.
func (b *benchRun) reportKeys(w io.Writer, rs []result) {
	ss := summarize(rs)
	f := ss[0].wall
	fmt.Fprintf(w, "\nKey types: sluice MODIFY k BIGINT on three %d-row tables with sbtest1's k, c and pad (KEY k_1 (k)), differing in their\n", b.o.Rows)
	fmt.Fprintf(w, "primary key; F = %s in this round (sbtest1, idle). \"x its own rebuild\" divides by the same table's native\n"+
		"ALTER ENGINE=InnoDB, idle: a wider key makes every table bigger and slower to rebuild, with any tool.", f.Round(time.Millisecond))
	if b.keyCapacity > 0 {
		fmt.Fprintf(w, " Under load: the bench's own load generator, not sysbench, on the table migrated:\n"+
			"%d writers, autocommit single-row writes on random keys (%s), at %.0f%% of the %.0f tps it sustains on sbtest1 = %.0f tps.",
			b.o.LoadThreads, keyMixText, b.o.LoadRatio*100, b.keyCapacity, b.keyRate)
	}
	fmt.Fprintf(w, "\n\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	own := map[string]time.Duration{} // each table's native rebuild, idle
	for _, s := range ss {
		if s.load == "idle" && s.wall > 0 && (s.name == rebuildName || s.name == ownRebuild(s.runs[0].table)) {
			own[s.runs[0].table] = s.wall
		}
	}
	fmt.Fprintln(tw, "table\tprimary key\tload\tx F\tx its own rebuild\tTPS before\tTPS during (mean)\tkept\tlowest TPS/s\tzero-TPS s\tapp errors/min during\tcatch-up after the copy\tsluice max RSS")
	var failed []string
	for _, s := range ss {
		table, key := s.runs[0].table, keyTableNamed(s.runs[0].table).key
		switch s.name {
		case rebuildName:
			key = "F: " + rebuildName
		case ownRebuild(table):
			key = "its own rebuild: " + rebuildName
		}
		if i := strings.Index(s.name, " ["); i >= 0 {
			key += " " + s.name[i+1:] // a --compare-with build
		}
		xOwn := "-"
		if o := own[table]; o > 0 && s.wall > 0 {
			xOwn = fmt.Sprintf("%.2f", float64(s.wall)/float64(o))
		}
		var catchUp []time.Duration
		for _, r := range s.runs {
			if r.failure == "" && r.phases != "" {
				catchUp = append(catchUp, r.catchUp)
			}
		}
		tps := "-\t-\t-\t-\t-\t-"
		if s.load != "idle" {
			tps = fmt.Sprintf("%.0f\t%.0f\t%.0f%%\t%.0f\t%d\t%.1f", s.before.Mean, s.during.Mean, kept(s), s.during.Min, s.during.Zero, s.errDuring)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", table, key, s.load, xF(s, f), xOwn, tps, durStats(catchUp), rss(s))
		for _, e := range s.failures {
			failed = append(failed, fmt.Sprintf("FAILED: %s (%s): %s", s.name, s.load, e))
		}
	}
	tw.Flush()
	for _, e := range failed {
		fmt.Fprintln(w, e)
	}
	printPhases(w, rs)
}
