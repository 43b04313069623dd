package migration_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/testdb"
	"github.com/sluicedb/sluice/migration"
)

// triggerTable creates t with five triggers: a BEFORE INSERT that sets a
// column, two AFTER INSERT in a set order, an AFTER UPDATE created under
// ANSI_QUOTES (its body parses only so) and an AFTER DELETE, each AFTER one
// writing a row to audit.
func triggerTable(t *testing.T, rows int) *testdb.DB {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE t (id INT PRIMARY KEY, v INT, note VARCHAR(30))",
		"CREATE TABLE audit (n BIGINT AUTO_INCREMENT PRIMARY KEY, op CHAR(1), tid INT)",
		"CREATE TRIGGER t_bi BEFORE INSERT ON t FOR EACH ROW SET NEW.note = CONCAT('bi:', NEW.id)",
		"CREATE TRIGGER t_ai AFTER INSERT ON t FOR EACH ROW INSERT INTO audit (op, tid) VALUES ('I', NEW.id)",
		"CREATE TRIGGER t_ai2 AFTER INSERT ON t FOR EACH ROW FOLLOWS t_ai INSERT INTO audit (op, tid) VALUES ('J', NEW.id)",
		"CREATE TRIGGER t_ad AFTER DELETE ON t FOR EACH ROW INSERT INTO audit (op, tid) VALUES ('D', OLD.id)")
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, q := range []string{"SET SESSION sql_mode = CONCAT(@@SESSION.sql_mode, ',ANSI_QUOTES')",
		`CREATE TRIGGER t_au AFTER UPDATE ON t FOR EACH ROW INSERT INTO "audit" (op, tid) VALUES ('U', NEW.id)`,
		"SET SESSION sql_mode = DEFAULT"} {
		if _, err := conn.ExecContext(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Fill(t, "t", rows, "n, n, ''")
	return db
}

// triggersOf lists table's triggers: name, timing, event and order, and
// whether its sql_mode has ANSI_QUOTES.
func triggersOf(t *testing.T, db *testdb.DB, table string) []string {
	t.Helper()
	rows, err := db.Query(`SELECT TRIGGER_NAME, ACTION_TIMING, EVENT_MANIPULATION, ACTION_ORDER, FIND_IN_SET('ANSI_QUOTES', SQL_MODE) > 0
		FROM information_schema.TRIGGERS WHERE EVENT_OBJECT_SCHEMA = ? AND EVENT_OBJECT_TABLE = ? ORDER BY TRIGGER_NAME`, db.Name, table)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var name, timing, event string
		var order int
		var ansi bool
		if err := rows.Scan(&name, &timing, &event, &order, &ansi); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s %s %s #%d ansi=%v", name, timing, event, order, ansi))
	}
	return out
}

// TestTriggersMoveAtCutover: writers insert, update and delete throughout a
// migration of a table with triggers, before and after the swap. Every
// write fires its triggers exactly once (the audit table, counted against
// the writers' own tally), the BEFORE trigger set every inserted row, and
// the new table has the same triggers in the same order and sql_mode; the
// old one has none.
func TestTriggersMoveAtCutover(t *testing.T) {
	const rows = 20000
	db := triggerTable(t, rows)
	if db.Flavor == dbconn.MariaDB {
		t.Skip("MariaDB: sluice refuses tables with triggers (TestTriggersRefusedOnMariaDB)")
	}
	before := triggersOf(t, db, "t")
	var base [4]int
	for i, op := range []string{"I", "J", "U", "D"} {
		db.QueryRow("SELECT COUNT(*) FROM audit WHERE op = ?", op).Scan(&base[i])
	}

	const writers = 4
	var inserts, updates, deletes atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 7))
			next := rows + 1 + w*1_000_000
			live := []int{}
			for {
				select {
				case <-stop:
					return
				default:
				}
				var q string
				var args []any
				var count *atomic.Int64
				switch p := r.IntN(10); {
				case p < 4 || len(live) == 0:
					q, args, count = "INSERT INTO t (id, v) VALUES (?, ?)", []any{next, r.IntN(1000)}, &inserts
				case p < 8:
					q, args, count = "UPDATE t SET v = v + 1 WHERE id = ?", []any{live[r.IntN(len(live))]}, &updates
				default:
					i := r.IntN(len(live))
					q, args, count = "DELETE FROM t WHERE id = ?", []any{live[i]}, &deletes
					live = slices.Delete(live, i, i+1)
				}
				res, err := db.Exec(q, args...)
				if err != nil {
					errs <- fmt.Errorf("%s %v: %w", q, args, err)
					return
				}
				if n, _ := res.RowsAffected(); n == 1 {
					count.Add(1)
				} else {
					errs <- fmt.Errorf("%s %v affected %d rows", q, args, n)
					return
				}
				if strings.HasPrefix(q, "INSERT") {
					live = append(live, next)
					next++
				}
			}
		}()
	}
	cfg := config(t, db, "t", "ADD COLUMN x INT")
	res, err := mustRunner(t, cfg).Run(context.Background())
	time.Sleep(200 * time.Millisecond) // writes after the swap, too
	close(stop)
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if err != nil {
		t.Fatal(err)
	}
	if inserts.Load()+updates.Load()+deletes.Load() < 50 {
		t.Errorf("only %d writes: the test proves little", inserts.Load()+updates.Load()+deletes.Load())
	}
	var got [4]int
	for i, op := range []string{"I", "J", "U", "D"} {
		db.QueryRow("SELECT COUNT(*) FROM audit WHERE op = ?", op).Scan(&got[i])
		got[i] -= base[i]
	}
	want := [4]int{int(inserts.Load()), int(inserts.Load()), int(updates.Load()), int(deletes.Load())}
	if got != want {
		t.Errorf("triggers fired (insert, second insert, update, delete) %v times, want %v: a write ran without its triggers, or through them twice", got, want)
	}
	var unset int
	db.QueryRow("SELECT COUNT(*) FROM t WHERE note IS NULL OR note <> CONCAT('bi:', id)").Scan(&unset)
	if unset != 0 {
		t.Errorf("%d rows the BEFORE INSERT trigger did not set", unset)
	}
	if after := triggersOf(t, db, "t"); !slices.Equal(after, before) {
		t.Errorf("triggers after the swap:\n%s\nwant:\n%s", strings.Join(after, "\n"), strings.Join(before, "\n"))
	}
	if old := triggersOf(t, db, res.OldTable); len(old) != 0 {
		t.Errorf("the old table kept triggers: %v", old)
	}
	t.Logf("%d inserts, %d updates, %d deletes; cut-over lock %s", inserts.Load(), updates.Load(), deletes.Load(), res.CutoverLock)
}

