package migration_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
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

// runWithWriters migrates while the workload writes, then checks the table
// against the replayed model.
func runWithWriters(t *testing.T, db *testdb.DB, w *workload, rows int64, alter, compareCols, orderBy string) migration.Result {
	t.Helper()
	ref := "model_ref"
	db.MustExec(t, "CREATE TABLE "+ref+" LIKE "+w.table)
	w.load(t, db, ref, rows)

	stop := make(chan struct{})
	wait := w.run(t, db, stop)
	time.Sleep(100 * time.Millisecond) // writes before the migration starts, too
	cfg := config(t, db, w.table, alter)
	r, err := migration.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	before := w.ops.Load()
	res, err := r.Run(context.Background())
	during := w.ops.Load() - before
	time.Sleep(100 * time.Millisecond) // and after the swap
	close(stop)
	wait()
	if err != nil {
		t.Fatalf("migration failed: %v", err)
	}
	if during < 50 {
		t.Errorf("only %d writes happened during the migration; the test proves little", during)
	}
	if res.KeysApplied == 0 {
		t.Errorf("no binlog change was applied: %+v", res)
	}
	t.Logf("rows copied %d, writes during migration %d (deadlock retries %d), keys applied %d, checksum rows %d, lock %s",
		res.RowsCopied, during, w.deadlocks.Load(), res.KeysApplied, res.ChecksumRows, res.CutoverLock)
	w.replay(t, db, ref)
	compare(t, db, w.table, ref, compareCols, orderBy)
	want := []string{"_" + w.table + "_old", w.table, ref}
	slices.Sort(want)
	if tables := db.Tables(t); !slices.Equal(tables, want) {
		t.Errorf("tables after the migration: %v", tables)
	}
	return res
}

// sysbenchTable creates t as sysbenchWorkload writes it.
func sysbenchTable(t *testing.T, db *testdb.DB) {
	t.Helper()
	db.MustExec(t, `CREATE TABLE t (id BIGINT NOT NULL PRIMARY KEY, k INT NOT NULL DEFAULT 0,
		c CHAR(120) NOT NULL DEFAULT '', pad VARCHAR(60), KEY k_1 (k))`)
}

// sysbenchWorkload is 8 writers on t (id BIGINT PRIMARY KEY, k INT, c
// CHAR(120), pad VARCHAR(60), KEY (k)), a sysbench-like table.
func sysbenchWorkload() *workload {
	return &workload{
		table: "t", pk: []string{"id"}, writers: 8,
		key:  func(n int64) []any { return []any{n + 1} },
		cols: []string{"k", "c", "pad"},
		gen: func(r *rand.Rand, n int64) []any {
			return []any{r.IntN(1000), fmt.Sprintf("c-%d-%d", n, r.IntN(1e6)), nil}
		},
		update: []func(r *rand.Rand) (string, []any){
			func(r *rand.Rand) (string, []any) { return "k = k + 1", nil },
			func(r *rand.Rand) (string, []any) { return "c = ?", []any{fmt.Sprint(r.Int())} },
			func(r *rand.Rand) (string, []any) { return "pad = ?", []any{strings.Repeat("p", r.IntN(60))} },
		},
	}
}

func TestConcurrentWritersIntegerKey(t *testing.T) {
	db := testdb.New(t)
	sysbenchTable(t, db)
	w := sysbenchWorkload()
	res := runWithWriters(t, db, w, 40000, "MODIFY COLUMN k BIGINT NOT NULL DEFAULT 0, ADD COLUMN extra INT DEFAULT 7",
		"id, k, c, pad", "id")
	// An integer key: the copy runs in lanes, changes are applied while it
	// runs, and those ahead of it wait for their range. The table equals the
	// model above.
	if res.KeysAppliedInCopy == 0 {
		t.Errorf("no change applied during the copy: with writers all over the key, some should be")
	}
	if res.CopyLanes < 2 {
		t.Errorf("the copy ran in %d lane(s): a 40,000-row table with an integer key should be split", res.CopyLanes)
	}
	t.Logf("applied during the copy %d, lanes %d, checksum beside the index build %v", res.KeysAppliedInCopy, res.CopyLanes, res.ChecksumWithIndex)
	var extra int
	if err := db.QueryRow("SELECT COUNT(*) FROM t WHERE extra <> 7").Scan(&extra); err != nil || extra != 0 {
		t.Errorf("added column: %d rows without the default (%v)", extra, err)
	}
}

