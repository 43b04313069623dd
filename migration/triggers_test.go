package migration_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/schema"
	"github.com/sluicedb/sluice/internal/testdb"
	"github.com/sluicedb/sluice/migration"
)

// auditTriggers are the triggers of the trigger tests' table t: each write
// to t leaves rows in audit that name it (trigger, operation, key, the row's
// write count), so that audit shows every write that ran without its
// triggers, or through them twice, and every write of sluice's own that
// fired one. t_ai2 is made in latin1 under PIPES_AS_CONCAT: a copy made in
// another character set or sql_mode writes another name than "ai2é".
var auditTriggers = []struct{ name, mode, charset, def string }{
	{"t_bi", "", "", "BEFORE INSERT ON t FOR EACH ROW SET NEW.seq = 1, NEW.note = CONCAT(NEW.note, '\U0001F600')"},
	{"t_bu", "", "", "BEFORE UPDATE ON t FOR EACH ROW SET NEW.seq = OLD.seq + 1"},
	{"t_ai", "", "", "AFTER INSERT ON t FOR EACH ROW INSERT INTO audit (trg, op, id, seq) VALUES ('ai', 'i', NEW.id, NEW.seq)"},
	{"t_ai2", "PIPES_AS_CONCAT", "latin1", "AFTER INSERT ON t FOR EACH ROW FOLLOWS t_ai INSERT INTO audit (trg, op, id, seq) VALUES ('ai2' || '\xe9', 'j', NEW.id, NEW.seq)"},
	{"t_au", "", "", "AFTER UPDATE ON t FOR EACH ROW BEGIN\n  -- one row per update\n  INSERT INTO audit (trg, op, id, seq) VALUES ('au', 'u', NEW.id, NEW.seq);\nEND"},
	{"t_ad", "", "", "AFTER DELETE ON t FOR EACH ROW INSERT INTO audit (trg, op, id, seq) VALUES ('ad', 'd', OLD.id, OLD.seq)"},
}

// auditModel is one writer's model of t (the rows whose ids are i modulo
// n) and of the audit rows its committed writes must leave.
type auditModel struct {
	i, n, next int64
	rows       map[int64][3]int64 // id -> v, seq, 1 if inserted through t_bi
	audit      []string
	ops        map[string]int
	appFirst   bool // this step wrote to audit before t
}