// TestTriggersRefusedOnMariaDB: on MariaDB the swap would leave a moment
// without the triggers, so a table with triggers is refused before anything
// is created.
func TestTriggersRefusedOnMariaDB(t *testing.T) {
	db := triggerTable(t, 10)
	if db.Flavor != dbconn.MariaDB {
		t.Skip("MySQL moves the triggers (TestTriggersMoveAtCutover)")
	}
	before := snapshot(t, db, "t")
	_, err := mustRunner(t, config(t, db, "t", "ADD COLUMN x INT")).Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "on MySQL only") {
		t.Fatalf("want a refusal, got %v", err)
	}
	if after := snapshot(t, db, "t"); after != before {
		t.Error("the original table changed")
	}
	if tables := db.Tables(t); !slices.Equal(tables, []string{"audit", "t"}) {
		t.Errorf("leftovers: %v", tables)
	}
}

// TestTriggersPutBackWhenTheSwapFails: the RENAME fails after the triggers
// moved to the new table (a table took the old table's name during a
// postponed cut-over). Every trigger is back on the original, in its order,
// and the original is as it was.
func TestTriggersPutBackWhenTheSwapFails(t *testing.T) {
	db := triggerTable(t, 500)
	if db.Flavor == dbconn.MariaDB {
		t.Skip("MariaDB: sluice refuses tables with triggers")
	}
	before, rows := triggersOf(t, db, "t"), snapshot(t, db, "t")
	cfg := config(t, db, "t", "ADD COLUMN x INT")
	cfg.PostponeCutover = true
	r := mustRunner(t, cfg)
	errc := make(chan error, 1)
	go func() { _, err := r.Run(context.Background()); errc <- err }()
	waitPhase(t, r, "postponed", errc)
	db.MustExec(t, "CREATE TABLE _t_old (x INT)")
	if err := migration.TriggerCutover(context.Background(), db.DB, db.Name, "t"); err != nil {
		t.Fatal(err)
	}
	err := ended(t, errc, time.Minute, "after the cut-over was triggered")
	if err == nil {
		t.Fatal("the swap onto an existing table succeeded")
	}
	if after := triggersOf(t, db, "t"); !slices.Equal(after, before) {
		t.Errorf("after a failed swap (%v) the original's triggers are:\n%s\nwant:\n%s", err, strings.Join(after, "\n"), strings.Join(before, "\n"))
	}
	if after := snapshot(t, db, "t"); after != rows {
		t.Error("the original table changed")
	}
	db.MustExec(t, "INSERT INTO t (id, v) VALUES (100000, 1)")
	var fired int
	db.QueryRow("SELECT COUNT(*) FROM audit WHERE tid = 100000").Scan(&fired)
	if fired != 2 {
		t.Errorf("an insert after the failed swap fired %d AFTER INSERT triggers, want 2", fired)
	}
}
