package plan

import (
	"strings"
	"testing"

	"github.com/sluicedb/sluice/internal/schema"
)

// TestCaptureRefusal: each shape capture by triggers cannot handle is named,
// and a plain table gets a note that names the queue and the triggers.
func TestCaptureRefusal(t *testing.T) {
	plain := func() *schema.Table {
		return &schema.Table{Database: "shop", Name: "orders", PrimaryKey: []string{"id"},
			Columns: []schema.Column{{Name: "id", DataType: "bigint"}, {Name: "at", DataType: "timestamp"}}}
	}
	if why := CaptureRefusal(plain()); why != "" {
		t.Fatalf("plain table refused: %s", why)
	}
	withTriggers := plain()
	withTriggers.Triggers = []string{"orders_ai", "_orders_bu", "orders_chg"}
	if why := CaptureRefusal(withTriggers); why != "" {
		t.Errorf("a table with triggers of other names refused: %s", why)
	}
	note := CaptureNote(plain())
	for _, want := range []string{"_orders_chg_i, _orders_chg_u, _orders_chg_d", "queue table _orders_chg", "TRUNCATE"} {
		if !strings.Contains(note, want) {
			t.Errorf("note %q lacks %q", note, want)
		}
	}
	cases := []struct {
		name string
		edit func(*schema.Table)
		want string
	}{
		{"a trigger of a capture name", func(t *schema.Table) { t.Triggers = []string{"orders_ai", "_Orders_chg_u"} }, "has trigger _Orders_chg_u, and capture by triggers makes a trigger _orders_chg_u"},
		{"a trigger whose copy takes a capture name", func(t *schema.Table) { t.Triggers = []string{"orders_chg_d"} }, "copy of orders_chg_d is named _orders_chg_d"},
		{"child", func(t *schema.Table) { t.ForeignKeys = []schema.ForeignKey{{Name: "fk"}} }, "foreign keys"},
		{"parent", func(t *schema.Table) { t.Children = []schema.ChildKey{{Table: "items"}} }, "foreign keys"},
		{"timestamp key", func(t *schema.Table) { t.PrimaryKey = []string{"id", "at"} }, "key column at is a TIMESTAMP"},
		{"encoded table", func(t *schema.Table) { t.Name = "order-items" }, "names of ASCII letters, digits and _"},
		{"encoded database", func(t *schema.Table) { t.Database = "shöp" }, "names of ASCII letters, digits and _"},
	}
	for _, c := range cases {
		tb := plain()
		c.edit(tb)
		why := CaptureRefusal(tb)
		if !strings.Contains(why, c.want) {
			t.Errorf("%s: refusal %q, want %q", c.name, why, c.want)
		}
		if note := CaptureNote(tb); !strings.HasPrefix(note, "refused: ") {
			t.Errorf("%s: note %q does not say it is refused", c.name, note)
		}
	}
}
