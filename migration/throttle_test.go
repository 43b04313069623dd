package migration_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/testdb"
	"github.com/sluicedb/sluice/migration"
)

// shadowRows counts the shadow table's rows (-1 if it does not exist: the
// migration ended).
func shadowRows(t *testing.T, db *testdb.DB, table string) int {
	t.Helper()
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM _" + table + "_new").Scan(&n); err != nil {
		return -1
	}
	return n
}

// start runs the migration in the background and waits for its copy phase.
func start(t *testing.T, cfg migration.Config, ctx context.Context) (*migration.Runner, <-chan error, func() migration.Result) {
	t.Helper()
	r := mustRunner(t, cfg)
	errc := make(chan error, 1)
	var res migration.Result
	go func() {
		var err error
		res, err = r.Run(ctx)
		errc <- err
	}()
	waitPhase(t, r, "copy", errc)
	return r, errc, func() migration.Result { return res }
}

// TestThrottleFlagFilePausesCopy: while the flag file exists the copy copies
// nothing; once it is removed the migration finishes and the table is whole.
func TestThrottleFlagFilePausesCopy(t *testing.T) {
	db := tableT(t, 20000)
	before := idV(t, db)
	flag := filepath.Join(t.TempDir(), "throttle")
	if err := os.WriteFile(flag, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := config(t, db, "t", "ADD COLUMN x INT")
	cfg.ThrottleFlagFile = flag
	var log testdb.SyncBuffer
	cfg.Logger = slog.New(slog.NewTextHandler(&log, nil))
	cfg.ProgressInterval = 100 * time.Millisecond
	_, errc, result := start(t, cfg, context.Background())
	time.Sleep(700 * time.Millisecond)
	if n := shadowRows(t, db, "t"); n != 0 {
		t.Fatalf("the shadow has %d rows while the copy should be paused", n)
	}
	os.Remove(flag)
	if err := ended(t, errc, time.Minute, "after the flag file was removed"); err != nil {
		t.Fatal(err)
	}
	res := result()
	if res.Throttled < 700*time.Millisecond {
		t.Errorf("Result.Throttled = %s, want at least the 700ms the file existed", res.Throttled)
	}
	if after := idV(t, db); after != before {
		t.Error("the migrated table differs from the original")
	}
	// The operator is told why the copy waits, and when it goes on.
	for _, want := range []string{`msg="copy paused" reason="the throttle flag file ` + flag + ` exists"`,
		`paused="the throttle flag file`, `msg="copy resumed"`} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("the log lacks %s:\n%s", want, log.String())
		}
	}
}

// idV returns table t's id and v columns as text.
func idV(t *testing.T, db *testdb.DB) string {
	return fmt.Sprint(db.Dump(t, "t", "id, v", "id"))
}

// TestMaxLoadPausesCopy: a ceiling the server is always at pauses the copy;
// cancelling then leaves the original as it was and nothing behind.
func TestMaxLoadPausesCopy(t *testing.T) {
	db := tableT(t, 20000)
	before := snapshot(t, db, "t")
	cfg := config(t, db, "t", "ADD COLUMN x INT")
	cfg.MaxLoad = "Threads_connected=1" // sluice's own connections reach it
	ctx, cancel := context.WithCancel(context.Background())
	_, errc, _ := start(t, cfg, ctx)
	time.Sleep(700 * time.Millisecond)
	if n := shadowRows(t, db, "t"); n != 0 {
		t.Errorf("the shadow has %d rows while the load is over --max-load", n)
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("want context.Canceled, got %v", err)
	}
	untouched(t, db, "t", before)
}

// TestCriticalLoadAndPanicFileStop: a critical ceiling reached twice in a
// row, or the panic flag file appearing, stops the migration with the reason;
// the original is untouched and the shadow gone.
func TestCriticalLoadAndPanicFileStop(t *testing.T) {
	for _, c := range []struct {
		name string
		set  func(cfg *migration.Config, dir string)
		want string
	}{
		{"critical load", func(cfg *migration.Config, _ string) { cfg.CriticalLoad = "Threads_connected=1" },
			"critical load: Threads_connected="},
		{"panic flag file", func(cfg *migration.Config, dir string) {
			cfg.ThrottleFlagFile = filepath.Join(dir, "throttle") // holds the copy until the panic
			os.WriteFile(cfg.ThrottleFlagFile, nil, 0o600)
			cfg.PanicFlagFile = filepath.Join(dir, "panic")
			cfg.OnPhase = func(name string) {
				if name == "copy" {
					time.AfterFunc(300*time.Millisecond, func() { os.WriteFile(cfg.PanicFlagFile, nil, 0o600) })
				}
			}
		}, "panic flag file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			db := tableT(t, 20000)
			before := snapshot(t, db, "t")
			cfg := config(t, db, "t", "ADD COLUMN x INT")
			c.set(&cfg, t.TempDir())
			r := mustRunner(t, cfg)
			done := make(chan error, 1)
			go func() { _, err := r.Run(context.Background()); done <- err }()
			if err := ended(t, done, time.Minute, "(it should stop)"); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error with %q", err, c.want)
			}
			untouched(t, db, "t", before)
		})
	}
}
