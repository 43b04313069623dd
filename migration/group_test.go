package migration_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/schema"
	"github.com/sluicedb/sluice/internal/testdb"
	"github.com/sluicedb/sluice/migration"
)

// groupTables makes t1 and t2 (the sysbench shape), each with its writers'
// model table, loaded with rows rows.
func groupTables(t *testing.T, db *testdb.DB, rows int64) (w1, w2 *workload) {
	t.Helper()
	w1, w2 = sysbenchWorkload(), sysbenchWorkload()
	w1.table, w2.table = "t1", "t2"
	w1.writers, w2.writers = 4, 4
	for _, name := range []string{"t1", "t2"} {
		db.MustExec(t, `CREATE TABLE `+name+` (id BIGINT NOT NULL PRIMARY KEY, k INT NOT NULL DEFAULT 0,
			c CHAR(120) NOT NULL DEFAULT '', pad VARCHAR(60), KEY k_1 (k))`,
			"CREATE TABLE model_"+name+" LIKE "+name)
	}
	w1.load(t, db, "model_t1", rows)
	w2.load(t, db, "model_t2", rows)
	return w1, w2
}

// schemaProbe reads both tables in one statement, again and again, and
// records which of them it saw changed: a statement opens both tables at one
// instant, so it sees both old or both new unless the swaps were apart.
type schemaProbe struct {
	seen  sync.Map // "t1 old, t2 new" -> count
	reads atomic.Int64
	stop  chan struct{}
	done  chan struct{}
}

func startSchemaProbe(t *testing.T, db *testdb.DB, col1, col2 string) *schemaProbe {
	p := &schemaProbe{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for {
			select {
			case <-p.stop:
				return
			default:
			}
			rows, err := db.Query("SELECT * FROM t1 JOIN t2 ON t1.id = t2.id LIMIT 0")
			if err != nil {
				continue // a table being renamed
			}
			cols, _ := rows.Columns()
			rows.Close()
			state := func(col, table string) string {
				if slices.Contains(cols, col) {
					return table + " new"
				}
				return table + " old"
			}
			key := state(col1, "t1") + ", " + state(col2, "t2")
			n, _ := p.seen.LoadOrStore(key, new(atomic.Int64))
			n.(*atomic.Int64).Add(1)
			p.reads.Add(1)
		}
	}()
	return p
}

func (p *schemaProbe) end() map[string]int64 {
	close(p.stop)
	<-p.done
	out := map[string]int64{}
	p.seen.Range(func(k, v any) bool {
		out[k.(string)] = v.(*atomic.Int64).Load()
		return true
	})
	return out
}