func TestConcurrentWritersColumnTypes(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, `CREATE TABLE typed (
		id BIGINT UNSIGNED NOT NULL PRIMARY KEY,
		i8 TINYINT, u8 TINYINT UNSIGNED, i64 BIGINT, u64 BIGINT UNSIGNED,
		dec_ DECIMAL(65,30), f FLOAT, dbl DOUBLE,
		dt DATE, dtm DATETIME(6), ts TIMESTAMP(6) NULL DEFAULT NULL,
		j JSON, b BLOB, tx TEXT,
		u4 VARCHAR(40) CHARACTER SET utf8mb4, l1 VARCHAR(40) CHARACTER SET latin1,
		e ENUM('a','b','c'), st SET('x','y','z'), bt BIT(10), bin BINARY(4),
		gv INT AS (i8 + 1) VIRTUAL,
		gs VARCHAR(60) AS (CONCAT(u4, '!')) STORED)`)
	pick := func(r *rand.Rand, vals ...any) any { return vals[r.IntN(len(vals))] }
	w := &workload{
		table: "typed", pk: []string{"id"}, writers: 6,
		zones: []string{"+05:30", "-08:00", "+00:00", "Europe/Berlin"[0:0] + "+13:00"},
		// Keys above 2^63 exercise unsigned handling of binlog key values.
		key:  func(n int64) []any { return []any{uint64(math.MaxUint64) - uint64(n)} },
		cols: []string{"i8", "u8", "i64", "u64", "dec_", "f", "dbl", "dt", "dtm", "ts", "j", "b", "tx", "u4", "l1", "e", "st", "bt", "bin"},
		gen: func(r *rand.Rand, n int64) []any {
			return []any{
				pick(r, -128, 127, 0, nil), pick(r, 0, 255, nil),
				pick(r, int64(math.MinInt64), int64(math.MaxInt64), nil), pick(r, uint64(math.MaxUint64), uint64(0), uint64(1)<<63),
				pick(r, "99999999999999999999999999999999999.999999999999999999999999999999", "-99999999999999999999999999999999999.999999999999999999999999999999", "0.000000000000000000000000000001", nil),
				pick(r, 3.25, -1e10, nil), pick(r, 1.7976931348623157e308, -2.2250738585072014e-308, 0.1, nil),
				pick(r, "1000-01-01", "9999-12-31", "2024-02-29", nil),
				pick(r, "1000-01-01 00:00:00.000000", "9999-12-31 23:59:59.999999", "2024-03-31 02:30:00.123456", nil),
				pick(r, "1970-01-02 00:00:00.000001", "2038-01-18 03:14:07.999999", "2024-03-31 02:30:00.5", nil),
				pick(r, `{"a": 1, "s": "x😀"}`, `[1, 2.5, null, true, "ü"]`, `{"deep": {"k": [1, {"z": "漢字"}]}}`, nil),
				pick(r, []byte{0, 1, 2, 0}, []byte(strings.Repeat("\xff\x00", 500)), []byte{}, nil),
				pick(r, strings.Repeat("text ", 300), "", "𝄞 clef", nil),
				pick(r, "😀漢字ü", "plain", "", nil), pick(r, "café", "naïve façade", nil),
				pick(r, "a", "c", nil), pick(r, "x,z", "", "y", nil), pick(r, 682, 1023, 0, nil),
				pick(r, []byte("ab\x00\x00"), []byte{0, 0, 0, 0}, []byte("\x00a\x00"), nil),
			}
		},
		update: []func(r *rand.Rand) (string, []any){
			func(r *rand.Rand) (string, []any) {
				return "j = JSON_SET(COALESCE(j, '{}'), '$.n', ?, '$.s', ?)", []any{r.IntN(1000), "ü😀" + fmt.Sprint(r.IntN(9))}
			},
			func(r *rand.Rand) (string, []any) {
				return "ts = ?, dtm = ?", []any{"2021-06-0" + fmt.Sprint(1+r.IntN(9)) + " 12:00:00.25", "2001-01-01 00:00:00.000001"}
			},
			func(r *rand.Rand) (string, []any) {
				return "u4 = ?, l1 = ?", []any{"ü" + fmt.Sprint(r.Int()), "é" + fmt.Sprint(r.IntN(99))}
			},
			func(r *rand.Rand) (string, []any) {
				return "b = ?, bin = ?", []any{[]byte{0, byte(r.IntN(255)), 0}, []byte{byte(r.IntN(255)), 0}}
			},
			func(r *rand.Rand) (string, []any) {
				return "i8 = ?, u64 = ?, dec_ = ?", []any{r.IntN(200) - 100, uint64(r.Uint64()), "-1.5"}
			},
			func(r *rand.Rand) (string, []any) { return "e = ?, st = ?, bt = ?", []any{"b", "x,y,z", r.IntN(1024)} },
			func(r *rand.Rand) (string, []any) { return "tx = NULL, f = NULL", nil },
		},
	}
	cols := "id, i8, u8, i64, u64, dec_, f, dbl, dt, dtm, ts, j, HEX(b), tx, HEX(u4), HEX(l1), e, st, bt+0, HEX(bin), gv, gs"
	runWithWriters(t, db, w, 20000, "ADD COLUMN note VARCHAR(10) NOT NULL DEFAULT 'n', ADD INDEX by_dt (dt)", cols, "id")
}

