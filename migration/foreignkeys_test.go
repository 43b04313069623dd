package migration_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
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

// fkChild is one row of c in the model.
type fkChild struct {
	pid int64
	qid sql.NullInt64
	v   int64
}

// fkWriter owns the parents, q rows and children whose id is i modulo n, so
// its model is exact: nothing another writer does touches its rows.
type fkWriter struct {
	i, n     int64
	next     int64 // the next id it creates
	parents  []int64
	qs       []int64
	children map[int64]fkChild
	ops      map[string]int
}

func (w *fkWriter) id() int64 { w.next += w.n; return w.next }

func pick(r *rand.Rand, ids []int64) (int64, int) {
	k := r.IntN(len(ids))
	return ids[k], k
}

// step runs one random transaction and, once it commits, applies it to the
// model, with the cascades the server makes: ON DELETE/UPDATE CASCADE from p,
// ON DELETE SET NULL from q. A child's own r row is deleted with it in one
// transaction, after it: the r key is RESTRICT, and a constraint on a shadow
// the apply has not caught up with would refuse that delete.
func (w *fkWriter) step(ctx context.Context, db *sql.DB, r *rand.Rand) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var commit func()
	op := ""
	switch k := r.IntN(10); {
	case k < 3 || len(w.children) < 10: // a child, with its r row
		id, pid := w.id(), w.parents[r.IntN(len(w.parents))]
		q := sql.NullInt64{Int64: w.qs[r.IntN(len(w.qs))], Valid: r.IntN(2) == 0}
		v := r.Int64N(1000)
		if _, err = tx.ExecContext(ctx, "INSERT INTO r VALUES (?)", id); err == nil {
			_, err = tx.ExecContext(ctx, "INSERT INTO c (id, pid, qid, rid, v) VALUES (?, ?, ?, ?, ?)", id, pid, q, id, v)
		}
		op, commit = "insert child", func() { w.children[id] = fkChild{pid, q, v} }
	case k < 5:
		id := anyKey(r, w.children)
		v, pid := r.Int64N(1000), w.parents[r.IntN(len(w.parents))]
		_, err = tx.ExecContext(ctx, "UPDATE c SET v = ?, pid = ? WHERE id = ?", v, pid, id)
		op, commit = "update child", func() { c := w.children[id]; c.v, c.pid = v, pid; w.children[id] = c }
	case k < 6:
		id := anyKey(r, w.children)
		if _, err = tx.ExecContext(ctx, "DELETE FROM c WHERE id = ?", id); err == nil {
			_, err = tx.ExecContext(ctx, "DELETE FROM r WHERE id = ?", id)
		}
		op, commit = "delete child and its r row", func() { delete(w.children, id) }
	case k < 7 && len(w.parents) > 5: // cascades: its children go
		pid, at := pick(r, w.parents)
		_, err = tx.ExecContext(ctx, "DELETE FROM p WHERE id = ?", pid)
		op, commit = "delete parent", func() {
			w.parents = slices.Delete(w.parents, at, at+1)
			for id, c := range w.children {
				if c.pid == pid {
					delete(w.children, id)
				}
			}
		}
	case k < 8: // cascades: its children follow the new id
		pid, at := pick(r, w.parents)
		nid := w.id()
		_, err = tx.ExecContext(ctx, "UPDATE p SET id = ? WHERE id = ?", nid, pid)
		op, commit = "move parent", func() {
			w.parents[at] = nid
			for id, c := range w.children {
				if c.pid == pid {
					c.pid = nid
					w.children[id] = c
				}
			}
		}
	case k < 9 && len(w.qs) > 3: // SET NULL on its children
		qid, at := pick(r, w.qs)
		_, err = tx.ExecContext(ctx, "DELETE FROM q WHERE id = ?", qid)
		op, commit = "delete q", func() {
			w.qs = slices.Delete(w.qs, at, at+1)
			for id, c := range w.children {
				if c.qid.Valid && c.qid.Int64 == qid {
					c.qid = sql.NullInt64{}
					w.children[id] = c
				}
			}
		}
	default:
		pid, qid := w.id(), w.id()
		if _, err = tx.ExecContext(ctx, "INSERT INTO p VALUES (?, 0)", pid); err == nil {
			_, err = tx.ExecContext(ctx, "INSERT INTO q VALUES (?)", qid)
		}
		op, commit = "insert parent", func() { w.parents = append(w.parents, pid); w.qs = append(w.qs, qid) }
	}
	return commitStep(tx, err, op, commit, w.ops)
}