// newAuditTable makes t, audit and the triggers, with rows rows (made before
// the triggers: seq 0, no audit row), and returns the writers' models.
func newAuditTable(t *testing.T, db *testdb.DB, rows, writers int) []*auditModel {
	t.Helper()
	db.MustExec(t, "CREATE TABLE t (id BIGINT PRIMARY KEY, v INT, seq INT NOT NULL DEFAULT 0, note VARCHAR(20) CHARACTER SET utf8mb4 NOT NULL DEFAULT 'w')",
		"CREATE TABLE audit (n BIGINT AUTO_INCREMENT PRIMARY KEY, trg VARCHAR(10) CHARACTER SET utf8mb4, op CHAR(1), id BIGINT, seq INT)")
	ms := make([]*auditModel, writers)
	for i := range ms {
		ms[i] = &auditModel{i: int64(i), n: int64(writers), next: int64(i), rows: map[int64][3]int64{}, ops: map[string]int{}}
	}
	var vals []any
	for k := range rows {
		m := ms[k%writers]
		id := m.id()
		m.rows[id] = [3]int64{int64(k), 0, 0}
		vals = append(vals, id, k)
		if len(vals) == 2000 || k == rows-1 {
			if _, err := db.Exec("INSERT INTO t (id, v) VALUES "+placeholders(len(vals)/2, 2), vals...); err != nil {
				t.Fatal(err)
			}
			vals = nil
		}
	}
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, tr := range auditTriggers {
		mode, charset := "ONLY_FULL_GROUP_BY,STRICT_TRANS_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION", "utf8mb4"
		if tr.mode != "" {
			mode = tr.mode
		}
		if tr.charset != "" {
			charset = tr.charset
		}
		for _, q := range []string{"SET SESSION sql_mode = '" + mode + "'", "SET NAMES " + charset, "CREATE TRIGGER " + tr.name + " " + tr.def} {
			if _, err := conn.ExecContext(context.Background(), q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
	}
	return ms
}

func (m *auditModel) id() int64 { m.next += m.n; return m.next }

// step runs one write and, once it commits, applies it and the audit rows
// the triggers leave to the model.
func (m *auditModel) step(ctx context.Context, db *sql.DB, rng *rand.Rand) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var ids []int64
	for id := range m.rows {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var op string
	var commit func()
	k := rng.IntN(12)
	if k >= 10 {
		// The application writes to the triggers' table first, then to t:
		// the cut-over, which locks both, must not make it a deadlock's
		// victim.
		_, err = tx.ExecContext(ctx, "INSERT INTO audit (trg, op, id, seq) VALUES ('app', 'a', ?, 0)", m.i)
		if err != nil {
			return err
		}
		k = rng.IntN(10)
		defer func() { m.appFirst = false }()
		m.appFirst = true
	}
	switch {
	case k < 4 || len(ids) < 10:
		id, v := m.id(), rng.Int64N(1000)
		_, err = tx.ExecContext(ctx, "INSERT INTO t (id, v) VALUES (?, ?)", id, v)
		op, commit = "insert", func() {
			m.rows[id] = [3]int64{v, 1, 1}
			m.audit = append(m.audit, fmt.Sprintf("ai i %d 1", id), fmt.Sprintf("ai2é j %d 1", id))
		}
	case k < 8:
		id, v := ids[rng.IntN(len(ids))], rng.Int64N(1000)
		_, err = tx.ExecContext(ctx, "UPDATE t SET v = ? WHERE id = ?", v, id)
		op, commit = "update", func() {
			seq := m.rows[id][1] + 1
			m.rows[id] = [3]int64{v, seq, m.rows[id][2]}
			m.audit = append(m.audit, fmt.Sprintf("au u %d %d", id, seq))
		}
	default:
		id := ids[rng.IntN(len(ids))]
		_, err = tx.ExecContext(ctx, "DELETE FROM t WHERE id = ?", id)
		op, commit = "delete", func() {
			m.audit = append(m.audit, fmt.Sprintf("ad d %d %d", id, m.rows[id][1]))
			delete(m.rows, id)
		}
	}
	if m.appFirst {
		inner := commit
		op, commit = op+" after audit", func() { inner(); m.audit = append(m.audit, fmt.Sprintf("app a %d 0", m.i)) }
	}
	return commitStep(tx, err, op, commit, m.ops)
}

// checkAudit compares t and audit with the models: every row, and every
// audit row exactly once (none missing: no write ran without its
// triggers; none twice; none from sluice's own writes), and t_ai2 fired
// after t_ai for each insert.
func checkAudit(t *testing.T, db *testdb.DB, ms []*auditModel) {
	t.Helper()
	var want, wantAudit []string
	for _, m := range ms {
		for id, r := range m.rows {
			note := "w"
			if r[2] == 1 {
				note += "\U0001F600"
			}
			want = append(want, fmt.Sprintf("%d %d %d %s", id, r[0], r[1], note))
		}
		wantAudit = append(wantAudit, m.audit...)
	}
	slices.Sort(want)
	slices.Sort(wantAudit)
	got := column(t, db, "SELECT CONCAT_WS(' ', id, v, seq, note) FROM t")
	if !slices.Equal(got, want) {
		t.Errorf("t: %d rows, model %d; first difference: %s", len(got), len(want), firstDiff(got, want))
	}
	gotAudit := column(t, db, "SELECT CONCAT_WS(' ', trg, op, id, seq) FROM audit")
	if !slices.Equal(gotAudit, wantAudit) {
		t.Errorf("audit: %d rows, model %d; first difference: %s", len(gotAudit), len(wantAudit), firstDiff(gotAudit, wantAudit))
	}
	if len(wantAudit) == 0 {
		t.Error("no write left an audit row: the check compared nothing")
	}
	var misordered int
	if err := db.QueryRow(`SELECT COUNT(*) FROM audit a JOIN audit b ON a.id = b.id AND a.op = 'i' AND b.op = 'j' WHERE a.n > b.n`).Scan(&misordered); err != nil || misordered > 0 {
		t.Errorf("t_ai2 fired before t_ai %d times (%v)", misordered, err)
	}
}

func firstDiff(got, want []string) string {
	for i := range max(len(got), len(want)) {
		switch {
		case i >= len(got):
			return "missing " + want[i]
		case i >= len(want):
			return "extra " + got[i]
		case got[i] != want[i]:
			return fmt.Sprintf("got %q, want %q", got[i], want[i])
		}
	}
	return "none"
}

// triggersOf reads the triggers of table with their bodies, as
// "name timing event order sql_mode charset collation definer: body".
func triggersOf(t *testing.T, db *testdb.DB, table string) []string {
	t.Helper()
	ctx := context.Background()
	trs, err := schema.LoadTriggers(ctx, db.DB, db.Name, table)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := schema.ReadBodies(ctx, conn, db.Name, table, trs); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, tr := range trs {
		out = append(out, fmt.Sprintf("%s %s %s %d %s %s %s %s: %q", tr.Name, tr.Timing, tr.Event, tr.Order, tr.SQLMode, tr.CharsetClient, tr.CollationConn, tr.DefinerClause, tr.Body))
	}
	return out
}

// toggledNames turns each line of triggersOf to the copy's name.
func toggledNames(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		name, rest, _ := strings.Cut(l, " ")
		out[i] = schema.Toggled(name) + " " + rest
	}
	return out
}

// With writers on the table throughout, the new table gets copies of all
// the triggers (renamed, in their order, with their definer, sql_mode,
// character set and body byte for byte), and every write of the
// application left its audit rows exactly once: with changes read from the
// binlog, and captured by triggers of sluice's beside the table's own.
func TestTriggersCarriedWithWriters(t *testing.T) {
	for _, mode := range []string{migration.CaptureBinlog, migration.CaptureTriggers} {
		t.Run(mode, func(t *testing.T) { triggersCarriedWithWriters(t, mode) })
	}
}

func triggersCarriedWithWriters(t *testing.T, mode string) {
	db := testdb.New(t)
	const writers = 4
	ms := newAuditTable(t, db, 20000, writers)
	before := triggersOf(t, db, "t")
	cfg := config(t, db, "t", "ADD COLUMN extra INT NOT NULL DEFAULT 7, MODIFY v BIGINT")
	cfg.CarryTriggers, cfg.Capture = true, mode
	log := &testdb.SyncBuffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(log, nil))
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	// 1213, rolled back and left out of the model: a row-lock deadlock
	// between writers, or the metadata-lock race the wait before the
	// cut-over narrows (counted).
	res, during, deadlocks := migrateUnderWriters(t, mustRunner(t, cfg), seed, writers, func(ctx context.Context, i int, rng *rand.Rand) error {
		return ms[i].step(ctx, db.DB, rng)
	}, 1213)
	if during == 0 || res.KeysApplied == 0 {
		t.Fatalf("%d writes during the migration, %d keys applied: nothing tested the triggers under writes", during, res.KeysApplied)
	}
	if db.Flavor == dbconn.MySQL && !strings.Contains(log.String(), `msg="the cut-over also locks the tables the triggers use" tables=audit`) {
		t.Errorf("the tables the triggers use were not found for the guard to watch:\n%s", log.String())
	}
	if mode == migration.CaptureTriggers && !strings.Contains(log.String(), `msg="changes are captured by triggers"`) {
		t.Errorf("the run did not capture by triggers:\n%s", log.String())
	}
	t.Logf("%d deadlocks rolled back", deadlocks)
	checkAudit(t, db, ms)
	if after := triggersOf(t, db, "t"); !slices.Equal(after, toggledNames(before)) {
		t.Errorf("triggers of the new table:\n got  %q\n want %q", after, toggledNames(before))
	}
	if old := triggersOf(t, db, res.OldTable); !slices.Equal(old, before) {
		t.Errorf("triggers of the old table:\n got  %q\n want %q", old, before)
	}
	var extra int
	if err := db.QueryRow("SELECT COUNT(*) FROM t WHERE extra <> 7").Scan(&extra); err != nil || extra != 0 {
		t.Errorf("rows without the new column's default: %d (%v)", extra, err)
	}
	t.Logf("%d writes during the migration (%v), %d keys applied; tables locked %s for the swap with %d trigger copies",
		during, ms[0].ops, res.KeysApplied, res.CutoverLock, len(before))

	// The next migration takes the names back.
	cfg.Alter = "DROP COLUMN extra"
	db.MustExec(t, "DROP TABLE "+res.OldTable)
	if _, err := mustRunner(t, cfg).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if again := triggersOf(t, db, "t"); !slices.Equal(again, before) {
		t.Errorf("triggers after a second migration:\n got  %q\n want %q", again, before)
	}
}