// TestGroupSwapsTogetherWithWriters: two tables migrated as one group while
// writers change both: each ends equal to its writers' model, and a reader
// of both never sees one table changed and the other not. The first RENAME
// attempt fails, so the retry after a failed swap is exercised too.
func TestGroupSwapsTogetherWithWriters(t *testing.T) {
	db := testdb.New(t)
	db.SkipUnless(t, dbconn.MySQL, "several tables in one cut-over need RENAME under LOCK TABLES (TestGroupRefusals checks MariaDB's refusal)")
	w1, w2 := groupTables(t, db, 20000)
	probe := startSchemaProbe(t, db, "x", "y")
	stop1, stop2 := w1.start(t, db), w2.start(t, db)
	time.Sleep(100 * time.Millisecond)
	cfg1 := config(t, db, "t1", "ADD COLUMN x INT")
	cfg2 := config(t, db, "t2", "MODIFY k BIGINT NOT NULL DEFAULT 0, ADD COLUMN y INT")
	migration.FailRenameOnce(db.Name)
	before1, before2 := w1.ops.Load(), w2.ops.Load()
	res, err := migration.RunGroup(context.Background(), []migration.Config{cfg1, cfg2})
	during1, during2 := w1.ops.Load()-before1, w2.ops.Load()-before2
	time.Sleep(100 * time.Millisecond)
	stop1()
	stop2()
	seen := probe.end()
	if err != nil {
		t.Fatalf("group migration failed: %v", err)
	}
	t.Logf("writes during the run %d and %d; probe: %v", during1, during2, seen)
	for i, r := range res {
		t.Logf("table %d: copied %d, applied %d, changed rows verified %d, lock held %s, lock attempts %d",
			i+1, r.RowsCopied, r.KeysApplied, r.ChangedRowsVerified, r.CutoverLock, r.LockAttempts)
		if r.RowsCopied < 15000 || r.KeysApplied == 0 { // (the writers delete rows too)
			t.Errorf("table %d: copied %d rows, applied %d keys: the test proves little", i+1, r.RowsCopied, r.KeysApplied)
		}
	}
	if during1 < 50 || during2 < 50 {
		t.Fatalf("%d and %d writes during the migration: the test proves little", during1, during2)
	}
	// Each run's own checksum snapshot takes a lock too: the failed RENAME
	// and its retry make it three at least.
	if migration.RenameFailurePending(db.Name) {
		t.Error("the RENAME the test fails was never attempted")
	}
	for i, r := range res {
		if r.LockAttempts < 3 {
			t.Errorf("table %d: the failed RENAME was not retried: %d lock attempts", i+1, r.LockAttempts)
		}
	}
	w1.replay(t, db, "model_t1")
	w2.replay(t, db, "model_t2")
	compare(t, db, "t1", "model_t1", "id, k, c, pad", "id")
	compare(t, db, "t2", "model_t2", "id, k, c, pad", "id")
	for state, n := range seen {
		if state == "t1 new, t2 old" || state == "t1 old, t2 new" {
			t.Errorf("a reader saw %s (%d times): the tables were not swapped together", state, n)
		}
	}
	if seen["t1 old, t2 old"] == 0 || seen["t1 new, t2 new"] == 0 {
		t.Errorf("the probe did not see both states (%v): it proves nothing", seen)
	}
	want := []string{"_t1_old", "_t2_old", "model_t1", "model_t2", "t1", "t2"}
	if tables := db.Tables(t); !slices.Equal(tables, want) {
		t.Errorf("tables after the migration: %v, want %v", tables, want)
	}
}

// TestGroupFailureSwapsNothing: when one table's run fails (a unique key
// its rows break, found when the key is built after the copy) while the
// other, small, waits at the cut-over, the waiting one stops too: neither
// table is swapped, both keep their rows, and no table of sluice's is left.
func TestGroupFailureSwapsNothing(t *testing.T) {
	db := testdb.New(t)
	db.SkipUnless(t, dbconn.MySQL, "several tables in one cut-over need RENAME under LOCK TABLES")
	groupTables(t, db, 20000)
	db.MustExec(t, "DELETE FROM t1 WHERE id > 50")
	dump1, dump2 := db.Dump(t, "t1", "*", "id"), db.Dump(t, "t2", "*", "id")
	cfg1 := config(t, db, "t1", "ADD COLUMN x INT")
	cfg2 := config(t, db, "t2", "ADD UNIQUE KEY uk (k)") // k repeats
	// t2 builds its key (and fails) only once t1 waits at the cut-over.
	waiting := make(chan struct{})
	cfg1.OnPhase = func(p string) {
		if p == "cut-over" {
			close(waiting)
		}
	}
	cfg2.OnPhase = func(p string) {
		if p == "index" {
			select {
			case <-waiting:
			case <-time.After(30 * time.Second):
			}
		}
	}
	res, err := migration.RunGroup(context.Background(), []migration.Config{cfg1, cfg2})
	if err == nil {
		t.Fatal("the group migrated although t2's rows break its new unique key")
	}
	t.Logf("error: %v", err)
	if !strings.Contains(err.Error(), "t2") || !strings.Contains(err.Error(), "no table was swapped") {
		t.Errorf("the error does not name the table that failed, or does not say nothing was swapped: %v", err)
	}
	if !slices.ContainsFunc(res[0].Phases, func(p migration.PhaseTime) bool { return p.Name == "cut-over" }) {
		t.Errorf("t1 never waited at the cut-over (phases %v): the test does not prove that a waiting run stops", res[0].Phases)
	}
	if res[0].Swapped || res[1].Swapped {
		t.Errorf("a table is swapped: %v, %v", res[0].Swapped, res[1].Swapped)
	}
	if got := db.Dump(t, "t1", "*", "id"); !slices.EqualFunc(got, dump1, slices.Equal) {
		t.Errorf("t1 changed although the group failed (%d rows, %d before)", len(got), len(dump1))
	}
	if got := db.Dump(t, "t2", "*", "id"); !slices.EqualFunc(got, dump2, slices.Equal) {
		t.Errorf("t2 changed although the group failed (%d rows, %d before)", len(got), len(dump2))
	}
	want := []string{"model_t1", "model_t2", "t1", "t2"}
	if tables := db.Tables(t); !slices.Equal(tables, want) {
		t.Errorf("tables after the failed group: %v, want %v", tables, want)
	}
}