// commitStep ends a model writer's transaction: commits it unless err, and
// once committed applies it to the model (commit) and counts op.
func commitStep(tx *sql.Tx, err error, op string, commit func(), ops map[string]int) error {
	if err == nil {
		err = tx.Commit()
	}
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	commit()
	ops[op]++
	return nil
}

func anyKey(r *rand.Rand, m map[int64]fkChild) int64 {
	keys := make([]int64, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys[r.IntN(len(keys))]
}

// migrateUnderWriters runs r while writers call step, each with a rand of
// its own (seed, i), from 200ms before the migration until 200ms after it
// (writes on the new table, its keys enforced). An error numbered in retry
// rolled the writer's transaction back and left its model untouched: it is
// counted and the writer goes on; any other error, or the migration's, ends
// the test. It returns the result, the writes made during the migration and
// the retries.
func migrateUnderWriters(t *testing.T, r *migration.Runner, seed uint64, writers int,
	step func(ctx context.Context, i int, rng *rand.Rand) error, retry ...uint16) (migration.Result, int64, int64) {
	t.Helper()
	return runUnderWriters(t, func() (migration.Result, error) { return r.Run(context.Background()) }, seed, writers, step, retry...)
}

// runUnderWriters is migrateUnderWriters for any run (a group's).
func runUnderWriters(t *testing.T, run func() (migration.Result, error), seed uint64, writers int,
	step func(ctx context.Context, i int, rng *rand.Rand) error, retry ...uint16) (migration.Result, int64, int64) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var failed atomic.Value
	var during, retried atomic.Int64
	var migrating atomic.Bool
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(i)))
			for ctx.Err() == nil {
				err := step(ctx, i, rng)
				switch {
				case ctx.Err() != nil:
					return
				case err != nil && slices.Contains(retry, dbconn.ErrorNumber(err)):
					retried.Add(1)
				case err != nil:
					failed.CompareAndSwap(nil, err)
					return
				case migrating.Load():
					during.Add(1)
				}
			}
		}()
	}
	time.Sleep(200 * time.Millisecond)
	migrating.Store(true)
	res, err := run()
	migrating.Store(false)
	time.Sleep(200 * time.Millisecond)
	cancel()
	wg.Wait()
	if err != nil {
		t.Fatalf("migration failed: %v", err)
	}
	if e := failed.Load(); e != nil {
		t.Fatalf("a writer saw an error (no constraint of the shadow or of the old table may reach the application): %v", e)
	}
	return res, during.Load(), retried.Load()
}

// foreignKeysOfDB lists the foreign keys of the test's database, as
// "table name parent update-rule delete-rule", sorted.
func foreignKeysOfDB(t *testing.T, db *testdb.DB) []string {
	t.Helper()
	return column(t, db, `SELECT CONCAT_WS(' ', TABLE_NAME, CONSTRAINT_NAME, REFERENCED_TABLE_NAME, UPDATE_RULE, DELETE_RULE)
		FROM information_schema.REFERENTIAL_CONSTRAINTS WHERE CONSTRAINT_SCHEMA = DATABASE()`)
}