func TestConcurrentWritersCompositeKey(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, `CREATE TABLE comp (a INT NOT NULL, b VARCHAR(40) CHARACTER SET latin1 NOT NULL,
		v INT, PRIMARY KEY (a, b))`)
	w := &workload{
		table: "comp", pk: []string{"a", "b"}, writers: 6,
		key:  func(n int64) []any { return []any{n % 13, fmt.Sprintf("café-%07d", n)} },
		cols: []string{"v"},
		gen:  func(r *rand.Rand, n int64) []any { return []any{r.IntN(1e6)} },
		update: []func(r *rand.Rand) (string, []any){
			func(r *rand.Rand) (string, []any) { return "v = ?", []any{r.IntN(1e6)} },
		},
	}
	runWithWriters(t, db, w, 30000, "ADD COLUMN w INT NOT NULL DEFAULT 0", "a, HEX(b), v", "a, b")
}

func TestConcurrentWritersStringKeys(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, `CREATE TABLE s (k VARCHAR(50) CHARACTER SET utf8mb4 COLLATE utf8mb4_0900_ai_ci NOT NULL,
		bk BINARY(6) NOT NULL, v VARCHAR(20), PRIMARY KEY (k, bk))`)
	w := &workload{
		table: "s", pk: []string{"k", "bk"}, writers: 6,
		// Binary key parts end in zero bytes; string parts hold 4-byte characters.
		key: func(n int64) []any {
			return []any{fmt.Sprintf("Ключ😀-%07d", n), []byte{byte(n >> 16), byte(n >> 8), byte(n), 0, 0, 0}}
		},
		cols: []string{"v"},
		gen:  func(r *rand.Rand, n int64) []any { return []any{fmt.Sprint(r.IntN(1e6))} },
		update: []func(r *rand.Rand) (string, []any){
			func(r *rand.Rand) (string, []any) { return "v = ?", []any{fmt.Sprint(r.Int())} },
		},
	}
	runWithWriters(t, db, w, 30000, "MODIFY v VARCHAR(40)", "HEX(k), HEX(bk), v", "k, bk")
}