// TestGroupRefusals: what a group cannot do is refused in one line, and
// nothing is changed.
func TestGroupRefusals(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE a (id INT PRIMARY KEY, v INT)", "CREATE TABLE b (id INT PRIMARY KEY, v INT)",
		"INSERT INTO a VALUES (1, 1), (2, 2)", "INSERT INTO b VALUES (1, 1)")
	with := func(table, alter string, edit func(*migration.Config)) migration.Config {
		c := config(t, db, table, alter)
		c.Method = ""
		if edit != nil {
			edit(&c)
		}
		return c
	}
	cases := []struct {
		name string
		cfgs []migration.Config
		want string
	}{
		{"one table", []migration.Config{with("a", "ADD COLUMN x INT", nil)}, "two tables or more"},
		{"a table twice", []migration.Config{with("a", "ADD COLUMN x INT", nil), with("a", "ADD COLUMN y INT", nil)}, "named twice"},
		{"instant", []migration.Config{with("a", "ADD COLUMN x INT", func(c *migration.Config) { c.Method = "instant" }),
			with("b", "ADD COLUMN x INT", nil)}, "copy path only"},
		{"capture by triggers", []migration.Config{with("a", "ADD COLUMN x INT", nil),
			with("b", "ADD COLUMN x INT", func(c *migration.Config) { c.Capture = migration.CaptureTriggers })}, "--capture=triggers"},
		{"two databases", []migration.Config{with("a", "ADD COLUMN x INT", nil),
			with("b", "ADD COLUMN x INT", func(c *migration.Config) { c.Database += "_other" })}, "one database"},
		{"names cut alike", []migration.Config{with(strings.Repeat("n", 60)+"a", "ADD COLUMN x INT", nil),
			with(strings.Repeat("n", 60)+"b", "ADD COLUMN x INT", nil)}, "would share the new table"},
	}
	if db.Flavor == dbconn.MariaDB {
		cases = append(cases, struct {
			name string
			cfgs []migration.Config
			want string
		}{"MariaDB", []migration.Config{with("a", "ADD COLUMN x INT", nil), with("b", "ADD COLUMN x INT", nil)}, "migrate the tables one by one"})
	} else {
		db.MustExec(t, "CREATE TABLE c (id INT PRIMARY KEY, a_id INT, FOREIGN KEY (a_id) REFERENCES a (id))")
		cases = append(cases, struct {
			name string
			cfgs []migration.Config
			want string
		}{"foreign keys", []migration.Config{with("a", "ADD COLUMN x INT", nil), with("b", "ADD COLUMN x INT", nil)}, "do not carry foreign keys yet"})
	}
	tables := db.Tables(t)
	defs := map[string]string{}
	for _, tb := range tables {
		var def string
		db.QueryRow("SHOW CREATE TABLE "+tb).Scan(new(string), &def)
		defs[tb] = def
	}
	for _, tc := range cases {
		_, err := migration.RunGroup(context.Background(), tc.cfgs)
		switch {
		case err == nil:
			t.Errorf("%s: not refused", tc.name)
		case !strings.Contains(err.Error(), tc.want):
			t.Errorf("%s: refused with %q, want it to say %q", tc.name, err, tc.want)
		case strings.Contains(err.Error(), "\n"):
			t.Errorf("%s: the refusal is not one line: %q", tc.name, err)
		}
		if want := migration.ErrConfig; tc.name == "MariaDB" || tc.name == "foreign keys" {
			if !errors.Is(err, migration.ErrPreflight) {
				t.Errorf("%s: %v is not a preflight refusal", tc.name, err)
			}
		} else if !errors.Is(err, want) {
			t.Errorf("%s: %v is not a refusal of the configuration", tc.name, err)
		}
		if got := db.Tables(t); !slices.Equal(got, tables) {
			t.Errorf("%s: tables %v after the refusal, want %v", tc.name, got, tables)
		}
		for tb, def := range defs {
			var now string
			db.QueryRow("SHOW CREATE TABLE "+tb).Scan(new(string), &now)
			if now != def {
				t.Errorf("%s: table %s changed", tc.name, tb)
			}
		}
	}
}

