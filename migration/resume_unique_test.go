package migration_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/testdb"
)

// TestResumedCopyDefersBuiltUnique: a run that built the new table's unique
// index and died before its checkpoint said the copy was done leaves a
// shadow with the index and a checkpoint with ranges still to copy. The
// resumed run copies them again: it must drop the unique index for that copy
// (a row moved to another primary key meanwhile could collide with itself
// and stop the run on a false duplicate) and build it after. The first run
// is made to keep its work by a cut-over that cannot get its lock; its
// checkpoint is then set back to "copy not done, everything to copy".
func TestResumedCopyDefersBuiltUnique(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE t (id INT PRIMARY KEY, u INT NOT NULL, v INT)")
	db.Fill(t, "t", 3000, "n, n, n")
	alter := "ADD UNIQUE KEY uq (u), ADD COLUMN x INT"
	ctx := context.Background()

	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	cfg := config(t, db, "t", alter)
	cfg.LockWait, cfg.LockDeadline, cfg.KillAfter, cfg.KillMaxRows = time.Second, 3*time.Second, time.Second, 1
	cfg.OnPhase = func(name string) {
		if name == "cut-over" {
			if _, err := tx.Exec("UPDATE t SET v = v + 1 WHERE id <= 10"); err != nil {
				t.Error(err)
			}
		}
	}
	if _, err := mustRunner(t, cfg).Run(ctx); err == nil {
		t.Fatal("the cut-over got its lock past an open transaction")
	}
	tx.Rollback()
	keptForResume(t, db)
	if !strings.Contains(showCreate(t, db, "_t_new"), "UNIQUE KEY `uq`") {
		t.Fatalf("the kept shadow has no unique index: the test sets up nothing\n%s", showCreate(t, db, "_t_new"))
	}
	db.MustExec(t, `UPDATE _t_ckpt SET body = JSON_SET(body, '$.copied', false, '$.todo', JSON_ARRAY(JSON_OBJECT()), '$.rows', 0)`)

	// The resumed run, with writers that swap u between rows.
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			a, b := 1+i%1500, 3000-i%1500
			db.Exec("UPDATE t SET u = -u WHERE id IN (?, ?)", a, b)
			db.Exec("UPDATE t SET u = CASE id WHEN ? THEN ? ELSE ? END WHERE id IN (?, ?)", a, b, a, a, b)
		}
	}()
	var uniqueInCopy []string
	cfg = config(t, db, "t", alter)
	var log testdb.SyncBuffer
	cfg.Logger = slog.New(slog.NewTextHandler(&log, nil))
	var once sync.Once
	stopWriters := func() { once.Do(func() { close(stop); <-done }) }
	cfg.OnPhase = func(name string) {
		if name == "copy" && strings.Contains(showCreate(t, db, "_t_new"), "UNIQUE KEY") {
			uniqueInCopy = append(uniqueInCopy, showCreate(t, db, "_t_new"))
		}
		if name == "cut-over" {
			// Writes after the swap would reach the new table only; the
			// old one is the oracle below.
			stopWriters()
		}
	}
	res, err := mustRunner(t, cfg).Run(ctx)
	stopWriters()
	if err != nil {
		t.Fatalf("the resumed run: %v\n%s", err, log.String())
	}
	if !res.Resumed {
		t.Fatalf("the run did not resume:\n%s", log.String())
	}
	if len(uniqueInCopy) > 0 {
		t.Errorf("the resumed copy ran with a unique index on the new table:\n%s", uniqueInCopy[0])
	}
	if !strings.Contains(showCreate(t, db, "t"), "UNIQUE KEY `uq`") {
		t.Errorf("the migrated table lacks its unique index:\n%s", showCreate(t, db, "t"))
	}
	compare(t, db, "t", "_t_old", "id, u, v", "id")
}

func showCreate(t *testing.T, db *testdb.DB, table string) string {
	t.Helper()
	var name, ddl string
	if err := db.QueryRow("SHOW CREATE TABLE `"+table+"`").Scan(&name, &ddl); err != nil {
		t.Fatal(err)
	}
	return ddl
}

// TestFunctionalUniqueBuiltAfterCopy: a unique index on an expression is, like
// any unique index, off the new table during the copy (a row moved to another
// primary key could collide with itself) and built after it; the server builds
// it with ALGORITHM=COPY only. Writers swap the indexed values meanwhile.
func TestFunctionalUniqueBuiltAfterCopy(t *testing.T) {
	db := testdb.New(t)
	db.SkipUnless(t, dbconn.MySQL, "functional key parts are MySQL syntax")
	db.MustExec(t, "CREATE TABLE t (id INT PRIMARY KEY, email VARCHAR(40) NOT NULL, v INT, UNIQUE KEY ue ((lower(email))))")
	db.Fill(t, "t", 3000, "n, CONCAT('user', n, '@Example.com'), n")
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			a, b := 1+i%1500, 3000-i%1500
			// Swap the two rows' emails through a free value.
			db.Exec("UPDATE t SET email = CONCAT('tmp', id) WHERE id = ?", a)
			db.Exec("UPDATE t SET email = (SELECT e FROM (SELECT CONCAT('user', ?, '@example.COM') AS e) x) WHERE id = ?", a, b)
			db.Exec("UPDATE t SET email = CONCAT('user', ?, '@example.com') WHERE id = ?", b, a)
		}
	}()
	var once sync.Once
	stopWriters := func() { once.Do(func() { close(stop); <-done }) }
	var uniqueInCopy []string
	cfg := config(t, db, "t", "ADD COLUMN x INT")
	cfg.OnPhase = func(name string) {
		if name == "copy" && strings.Contains(showCreate(t, db, "_t_new"), "UNIQUE KEY") {
			uniqueInCopy = append(uniqueInCopy, showCreate(t, db, "_t_new"))
		}
		if name == "cut-over" {
			stopWriters()
		}
	}
	_, err := mustRunner(t, cfg).Run(context.Background())
	stopWriters()
	if err != nil {
		t.Fatal(err)
	}
	if len(uniqueInCopy) > 0 {
		t.Errorf("the copy ran with a unique index on the new table:\n%s", uniqueInCopy[0])
	}
	if ddl := showCreate(t, db, "t"); !strings.Contains(ddl, "UNIQUE KEY `ue` ((lower(`email`)))") {
		t.Errorf("the migrated table lacks its functional unique index:\n%s", ddl)
	}
	compare(t, db, "t", "_t_old", "id, email, v", "id")
}
