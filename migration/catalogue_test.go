package migration_test

// TestCatalogue runs the end-to-end scenario catalogue: every record of
// testdata/scenarios.txt (whose head documents the format) is one subtest,
// TestCatalogue/<group>/<name>, judged by its oracle:
//
//	E  the migrated table equals a reference built without sluice: the old
//	   table sluice leaves (the original's final state) with the same ALTER
//	   applied natively, definition and rows compared as bytes
//	M  the same, with the reference a model of the concurrent writes: a copy
//	   of the table taken before them, onto which each writer's logged
//	   statements are replayed, then the native ALTER
//	F  the run fails with the expected text on one line, the original is
//	   unchanged (snapshot, or the model when writers ran) and no table of
//	   sluice's is left behind
//
// A record marked known: is a bug not fixed yet: it is listed and skipped
// with that text (SLUICE_CATALOGUE_KNOWN=1 runs it anyway). A record marked
// design: is a refusal by design. The last lines of the log (go test -v)
// count each group's outcomes.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/testdb"
	"github.com/sluicedb/sluice/migration"
)

// catSerial keeps scenarios marked serial: yes alone on the servers.
var catSerial sync.RWMutex

const (
	catModel = "catmodel" // the M oracle's model table
	catRef   = "catref"   // E's reference when no old table is left (INSTANT, in-place)
)

func TestCatalogue(t *testing.T) {
	testdb.Config(t)
	scs, err := catParse("testdata/scenarios.txt")
	if err != nil {
		t.Fatal(err)
	}
	sum := &catSummary{counts: map[string]*catCount{}}
	t.Cleanup(func() { sum.print(t) })
	for _, g := range catGroups {
		t.Run(g, func(t *testing.T) {
			t.Parallel()
			for _, sc := range scs {
				if sc.Group != g {
					continue
				}
				t.Run(sc.Name, func(t *testing.T) {
					if sc.Serial {
						catSerial.Lock()
						defer catSerial.Unlock()
					} else {
						t.Parallel()
						catSerial.RLock()
						defer catSerial.RUnlock()
					}
					defer sum.record(t, sc)
					catRun(t, sc)
				})
			}
		})
	}
}

// catRunState is what the phase hooks and the judge share.
type catRunState struct {
	mu        sync.Mutex
	phases    []string
	before    string // the original's snapshot (no writers)
	secondErr error
	secondRan bool
	worst     time.Duration // the blocker probe's slowest query
	probes    int
	kills     int
	// resumed is the result of running the same command again after a run
	// that kept its work (a lock deadline, a lost connection).
	resumed    *migration.Result
	resumedErr error
}

