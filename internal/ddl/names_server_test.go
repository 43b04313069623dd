package ddl_test

import (
	"context"
	"errors"
	"testing"

	"github.com/sluicedb/sluice/internal/ddl"
	"github.com/sluicedb/sluice/internal/testdb"
)

// TestLearnNames: an ALTER naming any character set or collation of the
// server parses once the parser learnt the server's names, and one the
// parser does not know of its own (cp1251, which every server here has) is
// refused as unknown before. Every name the server lists is tried, in a
// clause that names its character set too.
func TestLearnNames(t *testing.T) {
	db := testdb.New(t)
	const unknown = "MODIFY c VARCHAR(10) CHARACTER SET cp1251"
	if _, err := ddl.Parse(unknown); !errors.Is(err, ddl.ErrUnknownName) || !errors.Is(err, ddl.ErrInvalid) {
		t.Fatalf("before learning: %v, want an invalid ALTER that names an unknown character set", err)
	}
	if err := ddl.LearnNames(context.Background(), db.DB); err != nil {
		t.Fatal(err)
	}
	if err := ddl.LearnNames(context.Background(), db.DB); err != nil {
		t.Fatal("a second lesson:", err)
	}
	if _, err := ddl.Parse(unknown); err != nil {
		t.Fatalf("after learning: %v", err)
	}
	rows, err := db.Query("SELECT * FROM information_schema.COLLATION_CHARACTER_SET_APPLICABILITY")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	tried := 0
	for rows.Next() {
		vals := make([]string, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		var set string
		var names []string
		for i, c := range cols {
			switch c {
			case "CHARACTER_SET_NAME":
				set = vals[i]
			case "COLLATION_NAME", "FULL_COLLATION_NAME":
				names = append(names, vals[i])
			}
		}
		for _, n := range names {
			tried++
			for _, clause := range []string{
				"MODIFY c VARCHAR(10) CHARACTER SET " + set + " COLLATE " + n,
				"CONVERT TO CHARACTER SET " + set + " COLLATE " + n,
			} {
				if _, err := ddl.Parse(clause); err != nil {
					t.Errorf("%s: %v", clause, err)
				}
			}
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if tried < 100 {
		t.Fatalf("tried %d collation names; the server lists more", tried)
	}
	t.Logf("%d collation names parse", tried)
}