// A cut-over whose RENAME fails after the copies were made drops them
// before the apply goes on: the writes the apply copies between attempts
// fire nothing, and the next attempt makes the copies again. (The RENAME
// is failed by a test hook: under the cut-over's lock nothing else can make
// it fail in a way worth retrying.)
func TestFailedSwapDropsTheTriggerCopies(t *testing.T) {
	db := testdb.New(t)
	const writers = 3
	ms := newAuditTable(t, db, 5000, writers)
	before := triggersOf(t, db, "t")
	cfg := config(t, db, "t", "ADD COLUMN extra INT")
	cfg.CarryTriggers = true
	migration.FailRenameOnce(db.Name)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	res, during, _ := migrateUnderWriters(t, mustRunner(t, cfg), seed, writers, func(ctx context.Context, i int, rng *rand.Rand) error {
		return ms[i].step(ctx, db.DB, rng)
	}, 1213)
	if res.LockAttempts < 2 {
		t.Fatalf("%d cut-over attempts: the first did not fail", res.LockAttempts)
	}
	t.Logf("%d lock attempts, %d writes during the migration", res.LockAttempts, during)
	checkAudit(t, db, ms)
	if after := triggersOf(t, db, "t"); !slices.Equal(after, toggledNames(before)) {
		t.Errorf("triggers of the new table:\n got  %q\n want %q", after, toggledNames(before))
	}
}

