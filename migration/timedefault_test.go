package migration_test

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/sluicedb/sluice/internal/testdb"
)

// TestCurrentTimeDefaultWarned: on the copy path a column added with the
// current time for its default holds, in each row, the time sluice last
// copied it, where the server's own ALTER gives every row one moment. The run
// says so, naming the column; a run without such a column does not.
func TestCurrentTimeDefaultWarned(t *testing.T) {
	db := tableT(t, 2000)
	for _, c := range []struct {
		alter, want string
	}{
		{"MODIFY v BIGINT, ADD COLUMN at DATETIME(6) DEFAULT CURRENT_TIMESTAMP(6), ADD COLUMN d DATE DEFAULT (CURDATE())", "columns=at,d"},
		{"MODIFY v INT", ""},
	} {
		cfg := config(t, db, "t", c.alter)
		var log testdb.SyncBuffer
		cfg.Logger = slog.New(slog.NewTextHandler(&log, nil))
		cfg.Method, cfg.DropOld = "copy", true
		migrate(t, cfg)
		warned := strings.Contains(log.String(), "new columns take the current time as sluice copies each row")
		if warned != (c.want != "") || !strings.Contains(log.String(), c.want) {
			t.Errorf("%s: warned %v, want %q:\n%s", c.alter, warned, c.want, log.String())
		}
	}
}
