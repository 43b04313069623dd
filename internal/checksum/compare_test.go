package checksum

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/sluicedb/sluice/internal/ranges"
	"github.com/sluicedb/sluice/internal/rowkey"
	"github.com/sluicedb/sluice/internal/testdb"
)

// snapshotConns opens n connections, each inside a consistent snapshot.
func snapshotConns(t *testing.T, db *testdb.DB, n int) []*sql.Conn {
	t.Helper()
	ctx := context.Background()
	var conns []*sql.Conn
	for range n {
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		for _, q := range []string{"SET SESSION transaction_isolation = 'REPEATABLE-READ'", "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY"} {
			if _, err := c.ExecContext(ctx, db.Dialect(q)); err != nil {
				t.Fatal(err)
			}
		}
		conns = append(conns, c)
	}
	return conns
}

// TestCompareCountsRowsOutsideTheRanges gives Compare ranges that do not tile
// the key (the blind spot an empty-string key once gave both the copy and the
// checksum): the chunks it compares agree, but rows outside them are missing
// from the shadow, and the whole tables' counts must catch it.
func TestCompareCountsRowsOutsideTheRanges(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE src (id INT PRIMARY KEY, v VARCHAR(20) NOT NULL)")
	db.Fill(t, "src", 1000, "n, CONCAT('v', n)")
	m, key := db.Mapping(t, "src", "dst", true)
	db.MustExec(t, "INSERT INTO dst SELECT * FROM src WHERE id > 500")
	k := func(v int64) rowkey.Key { return rowkey.Key{v} }
	only := func(spans ...ranges.Span) func(context.Context, chan<- ranges.Span) error {
		return func(ctx context.Context, out chan<- ranges.Span) error {
			for _, s := range spans {
				out <- s
			}
			return nil
		}
	}
	// Ranges that cover only the rows both tables hold.
	cfg := Config{Mapping: m, Key: key, cut: only(ranges.Span{Lo: k(500), Hi: k(800)}, ranges.Span{Lo: k(800)})}
	res, err := Compare(context.Background(), snapshotConns(t, db, 3), cfg)
	if !errors.Is(err, ErrMismatch) {
		t.Fatalf("want a mismatch for 500 rows outside the ranges, got %v (%d rows compared)", err, res.Rows)
	}
	if res.Rows != 500 {
		t.Errorf("compared %d rows, want 500", res.Rows)
	}
	// The same ranges over equal tables: no mismatch from the chunks, but the
	// counts still see the uncovered rows in both.
	db.MustExec(t, "INSERT INTO dst SELECT * FROM src WHERE id <= 500")
	if _, err := Compare(context.Background(), snapshotConns(t, db, 3), cfg); !errors.Is(err, ErrMismatch) {
		t.Fatalf("ranges covering half the rows of equal tables: want a mismatch, got %v", err)
	}
	// The real cutter over equal tables: a match over every row.
	cfg.cut = nil
	res, err = Compare(context.Background(), snapshotConns(t, db, 3), cfg)
	if err != nil || res.Rows != 1000 {
		t.Fatalf("equal tables: %v, %d rows compared", err, res.Rows)
	}
}

// TestCompareSeesSwapsAndEvenFlips damages the copy in the ways a BIT_XOR of
// plain CRC32s cannot see: two rows of equal length swapping their non-key
// values, and the same bit flipped in two rows.
func TestCompareSeesSwapsAndEvenFlips(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE src (id INT PRIMARY KEY, a VARCHAR(20) NOT NULL, n INT NOT NULL)")
	db.Fill(t, "src", 100, "n, CONCAT('a', n), n")
	m, key := db.Mapping(t, "src", "dst", true)
	for _, damage := range []string{
		// rows 13 and 14 swap a and n
		"UPDATE dst SET a = IF(id = 13, 'a14', 'a13'), n = IF(id = 13, 14, 13) WHERE id IN (13, 14)",
		// '2' -> '3' and '5' -> '4': bit 0 of the same byte flipped in two rows
		"UPDATE dst SET a = IF(id = 22, 'a23', 'a24') WHERE id IN (22, 25)",
		// the same flip in four rows
		"UPDATE dst SET a = CASE id WHEN 22 THEN 'a23' WHEN 25 THEN 'a24' WHEN 36 THEN 'a37' WHEN 47 THEN 'a46' END WHERE id IN (22, 25, 36, 47)",
	} {
		db.MustExec(t, "DELETE FROM dst", "INSERT INTO dst SELECT * FROM src", damage)
		// The damage really is invisible to a BIT_XOR of plain CRC32s.
		var plainSrc, plainDst string
		q := "SELECT BIT_XOR(CRC32(CONCAT(id, '#', a, '#', n))) FROM "
		db.QueryRow(q + "src").Scan(&plainSrc)
		db.QueryRow(q + "dst").Scan(&plainDst)
		if plainSrc != plainDst {
			t.Errorf("%s: a plain CRC32 BIT_XOR already differs (%s, %s); the case tests nothing", damage, plainSrc, plainDst)
		}
		if _, err := Compare(context.Background(), snapshotConns(t, db, 3), Config{Mapping: m, Key: key}); !errors.Is(err, ErrMismatch) {
			t.Errorf("%s: want a mismatch, got %v", damage, err)
		}
	}
}