// A run killed with the copies made and the RENAME not yet sent leaves the
// original serving writes with its own triggers; the next run drops the
// copies before it applies those writes to the new table, and carries them
// again.
func TestDeathWithTheTriggerCopiesMade(t *testing.T) {
	if os.Getenv("SLUICE_RESUME_CHILD") != "" {
		t.Skip()
	}
	db := testdb.New(t)
	ms := newAuditTable(t, db, 3000, 1)
	before := triggersOf(t, db, "t")
	job := childJob{DSN: os.Getenv(testdb.Env), Database: db.Name, Table: "t", Alter: "ADD COLUMN extra INT NOT NULL DEFAULT 7",
		Every: 200 * time.Millisecond, Die: "triggers-copied", Carry: true}
	c := startChild(t, job)
	err := <-c.done
	if code := c.cmd.ProcessState.ExitCode(); code != 9 {
		t.Fatalf("the child did not die with the copies made (exit %d, %v):\n%s", code, err, c.out)
	}
	if copies := triggersOf(t, db, "_t_new"); len(copies) != len(before) {
		t.Fatalf("the shadow has %d triggers after the death, want %d: the test did not reach its point", len(copies), len(before))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		if err := ms[0].step(context.Background(), db.DB, rng); err != nil {
			t.Fatal(err)
		}
	}
	job.Die = ""
	c = startChild(t, job)
	if err := <-c.done; err != nil {
		res, line := c.result(t)
		t.Fatalf("the run after the death failed: %s (kept %q)\n%s", line, res.Kept, c.out)
	}
	checkAudit(t, db, ms)
	if after := triggersOf(t, db, "t"); !slices.Equal(after, toggledNames(before)) {
		t.Errorf("triggers of the new table:\n got  %q\n want %q", after, toggledNames(before))
	}
}