func TestUniqueKeyOverExistingDuplicatesFails(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE u (id INT PRIMARY KEY, email VARCHAR(50))")
	for i := 0; i < 5000; i++ {
		db.MustExec(t, fmt.Sprintf("INSERT INTO u VALUES (%d, 'user%d@x')", i, i))
	}
	db.MustExec(t, "INSERT INTO u VALUES (9999, 'user17@x')") // a duplicate email
	before := snapshot(t, db, "u")
	r, err := migration.New(config(t, db, "u", "ADD UNIQUE KEY uk_email (email)"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "collide under a unique key") {
		t.Fatalf("want a duplicate-key failure, got %v", err)
	}
	if !strings.Contains(err.Error(), "user17@x") {
		t.Errorf("the error should name the duplicate value: %v", err)
	}
	if after := snapshot(t, db, "u"); after != before {
		t.Error("the original table changed")
	}
	if tables := db.Tables(t); !slices.Equal(tables, []string{"u"}) {
		t.Errorf("leftovers: %v", tables)
	}
}

func TestUniqueKeyDuplicateArrivingThroughBinlogFails(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE u (id INT PRIMARY KEY, email VARCHAR(50))")
	db.Fill(t, "u", 20000, "n, CONCAT('user', n, '@x')")
	cfg := config(t, db, "u", "ADD UNIQUE KEY uk_email (email)")
	var inserted bool
	cfg.OnPhase = func(name string) {
		// After the copy, the duplicate can only arrive through the binlog.
		if name == "catch-up" {
			db.MustExec(t, "INSERT INTO u VALUES (50000, 'user42@x')")
			inserted = true
		}
	}
	r, err := migration.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Run(context.Background())
	if !inserted {
		t.Fatal("the duplicate was never inserted")
	}
	if err == nil || !strings.Contains(err.Error(), "collide under a unique key") {
		t.Fatalf("want a duplicate-key failure, got %v (result %+v)", err, res)
	}
	var n int
	db.QueryRow("SELECT COUNT(*) FROM u").Scan(&n)
	if n != 20001 {
		t.Errorf("the original table has %d rows, want 20001", n)
	}
	if tables := db.Tables(t); !slices.Equal(tables, []string{"u"}) {
		t.Errorf("leftovers: %v", tables)
	}
}

func TestPreflightRefusals(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE ok (id INT PRIMARY KEY, v INT)",
		"CREATE TABLE nopk (v INT)",
		"CREATE TABLE parent (id INT PRIMARY KEY, up INT, FOREIGN KEY (up) REFERENCES parent (id))",
		"CREATE TABLE child (id INT PRIMARY KEY, p INT, FOREIGN KEY (p) REFERENCES parent (id))",
		"CREATE TABLE trig (id INT PRIMARY KEY, v INT)",
		"CREATE TRIGGER trig_bi BEFORE INSERT ON trig FOR EACH ROW SET NEW.v = 1",
		"CREATE TABLE fk (f DOUBLE PRIMARY KEY)", "INSERT INTO nopk VALUES (7)")
	cases := []struct {
		table, alter, want string
		params             map[string]string
	}{
		{table: "missing", alter: "ADD COLUMN x INT", want: "does not exist"},
		{table: "nopk", alter: "ADD COLUMN x INT", want: "no primary key"},
		{table: "parent", alter: "ADD COLUMN x INT", want: "references itself"},
		{table: "trig", alter: "ADD COLUMN x INT", want: "triggers"},
		{table: "fk", alter: "ADD COLUMN x INT", want: "cannot compare exactly"},
		{table: "ok", alter: "ADD COLUMN x INT NOT NULL DEFAULT 'abc'", want: "does not apply"},
		{table: "ok", alter: "ADD COLUMN v INT", want: "does not apply"},
		{table: "ok", alter: "DROP PRIMARY KEY", want: "primary key"},
		{table: "ok", alter: "ADD COLUMN x INT", want: "binlog_format=STATEMENT", params: map[string]string{"binlog_format": "'STATEMENT'"}},
		// Values drawn anew at each insert would change each time a row is
		// copied again.
		{table: "ok", alter: "ADD COLUMN u CHAR(36) NOT NULL DEFAULT (UUID())", want: "UUID()"},
		{table: "ok", alter: "ADD COLUMN r DOUBLE DEFAULT (RAND())", want: "RAND()"},
		{table: "ok", alter: "ADD COLUMN n BIGINT NOT NULL AUTO_INCREMENT, ADD UNIQUE KEY (n)", want: "AUTO_INCREMENT"},
		{table: "ok", alter: "MODIFY v INT NOT NULL AUTO_INCREMENT, ADD UNIQUE KEY (v)", want: "AUTO_INCREMENT"},
		// What sluice parses and what the server runs must be the same text.
		{table: "ok", alter: "ADD COLUMN x INT -- and more", want: "comment"},
		{table: "ok", alter: "ADD COLUMN x INT /*!99999 , DROP COLUMN v */", want: "comment"},
		{table: "ok", alter: "ADD COLUMN x INT # note", want: "comment"},
		// A whole statement runs on the table it names, or not at all.
		{table: "ok", alter: "ALTER TABLE nopk ADD COLUMN x INT", want: "names table nopk"},
		// Run on the empty new table, these would move or keep rows the
		// server's own ALTER moves or removes (nopk's row, here).
		{table: "ok", alter: "EXCHANGE PARTITION p0 WITH TABLE nopk", want: "changes the table's rows"},
		{table: "ok", alter: "TRUNCATE PARTITION p0", want: "changes the table's rows"},
	}
	for _, c := range cases {
		t.Run(c.table+"/"+c.alter, func(t *testing.T) {
			cfg := config(t, db, c.table, c.alter)
			cfg.Conn.Params = c.params
			r, err := migration.New(cfg)
			if err == nil {
				_, err = r.Run(context.Background())
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("the error spans lines: %q", err)
			}
			if tables := db.Tables(t); len(tables) != 6 {
				t.Errorf("tables after a refusal: %v", tables)
			}
		})
	}
	if rows := db.Dump(t, "nopk", "v", "v"); len(rows) != 1 {
		t.Errorf("nopk after the refusals: %v, want its one row", rows)
	}
}

