package capture

import (
	"context"
	"errors"
	"testing"

	"github.com/sluicedb/sluice/internal/testdb"
)

// TestIdentitySeesTruncate: the id stays through writes and an in-place
// ALTER, and changes with a TRUNCATE and with a DROP and CREATE under the
// same name; a name InnoDB stores encoded, and a partitioned table, are
// refused.
func TestIdentitySeesTruncate(t *testing.T) {
	db := testdb.New(t)
	ctx := context.Background()
	db.MustExec(t, "CREATE TABLE t (id INT PRIMARY KEY, v INT)", "INSERT INTO t VALUES (1, 1)")
	id := func() uint64 {
		t.Helper()
		n, err := Identity(ctx, db.DB, db.Flavor, db.Name, "t")
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	first := id()
	db.MustExec(t, "INSERT INTO t VALUES (2, 2)", "UPDATE t SET v = 3", "DELETE FROM t WHERE id = 1", "ALTER TABLE t ADD INDEX (v)")
	if id() != first {
		t.Fatal("the id changed with writes or an index build")
	}
	db.MustExec(t, "TRUNCATE TABLE t")
	second := id()
	if second == first {
		t.Fatal("TRUNCATE left the id as it was: the cut-over could not see it")
	}
	db.MustExec(t, "DROP TABLE t", "CREATE TABLE t (id INT PRIMARY KEY, v INT)")
	if id() == second {
		t.Fatal("a DROP and CREATE left the id as it was")
	}
	db.MustExec(t, "CREATE TABLE `t-x` (id INT PRIMARY KEY)")
	if _, err := Identity(ctx, db.DB, db.Flavor, db.Name, "t-x"); !errors.Is(err, ErrIdentityName) {
		t.Fatalf("encoded name: %v, want ErrIdentityName", err)
	}
	db.MustExec(t, "CREATE TABLE p (id INT PRIMARY KEY) PARTITION BY HASH (id) PARTITIONS 2")
	if _, err := Identity(ctx, db.DB, db.Flavor, db.Name, "p"); err == nil {
		t.Fatal("a partitioned table got an id")
	}
}
