package checksum

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/sluicedb/sluice/internal/rowkey"
	"github.com/sluicedb/sluice/internal/testdb"
)

// TestHostileWidenedBinaryColumnsLeftOut: ALTERs that keep every stored byte
// (VARBINARY(8) -> VARBINARY(16), BLOB -> MEDIUMBLOB, BINARY(4) ->
// BINARY(8)) or convert exactly (FLOAT, BIGINT, DECIMAL -> DOUBLE, BIT(8) ->
// BIT(16), TIMESTAMP(3) -> TIMESTAMP(6)) are compared: the tables as copied
// match, and any damage to such a column in the shadow is found by the
// checksum and by CompareKeys. (Such columns were once left out.)
func TestHostileWidenedBinaryColumnsLeftOut(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t,
		"CREATE TABLE src (id INT PRIMARY KEY, vb VARBINARY(8) NOT NULL, bl BLOB NOT NULL, f FLOAT NOT NULL, bt BIT(8) NOT NULL, "+
			"bn BINARY(4) NOT NULL, i BIGINT NOT NULL, d DECIMAL(20,4) NOT NULL, ts TIMESTAMP(3) NULL, e ENUM('', 'a') NOT NULL)",
		"CREATE TABLE dst (id INT PRIMARY KEY, vb VARBINARY(16) NOT NULL, bl MEDIUMBLOB NOT NULL, f DOUBLE NOT NULL, bt BIT(16) NOT NULL, "+
			"bn BINARY(8) NOT NULL, i DOUBLE NOT NULL, d DOUBLE NOT NULL, ts TIMESTAMP(6) NULL, e ENUM('', 'a', 'b') NOT NULL)")
	db.Fill(t, "src", 100, "n, CONCAT('v', n), REPEAT('payload', n), n / 7, n, CHAR(n, 0), n * 9007199254740993, n * 1.2345, "+
		"IF(n % 10 = 0, NULL, FROM_UNIXTIME(1000000000 + n * 3600.125)), IF(n % 2, '', 'a')")
	db.MustExec(t, "INSERT INTO dst SELECT * FROM src")
	m, key := db.Mapping(t, "src", "dst", false)
	cfg := Config{Mapping: m, Key: key}
	ctx := context.Background()
	// Undamaged, they match: the conversions spell both sides alike.
	if res, err := Compare(ctx, snapshotConns(t, db, 2), cfg); err != nil || len(res.Skipped) > 0 || res.Rows != 100 {
		t.Fatalf("the tables as copied: %v (%d rows, skipped %v), want a match of 100 rows comparing every column", err, res.Rows, res.Skipped)
	}
	for _, damage := range []string{
		"UPDATE dst SET vb = '' WHERE id = 7",  // a value lost
		"UPDATE dst SET bl = 'x' WHERE id = 7", // a blob truncated
		"UPDATE dst SET f = 0 WHERE id = 7",    // a number zeroed
		"UPDATE dst SET bt = 0 WHERE id = 7",   // bits cleared
		"UPDATE dst SET bn = 'x' WHERE id = 7",
		"UPDATE dst SET i = i + 2048 WHERE id = 7",
		"UPDATE dst SET d = d + 0.0001 WHERE id = 7",
		"UPDATE dst SET ts = ts + INTERVAL 1 HOUR WHERE id = 7",
		"UPDATE dst SET ts = NULL WHERE id = 7",
		"UPDATE dst SET e = 'b' WHERE id = 7",
	} {
		db.MustExec(t, "DELETE FROM dst", "INSERT INTO dst SELECT * FROM src", damage)
		res, err := Compare(ctx, snapshotConns(t, db, 2), cfg)
		if !errors.Is(err, ErrMismatch) {
			t.Errorf("%s: the checksum passed (err %v, %d rows, compared %v, skipped %v)", damage, err, res.Rows, res.Compared, res.Skipped)
		}
		out, err := CompareKeys(ctx, db.DB, cfg, []rowkey.Key{{int64(7)}})
		if err != nil {
			t.Fatal(err)
		}
		if out[0].Same {
			t.Errorf("%s: CompareKeys calls row 7 the same", damage)
		}
	}
}

// TestHostileEnumErrorValue: an ENUM's error value (index 0, stored by a
// non-strict session) and a member spelled ” both read as ”. The hash reads
// an ENUM as text, so it cannot tell them apart although e+0, e = 1 and
// ORDER BY e do.
func TestHostileEnumErrorValue(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE src (id INT PRIMARY KEY, e ENUM('', 'a') NOT NULL)")
	m, key := db.Mapping(t, "src", "dst", true)
	ctx := context.Background()
	onOneSession(t, db, "SET SESSION sql_mode = ''", "INSERT INTO src VALUES (1, '')", "INSERT INTO dst VALUES (1, 'no such member')")
	var a, b int
	db.QueryRow("SELECT (SELECT e+0 FROM src), (SELECT e+0 FROM dst)").Scan(&a, &b)
	t.Logf("ordinal in the original %d, in the shadow %d", a, b)
	if a == b {
		t.Fatal("the rows do not differ: the case tests nothing")
	}
	if _, err := Compare(ctx, snapshotConns(t, db, 2), Config{Mapping: m, Key: key}); !errors.Is(err, ErrMismatch) {
		t.Errorf("the checksum passed rows whose ENUM ordinals differ (%d, %d): %v", a, b, err)
	}
}

// TestHostileTimestampFold: in a session time zone with daylight saving
// time (the checksum runs in the server's zone when the key has no
// TIMESTAMP, migration.SessionZone), the two instants of the autumn fold
// read as one text, so a TIMESTAMP one hour off passes the checksum. Needs
// the server's time-zone tables.
func TestHostileTimestampFold(t *testing.T) {
	db := testdb.New(t)
	const zone = "America/New_York"
	var probe sql.NullString
	if err := db.QueryRow("SELECT CONVERT_TZ('2021-11-07 05:30:00', '+00:00', ?)", zone).Scan(&probe); err != nil || !probe.Valid {
		t.Skipf("the server has no time-zone tables (%v)", err)
	}
	db.MustExec(t, "CREATE TABLE src (id INT PRIMARY KEY, ts TIMESTAMP NOT NULL)")
	m, key := db.Mapping(t, "src", "dst", true)
	ctx := context.Background()
	// 05:30 UTC is 01:30 EDT, 06:30 UTC is 01:30 EST.
	onOneSession(t, db, "SET time_zone = '+00:00'",
		"INSERT INTO src VALUES (1, '2021-11-07 05:30:00')", "INSERT INTO dst VALUES (1, '2021-11-07 06:30:00')")
	var conns []*sql.Conn
	for range 2 {
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		for _, q := range []string{"SET time_zone = '" + zone + "'", "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY"} {
			if _, err := c.ExecContext(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
		conns = append(conns, c)
	}
	if _, err := Compare(ctx, conns, Config{Mapping: m, Key: key}); !errors.Is(err, ErrMismatch) {
		t.Errorf("TIMESTAMPs one hour apart in the fold passed the checksum: %v", err)
	}
	out, err := CompareKeys(ctx, conns[1], Config{Mapping: m, Key: key}, []rowkey.Key{{int64(1)}})
	if err != nil {
		t.Fatal(err)
	}
	if out[0].Same {
		t.Error("CompareKeys calls TIMESTAMPs one hour apart the same")
	}
}

// onOneSession runs stmts in order on one connection (session settings
// such as sql_mode or time_zone hold for the statements after them).
func onOneSession(t *testing.T, db *testdb.DB, stmts ...string) {
	t.Helper()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, q := range stmts {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}
