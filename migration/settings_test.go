package migration_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/testdb"
	"github.com/sluicedb/sluice/migration"
)

// postponedWrites migrates table with a postponed cut-over and, while it
// waits (every row copied, changes reaching the new table only through the
// binlog), runs writes on a connection prepared by setup; then it compares the
// new table with the old one, which holds the original's final state.
func postponedWrites(t *testing.T, db *testdb.DB, table, alter string, setup []string, writes []string) migration.Result {
	t.Helper()
	return postponedWritesCfg(t, db, config(t, db, table, alter), append(append([]string{}, setup...), writes...))
}

// postponedWritesCfg is postponedWrites with a configuration of its own.
func postponedWritesCfg(t *testing.T, db *testdb.DB, cfg migration.Config, writes []string) migration.Result {
	t.Helper()
	table := cfg.Table
	cfg.PostponeCutover = true
	cfg.OnPhase = func(phase string) {
		if phase != "postponed" {
			return
		}
		c, err := db.Conn(context.Background())
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close()
		for _, q := range append(append([]string{}, writes...), "DROP TABLE "+"`_"+strings.ToLower(table)+"_cutover`") {
			if _, err := c.ExecContext(context.Background(), q); err != nil {
				t.Errorf("%s: %v", q, err)
			}
		}
	}
	res := migrate(t, cfg)
	got := db.Dump(t, table, "*", "id")
	want := db.Dump(t, res.OldTable, "*", "id")
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("the new table differs from the original's final state:\n got  %v\n want %v", got, want)
	}
	return res
}

var fourChanges = []string{
	"INSERT INTO %s (id, x) VALUES (1001, 1), (1002, 2)",
	"UPDATE %s SET x = x + 1000 WHERE id = 7",
	"DELETE FROM %s WHERE id = 9",
}

func changes(table string) []string {
	out := make([]string, len(fourChanges))
	for i, q := range fourChanges {
		out[i] = fmt.Sprintf(q, table)
	}
	return out
}

// TestCompressedTransactionsApplied: a session with
// binlog_transaction_compression=ON writes its row events inside one
// compressed payload; each change must still reach the new table.
func TestCompressedTransactionsApplied(t *testing.T) {
	db := testdb.New(t)
	db.SkipUnless(t, dbconn.MySQL, "binlog_transaction_compression is MySQL's (MariaDB's log_bin_compress is tested by the binlog reader's tests)")
	db.MustExec(t, "CREATE TABLE t (id INT PRIMARY KEY, x INT)")
	db.Fill(t, "t", 100, "n, n")
	res := postponedWrites(t, db, "t", "MODIFY x BIGINT", []string{"SET SESSION binlog_transaction_compression = ON"},
		append(changes("t"), "BEGIN", "UPDATE t SET x = -1 WHERE id BETWEEN 20 AND 30", "DELETE FROM t WHERE id = 40", "COMMIT"))
	if res.KeysApplied < 16 {
		t.Errorf("%d keys applied, want at least 16", res.KeysApplied)
	}
}

// TestAltServerCompressedAndFoldedNames runs on a server with
// lower_case_table_names=1 and compression on for every session: the table
// is named with capitals, which the server stores and logs in lower case.
func TestAltServerCompressedAndFoldedNames(t *testing.T) {
	db := testdb.NewAlt(t)
	db.MustExec(t, "CREATE TABLE Orders (id INT PRIMARY KEY, x INT)")
	db.Fill(t, "orders", 100, "n, n")
	res := postponedWrites(t, db, "Orders", "MODIFY x BIGINT", nil, changes("Orders"))
	if res.KeysApplied < 4 {
		t.Errorf("%d keys applied, want at least 4", res.KeysApplied)
	}
}