// groupResults parses a group child's results.
func (c *childRun) groupResults(t *testing.T) []migration.Result {
	t.Helper()
	s := c.out.String()
	i := strings.LastIndex(s, "\nGROUP ")
	if i < 0 {
		t.Fatalf("the child printed no group results:\n%s", s)
	}
	line, _, _ := strings.Cut(s[i+len("\nGROUP "):], "\n")
	var res []migration.Result
	if err := json.Unmarshal([]byte(line), &res); err != nil {
		t.Fatalf("group results %q: %v", line, err)
	}
	return res
}

// TestDeathOfAGroup: a group's process killed during the copy, then killed
// right after its RENAME: the next run of the same group resumes what the
// first left, the one after the swap finds both tables migrated, and each
// table ends equal to its writers' model with its ALTER applied.
func TestDeathOfAGroup(t *testing.T) {
	if os.Getenv("SLUICE_RESUME_CHILD") != "" {
		t.Skip()
	}
	db := testdb.New(t)
	db.SkipUnless(t, dbconn.MySQL, "several tables in one cut-over need RENAME under LOCK TABLES")
	w1, w2 := groupTables(t, db, 60000)
	stop1, stop2 := w1.start(t, db), w2.start(t, db)
	defer stop1()
	defer stop2()
	job := childJob{DSN: os.Getenv(testdb.Env), Database: db.Name, Table: "t1", Alter: "ADD COLUMN x INT NOT NULL DEFAULT 7",
		Table2: "t2", Alter2: "MODIFY k BIGINT NOT NULL DEFAULT 0, ADD COLUMN y INT NOT NULL DEFAULT 8", Every: 200 * time.Millisecond}
	c := startChild(t, job)
	if err, killed := c.killIn("copy", 800*time.Millisecond); !killed {
		t.Fatalf("the first run was not killed during the copy (%v):\n%s", err, c.out)
	}
	// Each table whose run recorded a position before the kill must resume.
	var recorded []string
	for _, tb := range []string{"t1", "t2"} {
		var n int
		db.QueryRow("SELECT COUNT(*) FROM `" + schema.NamesFor(tb).Checkpoint + "` WHERE body NOT LIKE '%\"file\":\"\"%'").Scan(&n)
		if n > 0 {
			recorded = append(recorded, tb)
		}
	}
	if len(recorded) == 0 {
		t.Fatalf("no table's run recorded a checkpoint before the kill: the test proves no resume:\n%s", c.out)
	}
	job.Die = "renamed"
	c = startChild(t, job)
	err := <-c.done
	if code := c.cmd.ProcessState.ExitCode(); code != 9 {
		t.Fatalf("the second run did not die after its RENAME (exit %d, %v):\n%s", code, err, c.out)
	}
	t.Logf("tables with a checkpoint at the kill: %v", recorded)
	for _, tb := range recorded {
		ckpt := "checkpoint=" + schema.NamesFor(tb).Checkpoint
		if !slices.ContainsFunc(strings.Split(c.out.String(), "\n"), func(l string) bool {
			return strings.Contains(l, "resuming the earlier run from its checkpoint") && strings.Contains(l, ckpt)
		}) {
			t.Errorf("the second run did not resume from %s:\n%s", ckpt, c.out)
		}
	}
	for _, tb := range []string{"_t1_old", "_t2_old"} {
		if !slices.Contains(db.Tables(t), tb) {
			t.Fatalf("after a death right after the RENAME, %s is missing: %v", tb, db.Tables(t))
		}
	}
	job.Die = ""
	c = startChild(t, job)
	if err := <-c.done; err != nil {
		_, line := c.result(t)
		t.Fatalf("the run after the deaths failed: %s\n%s", line, c.out)
	}
	for i, r := range c.groupResults(t) {
		if !r.AlreadyDone {
			t.Errorf("table %d: the last run did not find the group's swap done: %+v", i+1, r)
		}
	}
	stop1()
	stop2()
	if tables := db.Tables(t); !slices.Equal(tables, []string{"model_t1", "model_t2", "t1", "t2"}) {
		t.Errorf("tables left: %v", tables)
	}
	w1.replay(t, db, "model_t1")
	w2.replay(t, db, "model_t2")
	compare(t, db, "t1", "model_t1", "id, k, c, pad", "id")
	compare(t, db, "t2", "model_t2", "id, k, c, pad", "id")
	var bad int
	if err := db.QueryRow("SELECT (SELECT COUNT(*) FROM t1 WHERE x <> 7) + (SELECT COUNT(*) FROM t2 WHERE y <> 8)").Scan(&bad); err != nil || bad != 0 {
		t.Errorf("rows without the new columns' defaults: %d (%v)", bad, err)
	}
}