// TestRowsLongerThanMaxAllowedPacket: a row whose columns joined are longer
// than max_allowed_packet makes CONCAT NULL, which BIT_XOR would skip; a
// difference in such a row must still be found, by the table checksum and
// by the comparison of changed rows, with and without nullable columns.
func TestRowsLongerThanMaxAllowedPacket(t *testing.T) {
	for _, null := range []string{"NOT NULL", "NULL"} {
		t.Run(null, func(t *testing.T) {
			db := testdb.New(t)
			var packet int64
			if err := db.QueryRow("SELECT @@max_allowed_packet").Scan(&packet); err != nil {
				t.Fatal(err)
			}
			half := packet/2 + 1000
			db.MustExec(t, "CREATE TABLE src (id INT NOT NULL PRIMARY KEY, a LONGBLOB "+null+", b LONGBLOB "+null+")",
				"CREATE TABLE dst LIKE src")
			db.Fill(t, "src", 3, "n, REPEAT('a', n), REPEAT('b', n)")
			for _, q := range []string{
				"INSERT INTO src VALUES (10, REPEAT('a', ?), REPEAT('b', ?))",
				"INSERT INTO dst VALUES (10, REPEAT('a', ?), REPEAT('b', ?))",
				"INSERT INTO src VALUES (11, REPEAT('a', ?), REPEAT('b', ?))",
				"INSERT INTO dst VALUES (11, REPEAT('a', ?), CONCAT(REPEAT('b', ? - 1), 'X'))",
			} {
				if _, err := db.Exec(q, half, half); err != nil {
					t.Fatal(err)
				}
			}
			db.MustExec(t, "INSERT INTO dst SELECT * FROM src WHERE id < 10")
			var joined sql.NullString
			if err := db.QueryRow("SELECT CONCAT(a, b) IS NULL FROM src WHERE id = 10").Scan(&joined); err != nil {
				t.Fatal(err)
			}
			if joined.String != "1" {
				t.Fatalf("CONCAT of row 10 is not NULL (%q): the case tests nothing", joined.String)
			}
			m, key := db.Mapping(t, "src", "dst", false)
			cfg := Config{Mapping: m, Key: key}
			ctx := context.Background()
			out, err := CompareKeys(ctx, db.DB, cfg, []rowkey.Key{{int64(10)}, {int64(11)}, {int64(2)}})
			if err != nil {
				t.Fatal(err)
			}
			if !out[0].Same || out[1].Same || !out[2].Same {
				t.Fatalf("rows 10 (equal), 11 (one byte differs), 2 (equal): got same=%v, %v, %v", out[0].Same, out[1].Same, out[2].Same)
			}
			res, err := Compare(ctx, snapshotConns(t, db, 2), cfg)
			if !errors.Is(err, ErrMismatch) {
				t.Fatalf("the table checksum missed row 11's difference: %v (%d rows compared)", err, res.Rows)
			}
			db.MustExec(t, "DELETE FROM src WHERE id = 11", "DELETE FROM dst WHERE id = 11")
			if res, err := Compare(ctx, snapshotConns(t, db, 2), cfg); err != nil || res.Rows != 4 {
				t.Fatalf("equal tables: %v, %d rows compared (want 4)", err, res.Rows)
			}
		})
	}
}