// TestTimeZoneConversionsMatchNative: on a server at -07:00, DATETIME <->
// TIMESTAMP conversions and a new DATETIME DEFAULT CURRENT_TIMESTAMP column
// take the values the server's own ALTER gives.
func TestTimeZoneConversionsMatchNative(t *testing.T) {
	db := testdb.NewAlt(t)
	db.MustExec(t, "CREATE TABLE t (id INT PRIMARY KEY, dt DATETIME(3) NULL, ts TIMESTAMP(3) NULL)")
	db.Fill(t, "t", 200, "n, TIMESTAMP('2024-03-10 01:00:00') + INTERVAL n*7 MINUTE, FROM_UNIXTIME(1700000000 + n*3600)")
	db.MustExec(t, "CREATE TABLE ref LIKE t", "INSERT INTO ref SELECT * FROM t")
	alter := "MODIFY dt TIMESTAMP(3) NULL, MODIFY ts DATETIME(3) NULL"
	// The native ALTER, in a session of the server's own zone.
	c, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"SET time_zone = @@global.time_zone", "ALTER TABLE ref " + alter} {
		if _, err := c.ExecContext(context.Background(), q); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	migrate(t, config(t, db, "t", alter+", ADD COLUMN added DATETIME DEFAULT CURRENT_TIMESTAMP"))
	// Instants and wall times, read in UTC by the test's pool.
	cols := "id, UNIX_TIMESTAMP(dt), ts"
	if got, want := db.Dump(t, "t", cols, "id"), db.Dump(t, "ref", cols, "id"); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("converted values differ from the native ALTER's:\n got  %v\n want %v", got[:3], want[:3])
	}
	var off int
	db.QueryRow("SELECT MAX(ABS(TIMESTAMPDIFF(SECOND, added, CONVERT_TZ(UTC_TIMESTAMP(), '+00:00', '-07:00')))) FROM t").Scan(&off)
	if off > 300 {
		t.Fatalf("the new column's CURRENT_TIMESTAMP default is %d s away from the server's local time", off)
	}
}

