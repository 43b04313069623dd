package migration_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/sluicedb/sluice/internal/ddl"
	"github.com/sluicedb/sluice/internal/plan"
	"github.com/sluicedb/sluice/internal/testdb"
)

// convSources are column types with values near the edges of their
// conversions: fractions, halves, zero, signs, a JSON boolean.
var convSources = []struct {
	typ  string
	vals []string
}{
	{"FLOAT", []string{"0.1", "123456.789", "1.5", "-0.5", "2.5", "0", "1e20"}},
	{"DOUBLE", []string{"0.1", "123456.789", "1.5", "-0.5", "2.5", "1e20"}},
	{"DECIMAL(10,3)", []string{"0.1", "1.5", "-0.5", "2.5", "12345.678"}},
	{"INT", []string{"0", "1", "2", "5", "-3", "2024", "70"}},
	{"BIGINT UNSIGNED", []string{"0", "18446744073709551615", "3"}},
	{"YEAR", []string{"0", "1999", "2024", "70"}},
	{"JSON", []string{"'2.5'", "'-0.5'", "'true'", "'0.1'", "'\"abc\"'", "'1'", "'[1]'"}},
	{"BIT(8)", []string{"b'1'", "b'101'", "0"}},
	{"DATE", []string{"'2020-01-02'", "'1999-12-31'"}},
	{"DATETIME(3)", []string{"'2020-01-02 03:04:05.678'"}},
	{"TIME", []string{"'12:34:56'", "'-01:00:00'", "'838:00:00'"}},
	{"VARCHAR(20)", []string{"'1.5'", "'abc'", "'2020-01-02'", "' 12'", "'1e3'", "'2'"}},
	{"ENUM('a','b','1','2')", []string{"'a'", "'1'", "'2'"}},
	{"SET('a','b')", []string{"'a,b'", "'b'"}},
}

// convTargets are the types each source is converted to.
var convTargets = []string{"FLOAT", "DOUBLE", "DECIMAL(10,3)", "INT", "TINYINT", "INT UNSIGNED", "YEAR", "JSON", "BIT(8)",
	"DATE", "DATETIME", "TIME", "VARCHAR(40)", "CHAR(40)", "VARBINARY(40)", "ENUM('a','b','1','2')", "SET('a','b','1')", "ENUM('x','y','z')", "SET('x','y')", "TEXT"}

// TestConversionsMatchNativeAlter: a column converted to another type (the
// sources and targets above, each with every source value in one table)
// either is refused in one line, the table unchanged, or ends byte for byte
// as the server's own ALTER TABLE ... ALGORITHM=COPY leaves a clone of the
// table; where that ALTER refuses the values, sluice must not succeed. Every
// pair, about 30 s a server.
func TestConversionsMatchNativeAlter(t *testing.T) {
	type pair struct{ src, dst int }
	var pairs []pair
	for i := range convSources {
		for j := range convTargets {
			if !strings.EqualFold(convSources[i].typ, convTargets[j]) {
				pairs = append(pairs, pair{i, j})
			}
		}
	}
	db := testdb.New(t)
	dump := func(table string) []string {
		return column(t, db, "SELECT CONCAT(id, ':', COALESCE(HEX(CAST(c AS BINARY)), 'NULL')) FROM `"+table+"` ORDER BY id")
	}
	refused, matched, bothFailed, failed := 0, 0, 0, 0
	for n, p := range pairs {
		src, dst := convSources[p.src], convTargets[p.dst]
		name := fmt.Sprintf("%s -> %s", src.typ, dst)
		table := fmt.Sprintf("c%d", n)
		db.MustExec(t, fmt.Sprintf("CREATE TABLE `%s` (id INT PRIMARY KEY, c %s)", table, src.typ))
		rows := 0
		for i, v := range src.vals {
			if _, err := db.Exec(fmt.Sprintf("INSERT INTO `%s` VALUES (%d, %s)", table, i+1, v)); err == nil {
				rows++
			}
		}
		if rows == 0 {
			t.Fatalf("%s: the server took none of the values", name)
		}
		db.MustExec(t, fmt.Sprintf("CREATE TABLE `%s_n` LIKE `%s`", table, table), fmt.Sprintf("INSERT INTO `%s_n` SELECT * FROM `%s`", table, table))
		before := dump(table)
		_, nerr := db.Exec(fmt.Sprintf("ALTER TABLE `%s_n` MODIFY c %s, ALGORITHM=COPY", table, dst))
		a, err := ddl.Parse("MODIFY c " + dst)
		if err != nil {
			t.Fatal(err)
		}
		p, _, err := plan.Make(context.Background(), db.DB, "", db.Name, table, a, plan.Options{})
		if err != nil {
			t.Fatal(err)
		}
		cfg := config(t, db, table, "MODIFY c "+dst)
		_, err = mustRunner(t, cfg).Run(context.Background())
		refusedHere := err != nil && strings.Contains(err.Error(), "which a copy cannot convert")
		if planned := strings.HasPrefix(p.Conversions, "refused: "); planned != refusedHere || planned && p.Path != plan.PathCopy {
			t.Errorf("%s: sluice plan says %s path, conversions %q; the run refused it: %v", name, p.Path, p.Conversions, refusedHere)
		}
		switch {
		case refusedHere:
			refused++
			if got := dump(table); !slices.Equal(got, before) {
				t.Errorf("%s: refused, and the table changed: %v, was %v", name, got, before)
			}
		case err != nil:
			if nerr == nil {
				failed++ // the copy failed on a value: the original is kept
				t.Logf("%s: the server's ALTER converts it, sluice stops: %v", name, err)
			} else {
				bothFailed++
			}
			if got := dump(table); !slices.Equal(got, before) {
				t.Errorf("%s: sluice failed, and the table changed: %v, was %v", name, got, before)
			}
		case nerr != nil:
			t.Errorf("%s: the server's own ALTER refuses these values (%v), sluice converted them: %v", name, nerr, dump(table))
		default:
			matched++
			if got, want := dump(table), dump(table+"_n"); !slices.Equal(got, want) {
				t.Errorf("%s: sluice gave %v, the server's own ALTER %v (values %v)", name, got, want, src.vals)
			}
		}
		db.MustExec(t, fmt.Sprintf("DROP TABLE IF EXISTS `%s`, `%s_n`, `_%s_old`", table, table, table))
	}
	t.Logf("%d pairs: %d refused, %d matched the server's own ALTER, %d refused by both, %d stopped where the ALTER converts", len(pairs), refused, matched, bothFailed, failed)
	if matched == 0 {
		t.Errorf("no pair was migrated and compared")
	}
}