func TestMalformedAlterRefusedBeforeConnecting(t *testing.T) {
	_, err := migration.New(migration.Config{
		Conn: testdb.Config(t), Database: "d", Table: "t", Alter: "ADD COLUMN",
	})
	if err == nil || !strings.Contains(err.Error(), "cannot parse") {
		t.Fatalf("got %v", err)
	}
}

func TestCancelDuringCopyLeavesOriginalIntact(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE big (id INT PRIMARY KEY, v VARCHAR(200))")
	db.Fill(t, "big", 60000, "n, REPEAT('v', 200)")
	before := snapshot(t, db, "big")
	ctx, cancel := context.WithCancel(context.Background())
	cfg := config(t, db, "big", "ADD COLUMN x INT")
	cfg.ChunkTime = time.Millisecond // many small chunks: the copy takes a while
	cfg.CopyWorkers = 1
	cfg.OnPhase = func(name string) {
		if name == "copy" {
			time.AfterFunc(150*time.Millisecond, cancel)
		}
	}
	r, err := migration.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Run(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("want context.Canceled, got %v", err)
	}
	if r.Phase() != "copy" {
		t.Errorf("cancelled in phase %s, want copy", r.Phase())
	}
	untouched(t, db, "big", before)
	// No lock is held: an exclusive lock is granted at once.
	db.MustExec(t, "SET SESSION lock_wait_timeout = 1")
	conn, _ := db.Conn(context.Background())
	defer conn.Close()
	if _, err := conn.ExecContext(context.Background(), "SET SESSION lock_wait_timeout = 1"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(context.Background(), "LOCK TABLES big WRITE"); err != nil {
		t.Errorf("the table is still locked: %v", err)
	}
	conn.ExecContext(context.Background(), "UNLOCK TABLES")
}

// TestCutoverLockWaitIsBounded holds a long transaction on the table so the
// cut-over cannot lock it: every attempt gives up within the bound, a query
// of the application queued behind an attempt waits no longer than that,
// and the migration fails cleanly.
func TestCutoverLockWaitIsBounded(t *testing.T) {
	db := tableT(t, 2000)
	ctx := context.Background()
	blocker, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer blocker.Close()
	cfg := config(t, db, "t", "ADD COLUMN x INT")
	// The copy path's own budget: 1s, although LockWait (for ALTERs) is 5s.
	cfg.LockWait, cfg.CutoverLockTimeout = 5*time.Second, time.Second
	cfg.LockDeadline = 3 * time.Second
	probeDone := make(chan time.Duration, 1)
	cfg.OnPhase = func(name string) {
		if name != "cut-over" {
			return
		}
		// A transaction that read the table holds its metadata lock until it ends.
		if _, err := blocker.ExecContext(ctx, "BEGIN"); err != nil {
			t.Error(err)
		}
		if _, err := blocker.ExecContext(ctx, "SELECT COUNT(*) FROM t"); err != nil {
			t.Error(err)
		}
		go func() {
			time.Sleep(300 * time.Millisecond) // while the first attempt waits
			start := time.Now()
			var n int
			db.QueryRow("SELECT COUNT(*) FROM t WHERE id > 0").Scan(&n)
			probeDone <- time.Since(start)
		}()
	}
	r, err := migration.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = r.Run(ctx)
	took := time.Since(start)
	blocker.ExecContext(ctx, "COMMIT")
	if err == nil || !strings.Contains(err.Error(), "before the deadline") || !strings.Contains(err.Error(), "holds SHARED_READ; transaction open") {
		t.Fatalf("want a lock timeout naming the idle blocker, got %v", err)
	}
	if took > 15*time.Second {
		t.Errorf("the migration took %s to give up", took)
	}
	wait := <-probeDone
	t.Logf("an application query queued behind a cut-over attempt waited %s; the migration gave up after %s", wait, took)
	if wait > 1500*time.Millisecond {
		t.Errorf("an application query waited %s behind the cut-over, more than its 1s bound", wait)
	}
	if wait < 200*time.Millisecond {
		t.Errorf("the probe query waited only %s: it never queued behind the lock attempt, so the test proves nothing", wait)
	}
	keptForResume(t, db)
	// The same command again, the blocker gone, goes straight to the
	// cut-over: nothing is copied again.
	cfg.OnPhase = nil
	res, err := mustRunner(t, cfg).Run(ctx)
	if err != nil {
		t.Fatalf("the same command again: %v", err)
	}
	if !res.Resumed || res.RowsCopied != 0 || res.ResumedRows == 0 {
		t.Errorf("want a resumed run that copies nothing again: resumed %v, rows copied %d (earlier %d)", res.Resumed, res.RowsCopied, res.ResumedRows)
	}
	if tables := db.Tables(t); !slices.Equal(tables, []string{"_t_old", "t"}) {
		t.Errorf("after the resumed run: %v", tables)
	}
}

// TestMissingPrivilegeNamed runs as an account without LOCK TABLES and the
// replication privileges: preflight names what is missing.
func TestMissingPrivilegeNamed(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE t (id INT PRIMARY KEY)")
	user := "lp_" + db.Name[len(db.Name)-8:]
	db.MustExec(t, "CREATE USER '"+user+"'@'127.0.0.1' IDENTIFIED BY 'pw-x1'",
		"GRANT SELECT, INSERT, DELETE, CREATE, DROP, ALTER ON `"+db.Name+"`.* TO '"+user+"'@'127.0.0.1'")
	t.Cleanup(func() { db.Exec("DROP USER '" + user + "'@'127.0.0.1'") })
	cfg := config(t, db, "t", "ADD COLUMN x INT")
	cfg.Conn.User, cfg.Conn.Password = user, "pw-x1"
	r, err := migration.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Run(context.Background())
	want := "LOCK TABLES; REPLICATION CLIENT; REPLICATION SLAVE"
	if db.Flavor == dbconn.MariaDB {
		// Its cut-over lists every session (sentry.go).
		want = "LOCK TABLES; PROCESS; REPLICATION CLIENT; REPLICATION SLAVE"
	}
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %v, want it to name %s", err, want)
	}
	if strings.Contains(err.Error(), "pw-x1") {
		t.Error("the password shows in the error")
	}
}