// What cannot be carried is refused in one line before anything is made.
func TestTriggerRefusals(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE t (id INT PRIMARY KEY, v INT, w INT)", "CREATE TABLE u (id INT PRIMARY KEY)",
		"CREATE TABLE audit (id INT)", "INSERT INTO t VALUES (1, 1, 1)",
		"CREATE TRIGGER t_bi BEFORE INSERT ON t FOR EACH ROW SET NEW.w = NEW.v")
	for _, c := range []struct {
		name, alter string
		carry       bool
		setup       []string
		want        string
	}{
		{"not accepted", "ADD COLUMN x INT", false, nil, "table t has triggers (t_bi), which the swap would leave on the old table; a trigger's name is unique in its database, so their copies on the new table take the other name (_t_bi): pass --carry-triggers"},
		{"name taken", "ADD COLUMN x INT", true, []string{"CREATE TRIGGER _t_bi AFTER INSERT ON u FOR EACH ROW INSERT INTO audit VALUES (NEW.id)"},
			"trigger t_bi of t is copied to the new table as _t_bi, a name trigger _t_bi of table u has"},
		{"column used", "DROP COLUMN w", true, []string{"DROP TRIGGER IF EXISTS _t_bi"}, "trigger t_bi of t cannot be created on the new table (Error 1054"},
	} {
		t.Run(c.name, func(t *testing.T) {
			db.MustExec(t, c.setup...)
			cfg := config(t, db, "t", c.alter)
			cfg.CarryTriggers = c.carry
			_, err := mustRunner(t, cfg).Run(context.Background())
			if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("got %v, want one line with %q", err, c.want)
			}
			if tables := db.Tables(t); !slices.Equal(tables, []string{"audit", "t", "u"}) {
				t.Errorf("tables after the refusal: %v", tables)
			}
			if got := column(t, db, "SELECT CONCAT_WS(' ', id, v, w) FROM t"); !slices.Equal(got, []string{"1 1 1"}) {
				t.Errorf("rows: %q", got)
			}
			if trs := triggersOf(t, db, "t"); len(trs) != 1 || !strings.HasPrefix(trs[0], "t_bi ") {
				t.Errorf("triggers of t: %q", trs)
			}
		})
	}
}

// A trigger made in latin1 whose name is not ASCII: SHOW CREATE TRIGGER
// gives its name in UTF-8 and its body in latin1, which no one statement
// can send back; it is refused in one line, nothing made.
func TestTriggerHeadOutsideASCIIRefused(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE t (id INT PRIMARY KEY, v INT)", "CREATE TABLE audit (id INT, note VARCHAR(10))", "INSERT INTO t VALUES (1, 1)")
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"SET NAMES latin1", "CREATE TRIGGER t_\xe9 AFTER INSERT ON t FOR EACH ROW INSERT INTO audit VALUES (NEW.id, '\xe9')", "SET NAMES utf8mb4"} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	conn.Close()
	cfg := config(t, db, "t", "ADD COLUMN x INT")
	cfg.CarryTriggers = true
	_, err = mustRunner(t, cfg).Run(ctx)
	if want := "trigger t_\u00e9 of t was created with character_set_client latin1, and its definer, its name or the table's has characters outside ASCII"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %v, want %q", err, want)
	}
	if tables := db.Tables(t); !slices.Equal(tables, []string{"audit", "t"}) {
		t.Errorf("tables after the refusal: %v", tables)
	}
	if trs, err := schema.LoadTriggers(ctx, db.DB, db.Name, "t"); err != nil || len(trs) != 1 || trs[0].Name != "t_\u00e9" {
		t.Errorf("triggers of t: %+v (%v)", trs, err)
	}
}