func catRun(t *testing.T, sc *catScenario) {
	if sc.Known != "" && os.Getenv("SLUICE_CATALOGUE_KNOWN") == "" {
		t.Skipf("known bug: %s (line %d; SLUICE_CATALOGUE_KNOWN=1 runs it)", sc.Known, sc.Line)
	}
	if sc.Design != "" {
		t.Logf("refused by design: %s", sc.Design)
	}
	db := testdb.New
	if sc.Server == "alt" {
		db = testdb.NewAlt
	}
	d := db(t)
	if sc.Only != "" && !strings.EqualFold(sc.Only, string(d.Flavor)) {
		t.Skipf("%s only: %s", sc.Only, sc.OnlyWhy)
	}
	if sc.MariaDB != "" && d.Flavor == dbconn.MariaDB {
		sc.Oracle, sc.Expect = 'F', sc.MariaDB
	}
	ctx := context.Background()
	side, err := d.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer side.Close()
	if err := catAppSession(ctx, side, "", nil); err != nil {
		t.Fatal(err)
	}
	catSetup(t, d, side, sc)

	table := catTableName(t, d, sc.Table)
	cfg := migration.Config{
		Conn: d.Server, Database: d.Name, Table: sc.Table, Alter: catExpand(sc.Alter, d), Method: sc.Method,
		Approve: sc.Approve, ChunkTime: 20 * time.Millisecond, Logger: logger(t), ProgressInterval: time.Second,
		CopyWorkers: sc.CopyWorkers, LockWait: sc.LockWait, LockDeadline: sc.LockDeadline, KeepIndexes: sc.KeepIndexes, CarryTriggers: sc.CarryTriggers, Capture: sc.Capture,
		PostponeCutover: sc.Postpone > 0, KillAfter: sc.KillAfter,
	}
	if sc.Panic != "" {
		cfg.PanicFlagFile = filepath.Join(t.TempDir(), "panic")
	}
	if sc.Chunk > 0 {
		cfg.ChunkTime = sc.Chunk
	}
	if sc.Conn != nil {
		cfg.Conn.Params = sc.Conn
	}
	secrets := catAccount(t, d, sc, &cfg)

	var w *catWriters
	if sc.Writers > 0 {
		catCopyTable(t, d, table, catModel)
		w = &catWriters{sc: sc, db: d, table: table}
	}
	if sc.Oracle == 'E' && sc.Method != "copy" && w == nil {
		catCopyTable(t, d, table, catRef)
	}
	st := &catRunState{}
	if w == nil {
		st.before = catSnapshot(t, d, sc.Table)
	}
	// sluice's tables that exist before the run (a stale one, on purpose).
	preexisting := catLeftovers(t, d, sc.Table)

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	var bg sync.WaitGroup
	after := func(delay time.Duration, fn func()) {
		bg.Add(1)
		go func() {
			defer bg.Done()
			select {
			case <-time.After(delay):
				fn()
			case <-done:
			}
		}()
	}
	cfg.OnPhase = func(phase string) {
		st.mu.Lock()
		st.phases = append(st.phases, phase)
		st.mu.Unlock()
		if phase == "cut-over" && w != nil && sc.Oracle != 'M' {
			w.halt() // E compares with the old table: no write after the swap
		}
		for _, q := range sc.At[phase] {
			if _, err := side.ExecContext(ctx, catExpand(q, d)); err != nil {
				t.Errorf("at %s: %s: %v", phase, q, err)
			}
		}
		if len(sc.At[phase]) > 0 && w == nil {
			st.before = catSnapshot(t, d, sc.Table) // the scenario's own change is part of the original
		}
		if phase == sc.Cancel {
			if sc.CancelAfter > 0 {
				after(sc.CancelAfter, cancel)
			} else {
				cancel()
			}
		}
		if phase == "postponed" {
			after(sc.Postpone, func() {
				f := migration.TriggerCutover
				if sc.PostponeCancel {
					f = migration.CancelCutover
				}
				// The run may have ended already (an F scenario), dropping it.
				if err := f(ctx, d.DB, d.Name, sc.Table); err != nil && !strings.Contains(err.Error(), "is waiting for a cut-over") {
					t.Errorf("end the postponed cut-over: %v", err)
				}
			})
		}
		if phase == sc.Second.Phase {
			c2 := cfg
			c2.Alter, c2.OnPhase, c2.PostponeCutover = catExpand(sc.Second.Alter, d), nil, false
			r2, err := migration.New(c2)
			if err == nil {
				_, err = r2.Run(ctx)
			}
			st.secondErr, st.secondRan = err, true
		}
		if phase == sc.Blocker.Phase {
			catBlock(t, d, sc, st, &bg, done)
		}
		if phase == sc.Kill.Phase {
			catKillBinlog(t, d, sc, cfg.Conn.User, st, &bg, done)
		}
		if phase == sc.Panic {
			if err := os.WriteFile(cfg.PanicFlagFile, nil, 0o600); err != nil {
				t.Error(err)
			}
		}
	}

	if w != nil {
		w.start(t)
		time.Sleep(100 * time.Millisecond) // writes before the migration starts, too
	}
	var res migration.Result
	var ops0 int64
	if w != nil {
		ops0 = w.ops.Load()
	}
	r, err := migration.New(cfg)
	if err == nil {
		res, err = r.Run(runCtx)
	}
	if w != nil {
		during := w.ops.Load() - ops0
		if sc.Oracle == 'M' {
			time.Sleep(100 * time.Millisecond) // and after the swap
		}
		w.halt()
		t.Logf("writes: %d during the migration, %d in all", during, w.ops.Load())
		if n := w.errs.Load(); n > 0 && sc.Oracle != 'F' && sc.OrFail == "" {
			t.Errorf("%d writer(s) stopped on an error (logged above)", n)
		}
		// An INSTANT or in-place ALTER takes a moment: a few writes prove it.
		if during < sc.MinWrites && err == nil && (res.Path == "copy" || during == 0) {
			t.Errorf("only %d writes during the migration: the scenario proves little", during)
		}
	}
	close(done)
	bg.Wait()
	if err != nil && res.Kept != "" {
		// The same command again, with whatever stopped the first run gone,
		// takes up its work.
		c2 := cfg
		c2.OnPhase, c2.PostponeCutover = nil, false
		r2, err2 := migration.New(c2)
		var res2 migration.Result
		if err2 == nil {
			res2, err2 = r2.Run(ctx)
		}
		st.resumed, st.resumedErr = &res2, err2
	}
	if err != nil {
		t.Logf("run: %v", err)
		catCheckError(t, err, secrets)
	} else {
		t.Logf("run: path %s, rows copied %d, keys applied %d (%d during the copy), checksum rows %d (skipped %v), guard %d, took %s",
			res.Path, res.RowsCopied, res.KeysApplied, res.KeysAppliedInCopy, res.ChecksumRows, res.ChecksumSkipped, res.ChangedRowsVerified, res.Total.Round(time.Millisecond))
	}
	catJudge(t, d, sc, st, w, res, err, preexisting)
}