// TestTableChangesDuringMigrationStopIt alters the table, or writes to it
// with statement-format binlogging, while sluice copies it: either makes the
// captured keys untrustworthy, so the migration must stop, drop its shadow
// table and leave the original alone.
func TestTableChangesDuringMigrationStopIt(t *testing.T) {
	cases := []struct {
		name  string
		stmts []string
		want  string
	}{
		{"ddl", []string{"ALTER TABLE t ADD COLUMN y INT"}, "ALTER TABLE of"},
		{"statement-format write", []string{"SET SESSION transaction_isolation = 'REPEATABLE-READ'", "SET SESSION binlog_format = 'STATEMENT'", "UPDATE t SET v = v + 1 WHERE id < 10"}, "statement-format write"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			db := tableT(t, 5000)
			cfg := config(t, db, "t", "ADD COLUMN x INT")
			cfg.OnPhase = func(name string) {
				if name != "copy" {
					return
				}
				conn, err := db.Conn(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				defer conn.Close()
				for _, s := range c.stmts {
					if _, err := conn.ExecContext(context.Background(), db.Dialect(s)); err != nil {
						t.Errorf("%s: %v", s, err)
					}
				}
				conn.ExecContext(context.Background(), "SET SESSION binlog_format = 'ROW'")
				time.Sleep(300 * time.Millisecond) // let the binlog reader see it
			}
			r, err := migration.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			_, err = r.Run(context.Background())
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("want an error containing %q, got %v", c.want, err)
			}
			if tables := db.Tables(t); !slices.Equal(tables, []string{"t"}) {
				t.Errorf("leftovers: %v", tables)
			}
		})
	}
}

