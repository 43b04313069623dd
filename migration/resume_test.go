package migration_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/testdb"
	"github.com/sluicedb/sluice/migration"
)

// childJob is a migration run in a child process, so that it can be killed
// with SIGKILL: nothing of sluice runs after it, as after a crash.
type childJob struct {
	DSN      string
	Database string
	Table    string
	Alter    string
	Postpone bool
	Carry    bool   // --carry-triggers
	Capture  string // --capture
	Every    time.Duration
	// Table2 and Alter2, when set, make the child migrate Table and Table2
	// as one group (RunGroup); it prints the first result as RESULT, and
	// both as GROUP.
	Table2, Alter2 string
	// Die names a point of the cut-over at which the child exits at once,
	// as if killed there (failpoint).
	Die string
}

// TestResumeChild runs the migration of SLUICE_RESUME_CHILD (a childJob in
// JSON) and prints its result; it is the child of TestKillAndResume.
func TestResumeChild(t *testing.T) {
	spec := os.Getenv("SLUICE_RESUME_CHILD")
	if spec == "" {
		t.Skip("the child of TestKillAndResume")
	}
	var job childJob
	if err := json.Unmarshal([]byte(spec), &job); err != nil {
		t.Fatal(err)
	}
	conn, _, err := dbconn.ParseDSN(job.DSN)
	if err != nil {
		t.Fatal(err)
	}
	cfg := migration.Config{Conn: conn, Database: job.Database, Table: job.Table, Alter: job.Alter, Method: "copy",
		Approve: allRisks, ChunkTime: 10 * time.Millisecond, CopyWorkers: 2, PostponeCutover: job.Postpone, CarryTriggers: job.Carry, Capture: job.Capture,
		CheckpointInterval: job.Every, DropOld: true, LockDeadline: time.Minute,
		OnPhase: func(name string) { fmt.Printf("\nPHASE %s\n", name) },
		Logger:  slog.New(slog.NewTextHandler(os.Stdout, nil))}
	var res migration.Result
	if job.Table2 != "" {
		cfg2 := cfg
		cfg2.Table, cfg2.Alter = job.Table2, job.Alter2
		var results []migration.Result
		results, err = migration.RunGroup(context.Background(), []migration.Config{cfg, cfg2})
		out, _ := json.Marshal(results)
		fmt.Printf("\nGROUP %s\n", out)
		if len(results) > 0 {
			res = results[0]
		}
	} else {
		res, err = mustRunner(t, cfg).Run(context.Background())
	}
	out, _ := json.Marshal(res)
	fmt.Printf("\nRESULT %s\n", out)
	if err != nil {
		fmt.Printf("ERROR %v\n", err)
		os.Exit(3)
	}
}

// childRun is one child process.
type childRun struct {
	cmd    *exec.Cmd
	out    *testdb.SyncBuffer
	done   chan error
	exited chan struct{} // closed when the child has exited
	// copyFrom is when the child was first seen copying, killedAt when it
	// was killed (killIn).
	copyFrom, killedAt time.Time
}

