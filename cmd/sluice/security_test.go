package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/testdb"
)

// TestPasswordFileReadableByOthers: a password file (or an option file with
// a password) that other users may read is refused in one line, before any
// connection, and the table is untouched.
func TestPasswordFileReadableByOthers(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE t1 (id INT PRIMARY KEY, v INT)", "INSERT INTO t1 VALUES (1, 1)")
	before := fmt.Sprint(db.Dump(t, "t1", "*", "id"))
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	cnf := filepath.Join(dir, "my.cnf")
	for _, c := range []struct {
		path, body string
		args       []string
	}{
		{pw, "sluice-sandbox\n", []string{"--password-file", pw}},
		{cnf, "[client]\nuser = sluice\npassword = sluice-sandbox\n", []string{"--defaults-file", cnf}},
	} {
		for _, mode := range []os.FileMode{0o644, 0o640, 0o604} {
			if err := os.WriteFile(c.path, []byte(c.body), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(c.path, mode); err != nil {
				t.Fatal(err)
			}
			args := append([]string{"migrate", "--host", db.Server.Host, "--port", fmt.Sprint(db.Server.Port), "--user", "sluice",
				"--database", db.Name, "--table", "t1", "--alter", "ADD COLUMN a INT"}, c.args...)
			r := sluice(t, nil, args...)
			line := lastLine(r.stderr)
			if r.code != 1 || !strings.Contains(line, "chmod 600") || !strings.Contains(line, fmt.Sprintf("%04o", mode)) {
				t.Errorf("%s mode %04o: exit %d, last line %q; want exit 1 and a line saying chmod 600", c.args[0], mode, r.code, line)
			}
			if strings.Contains(r.stdout+r.stderr, "sluice-sandbox") {
				t.Errorf("%s: the password shows in the output", c.args[0])
			}
		}
	}
	if tables := db.Tables(t); !slices.Equal(tables, []string{"t1"}) {
		t.Errorf("tables after the refusals: %v", tables)
	}
	if got := fmt.Sprint(db.Dump(t, "t1", "*", "id")); got != before {
		t.Errorf("t1 changed: %s", got)
	}
}

// tlsDir is the sandbox's TLS material (scripts/sandbox.sh tls-dir).
func tlsDir(t *testing.T) string {
	dir := os.Getenv("SLUICE_TEST_TLS_DIR")
	if dir == "" {
		t.Skip("SLUICE_TEST_TLS_DIR is not set (make test sets it to scripts/sandbox.sh tls-dir)")
	}
	return dir
}

// TestTLSWithClientCertificate migrates a busy table as an account that the
// server admits only over TLS with a client certificate its CA signed
// (REQUIRE X509), so every connection sluice makes, the binlog reader's
// included, must carry both. The writers' own record of what they committed
// is the oracle. Then each missing piece is refused in one line with nothing
// changed: a wrong server name, no CA (the system's CAs do not know the
// sandbox's), no client certificate.
func TestTLSWithClientCertificate(t *testing.T) {
	dir := tlsDir(t)
	db := testdb.New(t)
	user := "sluice_tls_" + db.Name[len(db.Name)-8:]
	db.MustExec(t, "DROP USER IF EXISTS '"+user+"'@'127.0.0.1'",
		"CREATE USER '"+user+"'@'127.0.0.1' IDENTIFIED BY 'tls-sandbox' REQUIRE X509",
		"GRANT ALL ON *.* TO '"+user+"'@'127.0.0.1'")
	t.Cleanup(func() { db.Exec("DROP USER IF EXISTS '" + user + "'@'127.0.0.1'") })
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("tls-sandbox\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const rows = 3000
	db.MustExec(t, "CREATE TABLE t (id INT PRIMARY KEY, n INT NOT NULL, pad VARCHAR(100) NOT NULL)")
	db.Fill(t, "t", rows, "n, 0, REPEAT('p', 100)")

	base := []string{"migrate", "--host", db.Server.Host, "--port", fmt.Sprint(db.Server.Port), "--user", user,
		"--password-file", pw, "--database", db.Name, "--table", "t"}
	ca, cert, key := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "client-cert.pem"), filepath.Join(dir, "client-key.pem")
	refusals := []struct {
		name string
		args []string
		want string
	}{
		{"wrong server name", []string{"--tls-ca", ca, "--tls-cert", cert, "--tls-key", key, "--tls-server-name", "db.example"}, "certificate"},
		{"no CA", []string{"--tls", "true", "--tls-cert", cert, "--tls-key", key, "--tls-server-name", "sluice-sandbox"}, "certificate"},
		{"no client certificate", []string{"--tls-ca", ca, "--tls-server-name", "sluice-sandbox"}, "Access denied"},
		{"certificate without key", []string{"--tls-ca", ca, "--tls-cert", cert}, "--tls-key"},
		{"skip-verify with a CA", []string{"--tls", "skip-verify", "--tls-ca", ca}, "--tls=true"},
	}
	for _, c := range refusals {
		r := sluice(t, nil, append(append(slices.Clone(base), "--alter", "ADD COLUMN x INT"), c.args...)...)
		if line := lastLine(r.stderr); r.code != 1 || !strings.Contains(line, c.want) {
			t.Errorf("%s: exit %d, last line %q; want exit 1 and %q", c.name, r.code, line, c.want)
		}
		if tables := db.Tables(t); !slices.Equal(tables, []string{"t"}) {
			t.Fatalf("%s: tables after the refusal: %v", c.name, tables)
		}
	}

	// Writers bump n on random rows; each remembers what it committed.
	committed := make([]atomic.Int64, rows+1)
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var writes atomic.Int64
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				id := 1 + (i*7919+w*104729)%rows
				// Rows are split between writers (id % 4), so each row's
				// counter has one writer and its committed value is known.
				if id%4 != w {
					continue
				}
				if _, err := db.Exec("UPDATE t SET n = n + 1 WHERE id = ?", id); err == nil {
					committed[id].Add(1)
					writes.Add(1)
				}
			}
		}()
	}
	time.Sleep(100 * time.Millisecond)
	r := sluice(t, nil, append(slices.Clone(base), "--alter", "ADD COLUMN x INT", "--method", "copy", "--drop-old", "--chunk-time", "20ms",
		"--tls-ca", ca, "--tls-cert", cert, "--tls-key", key, "--tls-server-name", "sluice-sandbox")...)
	time.Sleep(100 * time.Millisecond)
	stop()
	wg.Wait()
	if r.code != 0 {
		t.Fatalf("migrate over TLS: exit %d:\n%s", r.code, r.stderr)
	}
	if writes.Load() == 0 {
		t.Fatal("the writers committed nothing: the test proves nothing")
	}
	got := db.Dump(t, "t", "id, n, x", "id")
	if len(got) != rows {
		t.Fatalf("%d rows after the migration, want %d", len(got), rows)
	}
	for _, row := range got {
		var id, n int64
		fmt.Sscan(fmt.Sprint(row[0]), &id)
		fmt.Sscan(fmt.Sprint(row[1]), &n)
		if n != committed[id].Load() {
			t.Errorf("row %d: n = %d, the writer committed %d increments", id, n, committed[id].Load())
		}
	}
	t.Logf("%d increments committed during the migration, all in the new table", writes.Load())
}
