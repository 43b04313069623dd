package migration

import (
	"context"
	"slices"
	"testing"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/schema"
	"github.com/sluicedb/sluice/internal/testdb"
)

// TestRepairTriggersAfterADeathMidMove: a run died in the cut-over after
// moving some of the original's triggers to the new table (two of four here,
// as the cut-over does: dropped from the original, created on the new
// table), its checkpoint holding all four. The next run puts all of them
// back on the original, in their order, before it goes on; with nothing
// moved it changes nothing.
func TestRepairTriggersAfterADeathMidMove(t *testing.T) {
	db := testdb.New(t)
	if db.Flavor == dbconn.MariaDB {
		t.Skip("MariaDB: sluice refuses tables with triggers")
	}
	db.MustExec(t, "CREATE TABLE t (id INT PRIMARY KEY, v INT)", "CREATE TABLE audit (op CHAR(1), tid INT)",
		"CREATE TRIGGER a1 AFTER INSERT ON t FOR EACH ROW INSERT INTO audit VALUES ('1', NEW.id)",
		"CREATE TRIGGER a2 AFTER INSERT ON t FOR EACH ROW INSERT INTO audit VALUES ('2', NEW.id)",
		"CREATE TRIGGER a3 AFTER INSERT ON t FOR EACH ROW INSERT INTO audit VALUES ('3', NEW.id)",
		"CREATE TRIGGER b1 BEFORE UPDATE ON t FOR EACH ROW SET NEW.v = NEW.v + 1",
		"CREATE TABLE _t_new LIKE t")
	ctx := context.Background()
	r, err := New(Config{Conn: db.Server, Database: db.Name, Table: "t", Alter: "ADD COLUMN x INT"})
	if err != nil {
		t.Fatal(err)
	}
	r.db = db.DB
	if r.orig, err = schema.Load(ctx, db.DB, db.Name, "t"); err != nil {
		t.Fatal(err)
	}
	all, err := schema.LoadTriggers(ctx, db.DB, db.Name, "t")
	if err != nil || len(all) != 4 {
		t.Fatalf("%d triggers (%v)", len(all), err)
	}
	r.resume = &checkpoint{Triggers: all}
	names := func(table string) []string {
		ts, err := schema.LoadTriggers(ctx, db.DB, db.Name, table)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, tr := range ts {
			out = append(out, tr.Name)
		}
		return out
	}
	want := names("t")
	if err := r.repairTriggers(ctx); err != nil || !slices.Equal(names("t"), want) {
		t.Fatalf("nothing moved: repair gave %v, triggers %v", err, names("t"))
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, tr := range all[:2] { // as the cut-over moves them, in order
		if err := r.createTrigger(ctx, conn, tr, dbconn.QuoteTable(db.Name, "_t_new"), true); err != nil {
			t.Fatal(err)
		}
	}
	if len(names("_t_new")) != 2 {
		t.Fatalf("the setup moved %v", names("_t_new"))
	}
	r.orig.Triggers = 2 // as the resuming run's preflight read it
	if err := r.repairTriggers(ctx); err != nil {
		t.Fatal(err)
	}
	if got := names("t"); !slices.Equal(got, want) || len(names("_t_new")) != 0 {
		t.Errorf("after the repair the original has %v (want %v), the new table %v", got, want, names("_t_new"))
	}
	if r.orig.Triggers != 4 {
		t.Errorf("the original is taken to have %d triggers after the repair; the capture's second reading would call it changed", r.orig.Triggers)
	}
	db.MustExec(t, "INSERT INTO t VALUES (1, 1)")
	var fired []string
	for _, row := range db.Dump(t, "audit", "op", "op") {
		fired = append(fired, row[0])
	}
	if !slices.Equal(fired, []string{"'1'", "'2'", "'3'"}) {
		t.Errorf("an insert fired %v", fired)
	}
}
