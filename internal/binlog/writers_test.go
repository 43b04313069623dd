package binlog

import (
	"errors"
	"strings"
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

// TestWritersMadeDuringTheRun: a view, a trigger or a routine made during
// the migration that writes the table is learnt from its CREATE: a
// statement-format write through it then stops the run (it went unseen,
// the write lost). One that does not write the table is let be.
func TestWritersMadeDuringTheRun(t *testing.T) {
	for _, tc := range []struct {
		made, write string
		stops       bool
	}{
		{"CREATE ALGORITHM=UNDEFINED DEFINER=`root`@`localhost` SQL SECURITY DEFINER VIEW `v2` AS select `id` AS `id` from `shop`.`orders`", "UPDATE v2 SET a = 1", true},
		{"CREATE VIEW shop.`we``ird` AS SELECT * FROM orders", "UPDATE `we``ird` SET a = 1", true},
		{"CREATE DEFINER=`root`@`localhost` TRIGGER u_ai AFTER INSERT ON `u` FOR EACH ROW UPDATE orders SET a = -999 WHERE id = NEW.x", "INSERT INTO u VALUES (10)", true},
		{"CREATE TRIGGER u_ai AFTER INSERT ON other.u FOR EACH ROW UPDATE shop.orders SET a = 1", "INSERT INTO other.u VALUES (10)", true},
		{"CREATE DEFINER=`root`@`localhost` PROCEDURE `p`() UPDATE orders SET a = 1", "CALL p()", true},
		{"CREATE FUNCTION f() RETURNS INT MODIFIES SQL DATA BEGIN UPDATE orders SET a = 1; RETURN 1; END", "SELECT f()", true},
		// A body that says "view", "function" or "procedure" is a body.
		{"CREATE DEFINER=`root`@`localhost` TRIGGER srcq_ai AFTER INSERT ON `srcq` FOR EACH ROW UPDATE orders SET b = 'page view x' WHERE id = NEW.id", "INSERT INTO srcq VALUES (3)", true},
		{"CREATE DEFINER=`root`@`localhost` PROCEDURE `p2`() UPDATE orders SET b = 'a function of a procedure'", "CALL p2()", true},
		// MariaDB's heads: OR REPLACE, IF NOT EXISTS, quoted definers.
		{"CREATE OR REPLACE DEFINER=`root`@`localhost` TRIGGER u2_bu BEFORE UPDATE ON u2 FOR EACH ROW UPDATE orders SET a = 1", "UPDATE u2 SET x = 1", true},
		{"CREATE DEFINER='app'@'10.%' TRIGGER IF NOT EXISTS shop.u3_ai AFTER DELETE ON shop.`u3` FOR EACH ROW DELETE FROM orders WHERE id = OLD.id", "DELETE FROM u3", true},
		{"CREATE OR REPLACE ALGORITHM=MERGE DEFINER=CURRENT_USER SQL SECURITY INVOKER VIEW v4 AS SELECT * FROM orders", "UPDATE v4 SET a = 1", true},
		{"ALTER ALGORITHM=UNDEFINED DEFINER=`root`@`%` SQL SECURITY DEFINER VIEW `v5` AS select 1 AS `x` from `audit`", "UPDATE v5 SET a = 1", true},
		// Through a writer known at the start (audit's trigger writes orders).
		{"CREATE VIEW va AS SELECT * FROM audit", "DELETE FROM va", true},
		// Not the table's.
		{"CREATE VIEW v3 AS SELECT * FROM other", "UPDATE v3 SET a = 1", false},
		{"CREATE TRIGGER x_ai AFTER INSERT ON x FOR EACH ROW UPDATE orders_log SET a = 1", "INSERT INTO x VALUES (1)", false},
	} {
		checkWriteAfter(t, []string{"audit"}, tc.made, tc.write, tc.stops)
	}
}

// checkWriteAfter reads first, which must not stop the run, then write,
// which must stop it or not, with the writers known at the start.
func checkWriteAfter(t *testing.T, writers []string, first, write string, stops bool) {
	t.Helper()
	s := &Streamer{cfg: Config{Database: "shop", Table: "orders", Writers: writers}}
	if err := s.checkQuery("shop", first, 0); err != nil {
		t.Errorf("%q stops the run: %v", first, err)
	}
	err := s.checkQuery("shop", write, 0)
	if stopped := errors.Is(err, ErrTableChanged); stopped != stops {
		t.Errorf("after %q, %q: %v, want a stop: %v", first, write, err, stops)
	}
}

// TestWritersRenamedDuringTheRun: a view or a trigger's table renamed
// during the migration (RENAME TABLE, ALTER TABLE ... RENAME) is a writer
// under its new name too: a statement-format write through it went unseen,
// the write lost. A RENAME of a writer the parser cannot read stops the run.
func TestWritersRenamedDuringTheRun(t *testing.T) {
	for _, tc := range []struct {
		rename, write string
		stops         bool
	}{
		{"RENAME TABLE vwq_a TO vwq_b", "UPDATE vwq_b SET a = -11 WHERE id = 3", true},
		{"RENAME TABLE x TO y, shop.`Src` TO shop.src2", "INSERT INTO src2 VALUES (3)", true},
		{"ALTER TABLE src RENAME TO src3", "INSERT INTO src3 VALUES (3)", true},
		{"ALTER TABLE src ADD COLUMN z INT, RENAME AS src4", "INSERT INTO src4 VALUES (3)", true},
		{"RENAME TABLE other TO other2", "UPDATE other2 SET a = 1", false},
	} {
		checkWriteAfter(t, []string{"vwq_a", "src"}, tc.rename, tc.write, tc.stops)
	}
	s := &Streamer{cfg: Config{Database: "shop", Table: "orders", Writers: []string{"vwq_a"}}}
	if err := s.checkQuery("shop", "RENAME TABLE vwq_a TO vwq_c WITH GARBAGE", 0); !errors.Is(err, ErrTableChanged) {
		t.Errorf("an unread RENAME of a writer: %v, want a stop", err)
	}
}

// TestRebuildsCounted: an OPTIMIZE or REPAIR of the table counts as a
// rebuild; one of a table of the same name in another database does not
// (it hid an unlogged TRUNCATE).
func TestRebuildsCounted(t *testing.T) {
	for _, tc := range []struct {
		schema, q string
		counts    bool
	}{
		{"shop", "OPTIMIZE TABLE orders", true},
		{"other", "OPTIMIZE TABLE shop.orders", true},
		{"other", "OPTIMIZE NO_WRITE_TO_BINLOG TABLE `shop`.`orders`", true},
		{"shop", "REPAIR TABLE x, orders QUICK", true},
		{"other", "OPTIMIZE TABLE orders", false},
		{"shop", "OPTIMIZE TABLE other.orders", false},
		{"shop", "OPTIMIZE TABLE orders_log", false},
		{"shop", "ANALYZE TABLE orders", false},
	} {
		s := &Streamer{cfg: Config{Database: "shop", Table: "orders"}}
		s.countRebuild(tc.schema, strings.ToLower(tc.q))
		if got := s.Rebuilds() > 0; got != tc.counts {
			t.Errorf("USE %s; %s: counted %v, want %v", tc.schema, tc.q, got, tc.counts)
		}
	}
}

// TestWritersMadeInAnotherDatabase: a view made in another database over
// that database's own table of the same name is not a writer of the table
// (a write through it stopped every migration of a table so named); one
// that names the table's database is.
func TestWritersMadeInAnotherDatabase(t *testing.T) {
	for _, tc := range []struct {
		made  string
		stops bool
	}{
		{"CREATE VIEW vw AS SELECT * FROM orders", false},
		{"CREATE TRIGGER x_ai AFTER INSERT ON x FOR EACH ROW UPDATE orders SET a = 1", false},
		{"CREATE VIEW vw AS SELECT * FROM shop.orders", true},
		{"CREATE VIEW vw AS SELECT * FROM `shop`.`orders`", true},
	} {
		s := &Streamer{cfg: Config{Database: "shop", Table: "orders"}}
		if err := s.checkQuery("other", tc.made, 0); err != nil {
			t.Errorf("%q stops the run: %v", tc.made, err)
		}
		for _, write := range []string{"UPDATE vw SET a = 1", "INSERT INTO x VALUES (1)"} {
			err := s.checkQuery("other", write, 0)
			want := tc.stops && (strings.Contains(tc.made, "VIEW") == strings.Contains(write, "vw"))
			if stopped := errors.Is(err, ErrTableChanged); stopped != want {
				t.Errorf("after %q in another database, %q: %v, want a stop: %v", tc.made, write, err, want)
			}
		}
	}
}