// TestGroupCarriesTriggers: a group of t, which has the audit triggers, and
// u, which has none, with writers on both and the group's first RENAME
// failed by the test: the copies made for the failed attempt are dropped
// before the apply goes on, the retry makes them again, every write to t
// left its audit rows exactly once, and every write to u is in the new u.
func TestGroupCarriesTriggers(t *testing.T) {
	db := testdb.New(t)
	db.SkipUnless(t, dbconn.MySQL, "several tables in one cut-over need RENAME under LOCK TABLES")
	const writers = 3
	ms := newAuditTable(t, db, 5000, writers)
	db.MustExec(t, "CREATE TABLE u (id INT PRIMARY KEY, v INT NOT NULL)")
	db.Fill(t, "u", 2000, "n, 0")
	before := triggersOf(t, db, "t")
	cfg := config(t, db, "t", "ADD COLUMN extra INT NOT NULL DEFAULT 7")
	cfg.CarryTriggers = true
	cfg2 := config(t, db, "u", "ADD COLUMN w INT")
	migration.FailRenameOnce(db.Name)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	var results []migration.Result
	var bumps atomic.Int64
	_, during, deadlocks := runUnderWriters(t, func() (migration.Result, error) {
		var err error
		results, err = migration.RunGroup(context.Background(), []migration.Config{cfg, cfg2})
		return migration.Result{}, err
	}, seed, writers, func(ctx context.Context, i int, rng *rand.Rand) error {
		if rng.IntN(3) == 0 {
			// Not cut short by the writers' stop: one that commits is counted.
			if _, err := db.Exec("UPDATE u SET v = v + 1 WHERE id = ?", 1+rng.IntN(2000)); err != nil {
				return err
			}
			bumps.Add(1)
		}
		return ms[i].step(ctx, db.DB, rng)
	}, 1213)
	if during == 0 || len(results) != 2 || results[0].KeysApplied == 0 || results[1].KeysApplied == 0 {
		t.Fatalf("%d writes during the migration, results %+v: nothing tested the group under writes", during, results)
	}
	if migration.RenameFailurePending(db.Name) || results[0].LockAttempts < 3 {
		t.Errorf("the failed RENAME was not retried (%d lock attempts)", results[0].LockAttempts)
	}
	t.Logf("%d writes during the group, %d increments of u, %d deadlocks rolled back; lock held %s", during, bumps.Load(), deadlocks, results[0].CutoverLock)
	checkAudit(t, db, ms)
	if after := triggersOf(t, db, "t"); !slices.Equal(after, toggledNames(before)) {
		t.Errorf("triggers of the new t:\n got  %q\n want %q", after, toggledNames(before))
	}
	if old := triggersOf(t, db, "_t_old"); !slices.Equal(old, before) {
		t.Errorf("triggers of the old t:\n got  %q\n want %q", old, before)
	}
	if got := triggersOf(t, db, "u"); len(got) > 0 {
		t.Errorf("u has triggers: %q", got)
	}
	var sum int64
	var cols string
	db.QueryRow("SELECT SUM(v) FROM u").Scan(&sum)
	db.QueryRow("SELECT GROUP_CONCAT(COLUMN_NAME ORDER BY ORDINAL_POSITION) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 'u'", db.Name).Scan(&cols)
	if sum != bumps.Load() || cols != "id,v,w" {
		t.Errorf("u: the increments sum to %d, %d were made; columns %s", sum, bumps.Load(), cols)
	}
}