// TestTwoMigrationsOfOneTable starts a second migration while the first one
// copies: the second refuses (after the run lock's few seconds' wait) and the
// first completes.
func TestTwoMigrationsOfOneTable(t *testing.T) {
	db := tableT(t, 20000)
	cfg := config(t, db, "t", "ADD COLUMN x INT")
	var second error
	cfg.OnPhase = func(name string) {
		if name != "copy" {
			return
		}
		r2, err := migration.New(config(t, db, "t", "ADD COLUMN y INT"))
		if err != nil {
			t.Error(err)
			return
		}
		_, second = r2.Run(context.Background())
	}
	r, err := migration.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Run(context.Background()); err != nil {
		t.Fatalf("the first migration failed: %v", err)
	}
	if second == nil || !strings.Contains(second.Error(), "another migration") {
		t.Errorf("the second migration: want a refusal naming another migration, got %v", second)
	}
	var cols int
	db.QueryRow("SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 't'", db.Name).Scan(&cols)
	if cols != 3 {
		t.Errorf("t has %d columns, want 3 (id, v, x)", cols)
	}
}

// TestTLSReachesTheBinlogConnection migrates over TLS and checks, while the
// copy runs, that the server sees sluice's replication connection encrypted.
func TestTLSReachesTheBinlogConnection(t *testing.T) {
	db := tableT(t, 5000)
	cfg := config(t, db, "t", "ADD COLUMN x INT")
	cfg.Conn.Params = map[string]string{"tls": "skip-verify"}
	var cipher string
	cfg.OnPhase = func(name string) {
		if name != "copy" {
			return
		}
		err := db.QueryRow(`SELECT s.VARIABLE_VALUE FROM performance_schema.threads th
			JOIN performance_schema.status_by_thread s ON s.THREAD_ID = th.THREAD_ID
			WHERE th.PROCESSLIST_COMMAND LIKE 'Binlog Dump%' AND s.VARIABLE_NAME = 'Ssl_cipher'
			ORDER BY th.PROCESSLIST_TIME LIMIT 1`).Scan(&cipher)
		if err != nil {
			t.Errorf("read the binlog connection's cipher: %v", err)
		}
	}
	r, err := migration.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if cipher == "" {
		t.Error("the binlog connection is not encrypted")
	}
	t.Logf("binlog connection cipher: %s", cipher)
}

