package migration_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/testdb"
	"github.com/sluicedb/sluice/migration"
)

// TestCutoverFourTerminals reproduces the metadata-lock seed on the copy
// path: as the cut-over begins, a long SELECT ... SLEEP() holds the table
// while 8 readers query it throughout the migration. No reader may wait much
// longer than the 1s lock budget because of sluice, and none may fail. Under
// the never policy the swap happens once the blocker ends by itself; under
// after=1s the blocker is killed and the swap follows. The blocker is named
// in sluice's log either way.
func TestCutoverFourTerminals(t *testing.T) {
	for _, tc := range []struct {
		name      string
		sleep     int
		killAfter time.Duration
	}{
		{"never", 4, 0},
		{"after=1s", 60, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := tableT(t, 2000)
			var log testdb.SyncBuffer
			cfg := config(t, db, "t", "ADD COLUMN x INT")
			cfg.Logger = slog.New(slog.NewTextHandler(&log, nil))
			cfg.LockWait, cfg.KillAfter = time.Second, tc.killAfter
			query := fmt.Sprintf("SELECT t.id, SLEEP(%d) FROM t WHERE id = 1", tc.sleep)
			var id int64
			var blockerDone <-chan error
			var blockedAt time.Time
			cfg.OnPhase = func(name string) {
				if name == "cut-over" {
					id, blockerDone = db.Blocker(t, query)
					blockedAt = time.Now()
				}
			}
			stop := db.Readers(t, "t", 8)
			_, err := mustRunner(t, cfg).Run(context.Background())
			worst, failed := stop()
			if err != nil {
				t.Fatalf("%v\n%s", err, log.String())
			}
			took := time.Since(blockedAt)
			t.Logf("cut-over done %s after the blocker started; worst reader latency %s; %d reader queries failed", took.Round(time.Millisecond), worst, failed)
			if worst > 1500*time.Millisecond || failed > 0 {
				t.Errorf("worst reader latency %s (want <= 1.5s), %d reader queries failed (want 0)", worst, failed)
			}
			if !strings.Contains(log.String(), fmt.Sprintf("connection %d", id)) || !strings.Contains(log.String(), fmt.Sprintf("SLEEP(%d)", tc.sleep)) {
				t.Errorf("the log does not name the blocker:\n%s", log.String())
			}
			var blockerErr error
			select {
			case blockerErr = <-blockerDone:
			case <-time.After(5 * time.Second):
				t.Fatal("the blocker is still running after the swap")
			}
			if tc.killAfter == 0 {
				if blockerErr != nil || strings.Contains(log.String(), "killed a blocking session") {
					t.Errorf("under the never policy the blocker was ended (%v)", blockerErr)
				}
				if took < time.Duration(tc.sleep)*time.Second-500*time.Millisecond {
					t.Errorf("the swap came %s after the blocker started, before it could have ended", took)
				}
			} else {
				if blockerErr == nil || !strings.Contains(log.String(), "killed a blocking session") {
					t.Errorf("the blocker was not killed (%v):\n%s", blockerErr, log.String())
				}
				if took > 10*time.Second {
					t.Errorf("the swap came %s after the blocker started; the policy kills after %s", took, tc.killAfter)
				}
			}
			if got := columns(t, db, "t"); got != "id,v,x" {
				t.Errorf("columns %s", got)
			}
		})
	}
}

