package mdl_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sluicedb/sluice/internal/mdl"
	"github.com/sluicedb/sluice/internal/testdb"
)

func TestLockViewBlind(t *testing.T) {
	for _, c := range []struct {
		view mdl.LockView
		want string // a word the reason must hold; "" for none
	}{
		{mdl.LockView{SchemaOn: true, Instrument: true, Consumer: true}, ""},
		{mdl.LockView{}, "performance_schema is OFF"},
		{mdl.LockView{SchemaOn: true, Consumer: true}, "setup_instruments"},
		{mdl.LockView{SchemaOn: true, Instrument: true}, "setup_consumers"},
		{mdl.LockView{SchemaOn: true, ReadDenied: true, ReadDeniedOf: "Error 1142"}, "grant SELECT"},
	} {
		got := c.view.Blind()
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%+v: Blind() = %q, want it to hold %q", c.view, got, c.want)
		}
		if got != "" && !strings.Contains(got, "--lock-wait") && !c.view.ReadDenied {
			t.Errorf("%+v: %q does not say what still bounds the wait", c.view, got)
		}
	}
}

// TestSandboxLockView: the sandbox servers (MySQL and MariaDB alike) let the
// guard see metadata locks; the guard tests rely on it.
func TestSandboxLockView(t *testing.T) {
	db := testdb.New(t)
	v, err := mdl.ReadLockView(context.Background(), db.DB)
	if err != nil {
		t.Fatal(err)
	}
	if why := v.Blind(); why != "" {
		t.Fatalf("%s server: %s", db.Flavor, why)
	}
}
