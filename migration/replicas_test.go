package migration_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/testdb"
	"github.com/sluicedb/sluice/migration"
)

// openReplica connects to a sandbox replica as root.
func openReplica(t *testing.T, c dbconn.Config) *sql.DB {
	t.Helper()
	db, err := dbconn.Open(context.Background(), c, "", 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// caughtUp waits until the replica has applied everything the primary has.
func caughtUp(t *testing.T, primary, rep *sql.DB) {
	t.Helper()
	testdb.WaitReplicated(t, primary, rep, 2*time.Minute)
}

// TestReplicaLagPausesCopyAndHoldsCutover: a replica whose SQL thread stops
// during the copy makes the copy pause within --max-lag plus one chunk;
// the copy goes on once the replica catches up. The replica is stopped again
// before the cut-over, which waits for it. The replica ends with the new
// table, equal to the primary's.
func TestReplicaLagPausesCopyAndHoldsCutover(t *testing.T) {
	reps := testdb.Replicas(t)
	db := tableT(t, 200000)
	rep := openReplica(t, reps[0])
	caughtUp(t, db.DB, rep)
	before := idV(t, db)

	const maxLag = 300 * time.Millisecond
	cfg := config(t, db, "t", "ADD COLUMN x INT")
	cfg.CopyWorkers, cfg.ChunkTime = 1, 5*time.Millisecond
	cfg.ReplicaDiscovery, cfg.MaxLag = true, maxLag
	cfg.PostponeCutover = true
	var log testdb.SyncBuffer
	cfg.Logger = slog.New(slog.NewTextHandler(&log, nil))
	cfg.ProgressInterval = 200 * time.Millisecond

	stopped := func(on bool) {
		t.Helper()
		stmt := "START REPLICA SQL_THREAD"
		if on {
			stmt = "STOP REPLICA SQL_THREAD"
		}
		if _, err := rep.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { rep.Exec("START REPLICA SQL_THREAD") })
	var stopAt atomic.Int64
	// The replica stops once the copy has copied some rows: stopped as the
	// copy starts, the pause (which reacts to the lag the replica is heading
	// for) can come before the first chunk on a slow machine, and show
	// nothing of where it came.
	cfg.OnPhase = func(name string) {
		if name == "copy" {
			go func() {
				for deadline := time.Now().Add(30 * time.Second); shadowRows(t, db, "t") < 2000 && time.Now().Before(deadline); {
					time.Sleep(5 * time.Millisecond)
				}
				if _, err := rep.Exec("STOP REPLICA SQL_THREAD"); err != nil {
					t.Error(err)
				}
				stopAt.Store(time.Now().UnixNano())
			}()
		}
	}
	r, errc, result := start(t, cfg, context.Background())
	for stopAt.Load() == 0 { // OnPhase runs just after the phase is set
		time.Sleep(time.Millisecond)
	}

	// Follow the shadow's rows: they must stop growing soon after the stop.
	type sample struct {
		at   time.Duration
		rows int
	}
	var samples []sample
	t0 := time.Unix(0, stopAt.Load())
	for time.Since(t0) < 10*time.Second {
		samples = append(samples, sample{time.Since(t0), shadowRows(t, db, "t")})
		time.Sleep(50 * time.Millisecond)
	}
	last := samples[len(samples)-1].rows
	if last <= 0 || last >= 200000 {
		t.Fatalf("after 10s with the replica stopped the shadow has %d of 200000 rows: the copy did not pause part-way "+
			"(it finished first, or never started)", last)
	}
	// pausedAt: from this sample on the count stays at last.
	i := len(samples) - 1
	for i > 0 && samples[i-1].rows == last {
		i--
	}
	pausedAt := samples[i].at
	t.Logf("the copy paused %s after the replica's SQL thread stopped (--max-lag %s), at %d of 200000 rows", pausedAt.Round(time.Millisecond), maxLag, last)
	if limit := maxLag + time.Second; pausedAt > limit {
		t.Errorf("the copy paused %s after the replica stopped, want within --max-lag %s plus one chunk (%s)", pausedAt, maxLag, limit)
	}
	stopped(false)

	// The copy resumes; before the cut-over the replica stops again for 3s.
	waitPhase(t, r, "postponed", errc)
	stopped(true)
	time.Sleep(time.Second)
	if err := migration.TriggerCutover(context.Background(), db.DB, db.Name, "t"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	if p := r.Phase(); p != "cut-over" {
		t.Errorf("phase %s while the replica is stopped before the cut-over, want cut-over waiting", p)
	}
	if n := db.Tables(t); !slices.Contains(n, "_t_new") {
		t.Errorf("the tables were swapped while the replica lagged: %v", n)
	}
	released := time.Now()
	stopped(false)
	if err := ended(t, errc, 2*time.Minute, "after the replica caught up"); err != nil {
		t.Fatal(err)
	}
	res := result()
	if res.ReplicaPaused < 5*time.Second {
		t.Errorf("Result.ReplicaPaused = %s, want most of the 10s the replica was stopped during the copy", res.ReplicaPaused)
	}
	if res.CutoverLagWait < 2*time.Second || time.Since(released) > time.Minute {
		t.Errorf("Result.CutoverLagWait = %s, want about the 3s the replica was stopped before the cut-over", res.CutoverLagWait)
	}
	if res.ReplicaLagMax < 2*time.Second {
		t.Errorf("Result.ReplicaLagMax = %s, want the lag of a replica stopped for seconds", res.ReplicaLagMax)
	}
	if !slices.Contains(res.Replicas, fmt.Sprintf("%s:%d", reps[0].Host, reps[0].Port)) {
		t.Errorf("Result.Replicas = %v, want the sandbox replica %s:%d found by discovery", res.Replicas, reps[0].Host, reps[0].Port)
	}
	if after := idV(t, db); after != before {
		t.Error("the migrated table differs from the original")
	}
	if tables := db.Tables(t); !slices.Equal(tables, []string{"_t_old", "t"}) {
		t.Errorf("tables after the run: %v, want _t_old and t (the heartbeat table dropped)", tables)
	}
	// The replica has the new table and the same rows.
	caughtUp(t, db.DB, rep)
	var got, want string
	q := "SELECT CONCAT(COUNT(*), ':', COALESCE(SUM(id), 0), ':', COALESCE(SUM(v), 0), ':', COUNT(x)) FROM " + dbconn.QuoteTable(db.Name, "t")
	if err := db.QueryRow(q).Scan(&want); err != nil {
		t.Fatal(err)
	}
	if err := rep.QueryRow(q).Scan(&got); err != nil {
		t.Fatalf("the replica lacks the migrated table: %v", err)
	}
	if got != want {
		t.Errorf("replica %s, primary %s", got, want)
	}
	for _, w := range []string{"watching replica lag", `paused="replica `, "the cut-over waits for the replicas", "replica_lag="} {
		if !strings.Contains(log.String(), w) {
			t.Errorf("the log lacks %q", w)
		}
	}
}

// TestReplicaFlags: a --replica value that carries credentials is refused
// before anything is done, and an unreachable named replica stops the
// preflight with its name.
func TestReplicaFlags(t *testing.T) {
	db := tableT(t, 10)
	before := snapshot(t, db, "t")
	cfg := config(t, db, "t", "ADD COLUMN x INT")
	cfg.ReplicaAddrs = []string{"root:secret@tcp(127.0.0.1:13317)/"}
	if _, err := migration.New(cfg); err == nil || !strings.Contains(err.Error(), "host:port only") {
		t.Errorf("a DSN as --replica: err = %v", err)
	}
	cfg.ReplicaAddrs = []string{"127.0.0.1:1"}
	_, err := mustRunner(t, cfg).Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Errorf("an unreachable --replica: err = %v", err)
	}
	untouched(t, db, "t", before)
}

// TestReplicasKeepIndexesDuringCopy: while replicas are watched, the new
// table keeps its plain secondary indexes during the copy (a build after it
// would reach each replica as one statement stopping its applier for the
// whole build), and they do not hold the changes back: they are applied
// during the copy. A unique one is still built after the copy: kept, a row
// the writers move to a new primary key during the copy would be copied
// twice and collide with itself. --defer-indexes builds them all after the
// copy. Every case ends equal to the writers' model, which moves rows.
func TestReplicasKeepIndexesDuringCopy(t *testing.T) {
	reps := testdb.Replicas(t)
	for _, c := range []struct {
		name                 string
		unique, deferThem    bool
		wantKept, wantInCopy bool
	}{
		{name: "plain", wantKept: true, wantInCopy: true},
		{name: "unique", unique: true, wantInCopy: true},
		{name: "deferred", deferThem: true, wantInCopy: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			db := testdb.New(t)
			key := "KEY kv (v)"
			if c.unique {
				key = "UNIQUE KEY kv (v)"
			}
			db.MustExec(t, "CREATE TABLE t (id BIGINT NOT NULL PRIMARY KEY, v BIGINT NOT NULL, pad VARCHAR(100), "+key+")")
			w := &workload{table: "t", pk: []string{"id"}, writers: 4, cols: []string{"v", "pad"},
				key: func(n int64) []any { return []any{n + 1} },
				// v is unique: the row's own number, moved far off on update.
				gen:    func(r *rand.Rand, n int64) []any { return []any{n + 1, "p"} },
				update: []func(r *rand.Rand) (string, []any){func(r *rand.Rand) (string, []any) { return "pad = ?", []any{fmt.Sprint(r.Int())} }}}
			var log testdb.SyncBuffer
			var kept atomic.Int32 // 1: kv was on the new table as the copy began; 2: it was not
			res := migrateUnderWorkload(t, db, w, 60000, "n, n, 'p'", "ADD COLUMN x INT", "id, v, pad", "id", func(cfg *migration.Config) {
				cfg.CopyWorkers, cfg.ChunkTime = 1, 2*time.Millisecond
				cfg.ReplicaAddrs = []string{fmt.Sprintf("%s:%d", reps[0].Host, reps[0].Port)}
				cfg.DeferIndexes = c.deferThem
				cfg.Logger = slog.New(slog.NewTextHandler(&log, nil))
				cfg.OnPhase = func(name string) {
					if name == "copy" {
						var n int
						db.QueryRow("SELECT COUNT(*) FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = '_t_new' AND INDEX_NAME = 'kv'", db.Name).Scan(&n)
						kept.Store(int32(2 - min(n, 1)))
					}
				}
			})
			if got := kept.Load() == 1; got != c.wantKept {
				t.Errorf("index kv on the new table as the copy began: %v, want %v", got, c.wantKept)
			}
			if got := res.KeysAppliedInCopy > 0; got != c.wantInCopy {
				t.Errorf("changes applied during the copy: %d, want some: %v", res.KeysAppliedInCopy, c.wantInCopy)
			}
			if got := strings.Contains(log.String(), "secondary indexes will be built after the copy"); got == c.wantKept {
				t.Errorf("the log says the indexes are built after the copy: %v, with the index kept: %v", got, c.wantKept)
			}
			if got := strings.Contains(log.String(), "plain secondary indexes are kept during the copy"); got != !c.deferThem {
				t.Errorf("the log says the plain indexes are kept: %v, want %v", got, !c.deferThem)
			}
			if len(res.Replicas) != 1 {
				t.Errorf("replicas watched: %v, want the one named", res.Replicas)
			}
		})
	}
}

// TestIgnoreReplica: a watched replica that stops applying holds the copy
// (a replica gone for good would hold it forever); the operator's
// ignore-replica stops watching it, and the run finishes while the replica
// is still stopped. A name that is not watched is refused.
func TestIgnoreReplica(t *testing.T) {
	reps := testdb.Replicas(t)
	db := tableT(t, 20000)
	rep := openReplica(t, reps[0])
	caughtUp(t, db.DB, rep)
	before := idV(t, db)
	name := fmt.Sprintf("%s:%d", reps[0].Host, reps[0].Port)

	cfg := config(t, db, "t", "ADD COLUMN x INT")
	cfg.CopyWorkers, cfg.ChunkTime = 1, 5*time.Millisecond
	cfg.ReplicaAddrs, cfg.MaxLag, cfg.DropOld = []string{name}, 300*time.Millisecond, true
	t.Cleanup(func() { rep.Exec("START REPLICA SQL_THREAD") })
	if _, err := rep.Exec("STOP REPLICA SQL_THREAD"); err != nil {
		t.Fatal(err)
	}
	r, errc, _ := start(t, cfg, context.Background())
	// The heartbeat never reaches the stopped replica: the copy holds.
	deadline := time.Now().Add(30 * time.Second)
	for st := r.Status(); st.Phase != "copy" || !strings.Contains(st.Throttle, name); st = r.Status() {
		if time.Now().After(deadline) {
			t.Fatalf("the copy was not held for the stopped replica within 30s: %+v", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
	held := shadowRows(t, db, "t")
	time.Sleep(time.Second)
	if n := shadowRows(t, db, "t"); n != held || n >= 20000 {
		t.Fatalf("the copy went on while the replica was stopped: %d rows, then %d", held, n)
	}
	if _, err := r.Set(context.Background(), "ignore-replica", "127.0.0.1:2"); err == nil || !strings.Contains(err.Error(), name) {
		t.Errorf("ignore-replica of a name not watched: %v, want a refusal listing %s", err, name)
	}
	msg, err := r.Set(context.Background(), "ignore-replica", name)
	if err != nil || !strings.Contains(msg, "0 replicas still watched") {
		t.Fatalf("ignore-replica=%s: %q, %v", name, msg, err)
	}
	select {
	case err := <-errc:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the run did not finish within 2 minutes of ignore-replica")
	}
	if after := idV(t, db); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Error("the rows changed")
	}
}