// TestCutoverSparesBigWriter: at the cut-over, a transaction that updated
// 3000 rows holds the table. With --kill-max-rows=1000 it is not killed even
// under after=1s; sluice gives up at its deadline saying why it waited, and
// the original table is as it was, the writer's transaction still open.
func TestCutoverSparesBigWriter(t *testing.T) {
	db := tableT(t, 3000)
	ctx := context.Background()
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var id int64
	cfg := config(t, db, "t", "ADD COLUMN x INT")
	var log testdb.SyncBuffer
	cfg.Logger = slog.New(slog.NewTextHandler(&log, nil))
	cfg.LockWait, cfg.LockDeadline, cfg.KillAfter, cfg.KillMaxRows = time.Second, 4*time.Second, time.Second, 1000
	cfg.OnPhase = func(name string) {
		if name != "cut-over" {
			return
		}
		tx.QueryRow("SELECT CONNECTION_ID()").Scan(&id)
		if _, err := tx.Exec("UPDATE t SET v = v + 1"); err != nil {
			t.Error(err)
		}
	}
	stop := db.Readers(t, "t", 8)
	_, err = mustRunner(t, cfg).Run(ctx)
	worst, failed := stop()
	want := "not killed: its transaction modified 3000 rows, more than --kill-max-rows=1000"
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("connection %d", id)) || !strings.Contains(err.Error(), want) {
		t.Fatalf("want the deadline error to describe the spared writer, got %v", err)
	}
	if !strings.Contains(log.String(), strings.TrimPrefix(want, "not killed: ")) || strings.Contains(log.String(), "killed a blocking session") {
		t.Errorf("the log does not say why sluice waits, or the writer was killed:\n%s", log.String())
	}
	if worst > 1500*time.Millisecond || failed > 0 {
		t.Errorf("worst reader latency %s, %d failed", worst, failed)
	}
	var n int
	if err := tx.QueryRow("SELECT COUNT(*) FROM t WHERE v = id + 1").Scan(&n); err != nil || n != 3000 {
		t.Errorf("the writer's transaction is gone or changed: %d rows, %v", n, err)
	}
	tx.Rollback()
	if got := columns(t, db, "t"); got != "id,v" {
		t.Errorf("columns %s after giving up", got)
	}
	keptForResume(t, db)
}

// keptForResume checks what a cut-over that gave up at its deadline leaves:
// the new table and its checkpoint, for the same command to resume.
func keptForResume(t *testing.T, db *testdb.DB) {
	t.Helper()
	if tables := db.Tables(t); !slices.Equal(tables, []string{"_t_ckpt", "_t_new", "t"}) {
		t.Errorf("after the lock deadline: tables %v, want the new table and its checkpoint kept", tables)
	}
}

