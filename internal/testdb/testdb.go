// Package testdb gives tests an isolated database on the server named by
// SLUICE_TEST_DSN (see scripts/sandbox.sh). Each call to New creates a fresh
// database and drops it when the test ends.
package testdb

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"math"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/rowkey"
	"github.com/sluicedb/sluice/internal/schema"
)

// Env is the variable that holds the test server's DSN.
const Env = "SLUICE_TEST_DSN"

// DB is an isolated test database.
type DB struct {
	*sql.DB
	Name   string
	Server dbconn.Config
	Flavor dbconn.Flavor // MySQL or MariaDB
}

// AltEnv is the variable that holds the DSN of the sandbox's "alt" server:
// lower_case_table_names=1, time zone -07:00, compressed binlog transactions
// (scripts/sandbox.sh, SLUICE_SANDBOX_PROFILE=alt).
const AltEnv = "SLUICE_TEST_ALT_DSN"

// Config returns the server's connection settings. Without SLUICE_TEST_DSN
// the test is skipped, or fails under CI, where a server must be there.
func Config(t testing.TB) dbconn.Config { return configFrom(t, Env) }

func configFrom(t testing.TB, env string) dbconn.Config {
	t.Helper()
	dsn := lookup(t, env)
	c, _, err := dbconn.ParseDSN(dsn)
	if err != nil {
		t.Fatalf("%s: %v", env, err)
	}
	return c
}

// lookup returns the variable env. When it is unset or empty the test is
// skipped, or fails under CI, where the sandbox servers must be there.
func lookup(t testing.TB, env string) string {
	t.Helper()
	v := os.Getenv(env)
	if v == "" && env != Env {
		if why := os.Getenv(NoExtrasEnv); why != "" {
			t.Skipf("%s is not set: %s", env, why)
		}
	}
	if v == "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not set: run the tests with 'make test', which starts the sandbox servers", env)
		}
		t.Skipf("%s is not set: run 'make test' to start the sandbox servers", env)
	}
	return v
}

// NoExtrasEnv, when set, says why the run lacks a server beside the one of
// SLUICE_TEST_DSN (the MariaDB runs of make test-all have no alt server):
// the tests of a server whose variable is unset are then skipped with that
// reason, also under CI.
const NoExtrasEnv = "SLUICE_TEST_NO_EXTRAS"

// ReplicaEnv is the variable that holds the DSNs of the sandbox's replicas
// of the server of SLUICE_TEST_DSN, comma-separated ('scripts/sandbox.sh
// replicas up' starts them and prints the line). They replicate with GTID
// auto-position, have read_only=ON (root writes all the same) and report
// their host and port, so SHOW REPLICAS on the primary lists them.
const ReplicaEnv = "SLUICE_TEST_REPLICA_DSNS"