// TestTimestampKeyWithZoneConversionRefused: sluice reads a TIMESTAMP key in
// UTC, so on a non-UTC server it cannot convert other columns between zones
// as the server would; it refuses, and changes nothing.
func TestTimestampKeyWithZoneConversionRefused(t *testing.T) {
	db := testdb.NewAlt(t)
	db.MustExec(t, "CREATE TABLE t (at TIMESTAMP PRIMARY KEY, dt DATETIME NULL)")
	db.Fill(t, "t", 20, "FROM_UNIXTIME(1700000000 + n), NOW()")
	before := snapshot(t, db, "t")
	r, err := migration.New(config(t, db, "t", "MODIFY dt TIMESTAMP NULL"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "TIMESTAMP column") {
		t.Fatalf("want a refusal naming the TIMESTAMP key, got %v", err)
	}
	untouched(t, db, "t", before)
}

// TestTimestampKeyWithZoneDateDefaultRefused: a DATE added with CURDATE()
// for its default would take the date in UTC, where sluice reads a TIMESTAMP
// key, and not in the server's zone as the server's own ALTER gives it (a
// day apart for seven hours of each day at -07:00); it is refused like a
// DATETIME of CURRENT_TIMESTAMP, and so is a DEFAULT expression that reads
// the TIMESTAMP column (seven hours off, exit 0, before). A TIMESTAMP of
// CURRENT_TIMESTAMP, an instant whatever the zone, is not.
func TestTimestampKeyWithZoneDateDefaultRefused(t *testing.T) {
	db := testdb.NewAlt(t)
	db.MustExec(t, "CREATE TABLE t (at TIMESTAMP PRIMARY KEY, v INT)")
	db.Fill(t, "t", 20, "FROM_UNIXTIME(1700000000 + n), n")
	before := snapshot(t, db, "t")
	for _, alter := range []string{"MODIFY v BIGINT, ADD COLUMN d DATE DEFAULT (CURDATE())", "MODIFY v BIGINT, ADD COLUMN d DATETIME DEFAULT CURRENT_TIMESTAMP",
		"ADD COLUMN d DATETIME DEFAULT (at + INTERVAL 0 SECOND)", "ADD COLUMN d VARCHAR(30) DEFAULT (CAST(at AS CHAR))"} {
		_, err := mustRunner(t, config(t, db, "t", alter)).Run(context.Background())
		if err == nil || !strings.Contains(err.Error(), "TIMESTAMP column") {
			t.Fatalf("%s: want a refusal naming the TIMESTAMP key, got %v", alter, err)
		}
		untouched(t, db, "t", before)
	}
	cfg := config(t, db, "t", "MODIFY v BIGINT, ADD COLUMN i TIMESTAMP NULL DEFAULT CURRENT_TIMESTAMP")
	cfg.DropOld = true
	migrate(t, cfg)
}

// TestTimestampKeyWithZoneGeneratedColumnRefused: a generated column stored
// or indexed whose value reads a TIMESTAMP column would be computed again in
// UTC, where sluice reads a TIMESTAMP key, and not in the server's zone as
// the server's own ALTER computes it (an existing column shifted by hours, an
// index disagreeing with its column): refused, nothing changed. A virtual
// column in no index, computed at each read, is no obstacle.
func TestTimestampKeyWithZoneGeneratedColumnRefused(t *testing.T) {
	for n, c := range []struct {
		create, alter string
		refused       bool
	}{
		{"g DATETIME AS (CAST(ts AS DATETIME)) STORED", "MODIFY v BIGINT", true},
		{"h INT AS (HOUR(ts)) VIRTUAL, KEY (h)", "MODIFY v BIGINT", true},
		{"h INT AS (HOUR(ts)) VIRTUAL", "MODIFY v BIGINT, ADD INDEX (h)", true},
		{"w INT AS (v + 1) STORED", "ADD COLUMN g VARCHAR(40) AS (CONCAT(ts, '')) STORED", true},
		{"h INT AS (HOUR(ts)) VIRTUAL", "MODIFY v BIGINT", true}, // errs towards refusing: indexes may be built later
		{"w INT AS (v * 2) STORED, KEY (w)", "MODIFY v BIGINT", false},
	} {
		db, table := testdb.NewAlt(t), fmt.Sprintf("g%d", n)
		db.MustExec(t, "CREATE TABLE "+table+" (id INT, ts TIMESTAMP NOT NULL, v INT, "+c.create+", PRIMARY KEY (id, ts))",
			"INSERT INTO "+table+" (id, ts, v) VALUES (1, '2024-01-01 10:00:00', 1), (2, '2024-06-01 20:30:00', 2)")
		before := snapshot(t, db, table)
		_, err := mustRunner(t, config(t, db, table, c.alter)).Run(context.Background())
		switch {
		case c.refused && (err == nil || !strings.Contains(err.Error(), "TIMESTAMP column")):
			t.Errorf("%s, %s: want a refusal naming the TIMESTAMP key, got %v", c.create, c.alter, err)
		case c.refused:
			untouched(t, db, table, before)
		case err != nil:
			t.Errorf("%s, %s: %v", c.create, c.alter, err)
		}
	}
}

// TestDivisionByZeroAsNative: a generated column, a CHECK or an index over
// an expression that divides by a column holding 0 fails the server's own
// ALTER under the server's default sql_mode (ERROR_FOR_DIVISION_BY_ZERO);
// sluice must not store NULL there instead: it fails too, table unchanged.
func TestDivisionByZeroAsNative(t *testing.T) {
	for n, alter := range []string{
		"ADD COLUMN g INT AS (10 DIV v) STORED",
		"ADD COLUMN g INT AS (MOD(10, v)) STORED",
		"ADD COLUMN g INT AS (10 DIV v) VIRTUAL, ADD INDEX (g)",
		"ADD CONSTRAINT ck CHECK (MOD(10, v) >= 0)",
	} {
		db := testdb.New(t)
		table := fmt.Sprintf("d%d", n)
		db.MustExec(t, "CREATE TABLE "+table+" (id INT PRIMARY KEY, v INT)", "INSERT INTO "+table+" VALUES (1, 0), (2, 2)",
			"CREATE TABLE ref LIKE "+table, "INSERT INTO ref SELECT * FROM "+table)
		c, err := db.Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.ExecContext(context.Background(), "SET sql_mode = @@global.sql_mode")
		if err == nil {
			_, err = c.ExecContext(context.Background(), "ALTER TABLE ref "+alter+", ALGORITHM=COPY")
		}
		c.Close()
		if err == nil {
			t.Errorf("%s: the server's own ALTER takes it here: the test proves nothing", alter)
			continue
		}
		db.MustExec(t, "DROP TABLE ref")
		before := snapshot(t, db, table)
		cfg := config(t, db, table, alter)
		cfg.Method = "copy"
		if _, err := mustRunner(t, cfg).Run(context.Background()); err == nil {
			t.Errorf("%s: the server's own ALTER refuses the row holding 0, sluice migrated it", alter)
			continue
		}
		untouched(t, db, table, before)
	}
}

// TestServerSQLModeRefused: a global sql_mode under which the server's own
// ALTER gives other values (fractional seconds cut on MySQL, rounded on
// MariaDB, where sluice's sessions do the other) is refused before anything
// is made; the mode is restored after.
func TestServerSQLModeRefused(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE t (id INT PRIMARY KEY, d DATETIME(6))", "INSERT INTO t VALUES (1, '2020-12-31 23:59:59.5')")
	before := snapshot(t, db, "t")
	var mode string
	if err := db.QueryRow("SELECT @@GLOBAL.sql_mode").Scan(&mode); err != nil {
		t.Fatal(err)
	}
	flag := "TIME_TRUNCATE_FRACTIONAL"
	if db.Flavor == dbconn.MariaDB {
		flag = "TIME_ROUND_FRACTIONAL"
	}
	db.MustExec(t, "SET GLOBAL sql_mode = CONCAT(@@GLOBAL.sql_mode, ',"+flag+"')")
	t.Cleanup(func() { db.Exec("SET GLOBAL sql_mode = " + dbconn.QuoteString(mode)) })
	cfg := config(t, db, "t", "MODIFY d DATETIME")
	cfg.Approve = []string{"lossy-type"}
	_, err := mustRunner(t, cfg).Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), flag) {
		t.Fatalf("want a refusal naming %s, got %v", flag, err)
	}
	untouched(t, db, "t", before)
}