// catJudge applies the scenario's oracle.
func catJudge(t *testing.T, d *testdb.DB, sc *catScenario, st *catRunState, w *catWriters, res migration.Result, err error, preexisting []string) {
	t.Helper()
	for _, p := range []string{sc.Cancel, sc.Second.Phase, sc.Blocker.Phase, sc.Kill.Phase, sc.Panic} {
		if p != "" && !slices.Contains(st.phases, p) {
			t.Errorf("the run never reached phase %s (phases %v): the scenario proves nothing", p, st.phases)
		}
	}
	for p := range sc.At {
		if !slices.Contains(st.phases, p) {
			t.Errorf("the run never reached phase %s (phases %v): its statements never ran", p, st.phases)
		}
	}
	if sc.Second.Phase != "" && st.secondRan {
		if st.secondErr == nil || !strings.Contains(st.secondErr.Error(), sc.Second.Expect) {
			t.Errorf("the second migration: got %v, want an error containing %q", st.secondErr, sc.Second.Expect)
		}
	}
	if sc.Blocker.Phase != "" {
		budget := max(sc.LockWait, time.Second)
		t.Logf("blocker: %d probe queries, the slowest %s (budget %s)", st.probes, st.worst, budget)
		if st.worst > budget+700*time.Millisecond {
			t.Errorf("an application query waited %s behind sluice's lock request, more than the %s budget", st.worst, budget)
		}
	}
	if sc.Kill.Phase != "" {
		t.Logf("killed sluice's binlog connection %d time(s)", st.kills)
		if st.kills == 0 {
			t.Errorf("never found sluice's binlog connection to kill: the scenario proves nothing")
		}
	}
	failOK := sc.Oracle == 'F' || (err != nil && sc.OrFail != "" && strings.Contains(err.Error(), sc.OrFail))
	if sc.Oracle == 'F' && err == nil {
		t.Fatalf("the migration succeeded (path %s); want an error containing %q", res.Path, sc.Expect)
	}
	if err != nil && !failOK {
		t.Fatalf("the migration failed: %v", err)
	}
	if err != nil {
		if sc.Oracle == 'F' && !slices.ContainsFunc(strings.Split(sc.Expect, " || "), func(e string) bool { return strings.Contains(err.Error(), e) }) {
			t.Errorf("want an error containing %q", sc.Expect)
		}
		if st.resumed == nil {
			catIntact(t, d, sc, st, w, preexisting)
			return
		}
		// The run kept its work; the same command again finished it.
		if st.resumedErr != nil || !st.resumed.Resumed {
			t.Fatalf("the run kept its work, but the same command again did not resume it: resumed %v, %v", st.resumed.Resumed, st.resumedErr)
		}
		t.Logf("resumed: copied %d rows again (the first run had %d), lock %s", st.resumed.RowsCopied, st.resumed.ResumedRows, st.resumed.CutoverLock)
		res = *st.resumed
		if sc.Oracle == 'F' {
			e := *sc
			e.Oracle = 'E' // judged as the migration it became
			sc = &e
		}
	}
	table := catTableName(t, d, sc.Table)
	if left := catLeftovers(t, d, sc.Table, append([]string{res.OldTable}, preexisting...)...); len(left) > 0 {
		t.Errorf("tables left behind: %v", left)
	}
	switch sc.Oracle {
	case 'M':
		w.replay(t, catModel)
		if err := catNativeAlter(t, d, sc, catModel); err != nil {
			t.Fatalf("the native ALTER fails on the model: %v", err)
		}
		catCompare(t, d, sc, table, catModel)
	case 'E':
		ref := res.OldTable
		if ref == "" {
			if catTableName(t, d, catRef) == "" {
				t.Fatalf("no old table and no reference copy (path %s)", res.Path)
			}
			ref = catRef
		}
		counter := catAutoIncrement(t, d, ref)
		if err := catNativeAlter(t, d, sc, ref); err != nil {
			t.Fatalf("sluice changed the table, but the server's own ALTER refuses it: %v", err)
		}
		catCompare(t, d, sc, table, ref)
		if got := catAutoIncrement(t, d, table); ref != catRef && got < counter {
			t.Errorf("AUTO_INCREMENT is %d on the migrated table, %d on the original: ids would be issued twice", got, counter)
		}

	}
}

