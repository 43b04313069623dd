package binlog

import (
	"errors"
	"testing"
)

// TestCheckQuery: statements that change the migrated table stop the
// migration; statements on a same-named table in another database, or that
// only mention the name, do not, even when the parser cannot read them.
func TestCheckQuery(t *testing.T) {
	s := &Streamer{cfg: Config{Database: "shop", Table: "t"}}
	for _, tc := range []struct {
		schema, query string
		stops         bool
	}{
		{"shop", "ALTER TABLE t ADD COLUMN x INT", true},
		{"other", "ALTER TABLE shop.t ADD COLUMN x INT", true},
		{"shop", "DROP TABLE IF EXISTS t", true},
		{"shop", "RENAME TABLE t TO t2", true},
		{"shop", "this is not sql but names t", true},
		{"other", "ALTER TABLE t ADD COLUMN x INT", false},
		{"other", "CREATE TABLE t (id INT, KEY ((id + 1)) /* unparsable */ garbage", false},
		{"shop", "ALTER TABLE other_table ADD COLUMN t INT", false},
		{"shop", "BEGIN", false},
	} {
		err := s.checkQuery(tc.schema, tc.query)
		if stops := errors.Is(err, ErrTableChanged); stops != tc.stops || (err != nil && !stops) {
			t.Errorf("%s: %q: err %v, want stop=%v", tc.schema, tc.query, err, tc.stops)
		}
	}
}