// TestCompressedColumnsNeedTriggerCapture: MariaDB logs a COMPRESSED
// column in a binlog type sluice's reader cannot decode, so the first write
// stopped the run in the middle; binlog capture is refused before anything
// is made, trigger capture migrates it.
func TestCompressedColumnsNeedTriggerCapture(t *testing.T) {
	db := testdb.New(t)
	if db.Flavor != dbconn.MariaDB {
		t.Skip("COMPRESSED columns are MariaDB's")
	}
	db.MustExec(t, "CREATE TABLE t (id INT PRIMARY KEY, a INT, c VARCHAR(100) COMPRESSED, b BLOB COMPRESSED)",
		"INSERT INTO t VALUES (1, 1, 'one', 'x'), (2, 2, 'two', 'y')")
	cfg := triggersOnly(t, db, "t", "MODIFY a BIGINT")
	migrate(t, cfg)
	if got := column(t, db, "SELECT CONCAT_WS(':', id, a, c, b) FROM t ORDER BY id"); strings.Join(got, ",") != "1:1:one:x,2:2:two:y" {
		t.Fatalf("after the migration: %v", got)
	}
}

// triggersOnly checks that binlog capture of table is refused in one line
// naming --capture=triggers, the table unchanged, and returns the
// configuration with trigger capture.
func triggersOnly(t *testing.T, db *testdb.DB, table, alter string) migration.Config {
	t.Helper()
	before := snapshot(t, db, table)
	_, err := mustRunner(t, config(t, db, table, alter)).Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "--capture=triggers") {
		t.Fatalf("binlog capture: want a refusal naming --capture=triggers, got %v", err)
	}
	untouched(t, db, table, before)
	cfg := config(t, db, table, alter)
	cfg.Capture = migration.CaptureTriggers
	return cfg
}