// catIntact checks what a failed run must leave: the original as it was,
// no table of sluice's, no lock.
func catIntact(t *testing.T, d *testdb.DB, sc *catScenario, st *catRunState, w *catWriters, preexisting []string) {
	t.Helper()
	if left := catLeftovers(t, d, sc.Table, preexisting...); len(left) > 0 {
		t.Errorf("tables left behind: %v", left)
	}
	table := catTableName(t, d, sc.Table)
	if w != nil {
		w.replay(t, catModel)
		catCompare(t, d, &catScenario{}, table, catModel)
	} else if after := catSnapshot(t, d, sc.Table); after != st.before {
		t.Errorf("the original table changed:\n before %.600s\n after  %.600s", st.before, after)
	}
	if table != "" {
		catUnlocked(t, d, table)
	}
}

// catCheckError: an error is one line and shows no password.
func catCheckError(t *testing.T, err error, secrets []string) {
	t.Helper()
	msg := err.Error()
	if strings.Contains(msg, "\n") {
		t.Errorf("the error spans lines: %q", msg)
	}
	for _, s := range secrets {
		if strings.Contains(msg, s) {
			t.Errorf("the error shows a password")
		}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("the run hit a deadline: %v", err)
	}
}

// catExpand replaces {db} with the test database's name and MySQL's names
// with the server's own (testdb's Dialect).
func catExpand(q string, d *testdb.DB) string {
	return d.Dialect(strings.ReplaceAll(q, "{db}", d.Name))
}

// catSetup runs the setup steps on the application's session.
func catSetup(t *testing.T, d *testdb.DB, c catExecer, sc *catScenario) {
	t.Helper()
	ctx := context.Background()
	for _, s := range sc.Setup {
		if s.FillTable == "" {
			if _, err := c.ExecContext(ctx, catExpand(s.SQL, d)); err != nil {
				t.Fatalf("setup: %s: %v", s.SQL, err)
			}
			continue
		}
		for lo := 1; lo <= s.FillCount; lo += 1000 {
			hi := min(lo+999, s.FillCount)
			q := fmt.Sprintf("INSERT INTO %s SELECT %s FROM (WITH RECURSIVE s(n) AS (SELECT %d UNION ALL SELECT n + 1 FROM s WHERE n < %d) SELECT n FROM s) x",
				dbconn.QuoteIdent(s.FillTable), s.FillSelect, lo, hi)
			if _, err := c.ExecContext(ctx, q); err != nil {
				t.Fatalf("setup: fill %s: %v", s.FillTable, err)
			}
		}
	}
}