// waitPhase waits until the runner reaches phase.
func waitPhase(t *testing.T, r *migration.Runner, phase string, errc <-chan error) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for r.Phase() != phase {
		select {
		case err := <-errc:
			t.Fatalf("the migration ended before %s: %v", phase, err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("phase %s never came (now %s)", phase, r.Phase())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestPostponedCutover: with PostponeCutover the migration waits after the
// checksum with the shadow kept in sync (changes made while it waits reach
// the shadow), does not swap on its own, and swaps once TriggerCutover drops
// its control table.
func TestPostponedCutover(t *testing.T) {
	db := tableT(t, 2000)
	ctx := context.Background()
	cfg := config(t, db, "t", "ADD COLUMN x INT")
	cfg.PostponeCutover = true
	r := mustRunner(t, cfg)
	errc := make(chan error, 1)
	go func() { _, err := r.Run(ctx); errc <- err }()
	waitPhase(t, r, "postponed", errc)

	db.MustExec(t, "INSERT INTO t (id, v) SELECT n + 100000, n FROM (SELECT id AS n FROM t WHERE id <= 50) s",
		"UPDATE t SET v = -1 WHERE id <= 10", "DELETE FROM t WHERE id BETWEEN 20 AND 29")
	// Changes keep reaching the shadow while the cut-over waits.
	deadline := time.Now().Add(10 * time.Second)
	for {
		var added, updated, deleted int
		db.QueryRow("SELECT SUM(id > 100000), SUM(v = -1), 10 - SUM(id BETWEEN 20 AND 29) FROM _t_new").Scan(&added, &updated, &deleted)
		if added == 50 && updated == 10 && deleted == 10 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the shadow did not follow the changes while the cut-over waited: %d added, %d updated, %d deleted", added, updated, deleted)
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Second)
	if r.Phase() != "postponed" {
		t.Fatalf("the migration went on to %s without being told", r.Phase())
	}
	if got := columns(t, db, "t"); got != "id,v" {
		t.Fatalf("the table changed before the cut-over was triggered: %s", got)
	}
	want := fmt.Sprint(db.Dump(t, "t", "id, v", "id"))
	if err := migration.TriggerCutover(ctx, db.DB, db.Name, "t"); err != nil {
		t.Fatal(err)
	}
	if err := ended(t, errc, 30*time.Second, "after the cut-over was triggered"); err != nil {
		t.Fatal(err)
	}
	if got := columns(t, db, "t"); got != "id,v,x" {
		t.Errorf("columns %s", got)
	}
	if got := fmt.Sprint(db.Dump(t, "t", "id, v", "id")); got != want {
		t.Errorf("the new table's rows differ from the original's at the trigger")
	}
	if tables := db.Tables(t); !slices.Equal(tables, []string{"_t_old", "t"}) {
		t.Errorf("tables after the cut-over: %v", tables)
	}
	if err := migration.TriggerCutover(ctx, db.DB, db.Name, "t"); err == nil || !strings.Contains(err.Error(), "no migration of this table is waiting") {
		t.Errorf("a second trigger: %v", err)
	}
}

// TestPostponedCutoverCancelled: CancelCutover ends a waiting migration with
// no swap; the original is unchanged and nothing is left behind.
func TestPostponedCutoverCancelled(t *testing.T) {
	db := tableT(t, 2000)
	ctx := context.Background()
	before := snapshot(t, db, "t")
	cfg := config(t, db, "t", "ADD COLUMN x INT")
	cfg.PostponeCutover = true
	r := mustRunner(t, cfg)
	errc := make(chan error, 1)
	go func() { _, err := r.Run(ctx); errc <- err }()
	waitPhase(t, r, "postponed", errc)
	if err := migration.CancelCutover(ctx, db.DB, db.Name, "t"); err != nil {
		t.Fatal(err)
	}
	if err := ended(t, errc, 30*time.Second, "after the cancel"); !errors.Is(err, migration.ErrCancelled) {
		t.Fatalf("want ErrCancelled, got %v", err)
	}
	if snapshot(t, db, "t") != before || columns(t, db, "t") != "id,v" {
		t.Error("the original changed")
	}
	if tables := db.Tables(t); !slices.Equal(tables, []string{"t"}) {
		t.Errorf("leftovers: %v", tables)
	}
}

// TestCopyIgnoresApplicationRowLocks: an application transaction holds a row
// lock through the whole copy. The copy reads without locks, so it finishes
// while the lock is held (it commits only once the index phase has begun);
// its change reaches the new table through the apply once it commits.
func TestCopyIgnoresApplicationRowLocks(t *testing.T) {
	db := tableT(t, 20000)
	app, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer app.Rollback()
	if _, err := app.Exec("UPDATE t SET v = -1 WHERE id = 12345"); err != nil {
		t.Fatal(err)
	}
	var log testdb.SyncBuffer
	cfg := config(t, db, "t", "ADD COLUMN x INT")
	cfg.Logger = slog.New(slog.NewTextHandler(&log, nil))
	committed := make(chan struct{})
	cfg.OnPhase = func(name string) {
		if name == "index" { // the copy is over; the lock is still held
			go func() {
				time.Sleep(500 * time.Millisecond)
				app.Commit()
				close(committed)
			}()
		}
	}
	res, err := mustRunner(t, cfg).Run(context.Background())
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	<-committed
	if res.KeysApplied == 0 {
		t.Errorf("the application's change was never applied:\n%s", log.String())
	}
	var v, n int
	db.QueryRow("SELECT v FROM t WHERE id = 12345").Scan(&v)
	db.QueryRow("SELECT COUNT(*) FROM t WHERE v = id OR (id = 12345 AND v = -1)").Scan(&n)
	if v != -1 || n != 20000 {
		t.Errorf("after the swap v=%d for the locked row and %d of 20000 rows as expected", v, n)
	}
	t.Logf("%d rows copied, %d changes applied", res.RowsCopied, res.KeysApplied)
}
