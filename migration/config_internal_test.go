package migration

import (
	"strings"
	"testing"
)

func TestCheckServer(t *testing.T) {
	ok := ServerVars{Version: "9.7.4", LogBin: "1", Format: "ROW", RowImage: "FULL", SessionFormat: "ROW", SessionImage: "FULL"}
	if err := CheckServer(ok); err != nil {
		t.Fatalf("a good server refused: %v", err)
	}
	bad := []struct {
		mut  func(v *ServerVars)
		want string
	}{
		{func(v *ServerVars) { v.LogBin = "0" }, "binary log is off"},
		{func(v *ServerVars) { v.Format = "STATEMENT" }, "binlog_format is STATEMENT"},
		{func(v *ServerVars) { v.Format = "MIXED" }, "binlog_format is MIXED"},
		{func(v *ServerVars) { v.RowImage = "MINIMAL" }, "binlog_row_image is MINIMAL"},
		{func(v *ServerVars) { v.SessionImage = "NOBLOB" }, "binlog_row_image=NOBLOB"},
		{func(v *ServerVars) { v.Version = "8.0.12" }, "8.0.13 or later"},
		{func(v *ServerVars) { v.Version = "10.11.6-MariaDB" }, "MariaDB"},
	}
	for _, b := range bad {
		v := ok
		b.mut(&v)
		err := CheckServer(v)
		if err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%+v: got %v, want %q", v, err, b.want)
		}
	}
}

func TestMissingPrivileges(t *testing.T) {
	if m := MissingPrivileges([]string{"ALL PRIVILEGES"}, nil); len(m) != 0 {
		t.Errorf("ALL PRIVILEGES: missing %v", m)
	}
	m := MissingPrivileges([]string{"REPLICATION SLAVE"}, []string{"SELECT", "INSERT", "DELETE", "CREATE", "DROP", "ALTER"})
	if len(m) != 2 || m[0] != "LOCK TABLES" || m[1] != "REPLICATION CLIENT" {
		t.Errorf("missing = %v", m)
	}
}