func startChild(t *testing.T, job childJob) *childRun {
	t.Helper()
	spec, _ := json.Marshal(job)
	cmd := exec.Command(os.Args[0], "-test.run=^TestResumeChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), "SLUICE_RESUME_CHILD="+string(spec), "SLUICE_FAILPOINT="+job.Die)
	out := &testdb.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &childRun{cmd: cmd, out: out, done: make(chan error, 1), exited: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		close(c.exited)
		c.done <- err
	}()
	return c
}

// result parses the child's result line.
func (c *childRun) result(t *testing.T) (migration.Result, string) {
	t.Helper()
	var res migration.Result
	s := c.out.String()
	i := strings.LastIndex(s, "\nRESULT ")
	if i < 0 {
		t.Fatalf("the child printed no result:\n%s", s)
	}
	line := s[i+len("\nRESULT "):]
	line, rest, _ := strings.Cut(line, "\n")
	if err := json.Unmarshal([]byte(line), &res); err != nil {
		t.Fatalf("child result %q: %v", line, err)
	}
	errLine := ""
	if j := strings.Index(rest, "ERROR "); j >= 0 {
		errLine, _, _ = strings.Cut(rest[j+len("ERROR "):], "\n")
	}
	return res, errLine
}

// TestKillAndResume: migrations of a table under eight writers, each run in
// a child process that is killed with SIGKILL at a random moment (copy,
// index build, checksum, postponed wait, cut-over) and then started again
// with the same command, which resumes; after at least 20 kills the table
// equals an independent model of the writes (each writer's statements
// replayed onto a reference table). SLUICE_RESUME_SEED replays the kill
// times.
func TestKillAndResume(t *testing.T) {
	killAndResume(t, "", 20)
}

// TestKillAndResumeByTriggers: TestKillAndResume with the changes captured
// by triggers (--capture=triggers): a run killed after its triggers are made
// leaves them recording into the queue, and the same command again takes
// them up with the shadow; at least 10 kills.
func TestKillAndResumeByTriggers(t *testing.T) {
	killAndResume(t, migration.CaptureTriggers, 10)
}

// killAndResume is TestKillAndResume, with the capture given and at least
// minKills kills.
func killAndResume(t *testing.T, captureBy string, minKills int) {
	if os.Getenv("SLUICE_RESUME_CHILD") != "" {
		t.Skip()
	}
	db := testdb.New(t)
	sysbenchTable(t, db)
	w := sysbenchWorkload()
	const rows = 60000
	db.MustExec(t, "CREATE TABLE model_ref LIKE t")
	w.load(t, db, "model_ref", rows)
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("SLUICE_RESUME_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (SLUICE_RESUME_SEED)", seed)
	rng := rand.New(rand.NewPCG(seed, 7))

	stop := w.start(t, db)
	defer stop()
	alters := []string{"ADD COLUMN extra INT NOT NULL DEFAULT 7", "DROP COLUMN extra"}
	kills, resumed, migrations, tookUp := 0, 0, 0, 0
	var recopies []float64 // rows copied again on resume, in checkpoint intervals of copying
	perInterval := 0.0     // rows the last run killed in its copy copied an interval
	phasesHit := map[string]int{}
	// Until 20 kills, and until a run resumed after a kill in a fresh
	// run's copy has measured what it copies again (a kill before the
	// first checkpoint leaves nothing to resume), for up to 8 migrations.
	for kills < minKills || migrations == 0 || len(recopies) == 0 && migrations < 8 {
		job := childJob{DSN: os.Getenv(testdb.Env), Database: db.Name, Table: "t", Alter: alters[migrations%2],
			Postpone: rng.IntN(4) == 0, Every: 200 * time.Millisecond, Capture: captureBy}
		here := 0 // kills in this migration: at most five, so that several migrations are killed in their first copy
		for {
			c := startChild(t, job)
			final := kills >= minKills && (len(recopies) > 0 || migrations >= 7) || here >= 5
			trigger := job.Postpone && (final || rng.IntN(2) == 0)
			if trigger {
				go triggerWhenPostponed(db, "t", c)
			}
			// The kill comes a random moment after a phase picked at random
			// starts (or when the child gets past it). A postponed child
			// nobody triggers never reaches the cut-over.
			targets := []string{"shadow", "copy", "copy", "index", "catch-up", "checksum"}
			if !job.Postpone || trigger {
				targets = append(targets, "cut-over")
			}
			if job.Postpone {
				targets = append(targets, "postponed", "postponed")
			}
			target := targets[rng.IntN(len(targets))]
			delay := time.Duration(rng.IntN(400)) * time.Millisecond
			if here == 0 {
				// The copy is short: each migration's first kill lands in it.
				target, delay = "copy", time.Duration(rng.IntN(150))*time.Millisecond
			}
			var err error
			killed := false
			if final {
				select {
				case err = <-c.done:
				case <-time.After(5 * time.Minute):
					c.cmd.Process.Signal(syscall.SIGQUIT) // its goroutines, into its output
					<-c.done
					t.Fatalf("the child did not end within 5 minutes (phase %s):\n%s", c.phase(), c.out)
				}
			} else {
				err, killed = c.killIn(target, delay)
				if killed {
					phasesHit[c.phase()]++
					kills++
					here++
				}
			}
			if strings.Contains(c.out.String(), "resuming the earlier run from its checkpoint") {
				tookUp++ // killed again or not
			}
			if perInterval > 0 {
				// The run after a kill in a fresh run's copy: what it
				// copies again, against what that run copied an interval.
				if n, ok := c.cleared(); ok {
					recopies = append(recopies, float64(n)/perInterval)
				}
				perInterval = 0
			}
			if killed && c.phase() == "copy" && !c.copyFrom.IsZero() && !strings.Contains(c.out.String(), "rows_cleared=") {
				// A copy statement the server was running goes on to its
				// commit after its client is killed: what the run copied
				// is counted once none is left.
				for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) &&
					db.Processes(t, "COMMAND = 'Query' AND ID <> CONNECTION_ID() AND INFO LIKE ?", "%`"+db.Name+"`.`_t_new`%") > 0; {
					time.Sleep(10 * time.Millisecond)
				}
				if n := shadowRows(t, db, "t"); n > 0 {
					perInterval = float64(n) / c.killedAt.Sub(c.copyFrom).Seconds() * job.Every.Seconds()
				}
			}
			if killed && !finished(t, db, job.Alter) {
				continue // the same command again
			}
			if killed {
				break // killed after it had finished: the swap and the cleanup were done
			}
			if job.Postpone && err != nil {
				t.Fatalf("postponed child: %v\n%s", err, c.out)
			}
			if err == nil {
				res, _ := c.result(t)
				if res.Resumed || res.AlreadyDone {
					resumed++
				}

				break
			}
			res, errLine := c.result(t)
			if strings.Contains(errLine, "the ALTER does not apply") && finished(t, db, job.Alter) {
				// The killed run's own cleanup statement was still running
				// on the server when finished looked: the migration was
				// done, and the same command again refused without a change.
				t.Logf("the migration was done; the command again refused: %s", errLine)
				break
			}
			t.Fatalf("the child failed (not killed): %s (kept %q)\n%s", errLine, res.Kept, c.out)
		}
		migrations++
	}
	stop()
	w.replay(t, db, "model_ref")
	compare(t, db, "t", "model_ref", "id, k, c, pad", "id")
	t.Logf("%d migrations, %d kills, %d runs resumed; kills by phase %v; %d writes", migrations, kills, resumed, phasesHit, w.ops.Load())
	if tookUp == 0 {
		// (A run that resumed may itself be killed: counted from its log.)
		t.Errorf("no run resumed from a checkpoint (%d finished runs resumed or found the swap done): the kills all missed the migrations", resumed)
	}
	// A resumed run copies again only what the killed one copied after its
	// last checkpoint: at most about one interval's worth (plus the chunks
	// in flight, and the copy's speed varies), never the whole table.
	t.Logf("rows copied again on resume, in checkpoint intervals of the killed run's copying: %.2f", recopies)
	if len(recopies) == 0 {
		t.Error("no resumed run copied a row again: the kills in the copy measured nothing")
	}
	for _, x := range recopies {
		if x > 3 {
			t.Errorf("a resumed run copied again %.2f checkpoint intervals' worth of rows, want about one", x)
		}
	}
	for _, n := range db.Tables(t) {
		if n != "t" && n != "model_ref" {
			t.Errorf("left behind: %s", n)
		}
	}
}