// TestLongUniqueKey: MariaDB makes a unique key on a long column a hash
// over a hidden column (USING HASH), which it builds with ALGORITHM=COPY
// only; the build after the copy failed on every such table. The hidden
// column is in the row events too: binlog capture is refused, trigger
// capture migrates it with the changes made while the cut-over waits; a
// duplicate still stops the build.
func TestLongUniqueKey(t *testing.T) {
	db := testdb.New(t)
	if db.Flavor != dbconn.MariaDB {
		t.Skip("long unique keys (USING HASH) are MariaDB's")
	}
	db.MustExec(t, "CREATE TABLE t (id INT PRIMARY KEY, a INT, url VARCHAR(1000), UNIQUE KEY (url)) DEFAULT CHARSET utf8mb4")
	db.Fill(t, "t", 500, "n, n, CONCAT('https://x/', n)")
	cfg := triggersOnly(t, db, "t", "MODIFY a BIGINT")
	cfg.PostponeCutover = true
	postponedWritesCfg(t, db, cfg, []string{"UPDATE t SET url = 'moved' WHERE id = 7", "INSERT INTO t VALUES (1000, 1, 'https://x/7')", "DELETE FROM t WHERE id = 9"})
	var create string
	db.QueryRow("SHOW CREATE TABLE t").Scan(new(string), &create)
	if !strings.Contains(create, "USING HASH") {
		t.Fatalf("the new table lost its long unique key: %s", create)
	}
	db = testdb.New(t)
	db.MustExec(t, "CREATE TABLE d (id INT PRIMARY KEY, url VARCHAR(1000)) DEFAULT CHARSET utf8mb4", "INSERT INTO d VALUES (1, 'x'), (2, 'x')")
	before := snapshot(t, db, "d")
	if _, err := mustRunner(t, config(t, db, "d", "ADD UNIQUE KEY (url)")).Run(context.Background()); err == nil || strings.Contains(err.Error(), "--capture=triggers") {
		t.Fatalf("a long unique key over duplicates: %v", err)
	}
	untouched(t, db, "d", before)
	db.MustExec(t, "UPDATE d SET url = 'y' WHERE id = 2")
	postponedWrites(t, db, "d", "ADD UNIQUE KEY (url)", nil, []string{"INSERT INTO d VALUES (3, 'z')", "UPDATE d SET url = 'w' WHERE id = 1"})
}

// TestMinimalRowImages: sessions logging MINIMAL or NOBLOB row images (an
// update's after image without the key) still have every change applied;
// sluice needs only the keys.
func TestMinimalRowImages(t *testing.T) {
	for _, image := range []string{"MINIMAL", "NOBLOB"} {
		t.Run(image, func(t *testing.T) {
			db := testdb.New(t)
			db.MustExec(t, "CREATE TABLE t (id INT PRIMARY KEY, x INT, b BLOB)")
			db.Fill(t, "t", 100, "n, n, REPEAT('b', n)")
			res := postponedWrites(t, db, "t", "MODIFY x BIGINT", []string{"SET SESSION binlog_row_image = " + image},
				append(changes("t"), "UPDATE t SET b = 'new' WHERE id = 11", "UPDATE t SET id = 5000 WHERE id = 12"))
			if res.KeysApplied < 7 {
				t.Errorf("%d keys applied, want at least 7", res.KeysApplied)
			}
		})
		// A composite key, one of whose columns an update changes: the
		// after image holds that column only; the new key is the before
		// image's with it.
		t.Run(image+"-composite", func(t *testing.T) {
			db := testdb.New(t)
			db.MustExec(t, "CREATE TABLE t (id INT, b INT, x INT, c BLOB, PRIMARY KEY (id, b))")
			db.Fill(t, "t", 100, "n, n % 7, n, REPEAT('c', n)")
			res := postponedWrites(t, db, "t", "MODIFY x BIGINT", []string{"SET SESSION binlog_row_image = " + image}, []string{
				"UPDATE t SET id = id + 5000 WHERE id = 13",
				"UPDATE t SET b = b + 100 WHERE id BETWEEN 20 AND 24",
				"UPDATE t SET id = id + 6000, x = -x WHERE id = 30",
				"UPDATE t SET c = 'new', b = 99 WHERE id = 31",
				"INSERT INTO t (id, b, x) VALUES (2000, 1, 1)",
				"DELETE FROM t WHERE id = 40",
			})
			if res.KeysApplied < 10 {
				t.Errorf("%d keys applied, want at least 10", res.KeysApplied)
			}
		})
	}
}

// TestDecimalKeyChangesApplied: a DECIMAL key wider than a float64 is read
// from the binlog exactly; a change to it reaches the new table.
func TestDecimalKeyChangesApplied(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE t (id DECIMAL(30,10) PRIMARY KEY, x INT)")
	db.Fill(t, "t", 100, "12345678901234567890 + n / 3, n")
	postponedWrites(t, db, "t", "MODIFY x BIGINT", nil, []string{
		"UPDATE t SET x = -x WHERE x BETWEEN 10 AND 20",
		"DELETE FROM t WHERE x = 30",
		"INSERT INTO t VALUES (-98765432109876543210.0123456789, 7)",
	})
}