// TestForeignKeysOfAChildWithWriters migrates a table with three foreign
// keys (CASCADE, SET NULL, RESTRICT; one named by the user, two by the
// server) while writers insert, update and delete its rows and its parents'
// (whose cascades change its rows): the table ends equal to a model of the
// writes, with the same constraints enforced, and no writer ever saw an error.
func TestForeignKeysOfAChildWithWriters(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE p (id BIGINT PRIMARY KEY, v INT)",
		"CREATE TABLE q (id BIGINT PRIMARY KEY)",
		"CREATE TABLE r (id BIGINT PRIMARY KEY)",
		`CREATE TABLE c (id BIGINT PRIMARY KEY, pid BIGINT NOT NULL, qid BIGINT NULL, rid BIGINT NOT NULL, v INT,
			CONSTRAINT fk_parent FOREIGN KEY (pid) REFERENCES p (id) ON DELETE CASCADE ON UPDATE CASCADE,
			FOREIGN KEY (qid) REFERENCES q (id) ON DELETE SET NULL,
			FOREIGN KEY (rid) REFERENCES r (id))`)
	const writers, perWriter = 4, 1500
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	seed := rng.Uint64()
	t.Logf("seed %d", seed)
	ws := make([]*fkWriter, writers)
	var prows, qrows, crows []string
	for i := range ws {
		w := &fkWriter{i: int64(i), n: writers, next: int64(i), children: map[int64]fkChild{}, ops: map[string]int{}}
		for range 40 {
			p, q := w.id(), w.id()
			w.parents, w.qs = append(w.parents, p), append(w.qs, q)
			prows, qrows = append(prows, fmt.Sprintf("(%d, 0)", p)), append(qrows, fmt.Sprintf("(%d)", q))
		}
		for range perWriter {
			id := w.id()
			c := fkChild{pid: w.parents[rng.IntN(len(w.parents))], qid: sql.NullInt64{Int64: w.qs[rng.IntN(len(w.qs))], Valid: rng.IntN(3) > 0}, v: rng.Int64N(1000)}
			w.children[id] = c
			q := "NULL"
			if c.qid.Valid {
				q = fmt.Sprint(c.qid.Int64)
			}
			crows = append(crows, fmt.Sprintf("(%d, %d, %s, %d, %d)", id, c.pid, q, id, c.v))
		}
		ws[i] = w
	}
	db.MustExec(t, "INSERT INTO p VALUES "+strings.Join(prows, ","), "INSERT INTO q VALUES "+strings.Join(qrows, ","))
	for _, ch := range slices.Collect(slices.Chunk(crows, 1000)) {
		var rs []string
		for _, row := range ch {
			rs = append(rs, "("+strings.Split(strings.Trim(row, "()"), ", ")[0]+")")
		}
		db.MustExec(t, "INSERT INTO r VALUES "+strings.Join(rs, ","), "INSERT INTO c (id, pid, qid, rid, v) VALUES "+strings.Join(ch, ","))
	}

	cfg := config(t, db, "c", "ADD COLUMN extra INT NOT NULL DEFAULT 7, MODIFY v BIGINT")
	r, err := migration.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if db.Flavor == dbconn.MariaDB {
		_, err := r.Run(context.Background())
		if err == nil || !strings.Contains(err.Error(), "only on MySQL so far") {
			t.Fatalf("got %v, want the refusal of foreign keys on MariaDB", err)
		}
		return
	}
	res, during, _ := migrateUnderWriters(t, r, seed, len(ws), func(ctx context.Context, i int, rng *rand.Rand) error {
		return ws[i].step(ctx, db.DB, rng)
	}, 1213, 1205) // deadlock or lock wait: rolled back, model untouched
	ops := map[string]int{}
	for _, w := range ws {
		for k, n := range w.ops {
			ops[k] += n
		}
	}
	t.Logf("writes during the migration %d (%v), keys applied %d, rows copied %d, lock %s", during, ops, res.KeysApplied, res.RowsCopied, res.CutoverLock)
	if during < 100 || ops["delete parent"] == 0 || ops["move parent"] == 0 || ops["delete q"] == 0 {
		t.Errorf("too few writes, or no cascade, to prove anything: %d during, %v", during, ops)
	}
	if res.RowsCopied == 0 || res.KeysApplied == 0 {
		t.Errorf("nothing copied or applied: %+v", res)
	}
	if want := []string{"fk_parent -> _fk_parent"}; !slices.Equal(res.RenamedForeignKeys, want) {
		t.Errorf("renamed foreign keys %v, want %v", res.RenamedForeignKeys, want)
	}

	// The table against the model.
	var want [][]string
	var ids []int64
	all := map[int64]fkChild{}
	for _, w := range ws {
		for id, c := range w.children {
			ids = append(ids, id)
			all[id] = c
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		c := all[id]
		q := "NULL" // as Dump writes values
		if c.qid.Valid {
			q = fmt.Sprintf("'%d'", c.qid.Int64)
		}
		want = append(want, []string{fmt.Sprintf("'%d'", id), fmt.Sprintf("'%d'", c.pid), q, fmt.Sprintf("'%d'", id), fmt.Sprintf("'%d'", c.v), "'7'"})
	}
	got := db.Dump(t, "c", "id, pid, qid, rid, v, extra", "id")
	if len(got) != len(want) {
		t.Errorf("c has %d rows, the model %d", len(got), len(want))
	}
	bad := 0
	for i := range min(len(got), len(want)) {
		if fmt.Sprint(got[i]) != fmt.Sprint(want[i]) {
			if bad < 5 {
				t.Errorf("row %d: got %v, want %v", i, got[i], want[i])
			}
			bad++
		}
	}
	if bad > 0 || len(got) != len(want) {
		t.Fatalf("%d of %d rows differ from the model", bad, len(want))
	}

	// The same constraints, enforced, on the new table.
	fks := foreignKeysOfDB(t, db)
	if wantFKs := []string{"c _fk_parent p CASCADE CASCADE", "c c_ibfk_1 q NO ACTION SET NULL", "c c_ibfk_2 r NO ACTION NO ACTION"}; !slices.Equal(fks, wantFKs) {
		t.Errorf("foreign keys of the new table:\n got  %q\n want %q", fks, wantFKs)
	}
	if _, err := db.Exec("INSERT INTO c (id, pid, rid) VALUES (-1, -1, -1)"); dbconn.ErrorNumber(err) != 1452 {
		t.Errorf("an orphan row: got %v, want error 1452", err)
	}
	pid := ws[0].parents[0]
	db.MustExec(t, fmt.Sprintf("DELETE FROM p WHERE id = %d", pid))
	var left int
	if err := db.QueryRow("SELECT COUNT(*) FROM c WHERE pid = ?", pid).Scan(&left); err != nil || left != 0 {
		t.Errorf("the cascade after the swap left %d rows (%v)", left, err)
	}
}

