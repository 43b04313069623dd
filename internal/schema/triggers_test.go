package schema

import (
	"bytes"
	"strings"
	"testing"
)

// The body is what follows the head the server writes, byte for byte (a
// 4-byte character and a latin1 byte included), and CreateTriggerSQL puts
// the same bytes behind the copy's head; a head of another shape is refused.
func TestSplitTriggerDefinition(t *testing.T) {
	tr := Trigger{Name: "a`b", Timing: "BEFORE", Event: "INSERT", Definer: "us`er@local%"}
	body := []byte("BEGIN SET NEW.c = CONCAT(NEW.c, '\xf0\x9f\x98\x80\xe9'); END")
	stmt := append([]byte("CREATE DEFINER=`us``er`@`local%` TRIGGER `a``b` BEFORE INSERT ON `t x` FOR EACH ROW "), body...)
	definer, got, err := SplitTriggerDefinition(stmt, tr, "t x")
	if err != nil || !bytes.Equal(got, body) || string(definer) != "`us``er`@`local%`" {
		t.Fatalf("definer %q body %q err %v", definer, got, err)
	}
	tr.DefinerClause, tr.Body = definer, got
	want := "CREATE DEFINER=`us``er`@`local%` TRIGGER `_a``b` BEFORE INSERT ON `db`.`_t x_new` FOR EACH ROW " + string(body)
	if s := CreateTriggerSQL(tr, Toggled(tr.Name), "`db`.`_t x_new`"); s != want {
		t.Errorf("copy:\n%q\nwant\n%q", s, want)
	}
	for _, bad := range []struct{ stmt, table, definer string }{
		{"CREATE TRIGGER `a``b` BEFORE INSERT ON `t x` FOR EACH ROW SET @a = 1", "t x", tr.Definer},
		{"CREATE DEFINER=`us``er`@`local%` TRIGGER `a``b` AFTER INSERT ON `t x` FOR EACH ROW SET @a = 1", "t x", tr.Definer},
		{"CREATE DEFINER=`us``er`@`local%` TRIGGER `a``b` BEFORE INSERT ON `t x` FOR EACH ROW SET @a = 1", "t", tr.Definer},
		{"CREATE DEFINER=`us``er`@`local%` TRIGGER `a``b` BEFORE INSERT ON `t x` FOR EACH ROW SET @a = 1", "t x", "other@local%"},
		{"CREATE DEFINER=`us``er`@`local%` TRIGGER `a``b` BEFORE INSERT ON `t x` FOR EACH ROW  ", "t x", tr.Definer},
	} {
		tr.Definer = bad.definer
		if _, _, err := SplitTriggerDefinition([]byte(bad.stmt), tr, bad.table); err == nil || !strings.Contains(err.Error(), "trigger a`b") {
			t.Errorf("%q on %q accepted (err %v)", bad.stmt, bad.table, err)
		}
	}
}

// MariaDB's form: the user's text from TRIGGER on, in any case, with
// comments, qualified names, IF NOT EXISTS, FOLLOWS, and quotes of either
// kind; the body is what follows, byte for byte.
func TestSplitTriggerDefinitionAsTyped(t *testing.T) {
	tr := Trigger{Name: "Tr1", Timing: "AFTER", Event: "UPDATE", Definer: "root@localhost"}
	body := "INSERT INTO audit VALUES ('x -- not a comment', NEW.id) -- a comment in the body"
	for _, head := range []string{
		"CREATE DEFINER=`root`@`localhost` trigger tr1 after update on t for each row ",
		"CREATE DEFINER=`root`@`localhost` TRIGGER `db`.`tr1` AFTER UPDATE ON db.T FOR EACH ROW FOLLOWS `x` ",
		"CREATE DEFINER=`root`@`localhost` trigger /* c */ IF NOT EXISTS tr1 -- line\n after\tupdate # hash\n on `t` for each row precedes y\n",
		"CREATE OR REPLACE DEFINER=`root`@`localhost` TRIGGER \"tr1\" AFTER UPDATE ON \"t\" FOR EACH ROW ",
	} {
		tr.SQLMode = ""
		if strings.Contains(head, `"`) {
			tr.SQLMode = "ANSI_QUOTES"
		}
		definer, got, err := SplitTriggerDefinition([]byte(head+body), tr, "t")
		if err != nil || string(got) != body || string(definer) != "`root`@`localhost`" {
			t.Errorf("%q: definer %q body %q err %v", head, definer, got, err)
		}
	}
	for _, head := range []string{
		"CREATE DEFINER=`root`@`localhost` TRIGGER tr1x AFTER UPDATE ON t FOR EACH ROW ",
		"CREATE DEFINER=`root`@`localhost` TRIGGER tr1 AFTER UPDATE ON tt FOR EACH ROW ",
		"CREATE DEFINER=`root`@`localhost` TRIGGER tr1 AFTER UPDATEX ON t FOR EACH ROW ",
		"CREATE DEFINER=`root`@`localhost` TRIGGER \"tr1\" AFTER UPDATE ON t FOR EACH ROW ",
		"CREATE DEFINER=`root`@`localhost` TRIGGER tr1 AFTER UPDATE ON t FOR EACH ROWS ",
	} {
		tr.SQLMode = ""
		if _, _, err := SplitTriggerDefinition([]byte(head+body), tr, "t"); err == nil {
			t.Errorf("%q accepted", head)
		}
	}
}

// A head outside ASCII can be written only in a UTF-8 client character set.
func TestHeadWritable(t *testing.T) {
	for _, c := range []struct {
		charset, definer, name string
		want                   bool
	}{
		{"latin1", "`root`@`%`", "_t_ai", true},
		{"latin1", "`jos\u00e9`@`%`", "_t_ai", false},
		{"latin1", "`root`@`%`", "_t_\u00e9", false},
		{"utf8mb4", "`jos\u00e9`@`%`", "_t_\u00e9", true},
		{"utf8mb3", "`jos\u00e9`@`%`", "_t_ai", true},
		{"cp932", "`root`@`%`", "_t_ai", true},
	} {
		tr := Trigger{CharsetClient: c.charset, Definer: c.definer}
		if got := HeadWritable(tr, c.name, "db", "_t_new"); got != c.want {
			t.Errorf("%+v: %v", c, got)
		}
	}
	if HeadWritable(Trigger{CharsetClient: "latin1"}, "x", "caf\u00e9", "_t_new") {
		t.Error("a database name outside ASCII under latin1 passed")
	}
}