// Replicas returns the connection settings of the sandbox's replicas
// (ReplicaEnv). Without them the test is skipped, or fails under CI.
func Replicas(t testing.TB) []dbconn.Config {
	t.Helper()
	var out []dbconn.Config
	for dsn := range strings.SplitSeq(lookup(t, ReplicaEnv), ",") {
		if dsn = strings.TrimSpace(dsn); dsn == "" {
			continue
		}
		c, _, err := dbconn.ParseDSN(dsn)
		if err != nil {
			t.Fatalf("%s: %v", ReplicaEnv, err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		t.Fatalf("%s names no replica", ReplicaEnv)
	}
	return out
}

// WaitReplicated waits until replica has applied every transaction primary
// has executed now (WAIT_FOR_EXECUTED_GTID_SET; MASTER_GTID_WAIT on
// MariaDB), and fails the test when it has not within timeout, saying what
// the replica lacks and why.
func WaitReplicated(t testing.TB, primary, replica *sql.DB, timeout time.Duration) {
	t.Helper()
	ctx := context.Background()
	flavor, err := dbconn.ReadFlavor(ctx, primary)
	if err != nil {
		t.Fatal(err)
	}
	secs := max(1, int(math.Ceil(timeout.Seconds())))
	if flavor == dbconn.MariaDB {
		var want string
		if err := primary.QueryRowContext(ctx, "SELECT @@GLOBAL.gtid_binlog_pos").Scan(&want); err != nil {
			t.Fatalf("read the primary's gtid_binlog_pos: %v", err)
		}
		var res int
		if err := replica.QueryRowContext(ctx, "SELECT MASTER_GTID_WAIT(?, ?)", want, secs).Scan(&res); err != nil {
			t.Fatalf("wait for the replica to apply %s: %v", want, err)
		}
		if res == 0 {
			return
		}
		var have, ioErr, sqlErr sql.NullString
		replica.QueryRowContext(ctx, "SELECT @@GLOBAL.gtid_slave_pos").Scan(&have)
		replica.QueryRowContext(ctx, "SELECT LAST_ERROR_MESSAGE FROM performance_schema.replication_connection_status").Scan(&ioErr)
		replica.QueryRowContext(ctx, "SELECT LAST_ERROR_MESSAGE FROM performance_schema.replication_applier_status_by_worker").Scan(&sqlErr)
		t.Fatalf("the replica has applied %s, not %s, within %s (receiver: %q, applier: %q)", have.String, want, timeout, ioErr.String, sqlErr.String)
	}
	var want string
	if err := primary.QueryRowContext(ctx, "SELECT @@GLOBAL.gtid_executed").Scan(&want); err != nil {
		t.Fatalf("read the primary's gtid_executed: %v", err)
	}
	var timedOut int
	if err := replica.QueryRowContext(ctx, "SELECT WAIT_FOR_EXECUTED_GTID_SET(?, ?)", want, secs).Scan(&timedOut); err != nil {
		t.Fatalf("wait for the replica to apply %s: %v", want, err)
	}
	if timedOut == 0 {
		return
	}
	var missing, io, applier string
	replica.QueryRowContext(ctx, "SELECT GTID_SUBTRACT(?, @@GLOBAL.gtid_executed)", want).Scan(&missing)
	replica.QueryRowContext(ctx, "SELECT CONCAT(SERVICE_STATE, ' ', LAST_ERROR_MESSAGE) FROM performance_schema.replication_connection_status WHERE CHANNEL_NAME = ''").Scan(&io)
	replica.QueryRowContext(ctx, "SELECT CONCAT(SERVICE_STATE, ' ', COALESCE((SELECT MAX(LAST_ERROR_MESSAGE) FROM performance_schema.replication_applier_status_by_worker WHERE CHANNEL_NAME = ''), '')) FROM performance_schema.replication_applier_status WHERE CHANNEL_NAME = ''").Scan(&applier)
	t.Fatalf("the replica has not applied %s within %s (receiver: %q, applier: %q)", missing, timeout, io, applier)
}

// NewAlt is New on the sandbox's alt server (AltEnv).
func NewAlt(t testing.TB) *DB {
	t.Helper()
	return newOn(t, configFrom(t, AltEnv))
}

var unsafe = regexp.MustCompile(`[^a-z0-9_]`)

// New creates a database for this test and returns a pool on it.
func New(t testing.TB) *DB {
	t.Helper()
	return newOn(t, Config(t))
}

func newOn(t testing.TB, c dbconn.Config) *DB {
	t.Helper()
	ctx := context.Background()
	b := make([]byte, 4)
	rand.Read(b)
	name := unsafe.ReplaceAllString(strings.ToLower(t.Name()), "_")
	if len(name) > 40 {
		name = name[:40]
	}
	name = "t_" + name + "_" + hex.EncodeToString(b)
	admin, err := dbconn.Open(ctx, c, "", 2)
	if err != nil {
		t.Fatalf("connect to the test server: %v", err)
	}
	defer admin.Close()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+dbconn.QuoteIdent(name)); err != nil {
		t.Fatalf("create database: %v", err)
	}
	db, err := dbconn.Open(ctx, c, name, 64)
	if err != nil {
		t.Fatalf("connect to %s: %v", name, err)
	}
	t.Cleanup(func() {
		db.Close()
		if os.Getenv("SLUICE_KEEP_TEST_DB") != "" {
			return
		}
		if a, err := dbconn.Open(context.Background(), c, "", 1); err == nil {
			a.Exec("DROP DATABASE IF EXISTS " + dbconn.QuoteIdent(name))
			a.Close()
		}
	})
	flavor, err := dbconn.ReadFlavor(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	return &DB{DB: db, Name: name, Server: c, Flavor: flavor}
}

// SkipUnless skips the test unless the server is of flavour f, saying why.
func (d *DB) SkipUnless(t testing.TB, f dbconn.Flavor, why string) {
	t.Helper()
	if d.Flavor != f {
		t.Skipf("%s server: %s", d.Flavor, why)
	}
}

// MustExec runs statements, rewritten for the server (Dialect), failing the
// test on the first error.
func (d *DB) MustExec(t testing.TB, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		if _, err := d.Exec(d.Dialect(s)); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// Tables lists the database's tables.
func (d *DB) Tables(t testing.TB) []string {
	t.Helper()
	rows, err := d.Query("SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = ?", d.Name)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		rows.Scan(&n)
		out = append(out, n)
	}
	slices.Sort(out) // byte order, whatever the server's collation
	return out
}

// Dump returns every row of table as text, ordered by orderBy, with the
// listed columns (all when cols is "*"), read with session time zone UTC.
func (d *DB) Dump(t testing.TB, table, cols, orderBy string) [][]string {
	t.Helper()
	rows, err := d.Query("SELECT " + cols + " FROM " + dbconn.QuoteIdent(table) + " ORDER BY " + orderBy)
	if err != nil {
		t.Fatalf("dump %s: %v", table, err)
	}
	defer rows.Close()
	n, _ := rows.Columns()
	var out [][]string
	for rows.Next() {
		raw := make([]sql.RawBytes, len(n))
		ptrs := make([]any, len(n))
		for i := range raw {
			ptrs[i] = &raw[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		row := make([]string, len(raw))
		for i, v := range raw {
			if v == nil {
				row[i] = "NULL"
			} else {
				row[i] = "'" + string(v) + "'"
			}
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// Fill inserts rows n = 1..count into table, in statements of 1,000 rows;
// selectList is the SELECT list of each row and may use n, e.g.
// "n, REPEAT('v', 200)".
func (d *DB) Fill(t testing.TB, table string, count int, selectList string) {
	t.Helper()
	for lo := 1; lo <= count; lo += 1000 {
		hi := min(lo+999, count)
		d.MustExec(t, fmt.Sprintf("INSERT INTO %s SELECT %s FROM (WITH RECURSIVE s(n) AS "+
			"(SELECT %d UNION ALL SELECT n + 1 FROM s WHERE n < %d) SELECT n FROM s) x",
			dbconn.QuoteIdent(table), selectList, lo, hi))
	}
}

// Mapping loads tables src and dst (dst is created LIKE src when create is
// true) and returns the column mapping by name and src's primary key.
func (d *DB) Mapping(t testing.TB, src, dst string, create bool) (*schema.Mapping, rowkey.Cols) {
	t.Helper()
	ctx := context.Background()
	if create {
		d.MustExec(t, "CREATE TABLE "+dbconn.QuoteIdent(dst)+" LIKE "+dbconn.QuoteIdent(src))
	}
	s, err := schema.Load(ctx, d.DB, d.Name, src)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := schema.Load(ctx, d.DB, d.Name, dst)
	if err != nil {
		t.Fatal(err)
	}
	key, err := rowkey.NewCols(s.PKColumns())
	if err != nil {
		t.Fatal(err)
	}
	return schema.NewMapping(s, ds, func(n string) (string, bool) { return n, true }), key
}