// killIn kills the child delay after it starts phase target (or any later
// one), unless it ends first; it returns the child's exit error and whether
// it was killed.
func (c *childRun) killIn(target string, delay time.Duration) (error, bool) {
	order := []string{"start", "preflight", "shadow", "capture", "copy", "index", "catch-up", "checksum", "postponed", "cut-over"}
	rank := func(p string) int { return slices.Index(order, p) }
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	stuck := time.After(3 * time.Minute)
	for {
		select {
		case err := <-c.done:
			return err, false
		case <-tick.C:
		case <-stuck:
			c.cmd.Process.Signal(syscall.SIGKILL)
			<-c.done
			return fmt.Errorf("the child did not reach phase %s within 3 minutes (last phase %s):\n%s", target, c.phase(), c.out), false
		}
		p := c.phase()
		if p == "copy" && c.copyFrom.IsZero() {
			c.copyFrom = time.Now()
		}
		if rank(p) >= rank(target) {
			break
		}
	}
	select {
	case err := <-c.done:
		return err, false
	case <-time.After(delay):
	}
	c.cmd.Process.Signal(syscall.SIGKILL)
	c.killedAt = time.Now()
	<-c.done
	return nil, true
}

// clearedRE is the resumed run's log of the rows it copies again.
var clearedRE = regexp.MustCompile(`copying what the earlier run had not.* rows_cleared=(\d+)`)

