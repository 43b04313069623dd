package checksum

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sluicedb/sluice/internal/schema"
	"github.com/sluicedb/sluice/internal/testdb"
)

// TestConvertBitNarrowed: LPAD(str, len, pad) keeps the leftmost len bytes
// of a longer str, so a BIT narrowed across a byte boundary is not read by
// it (it would read the high, zero byte where the new table holds the low).
func TestConvertBitNarrowed(t *testing.T) {
	from := schema.Column{Name: "b", DataType: "bit", ColumnType: "bit(16)"}
	to := schema.Column{Name: "b", DataType: "bit", ColumnType: "bit(8)"}
	expr, ok := Convert(from, to)
	if ok && strings.HasPrefix(expr, "LPAD(") && strings.Contains(expr, ", 1,") {
		t.Errorf("BIT(16) -> BIT(8) reads the original as %s: its high byte, while the shadow stores the low one", expr)
	}
}

// TestConvertDoubleMD: a DOUBLE(M,D) rounds on assignment to D decimals
// and prints D decimals; (x * 1e0) does neither, so it is not used.
func TestConvertDoubleMD(t *testing.T) {
	from := schema.Column{Name: "d", DataType: "decimal", ColumnType: "decimal(10,4)"}
	to := schema.Column{Name: "d", DataType: "double", ColumnType: "double(10,2)"}
	if expr, ok := Convert(from, to); ok && strings.Contains(expr, "* 1e0") {
		t.Errorf("DECIMAL(10,4) -> DOUBLE(10,2) compared as %s: 1.5 reads '1.5' against the shadow's '1.50'", expr)
	}
}

// TestEnumBangMember: an original row holding the member '!' and a shadow
// row holding the error value (index 0) differ in the checksum (a mark
// after the text would spell both '!').
func TestEnumBangMember(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE src (id INT PRIMARY KEY, e ENUM('!', 'a') NOT NULL)")
	m, key := db.Mapping(t, "src", "dst", true)
	ctx := context.Background()
	onOneSession(t, db, "SET SESSION sql_mode = ''", "INSERT INTO src VALUES (1, '!')", "INSERT INTO dst VALUES (1, 'no such member')")
	if _, err := Compare(ctx, snapshotConns(t, db, 2), Config{Mapping: m, Key: key}); !errors.Is(err, ErrMismatch) {
		t.Errorf("member '!' and the error value passed the checksum: %v", err)
	}
}

// TestBitNarrowed: BIT(16) -> BIT(8), 5 copied as 5 passes the checksum,
// and a new table damaged to 0 fails it.
func TestBitNarrowed(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE src (id INT PRIMARY KEY, b BIT(16) NOT NULL)",
		"CREATE TABLE dst (id INT PRIMARY KEY, b BIT(8) NOT NULL)",
		"INSERT INTO src VALUES (1, 5)", "INSERT INTO dst VALUES (1, 5)")
	m, key := db.Mapping(t, "src", "dst", false)
	ctx := context.Background()
	if _, err := Compare(ctx, snapshotConns(t, db, 2), Config{Mapping: m, Key: key}); err != nil {
		t.Errorf("a correct copy of BIT(16) 5 into BIT(8) fails the checksum: %v", err)
	}
	db.MustExec(t, "UPDATE dst SET b = 0")
	if _, err := Compare(ctx, snapshotConns(t, db, 2), Config{Mapping: m, Key: key}); !errors.Is(err, ErrMismatch) {
		t.Errorf("BIT 5 in the original and 0 in the shadow passed the checksum: %v", err)
	}
}

// TestToDoubleSeventeenDigits: FLOAT, BIGINT and DECIMAL values whose DOUBLE
// needs 17 digits to print (a FLOAT's smallest normal, integers past 2^53)
// pass the checksum when copied into DOUBLE columns (MySQL prints a DOUBLE
// column with 17 digits and an expression's DOUBLE with 16: compared as one
// the other, they stopped correct runs), and a value changed in the 16th
// digit fails it.
func TestToDoubleSeventeenDigits(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE src (id INT PRIMARY KEY, f FLOAT, b BIGINT, d DECIMAL(30,10))",
		"CREATE TABLE dst (id INT PRIMARY KEY, f DOUBLE, b DOUBLE, d DOUBLE)",
		"INSERT INTO src VALUES (1, -1.17549435e-38, 9007199254740993, 1234567890.1234567891), (2, 1.17549e-38, -123456789012345678, -0.0000000001),"+
			" (3, 1.1, 0, 0), (4, 3.4028234e38, 1, 99999999999999999999.9999999999), (5, 1e-45, NULL, NULL), (6, -0.0, -1, -1.5),"+
			" (7, 0.5, 123456789012345678, 1234567890.1234567891)",
		"INSERT INTO dst SELECT * FROM src")
	m, key := db.Mapping(t, "src", "dst", false)
	ctx := context.Background()
	if _, err := Compare(ctx, snapshotConns(t, db, 2), Config{Mapping: m, Key: key}); err != nil {
		t.Fatalf("a correct copy into DOUBLE columns fails the checksum: %v", err)
	}
	// (A BIGINT past 10^16 and a DECIMAL of 20 digits are DOUBLEs that
	// share their first 16 digits with the damaged ones.)
	for _, damage := range []string{"UPDATE dst SET f = f * 1.000000000000001 WHERE id = 1", "UPDATE dst SET b = b + 4096 WHERE id = 1",
		"UPDATE dst SET d = 1234567890.12346 WHERE id = 1", "UPDATE dst SET b = 123456789012345700 WHERE id = 7", "UPDATE dst SET d = 1234567890.1234569 WHERE id = 7"} {
		db.MustExec(t, "DELETE FROM dst", "INSERT INTO dst SELECT * FROM src", damage)
		if _, err := Compare(ctx, snapshotConns(t, db, 2), Config{Mapping: m, Key: key}); !errors.Is(err, ErrMismatch) {
			t.Errorf("%s passed the checksum: %v", damage, err)
		}
	}
}
