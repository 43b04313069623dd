package migration_test

import (
	"fmt"
	"log/slog"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/plan"
	"github.com/sluicedb/sluice/internal/testdb"
	"github.com/sluicedb/sluice/migration"
)

// The helpers the migration tests share: their configuration, small tables,
// and reads of what a run left.

func logger(t *testing.T) *slog.Logger {
	if os.Getenv("SLUICE_TEST_VERBOSE") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return nil
}

// allRisks approves every kind of risk: these tests are about the copy.
var allRisks = []string{plan.RiskDropColumn, plan.RiskRenameColumn, plan.RiskLossyType, plan.RiskNotNull, plan.RiskUniqueKey}

// config is a copy-path migration: most tests here exercise the shadow copy,
// whatever path the planner would pick for their ALTER.
func config(t *testing.T, db *testdb.DB, table, alter string) migration.Config {
	return migration.Config{
		Conn: db.Server, Database: db.Name, Table: table, Alter: alter, Method: "copy", Approve: allRisks,
		ChunkTime: 20 * time.Millisecond, Logger: logger(t), ProgressInterval: time.Second,
	}
}

// tableT creates table t (id INT PRIMARY KEY, v INT) holding rows 1..rows.
func tableT(t *testing.T, rows int) *testdb.DB {
	t.Helper()
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE t (id INT PRIMARY KEY, v INT)")
	db.Fill(t, "t", rows, "n, n")
	return db
}

// snapshot returns every row of table as text, to show a table is unchanged.
func snapshot(t *testing.T, db *testdb.DB, table string) string {
	return fmt.Sprint(db.Dump(t, table, "*", "1"))
}

// untouched checks that table still holds what snapshot returned before, and
// that it is the database's only table: a failed run left nothing behind.
func untouched(t *testing.T, db *testdb.DB, table, before string) {
	t.Helper()
	if after := snapshot(t, db, table); after != before {
		t.Error("the original table changed")
	}
	if tables := db.Tables(t); !slices.Equal(tables, []string{table}) {
		t.Errorf("leftovers: %v", tables)
	}
}

// ended waits up to within for the run's error on errc.
func ended(t *testing.T, errc <-chan error, within time.Duration, what string) error {
	t.Helper()
	select {
	case err := <-errc:
		return err
	case <-time.After(within):
		t.Fatalf("the migration did not end within %s %s", within, what)
		return nil
	}
}

// column reads the one column query returns, sorted.
func column(t *testing.T, db *testdb.DB, query string) []string {
	t.Helper()
	rows, err := db.Query(query)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}
