package copier

import (
	"context"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/chunk"
	"github.com/sluicedb/sluice/internal/testdb"
)

func setup(t *testing.T, db *testdb.DB) *Copier {
	t.Helper()
	m, key := db.Mapping(t, "src", "dst", true)
	c, err := New(Config{
		DB: db.DB, Key: key, Workers: 2,
		Mapping: m,
		Chunk:   chunk.Config{Initial: 500, Min: 100},
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCopyTakesNoRowLocks: an application transaction holds uncommitted
// changes (an update, a delete, an insert) for the whole copy. The copy reads
// without locks, so it finishes while they are still open, and copies the
// committed state of every row: the apply, not the copy, brings the changes
// once they commit.
func TestCopyTakesNoRowLocks(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE src (id INT PRIMARY KEY, v INT NOT NULL)")
	db.Fill(t, "src", 20000, "n, n")
	c := setup(t, db)

	app, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer app.Rollback()
	for _, q := range []string{"UPDATE src SET v = -1 WHERE id = 12345", "DELETE FROM src WHERE id = 777", "INSERT INTO src VALUES (30000, 1)"} {
		if _, err := app.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	// A copy that waited for these row locks would still be waiting (or
	// retrying lock wait timeouts) at this deadline.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Run(ctx); err != nil {
		t.Fatalf("the copy did not finish while the application held its locks: %v", err)
	}
	var n, v, deleted, inserted int
	db.QueryRow("SELECT COUNT(*) FROM dst").Scan(&n)
	db.QueryRow("SELECT v FROM dst WHERE id = 12345").Scan(&v)
	db.QueryRow("SELECT COUNT(*) FROM dst WHERE id = 777").Scan(&deleted)
	db.QueryRow("SELECT COUNT(*) FROM dst WHERE id = 30000").Scan(&inserted)
	if n != 20000 || c.Rows() != 20000 || v != 12345 || deleted != 1 || inserted != 0 {
		t.Errorf("dst has %d rows (copied %d), v=%d for the updated row, %d of the deleted one, %d of the inserted one; want 20000, 20000, 12345, 1, 0: the committed state",
			n, c.Rows(), v, deleted, inserted)
	}
}

// TestCopySparseSignedKeys copies a table whose signed integer key spans
// almost all of BIGINT with big gaps, and checks every row arrives once.
func TestCopySparseSignedKeys(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE src (id BIGINT PRIMARY KEY, v INT)",
		"INSERT INTO src VALUES (-9223372036854775808, 1), (-5, 2), (0, 3), (7, 4), (1000000000000, 5), (9223372036854775807, 6)")
	db.Fill(t, "src", 3000, "n * 1000003, n")
	c := setup(t, db)
	if err := c.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	var n int
	db.QueryRow("SELECT COUNT(*) FROM dst").Scan(&n)
	if n != 3006 || c.Rows() != 3006 {
		t.Errorf("copied %d rows (dst has %d), want 3006", c.Rows(), n)
	}
}