// TestGroupPostponed: a group started with a postponed cut-over swaps only
// once every table's cut-over is let go: one let go alone waits for the
// other, and changes keep reaching both new tables meanwhile.
func TestGroupPostponed(t *testing.T) {
	db := testdb.New(t)
	db.SkipUnless(t, dbconn.MySQL, "several tables in one cut-over need RENAME under LOCK TABLES")
	for _, tb := range []string{"t1", "t2"} {
		db.MustExec(t, "CREATE TABLE "+tb+" (id INT PRIMARY KEY, v INT)")
		db.Fill(t, tb, 500, "n, n")
	}
	var postponed atomic.Int32
	cfgs := []migration.Config{config(t, db, "t1", "ADD COLUMN x INT"), config(t, db, "t2", "ADD COLUMN y INT")}
	for i := range cfgs {
		cfgs[i].PostponeCutover = true
		cfgs[i].OnPhase = func(name string) {
			if name == "postponed" {
				postponed.Add(1)
			}
		}
	}
	errc := make(chan error, 1)
	go func() { _, err := migration.RunGroup(context.Background(), cfgs); errc <- err }()
	deadline := time.Now().Add(time.Minute)
	for postponed.Load() < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the group's runs did not both reach the postponed cut-over within a minute")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := migration.TriggerCutover(context.Background(), db.DB, db.Name, "t1"); err != nil {
		t.Fatal(err)
	}
	db.MustExec(t, "UPDATE t1 SET v = -1 WHERE id = 7", "DELETE FROM t2 WHERE id = 8")
	time.Sleep(1500 * time.Millisecond)
	if got := columns(t, db, "t1"); got != "id,v" {
		t.Fatalf("t1 was swapped (%s) before t2's cut-over was let go", got)
	}
	if err := migration.TriggerCutover(context.Background(), db.DB, db.Name, "t2"); err != nil {
		t.Fatal(err)
	}
	if err := ended(t, errc, time.Minute, "after both cut-overs were let go"); err != nil {
		t.Fatal(err)
	}
	if got1, got2 := columns(t, db, "t1"), columns(t, db, "t2"); got1 != "id,v,x" || got2 != "id,v,y" {
		t.Errorf("columns after the group: t1 %s, t2 %s", got1, got2)
	}
	var v, n int
	db.QueryRow("SELECT v FROM t1 WHERE id = 7").Scan(&v)
	db.QueryRow("SELECT COUNT(*) FROM t2").Scan(&n)
	if v != -1 || n != 499 {
		t.Errorf("changes made while the cut-over waited did not reach the new tables: t1 v=%d, t2 rows %d", v, n)
	}
}