// TestCancelAtEveryPhase cancels the migration as each phase starts: the
// original table keeps its rows and schema, nothing is left behind, and no
// lock is held.
func TestCancelAtEveryPhase(t *testing.T) {
	for _, phase := range []string{"preflight", "shadow", "capture", "copy", "index", "catch-up", "checksum", "cut-over"} {
		t.Run(phase, func(t *testing.T) {
			db := testdb.New(t)
			db.MustExec(t, "CREATE TABLE t (id INT PRIMARY KEY, v INT, KEY (v))")
			db.Fill(t, "t", 3000, "n, n % 7")
			before := snapshot(t, db, "t")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			cfg := config(t, db, "t", "ADD COLUMN x INT")
			cfg.OnPhase = func(name string) {
				if name == phase {
					cancel()
				}
			}
			r, err := migration.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := r.Run(ctx); !errors.Is(err, context.Canceled) {
				t.Fatalf("want context.Canceled, got %v", err)
			}
			if after := snapshot(t, db, "t"); after != before {
				t.Error("the original table changed")
			}
			var cols int
			db.QueryRow("SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 't'", db.Name).Scan(&cols)
			if cols != 2 {
				t.Errorf("the original has %d columns, want 2", cols)
			}
			if tables := db.Tables(t); !slices.Equal(tables, []string{"t"}) {
				t.Errorf("leftovers: %v", tables)
			}
			conn, err := db.Conn(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.ExecContext(context.Background(), "SET SESSION lock_wait_timeout = 1")
			if _, err := conn.ExecContext(context.Background(), "LOCK TABLES t WRITE"); err != nil {
				t.Errorf("a lock is still held on t: %v", err)
			}
			conn.ExecContext(context.Background(), "UNLOCK TABLES")
		})
	}
}

// TestUniqueValuesSwappedDuringMigration swaps the unique emails of random
// pairs of rows, in transactions, while the table is migrated. The original
// never holds a duplicate, though a shadow applied key by key may for a
// moment: the migration must succeed, and the invariants of the swaps must
// hold in the new table: the same multiset of emails, the same sum of v.
func TestUniqueValuesSwappedDuringMigration(t *testing.T) {
	db := testdb.New(t)
	const rows = 20000
	db.MustExec(t, "CREATE TABLE sw (id INT PRIMARY KEY, email VARCHAR(40) NOT NULL, v INT NOT NULL, UNIQUE KEY uk_email (email))")
	db.Fill(t, "sw", rows, "n, CONCAT('user', n, '@x'), 100")

	stop := make(chan struct{})
	var swaps, failed atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, 7))
			for {
				select {
				case <-stop:
					return
				default:
				}
				a, b := 1+r.IntN(rows), 1+r.IntN(rows)
				if a == b {
					continue
				}
				if err := swapEmails(db.DB, a, b); err != nil {
					failed.Add(1) // a deadlock victim: rolled back as a whole
					continue
				}
				swaps.Add(1)
			}
		}(uint64(w))
	}
	time.Sleep(100 * time.Millisecond)
	cfg := config(t, db, "sw", "MODIFY COLUMN v BIGINT NOT NULL")
	cfg.ChunkTime = 5 * time.Millisecond // many small chunks: swaps straddle them
	r, err := migration.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	before := swaps.Load()
	res, err := r.Run(context.Background())
	during := swaps.Load() - before
	time.Sleep(100 * time.Millisecond)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatalf("migration failed: %v", err)
	}
	if during < 100 {
		t.Errorf("only %d swaps during the migration; the test proves little", during)
	}
	t.Logf("swaps during the migration %d (rolled back %d), keys applied %d", during, failed.Load(), res.KeysApplied)
	var n, distinct, sum, foreign int64
	if err := db.QueryRow(`SELECT COUNT(*), COUNT(DISTINCT email), SUM(v),
		SUM(CAST(SUBSTRING(email, 5, LENGTH(email) - 6) AS UNSIGNED) NOT BETWEEN 1 AND ?) FROM sw`, rows).Scan(&n, &distinct, &sum, &foreign); err != nil {
		t.Fatal(err)
	}
	if n != rows || distinct != rows || sum != 100*rows || foreign != 0 {
		t.Errorf("after the migration: %d rows, %d distinct emails, sum(v) %d, %d unknown emails; want %d, %d, %d, 0",
			n, distinct, sum, foreign, rows, rows, 100*rows)
	}
	var uniq int
	db.QueryRow("SELECT COUNT(*) FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'sw' AND INDEX_NAME = 'uk_email' AND NON_UNIQUE = 0").Scan(&uniq)
	if uniq != 1 {
		t.Error("the new table lost its unique key")
	}
}

// swapEmails swaps the emails of rows a and b, and moves one unit of v from
// b to a, in one transaction.
func swapEmails(db *sql.DB, a, b int) error {
	tx, err := db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var ea, eb string
	if err := tx.QueryRow("SELECT email FROM sw WHERE id = ? FOR UPDATE", a).Scan(&ea); err != nil {
		return err
	}
	if err := tx.QueryRow("SELECT email FROM sw WHERE id = ? FOR UPDATE", b).Scan(&eb); err != nil {
		return err
	}
	for _, s := range []struct {
		q    string
		args []any
	}{
		{"UPDATE sw SET email = CONCAT('tmp-', id), v = v + 1 WHERE id = ?", []any{a}},
		{"UPDATE sw SET email = ?, v = v - 1 WHERE id = ?", []any{ea, b}},
		{"UPDATE sw SET email = ? WHERE id = ?", []any{eb, a}},
	} {
		if _, err := tx.Exec(s.q, s.args...); err != nil {
			return err
		}
	}
	return tx.Commit()
}