// TestForeignKeyRefusals: what the copy path cannot yet carry is refused in
// one line before anything is created.
func TestForeignKeyRefusals(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE p (id INT PRIMARY KEY)",
		"CREATE TABLE c (id INT PRIMARY KEY, pid INT, v INT, CONSTRAINT fk_c FOREIGN KEY (pid) REFERENCES p (id))",
		"CREATE TABLE n (id INT PRIMARY KEY, pid INT NULL, CONSTRAINT fk_n FOREIGN KEY (pid) REFERENCES p (id) ON DELETE SET NULL)",
		"CREATE TABLE other (id INT PRIMARY KEY, pid INT)",
		"CREATE TABLE q (id INT PRIMARY KEY, x INT, UNIQUE KEY (id, x))",
		// Which of these the server applies first to a delete from q
		// decides whether the row is deleted or keeps NULLs.
		"CREATE TABLE o (id INT PRIMARY KEY, qid INT, qx INT, CONSTRAINT z FOREIGN KEY (qid, qx) REFERENCES q (id, x) ON DELETE SET NULL, CONSTRAINT a FOREIGN KEY (qid) REFERENCES q (id) ON DELETE CASCADE)")
	cases := []struct{ table, alter, want string }{
		{"other", "ADD COLUMN x INT, ADD FOREIGN KEY (pid) REFERENCES p (id)", "adds a foreign key"},
	}
	if db.Flavor == dbconn.MariaDB {
		cases = append(cases, struct{ table, alter, want string }{"c", "ADD COLUMN x INT", "only on MySQL so far"})
	} else {
		cases = append(cases,
			struct{ table, alter, want string }{"p", "MODIFY id BIGINT", "changes column id, which foreign key"},
			struct{ table, alter, want string }{"p", "DROP PRIMARY KEY, ADD PRIMARY KEY (id, x), ADD COLUMN x INT NOT NULL DEFAULT 0", "no primary key or unique index on exactly (id)"},
			struct{ table, alter, want string }{"c", "ADD COLUMN x INT, DROP FOREIGN KEY fk_c", "drop it first"},
			struct{ table, alter, want string }{"c", "ADD COLUMN x INT, DROP CONSTRAINT fk_c", "drops foreign key fk_c; drop it first"},
			struct{ table, alter, want string }{"c", "MODIFY pid BIGINT", "changes column pid of foreign key fk_c"},
			struct{ table, alter, want string }{"c", "DROP COLUMN pid", "drops, renames or refills column pid"},
			// Same name and type, other values: the key would be added over rows it was never checked on.
			struct{ table, alter, want string }{"c", "CHANGE pid pid_old INT, ADD COLUMN pid INT, ADD INDEX (pid)", "drops, renames or refills column pid"},
			struct{ table, alter, want string }{"c", "CHANGE pid pid_old INT, CHANGE v pid INT, ADD INDEX (pid)", "drops, renames or refills column pid"},
			struct{ table, alter, want string }{"n", "MODIFY pid INT NOT NULL", "sets to NULL"},
			struct{ table, alter, want string }{"o", "ADD COLUMN x INT", "foreign keys a and z of o reference one table on shared columns with different actions"},
			struct{ table, alter, want string }{"q", "ADD COLUMN y INT", "referenced by foreign keys"},
		)
	}
	before := db.Tables(t)
	for _, c := range cases {
		t.Run(c.alter, func(t *testing.T) {
			r, err := migration.New(config(t, db, c.table, c.alter))
			if err == nil {
				_, err = r.Run(context.Background())
			}
			if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("got %v, want one line containing %q", err, c.want)
			}
			if tables := db.Tables(t); !slices.Equal(tables, before) {
				t.Errorf("tables after a refusal: %v, before %v", tables, before)
			}
		})
	}
}

