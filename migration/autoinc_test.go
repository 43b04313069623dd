package migration_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sluicedb/sluice/internal/testdb"
)

// TestAutoIncrementKeyKept: an AUTO_INCREMENT column that is not first in the
// primary key (PRIMARY KEY (tenant, id)) must begin some other index, which
// InnoDB refuses to drop. With the secondary indexes built after the copy,
// that plain index stays during it (the run failed with error 1075); where
// only a unique index begins with it (built after the copy), the run is
// refused in one line, the table as it was, and adding a plain index in the
// same ALTER, as the line says, lets it run.
func TestAutoIncrementKeyKept(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, `CREATE TABLE ai (tenant INT NOT NULL, id BIGINT NOT NULL AUTO_INCREMENT, v INT,
		PRIMARY KEY (tenant, id), KEY kid (id), KEY kv (v))`,
		`CREATE TABLE au (tenant INT NOT NULL, id BIGINT NOT NULL AUTO_INCREMENT, v INT,
		PRIMARY KEY (tenant, id), UNIQUE KEY uid (id))`)
	for _, tb := range []string{"ai", "au"} {
		db.Fill(t, tb, 3000, "n % 7, n, n")
	}
	cfg := config(t, db, "ai", "MODIFY v BIGINT")
	cfg.Method, cfg.DeferIndexes, cfg.DropOld = "copy", true, true
	migrate(t, cfg)
	var rows, sum int64
	if err := db.QueryRow("SELECT COUNT(*), SUM(id + v) FROM ai").Scan(&rows, &sum); err != nil || rows != 3000 || sum != 3000*3001 {
		t.Errorf("ai after the run: %d rows, sum %d (%v)", rows, sum, err)
	}
	if def := showCreate(t, db, "ai"); !strings.Contains(def, "KEY `kid` (`id`)") || !strings.Contains(def, "KEY `kv` (`v`)") || !strings.Contains(def, "bigint") {
		t.Errorf("ai after the run:\n%s", def)
	}

	db.MustExec(t, "DROP TABLE ai")
	before := snapshot(t, db, "au")
	cfg = config(t, db, "au", "MODIFY v BIGINT")
	cfg.Method, cfg.DeferIndexes = "copy", true
	_, err := mustRunner(t, cfg).Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "begins only unique index uid") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("want one line refusing it, got %v", err)
	}
	untouched(t, db, "au", before)
	cfg = config(t, db, "au", "MODIFY v BIGINT, ADD KEY kid (id)")
	cfg.Method, cfg.DeferIndexes = "copy", true
	migrate(t, cfg)
	if def := showCreate(t, db, "au"); !strings.Contains(def, "UNIQUE KEY `uid` (`id`)") || !strings.Contains(def, "KEY `kid` (`id`)") {
		t.Errorf("au after the run:\n%s", def)
	}

	// The new primary key begins with it: nothing more is needed (the
	// check read the original's key, and refused).
	db.MustExec(t, `CREATE TABLE ak (tenant INT NOT NULL, id BIGINT NOT NULL AUTO_INCREMENT, v INT,
		PRIMARY KEY (tenant, id), UNIQUE KEY uid (id))`)
	db.Fill(t, "ak", 3000, "n % 7, n, n")
	cfg = config(t, db, "ak", "DROP PRIMARY KEY, ADD PRIMARY KEY (id), ADD KEY kt (tenant, id)")
	cfg.Method, cfg.DeferIndexes = "copy", true
	migrate(t, cfg)
	if def := showCreate(t, db, "ak"); !strings.Contains(def, "PRIMARY KEY (`id`)") {
		t.Errorf("ak after the run:\n%s", def)
	}
}
