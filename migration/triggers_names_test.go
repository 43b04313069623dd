package migration_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/testdb"
)

// TestTriggersCarriedWithFoldedNames: the table, its triggers and the tables
// they write are named with capitals, and one trigger calls a procedure that
// writes a table of its own (which MySQL's LOCK TABLES locks too). On the alt
// server (lower_case_table_names=1) the table is named in the command in yet
// another case. With writers throughout, every committed write leaves its
// audit rows exactly once, the copies carry the names in their case, and on
// MySQL the guard watched both tables the triggers write.
func TestTriggersCarriedWithFoldedNames(t *testing.T) {
	t.Run("folded", func(t *testing.T) { triggersWithCapitals(t, testdb.NewAlt(t), "ORDERS") })
	t.Run("exact", func(t *testing.T) { triggersWithCapitals(t, testdb.New(t), "Orders") })
}

func triggersWithCapitals(t *testing.T, db *testdb.DB, table string) {
	db.MustExec(t, "CREATE TABLE Orders (Id BIGINT PRIMARY KEY, V INT)",
		"CREATE TABLE Audit_Log (n BIGINT AUTO_INCREMENT PRIMARY KEY, op CHAR(1), id BIGINT)",
		"CREATE TABLE Proc_Log (n BIGINT AUTO_INCREMENT PRIMARY KEY, id BIGINT, v INT)",
		"CREATE PROCEDURE Log_Update(IN k BIGINT, IN nv INT) INSERT INTO Proc_Log (id, v) VALUES (k, nv)")
	db.Fill(t, "Orders", 5000, "n, n")
	db.MustExec(t,
		"CREATE TRIGGER Orders_AI AFTER INSERT ON Orders FOR EACH ROW INSERT INTO Audit_Log (op, id) VALUES ('i', NEW.Id)",
		"CREATE TRIGGER Orders_AU AFTER UPDATE ON Orders FOR EACH ROW CALL Log_Update(NEW.Id, NEW.V)",
		"CREATE TRIGGER Orders_AD AFTER DELETE ON Orders FOR EACH ROW INSERT INTO Audit_Log (op, id) VALUES ('d', OLD.Id)")
	stored := "Orders"
	if table != stored {
		stored = "orders" // lower_case_table_names=1
	}
	before := triggersOf(t, db, stored)
	if len(before) != 3 {
		t.Fatalf("triggers before: %q", before)
	}
	const writers = 3
	var mu sync.Mutex
	wantAudit, wantProc := []string{}, []string{}
	next := make([]int64, writers)
	for i := range next {
		next[i] = 100000 + int64(i)
	}
	cfg := config(t, db, table, "ADD COLUMN Extra INT NOT NULL DEFAULT 7")
	cfg.CarryTriggers = true
	log := &testdb.SyncBuffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(log, nil))
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	res, during, _ := migrateUnderWriters(t, mustRunner(t, cfg), seed, writers, func(ctx context.Context, i int, rng *rand.Rand) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		var audit, proc string
		switch id := int64(1 + rng.IntN(5000/writers)*writers + i); rng.IntN(3) {
		case 0:
			next[i] += writers
			_, err = tx.ExecContext(ctx, "INSERT INTO Orders (Id, V) VALUES (?, 0)", next[i])
			audit = fmt.Sprintf("i %d", next[i])
		case 1:
			var r sql.Result
			// A row the UPDATE matches fires the trigger even if unchanged:
			// it matches only rows it changes.
			v := rng.IntN(1000)
			if r, err = tx.ExecContext(ctx, "UPDATE Orders SET V = ? WHERE Id = ? AND V <> ?", v, id, v); err == nil {
				if n, _ := r.RowsAffected(); n == 1 {
					proc = fmt.Sprintf("%d %d", id, v)
				}
			}
		default:
			var r sql.Result
			if r, err = tx.ExecContext(ctx, "DELETE FROM Orders WHERE Id = ?", id); err == nil {
				if n, _ := r.RowsAffected(); n == 1 {
					audit = fmt.Sprintf("d %d", id)
				}
			}
		}
		if err == nil {
			err = tx.Commit()
		}
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		if audit != "" {
			wantAudit = append(wantAudit, audit)
		}
		if proc != "" {
			wantProc = append(wantProc, proc)
		}
		return nil
	}, 1213)
	if during == 0 || res.KeysApplied == 0 {
		t.Fatalf("%d writes during the migration, %d keys applied: nothing tested the triggers under writes", during, res.KeysApplied)
	}
	// The tables in either order (as the metadata locks list them).
	audit, proc := "Audit_Log", "Proc_Log"
	if table != stored {
		audit, proc = strings.ToLower(audit), strings.ToLower(proc)
	}
	found := false
	for _, l := range strings.Split(log.String(), "\n") {
		if strings.Contains(l, `msg="the cut-over also locks the tables the triggers use"`) {
			found = slices.Contains([]string{`tables="` + audit + ", " + proc + `"`, `tables="` + proc + ", " + audit + `"`}, l[strings.Index(l, "tables="):])
		}
	}
	if db.Flavor == dbconn.MySQL && !found {
		t.Errorf("the tables the triggers (and the procedure one calls) write were not found for the guard to watch:\n%s", log.String())
	}
	slices.Sort(wantAudit)
	slices.Sort(wantProc)
	if got := column(t, db, "SELECT CONCAT_WS(' ', op, id) FROM Audit_Log"); !slices.Equal(got, wantAudit) {
		t.Errorf("Audit_Log: %d rows, model %d; first difference: %s", len(got), len(wantAudit), firstDiff(got, wantAudit))
	}
	if got := column(t, db, "SELECT CONCAT_WS(' ', id, v) FROM Proc_Log"); !slices.Equal(got, wantProc) {
		t.Errorf("Proc_Log: %d rows, model %d; first difference: %s", len(got), len(wantProc), firstDiff(got, wantProc))
	}
	if len(wantAudit) == 0 || len(wantProc) == 0 {
		t.Error("no committed write left an audit row: the check compared nothing")
	}
	if after := triggersOf(t, db, stored); !slices.Equal(after, toggledNames(before)) {
		t.Errorf("triggers of the new table:\n got  %q\n want %q", after, toggledNames(before))
	}
	var extra int
	if err := db.QueryRow("SELECT COUNT(*) FROM Orders WHERE Extra <> 7").Scan(&extra); err != nil || extra != 0 {
		t.Errorf("rows without the new column's default: %d (%v)", extra, err)
	}
	t.Logf("%d writes during the migration, %d keys applied, %d audit and %d procedure rows; tables locked %s for the swap",
		during, res.KeysApplied, len(wantAudit), len(wantProc), res.CutoverLock)
}