// TestForeignKeyServedByThePrimaryKey: a foreign key whose index is the
// primary key's first column (a join table) is carried like any other.
func TestForeignKeyServedByThePrimaryKey(t *testing.T) {
	db := testdb.New(t)
	db.SkipUnless(t, dbconn.MySQL, "foreign keys are carried on MySQL only")
	db.MustExec(t, "CREATE TABLE p (id INT PRIMARY KEY)", "INSERT INTO p VALUES (1), (2), (3)",
		"CREATE TABLE j (pid INT NOT NULL, n INT NOT NULL, PRIMARY KEY (pid, n), FOREIGN KEY (pid) REFERENCES p (id) ON DELETE CASCADE)")
	db.Fill(t, "j", 3000, "1 + n % 3, n")
	r, err := migration.New(config(t, db, "j", "ADD COLUMN x INT"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Run(context.Background())
	if err != nil {
		t.Fatalf("migration failed: %v", err)
	}
	if res.RowsCopied != 3000 {
		t.Errorf("copied %d rows of 3000", res.RowsCopied)
	}
	var fks, rows int
	if err := db.QueryRow(`SELECT COUNT(*) FROM information_schema.REFERENTIAL_CONSTRAINTS WHERE CONSTRAINT_SCHEMA = DATABASE()
		AND TABLE_NAME = 'j' AND CONSTRAINT_NAME = 'j_ibfk_1' AND DELETE_RULE = 'CASCADE'`).Scan(&fks); err != nil || fks != 1 {
		t.Errorf("j_ibfk_1 on the new table: %d (%v)", fks, err)
	}
	db.MustExec(t, "DELETE FROM p WHERE id = 1")
	if err := db.QueryRow("SELECT COUNT(*) FROM j").Scan(&rows); err != nil || rows != 2000 {
		t.Errorf("after a parent's delete cascaded: %d rows (%v), want 2000", rows, err)
	}
}

// TestKillAndResumeForeignKeys kills migrations of a child table, mostly in
// its cut-over (around the ALTER that adds the foreign keys to the new table,
// the RENAME and the one that takes them off the old table), and runs the
// same command again each time, under writers: the table ends equal to the
// model of the writes, with its foreign keys, and no other table keeps one.
func TestKillAndResumeForeignKeys(t *testing.T) {
	if os.Getenv("SLUICE_RESUME_CHILD") != "" {
		t.Skip()
	}
	db := testdb.New(t)
	db.SkipUnless(t, dbconn.MySQL, "foreign keys are carried on MySQL only")
	db.MustExec(t, "CREATE TABLE p (id INT PRIMARY KEY)", "INSERT INTO p VALUES (1), (2)",
		`CREATE TABLE t (id BIGINT NOT NULL PRIMARY KEY, k INT NOT NULL DEFAULT 0,
		c CHAR(120) NOT NULL DEFAULT '', pad VARCHAR(60), pid INT NOT NULL DEFAULT 1, KEY k_1 (k),
		CONSTRAINT fk_p FOREIGN KEY (pid) REFERENCES p (id) ON DELETE CASCADE)`)
	w := sysbenchWorkload()
	db.MustExec(t, "CREATE TABLE model_ref LIKE t")
	w.load(t, db, "model_ref", 20000)
	// t is a parent too.
	db.MustExec(t, "CREATE TABLE ch (id INT PRIMARY KEY, tid BIGINT, FOREIGN KEY (tid) REFERENCES t (id) ON DELETE CASCADE ON UPDATE CASCADE)")
	db.Fill(t, "ch", 5000, "n, n * 3")
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 11))
	stop := make(chan struct{})
	wait := w.run(t, db, stop)
	alters := []string{"ADD COLUMN extra INT NOT NULL DEFAULT 7", "DROP COLUMN extra"}
	kills := 0
	for m := 0; m < 2; m++ {
		job := childJob{DSN: os.Getenv(testdb.Env), Database: db.Name, Table: "t", Alter: alters[m], Every: 200 * time.Millisecond}
		for here := 0; ; here++ {
			c := startChild(t, job)
			if here >= 4 {
				if err := <-c.done; err != nil {
					res, line := c.result(t)
					t.Fatalf("the last run failed: %s (kept %q)\n%s", line, res.Kept, c.out)
				}
				break
			}
			target, delay := "cut-over", time.Duration(rng.IntN(300))*time.Millisecond
			if here == 0 {
				target, delay = "copy", time.Duration(rng.IntN(100))*time.Millisecond
			}
			err, killed := c.killIn(target, delay)
			if !killed {
				if err != nil {
					res, line := c.result(t)
					t.Fatalf("the child failed (not killed): %s (kept %q)\n%s", line, res.Kept, c.out)
				}
				break
			}
			kills++
			t.Logf("migration %d: killed in %s, %s after it started", m, c.phase(), delay)
			if finished(t, db, job.Alter) {
				break
			}
		}
	}
	close(stop)
	wait()
	w.replay(t, db, "model_ref")
	compare(t, db, "t", "model_ref", "id, k, c, pad", "id")
	fks := foreignKeysOfDB(t, db)
	// fk_p became _fk_p at the first migration and fk_p again at the
	// second; ch's key, re-pointed twice, too.
	if want := []string{"ch ch_ibfk_1 t CASCADE CASCADE", "t fk_p p NO ACTION CASCADE"}; !slices.Equal(fks, want) {
		t.Errorf("foreign keys after %d kills: %q, want %q", kills, fks, want)
	}
	var orphans, kids int
	if err := db.QueryRow("SELECT COUNT(*), COALESCE(SUM(t.id IS NULL), 0) FROM ch LEFT JOIN t ON t.id = ch.tid").Scan(&kids, &orphans); err != nil || orphans != 0 || kids == 0 {
		t.Errorf("ch has %d rows, %d of them orphans (%v)", kids, orphans, err)
	}
	for _, n := range db.Tables(t) {
		if n != "t" && n != "model_ref" && n != "p" && n != "ch" {
			t.Errorf("left behind: %s", n)
		}
	}
}

