package schema_test

import (
	"context"
	"testing"

	"github.com/sluicedb/sluice/internal/schema"
	"github.com/sluicedb/sluice/internal/testdb"
)

// TestDefaultNowRead: a default that reads the clock is told from a literal
// that spells one and from another expression, on MySQL (DEFAULT_GENERATED)
// and on MariaDB (which marks none, and quotes literals).
func TestDefaultNowRead(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, `CREATE TABLE dn (id INT PRIMARY KEY, a DATETIME DEFAULT CURRENT_TIMESTAMP, b DATE DEFAULT (CURDATE()),
		c VARCHAR(10) DEFAULT 'now()', d INT DEFAULT 5, e VARCHAR(20) DEFAULT (CONCAT('a', 'b')),
		f TIMESTAMP(6) NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6), g VARCHAR(30) DEFAULT 'current_timestamp')`)
	tbl, err := schema.Load(context.Background(), db.DB, db.Name, "dn")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"a": true, "b": true, "f": true}
	for _, c := range tbl.Columns {
		if c.DefaultNow != want[c.Name] {
			t.Errorf("column %s: DefaultNow %v, want %v", c.Name, c.DefaultNow, want[c.Name])
		}
	}
	if tbl.Collation == "" || tbl.CharsetDefaults["utf8mb4"] == "" {
		t.Errorf("collation %q, utf8mb4's default %q", tbl.Collation, tbl.CharsetDefaults["utf8mb4"])
	}
}