// catAccount creates the scenario's account, if any, and points cfg at it.
// It returns the passwords the errors must not show.
func catAccount(t *testing.T, d *testdb.DB, sc *catScenario, cfg *migration.Config) []string {
	t.Helper()
	if sc.Account == "" {
		return nil
	}
	b := make([]byte, 4)
	rand.Read(b)
	user, pw := "cat_"+hex.EncodeToString(b), "Cat-"+hex.EncodeToString(b)+"-pw"
	grants, viaRole := strings.CutPrefix(sc.Account, "role ")
	if grants == "least" {
		grants = "SELECT, INSERT, DELETE, CREATE, DROP, ALTER, LOCK TABLES, TRIGGER | REPLICATION SLAVE, REPLICATION CLIENT"
	}
	onDB, global, _ := strings.Cut(grants, "|")
	global, onTables, _ := strings.Cut(global, "|")
	if d.Flavor == dbconn.MariaDB && !strings.Contains(global, "PROCESS") {
		// MariaDB's cut-over lists every session (sentry.go): the README's
		// account has PROCESS there (TestMissingPrivilegeNamed asks for it).
		if strings.TrimSpace(global) != "" {
			global += ","
		}
		global += " PROCESS"
	}
	d.MustExec(t, "CREATE USER '"+user+"'@'%' IDENTIFIED BY '"+pw+"'")
	t.Cleanup(func() { d.Exec("DROP USER '" + user + "'@'%'") })
	grantee := "'" + user + "'@'%'"
	if viaRole {
		// Every privilege through a role the account has by default.
		role := "catr_" + hex.EncodeToString(b)
		d.MustExec(t, "CREATE ROLE "+role)
		t.Cleanup(func() { d.Exec("DROP ROLE " + role) })
		d.MustExec(t, "GRANT "+role+" TO "+grantee)
		if d.Flavor == dbconn.MariaDB {
			d.MustExec(t, "SET DEFAULT ROLE "+role+" FOR "+grantee)
		} else {
			d.MustExec(t, "SET DEFAULT ROLE "+role+" TO "+grantee)
		}
		grantee = role
	}
	if s := strings.TrimSpace(onDB); s != "" {
		d.MustExec(t, "GRANT "+s+" ON "+dbconn.QuoteIdent(d.Name)+".* TO "+grantee)
	}
	if s := strings.TrimSpace(global); s != "" {
		d.MustExec(t, "GRANT "+s+" ON *.* TO "+grantee)
	}
	if s := strings.TrimSpace(onTables); s != "" {
		// On the table and each table the run makes beside it (the
		// README's list), and no other.
		tables := []string{sc.Table, "_" + sc.Table + "_new", "_" + sc.Table + "_old", "_" + sc.Table + "_cutover",
			"_" + sc.Table + "_ckpt", "_" + sc.Table + "_hb"}
		if d.Flavor == dbconn.MariaDB {
			tables = append(tables, sc.Table+"_sluice_swap")
		}
		if rest, ok := strings.CutPrefix(s, "original "); ok {
			s, tables = rest, tables[:1]
		}
		for _, tb := range tables {
			d.MustExec(t, "GRANT "+s+" ON "+dbconn.QuoteTable(d.Name, tb)+" TO "+grantee)
		}
	}
	cfg.Conn.User, cfg.Conn.Password = user, pw
	secrets := []string{pw}
	if sc.WrongPassword {
		cfg.Conn.Password = "Wrong-" + hex.EncodeToString(b) + "-pw"
		secrets = append(secrets, cfg.Conn.Password)
	}
	return secrets
}

// catSummary counts outcomes per group.
type catSummary struct {
	mu     sync.Mutex
	counts map[string]*catCount
}

type catCount struct {
	passed                       map[byte]int
	design, known, failed, total int
}

func (s *catSummary) record(t *testing.T, sc *catScenario) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.counts[sc.Group]
	if c == nil {
		c = &catCount{passed: map[byte]int{}}
		s.counts[sc.Group] = c
	}
	c.total++
	switch {
	case t.Failed():
		c.failed++
	case t.Skipped() && sc.Known != "":
		c.known++
	case t.Skipped():
		c.total-- // no server: not run
	case sc.Design != "":
		c.design++
	default:
		c.passed[sc.Oracle]++
	}
}

func (s *catSummary) print(t *testing.T) {
	s.mu.Lock()
	defer s.mu.Unlock()
	all := &catCount{passed: map[byte]int{}}
	line := func(name string, c *catCount) {
		p := c.passed['E'] + c.passed['M'] + c.passed['F']
		t.Logf("catalogue %-12s %3d scenarios: %3d passed (E %d, M %d, F %d), %2d refused by design (F), %d known bugs (skipped), %d failed",
			name, c.total, p, c.passed['E'], c.passed['M'], c.passed['F'], c.design, c.known, c.failed)
	}
	for _, g := range catGroups {
		c := s.counts[g]
		if c == nil {
			continue
		}
		line(g, c)
		for _, o := range []byte("EMF") {
			all.passed[o] += c.passed[o]
		}
		all.design += c.design
		all.known += c.known
		all.failed += c.failed
		all.total += c.total
	}
	line("total", all)
}