// TestDeathInTheCutoverOfRelatedTables: a run that dies at each point of a
// cut-over that moves foreign keys (after they are added to the new table,
// after the first child is pointed at it, after all are, right after the
// RENAME), then the same command again: the table ends migrated with all its
// rows, its own key on it (not on the old table), the children's keys
// (three, on two tables, with their rules) on it under the planned names,
// the children's rows untouched, and nothing left behind.
func TestDeathInTheCutoverOfRelatedTables(t *testing.T) {
	if os.Getenv("SLUICE_RESUME_CHILD") != "" {
		t.Skip()
	}
	for _, at := range []string{"in-call", "renamed"} {
		t.Run(at, func(t *testing.T) {
			db := testdb.New(t)
			db.SkipUnless(t, dbconn.MySQL, "foreign keys are carried on MySQL only")
			db.MustExec(t, "CREATE TABLE p (id INT PRIMARY KEY)", "INSERT INTO p VALUES (1), (2)",
				"CREATE TABLE t (id BIGINT PRIMARY KEY, pid INT NOT NULL, v INT, CONSTRAINT fk_p FOREIGN KEY (pid) REFERENCES p (id))",
				"CREATE TABLE ch (id INT PRIMARY KEY, tid BIGINT, FOREIGN KEY (tid) REFERENCES t (id) ON DELETE CASCADE)",
				`CREATE TABLE ch2 (id INT PRIMARY KEY, a BIGINT, b BIGINT, CONSTRAINT k_a FOREIGN KEY (a) REFERENCES t (id),
					CONSTRAINT k_b FOREIGN KEY (b) REFERENCES t (id) ON DELETE SET NULL ON UPDATE CASCADE)`)
			db.Fill(t, "t", 5000, "n, 1 + n % 2, n")
			db.Fill(t, "ch", 1000, "n, n * 5")
			db.Fill(t, "ch2", 1000, "n, n * 3, IF(n % 2, NULL, n * 4)")
			dump := func() string {
				return fmt.Sprint(db.Dump(t, "t", "id, pid, v", "id"), db.Dump(t, "ch", "id, tid", "id"), db.Dump(t, "ch2", "id, a, b", "id"))
			}
			before := dump()
			job := childJob{DSN: os.Getenv(testdb.Env), Database: db.Name, Table: "t", Alter: "ADD COLUMN extra INT NOT NULL DEFAULT 7", Every: 200 * time.Millisecond, Die: at}
			c := startChild(t, job)
			err := <-c.done
			if code := c.cmd.ProcessState.ExitCode(); code != 9 {
				t.Fatalf("the child did not die at %s (exit %d, %v):\n%s", at, code, err, c.out)
			}
			job.Die = ""
			c = startChild(t, job)
			if err := <-c.done; err != nil {
				res, line := c.result(t)
				t.Fatalf("the run after the death failed: %s (kept %q)\n%s", line, res.Kept, c.out)
			}
			if after := dump(); after != before {
				t.Errorf("rows changed by the migration")
			}
			var extra int
			if err := db.QueryRow("SELECT COUNT(*) FROM t WHERE extra = 7").Scan(&extra); err != nil || extra != 5000 {
				t.Errorf("migrated rows: %d (%v)", extra, err)
			}
			fks := foreignKeysOfDB(t, db)
			want := []string{"ch _ch_ibfk_1 t NO ACTION CASCADE", "ch2 _k_a t NO ACTION NO ACTION", "ch2 _k_b t CASCADE SET NULL", "t _fk_p p NO ACTION NO ACTION"}
			if !slices.Equal(fks, want) {
				t.Errorf("foreign keys:\n got  %q\n want %q", fks, want)
			}
			for _, n := range db.Tables(t) {
				if n != "t" && n != "p" && n != "ch" && n != "ch2" {
					t.Errorf("left behind: %s", n)
				}
			}
		})
	}
}