// cleared returns the rows a resumed child deleted to copy them again, and
// whether it got that far.
func (c *childRun) cleared() (int64, bool) {
	m := clearedRE.FindStringSubmatch(c.out.String())
	if m == nil {
		return 0, false
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	return n, true
}

// phase is the last phase the child started.
func (c *childRun) phase() string {
	s := c.out.String()
	i := strings.LastIndex(s, "\nPHASE ")
	if i < 0 {
		return "start"
	}
	p, _, _ := strings.Cut(s[i+len("\nPHASE "):], "\n")
	return p
}

// triggerWhenPostponed drops the postponed cut-over's table once the child
// waits on it (its phase is "postponed"), unless the child exits first. A
// table left by a killed run is not a trigger: dropped before the resumed
// run looks, the resumed run makes it again and would wait forever.
func triggerWhenPostponed(db *testdb.DB, table string, c *childRun) {
	for {
		select {
		case <-c.exited:
			return
		case <-time.After(100 * time.Millisecond):
		}
		if c.phase() != "postponed" {
			continue
		}
		if err := migration.TriggerCutover(context.Background(), db.DB, db.Name, table); err == nil {
			return
		}
	}
}

// finished reports whether the migration alter of table t is complete: its
// checkpoint is gone and the table has the new shape.
func finished(t *testing.T, db *testdb.DB, alter string) bool {
	t.Helper()
	var ckpt, extra int
	if err := db.QueryRow(`SELECT COALESCE(SUM(TABLE_NAME = '_t_ckpt'), 0) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ?`, db.Name).Scan(&ckpt); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(`SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 't' AND COLUMN_NAME = 'extra'`, db.Name).Scan(&extra); err != nil {
		t.Fatal(err)
	}
	return ckpt == 0 && (extra == 1) == strings.HasPrefix(alter, "ADD")
}

// killedWhilePostponed makes table t of 20,000 rows and kills a run of alter
// on it delay after it begins to wait on its postponed cut-over, with
// checkpoints every 50 ms.
func killedWhilePostponed(t *testing.T, alter string, delay time.Duration) *testdb.DB {
	t.Helper()
	db := tableT(t, 20000)
	c := startChild(t, childJob{DSN: os.Getenv(testdb.Env), Database: db.Name, Table: "t", Alter: alter,
		Postpone: true, Every: 50 * time.Millisecond})
	if err, killed := c.killIn("postponed", delay); !killed {
		t.Fatalf("the run was not killed while postponed (%v):\n%s", err, c.out)
	}
	return db
}

// TestResumeKeepsWhatItTookUp: a run killed after its copy (waiting on its
// postponed cut-over) is taken up by a run whose checkpoints come every
// 20 ms and that waits 400 ms before its copy phase. Its checkpoints, written
// while it waited, must not change the checkpoint it took up, and must say
// the copy is done (a run killed then would copy every row again): it copies
// nothing again, and the table holds every row.
func TestResumeKeepsWhatItTookUp(t *testing.T) {
	if os.Getenv("SLUICE_RESUME_CHILD") != "" {
		t.Skip()
	}
	const alter = "ADD COLUMN extra INT NOT NULL DEFAULT 7"
	db := killedWhilePostponed(t, alter, 500*time.Millisecond)
	db.MustExec(t, "UPDATE t SET v = -v WHERE id % 100 = 3", "INSERT INTO t (id, v) VALUES (50000, 1)")
	var wantSum, wantRows int64
	if err := db.QueryRow("SELECT SUM(v), COUNT(*) FROM t").Scan(&wantSum, &wantRows); err != nil {
		t.Fatal(err)
	}
	cfg := config(t, db, "t", alter)
	cfg.CheckpointInterval = 20 * time.Millisecond
	var copied string
	cfg.OnPhase = func(p string) {
		if p == "copy" {
			time.Sleep(400 * time.Millisecond)
			db.QueryRow("SELECT JSON_EXTRACT(body, '$.copied') FROM _t_ckpt WHERE id = 1").Scan(&copied)
		}
	}
	res, err := mustRunner(t, cfg).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if copied != "true" {
		t.Errorf("the checkpoint written before the copy phase says the copy is done: %q, want true", copied)
	}
	if !res.Resumed || res.RowsCopied != 0 || res.Recopied != 0 {
		t.Errorf("the resumed run copied again: resumed %v, rows copied %d, cleared %d (the earlier run had copied %d)", res.Resumed, res.RowsCopied, res.Recopied, res.ResumedRows)
	}
	var sum, rows int64
	if err := db.QueryRow("SELECT SUM(v), COUNT(*) FROM t").Scan(&sum, &rows); err != nil || sum != wantSum || rows != wantRows {
		t.Errorf("after the resumed run: sum %d rows %d (%v), want %d and %d", sum, rows, err, wantSum, wantRows)
	}
}

// TestResumeEndsTheEarlierRunsStatements: a statement a killed run sent into
// its new table runs on after sluice died (here an INSERT that takes seconds,
// then writes a row the original never had). The run that resumes
// ends it before it touches the new table, whether it finds the statement by
// its connection's sluice_run attribute or, as where performance_schema is
// off, in the session list; the table then holds exactly the original's rows.
// A session that only reads the new table is let be. (The statement is a join of 400 million pairs, some seconds, that a KILL
// stops: one that sleeps would be woken by it and write its row all the same.)
func TestResumeEndsTheEarlierRunsStatements(t *testing.T) {
	if os.Getenv("SLUICE_RESUME_CHILD") != "" {
		t.Skip()
	}
	for _, how := range []string{"attribute", "session list"} {
		t.Run(how, func(t *testing.T) {
			const alter = "ADD COLUMN extra INT NOT NULL DEFAULT 7"
			db := killedWhilePostponed(t, alter, 300*time.Millisecond)
			var run string
			if err := db.QueryRow("SELECT JSON_UNQUOTE(JSON_EXTRACT(body, '$.run')) FROM _t_ckpt WHERE id = 1").Scan(&run); err != nil || run == "" {
				t.Fatalf("the checkpoint names no run (%q): %v", run, err)
			}
			earlier := db.Server
			earlier.RunID = run
			if how == "session list" {
				earlier.RunID = ""
				migration.SessionListOnly(db.Name)
			}
			conn, err := dbconn.Open(context.Background(), earlier, db.Name, 1)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			stray := make(chan error, 1)
			go func() {
				_, err := conn.Exec("INSERT INTO " + dbconn.QuoteTable(db.Name, "_t_new") + " (id, v, extra) SELECT 900000, COUNT(*), 7 FROM t a JOIN t b ON a.v + b.v = 3")
				stray <- err
			}()
			for started := time.Now(); ; time.Sleep(20 * time.Millisecond) {
				var n int
				db.QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE 'INSERT INTO %JOIN t b ON a.v + b.v = 3'").Scan(&n)
				if n == 1 {
					break
				}
				if time.Since(started) > 10*time.Second {
					t.Fatal("the stray INSERT did not start")
				}
			}
			// A reader of the new table, not sluice's, is let be.
			reader, err := db.Conn(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			defer reader.Close()
			var readerID int64
			if err := reader.QueryRowContext(context.Background(), "SELECT CONNECTION_ID()").Scan(&readerID); err != nil {
				t.Fatal(err)
			}
			read := make(chan error, 1)
			go func() {
				_, err := reader.ExecContext(context.Background(), "SELECT COUNT(*) FROM "+dbconn.QuoteTable(db.Name, "_t_new")+" a JOIN "+dbconn.QuoteTable(db.Name, "_t_new")+" b ON a.v + b.v = 3")
				read <- err
			}()
			time.Sleep(100 * time.Millisecond)
			cfg := config(t, db, "t", alter)
			readerLived := false
			cfg.OnPhase = func(p string) {
				if p != "shadow" {
					return
				}
				select {
				case <-read:
				default:
					readerLived = true
				}
				db.Exec(fmt.Sprintf("KILL QUERY %d", readerID)) // it would hold up the cut-over
			}
			res, err := mustRunner(t, cfg).Run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if !readerLived {
				t.Errorf("the resumed run ended a session that only read its new table")
			}
			select {
			case err := <-stray:
				if err == nil {
					t.Errorf("the earlier run's INSERT ran to its end")
				}
			case <-time.After(5 * time.Second):
				t.Errorf("the earlier run's INSERT still runs after the resumed run")
			}
			if !res.Resumed {
				t.Errorf("the run did not resume")
			}
			var n, above int
			if err := db.QueryRow("SELECT COUNT(*), COUNT(CASE WHEN id > 20000 THEN 1 END) FROM t").Scan(&n, &above); err != nil || n != 20000 || above != 0 {
				t.Errorf("after the resumed run: %d rows, %d not in the original (%v), want 20000 and 0", n, above, err)
			}
		})
	}
}

// TestRunLockKeptOrStopped: the connection that holds a run's lock is killed
// while the run waits on its postponed cut-over. The run takes the lock
// again and finishes, with every row. Killed again with another session
// taking the lock at once (as a second run would), the run stops with one
// line saying so and leaves every table as it was: the new table and its
// checkpoint stay, for the run that holds the lock.
func TestRunLockKeptOrStopped(t *testing.T) {
	for _, taken := range []bool{false, true} {
		t.Run(fmt.Sprintf("taken=%v", taken), func(t *testing.T) {
			db := tableT(t, 20000)
			cfg := config(t, db, "t", "ADD COLUMN extra INT NOT NULL DEFAULT 7")
			cfg.PostponeCutover = true
			r := mustRunner(t, cfg)
			errc := make(chan error, 1)
			go func() { _, err := r.Run(context.Background()); errc <- err }()
			waitPhase(t, r, "postponed", errc)
			name := migration.RunLockName(db.Name, "t")
			var holder int64
			if err := db.QueryRow("SELECT IS_USED_LOCK(?)", name).Scan(&holder); err != nil || holder == 0 {
				t.Fatalf("nobody holds the run's lock %s (%d): %v", name, holder, err)
			}
			other, err := db.Conn(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()
			db.MustExec(t, fmt.Sprintf("KILL %d", holder))
			if taken {
				var got int
				if err := other.QueryRowContext(context.Background(), "SELECT GET_LOCK(?, 5)", name).Scan(&got); err != nil || got != 1 {
					t.Fatalf("the test could not take the lock: %d %v", got, err)
				}
				select {
				case err := <-errc:
					if err == nil || !strings.Contains(err.Error(), "lock on") || !strings.Contains(err.Error(), "held by another session") || strings.Contains(err.Error(), "\n") {
						t.Fatalf("the run whose lock was taken: %v, want one line saying so", err)
					}
				case <-time.After(10 * time.Second):
					t.Fatal("the run whose lock another session took goes on")
				}
				if tables := db.Tables(t); !slices.Equal(tables, []string{"_t_ckpt", "_t_cutover", "_t_new", "t"}) {
					t.Errorf("after the run stopped: tables %v, want everything left as it was", tables)
				}
				var n int
				if err := db.QueryRow("SELECT COUNT(*) FROM t").Scan(&n); err != nil || n != 20000 {
					t.Errorf("the original holds %d rows (%v), want 20000", n, err)
				}
				return
			}
			time.Sleep(2500 * time.Millisecond)
			var now int64
			if err := db.QueryRow("SELECT COALESCE(IS_USED_LOCK(?), 0)", name).Scan(&now); err != nil || now == 0 || now == holder {
				t.Fatalf("after the kill the lock is held by %d (was %d): %v, want a new session of the run", now, holder, err)
			}
			db.MustExec(t, "UPDATE t SET v = -v WHERE id % 100 = 1")
			if err := migration.TriggerCutover(context.Background(), db.DB, db.Name, "t"); err != nil {
				t.Fatal(err)
			}
			if err := <-errc; err != nil {
				t.Fatalf("the run whose lock was taken again: %v", err)
			}
			var n, neg int
			if err := db.QueryRow("SELECT COUNT(*), SUM(v < 0) FROM t").Scan(&n, &neg); err != nil || n != 20000 || neg != 200 {
				t.Errorf("after the run: %d rows, %d updated (%v), want 20000 and 200", n, neg, err)
			}
		})
	}
}
