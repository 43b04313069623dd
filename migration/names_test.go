package migration_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/testdb"
)

// TestColumnsGoFoldsTogether: column names that Unicode case folding takes
// for one (s and ſ, σ and ς, µ and μ, ß and ẞ, θ and ϑ, ε and ϵ) are two
// columns to the server, which compares names by their lower case. Each
// keeps its own values, whichever the ALTER names and whichever is in the
// key, as the server's own ALTER keeps them on a clone.
func TestColumnsGoFoldsTogether(t *testing.T) {
	db := testdb.New(t)
	made := 0
	for n, p := range [][2]string{{"s", "ſ"}, {"σ", "ς"}, {"µ", "μ"}, {"ß", "ẞ"}, {"θ", "ϑ"}, {"ε", "ϵ"}, {"ſ", "s"}} {
		a, b := "`"+p[0]+"`", "`"+p[1]+"`"
		for m, c := range []struct{ create, alter string }{
			{fmt.Sprintf("(id INT PRIMARY KEY, %s VARCHAR(10), %s VARCHAR(10))", a, b), "MODIFY id BIGINT"},
			{fmt.Sprintf("(id INT PRIMARY KEY, %s VARCHAR(10), %s VARCHAR(10))", a, b), fmt.Sprintf("MODIFY %s VARCHAR(20)", b)},
			{fmt.Sprintf("(id INT, %s INT NOT NULL, %s INT NOT NULL, PRIMARY KEY (%s))", a, b, b), "ADD COLUMN x INT"},
		} {
			table := fmt.Sprintf("f%d_%d", n, m)
			if _, err := db.Exec("CREATE TABLE `" + table + "` " + c.create + " DEFAULT CHARSET utf8mb4"); err != nil {
				t.Logf("%s and %s: the server takes them for one column: %v", p[0], p[1], err)
				continue
			}
			made++
			db.MustExec(t, "INSERT INTO `"+table+"` (id, "+a+", "+b+") VALUES (1, 10, 20), (2, 30, 40), (3, 50, 60)",
				"CREATE TABLE `"+table+"_n` LIKE `"+table+"`", "INSERT INTO `"+table+"_n` SELECT * FROM `"+table+"`",
				"ALTER TABLE `"+table+"_n` "+c.alter+", ALGORITHM=COPY")
			cfg := config(t, db, table, c.alter)
			cfg.Method = "copy"
			migrate(t, cfg)
			dump := func(tb string) []string {
				got := column(t, db, "SELECT CONCAT_WS(':', id, "+a+", "+b+") FROM `"+tb+"`")
				slices.Sort(got)
				return got
			}
			if got, want := dump(table), dump(table+"_n"); !slices.Equal(got, want) {
				t.Errorf("%s and %s, %s: sluice left %v, the server's own ALTER %v", p[0], p[1], c.alter, got, want)
			}
		}
	}
	// A name the server may take for the column (MariaDB joins s and ſ, MySQL
	// does not) and sluice does not: refused, or refused by the server, and
	// the table as it was; never a run that leaves the column uncopied.
	db.MustExec(t, "CREATE TABLE one (id INT PRIMARY KEY, s VARCHAR(10))", "INSERT INTO one VALUES (1, 'x'), (2, 'y')")
	before := column(t, db, "SELECT CONCAT_WS(':', id, s) FROM one ORDER BY id")
	for _, alter := range []string{"CHANGE `ſ` t VARCHAR(20)", "MODIFY `ſ` VARCHAR(20)"} {
		cfg := config(t, db, "one", alter)
		cfg.Method = "copy"
		if _, err := mustRunner(t, cfg).Run(context.Background()); err == nil {
			t.Errorf("%s on a table whose column is s: the run succeeded", alter)
		}
		if got := column(t, db, "SELECT CONCAT_WS(':', id, s) FROM one ORDER BY id"); !slices.Equal(got, before) {
			t.Errorf("%s: the table changed: %v, was %v", alter, got, before)
		}
	}
	if made < 6 && db.Flavor != dbconn.MariaDB {
		t.Fatalf("only %d tables had two such columns: the test proves little", made)
	}
}

// TestIfExistsClausesTheServerSkips: MariaDB skips ADD COLUMN IF NOT EXISTS
// of a column the table has, and CHANGE COLUMN IF EXISTS of one it lacks;
// sluice took the column for a new one and the run ended with it NULL in
// every row. Refused, table unchanged (MySQL refuses the syntax itself).
func TestIfExistsClausesTheServerSkips(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE t (id INT PRIMARY KEY, a INT, b VARCHAR(10))", "INSERT INTO t VALUES (1, 1, 'keep'), (2, 2, 'me')")
	before := column(t, db, "SELECT CONCAT_WS(':', id, a, b) FROM t ORDER BY id")
	for _, alter := range []string{
		"ADD COLUMN IF NOT EXISTS b INT, MODIFY a BIGINT",
		"CHANGE COLUMN IF EXISTS zz b BIGINT, MODIFY a BIGINT",
		"ADD COLUMN IF NOT EXISTS id BIGINT, MODIFY a BIGINT",
	} {
		if _, err := mustRunner(t, config(t, db, "t", alter)).Run(context.Background()); err == nil {
			t.Errorf("%s: migrated", alter)
		}
		if got := column(t, db, "SELECT CONCAT_WS(':', id, a, b) FROM t ORDER BY id"); !slices.Equal(got, before) {
			t.Fatalf("%s: the table is %v, was %v", alter, got, before)
		}
	}
}