// TestForeignKeyIndexNamesKept: the indexes the server made for foreign keys
// keep their names through the swap, on the table and on its children, as
// the server's own ALTER keeps them (the server renamed such an index after
// the constraint when the swap added the key again: _t_new_ibfk_1, _myfk).
func TestForeignKeyIndexNamesKept(t *testing.T) {
	db := testdb.New(t)
	db.SkipUnless(t, dbconn.MySQL, "foreign keys are carried on MySQL only")
	for _, suffix := range []string{"", "2"} {
		db.MustExec(t, "CREATE TABLE IF NOT EXISTS p (id INT PRIMARY KEY, k2 INT NOT NULL, UNIQUE KEY uk (id, k2))",
			"INSERT IGNORE INTO p VALUES (1, 1), (2, 2)",
			fmt.Sprintf(`CREATE TABLE t%s (id INT PRIMARY KEY, pid INT, p2 INT, rid INT, sid INT, KEY mine (sid),
				FOREIGN KEY (pid, p2) REFERENCES p (id, k2), CONSTRAINT myfk%s FOREIGN KEY (rid) REFERENCES p (id),
				FOREIGN KEY (sid) REFERENCES p (id))`, suffix, suffix),
			fmt.Sprintf("INSERT INTO t%s VALUES (1, 1, 1, 1, 1), (2, 2, 2, 2, 2)", suffix),
			fmt.Sprintf("CREATE TABLE ch%s (id INT PRIMARY KEY, tid INT, FOREIGN KEY (tid) REFERENCES t%s (id))", suffix, suffix),
			fmt.Sprintf("INSERT INTO ch%s VALUES (1, 1)", suffix))
	}
	db.MustExec(t, "ALTER TABLE t2 ADD COLUMN c INT, ALGORITHM=COPY")
	migrate(t, config(t, db, "t", "ADD COLUMN c INT"))
	indexes := func(table string) []string {
		var out []string
		for _, line := range strings.Split(showCreate(t, db, table), "\n") {
			if l := strings.TrimSpace(line); strings.HasPrefix(l, "KEY ") {
				out = append(out, strings.NewReplacer("myfk2", "myfk", "t2", "t").Replace(strings.TrimSuffix(l, ",")))
			}
		}
		slices.Sort(out)
		return out
	}
	for _, pair := range [][2]string{{"t", "t2"}, {"ch", "ch2"}} {
		got, want := indexes(pair[0]), indexes(pair[1])
		if !slices.Equal(got, want) {
			t.Errorf("indexes of %s after sluice %q, after the server's ALTER %q", pair[0], got, want)
		}
		if len(got) == 0 {
			t.Errorf("%s has no index: the comparison proves nothing", pair[0])
		}
	}
}
