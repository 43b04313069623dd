package binlog

import (
	"errors"
	"testing"
)

// TestCheckWritersLetsOthersPass: statements that name a writer (a view,
// a trigger's table, a routine) without writing through it go on.
func TestCheckWritersLetsOthersPass(t *testing.T) {
	// Row-format traffic still logs these as Query events; none of them writes rows
	// of the migrated table.
	for _, q := range []string{
		"OPTIMIZE TABLE audit",
		"REPAIR TABLE audit",
		"ANALYZE TABLE audit",
		"GRANT SELECT ON shop.audit TO 'u'@'%'",
		"REVOKE SELECT ON shop.audit FROM 'u'@'%'",
		"GRANT EXECUTE ON PROCEDURE shop.touch TO 'u'@'%'",
		"XA START X'6175646974',X'',1",
		"SAVEPOINT audit",
		"CREATE TABLE audit2 LIKE audit",
		"DROP TABLE audit",
		"RENAME TABLE audit TO audit_old",
		"FLUSH TABLES audit",
		// Other names that hold a writer's: none writes through it.
		"INSERT INTO other VALUES (1)",
		"INSERT INTO audits (a) VALUES (1)",
		"UPDATE audit_log SET a = 1",
		"DELETE FROM retouch WHERE id = 1",
		"INSERT INTO x (audit$) VALUES (1)",
	} {
		s := &Streamer{cfg: Config{Database: "shop", Table: "orders", Writers: []string{"audit", "touch", "v"}}}
		if err := s.checkQuery("shop", q, 0); err != nil {
			t.Errorf("false alarm: %q stops the run: %v", q, err)
		}
	}
}

// TestCheckWritersStops: a CREATE TABLE ... SELECT of a routine, and a
// statement in latin1 naming a writer whose name is not ASCII, stop.
func TestCheckWritersStops(t *testing.T) {
	for _, tc := range []struct {
		q      string
		writer string
	}{
		// CREATE TABLE ... SELECT calls the function that writes orders.
		{"CREATE TABLE tmp_x AS SELECT touch() AS t", "touch"},
		// A non-ASCII writer name in a latin1-logged statement: 'vüe' in latin1 bytes.
		{"UPDATE v\xfce SET v = 'z' WHERE id = 1", "vüe"},
		// Whole words, quoted, qualified, or after a versioned comment's version.
		{"INSERT INTO audit VALUES (1)", "audit"},
		{"INSERT INTO `audit`(a) VALUES (1)", "audit"},
		{"UPDATE shop.audit SET a = 1", "audit"},
		{"UPDATE /*!50700audit*/ SET a = 1", "audit"},
		{"CALL touch()", "touch"},
		{"INSERT INTO `we``ird` VALUES (1)", "we`ird"},
	} {
		s := &Streamer{cfg: Config{Database: "shop", Table: "orders", Writers: []string{tc.writer}}}
		if err := s.checkQuery("shop", tc.q, 0); !errors.Is(err, ErrTableChanged) {
			t.Errorf("missed: %q (writer %s) passes: %v", tc.q, tc.writer, err)
		}
	}
}
