package migration

import (
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/rowkey"
	"github.com/sluicedb/sluice/internal/schema"
)

func TestCheckServer(t *testing.T) {
	ok := ServerVars{Version: "9.7.4", LogBin: "1", Format: "ROW", RowImage: "FULL", SessionFormat: "ROW", SessionImage: "FULL"}
	if err := CheckServer(ok); err != nil {
		t.Fatalf("a good server refused: %v", err)
	}
	replica := ok
	replica.Replica, replica.ReplicaUpdates = true, true
	if err := CheckServer(replica); err != nil {
		t.Fatalf("a replica that logs what it replicates refused: %v", err)
	}
	for _, version := range []string{"10.6.21-MariaDB-log", "10.11.19-MariaDB-0+deb12u1", "11.8.9-MariaDB-1"} {
		v := ok
		v.Version = version
		if err := CheckServer(v); err != nil {
			t.Errorf("MariaDB %s refused: %v", version, err)
		}
	}
	for _, image := range []string{"MINIMAL", "noblob", "FULL_NODUP"} {
		v := ok
		v.RowImage, v.SessionImage = image, image
		if err := CheckServer(v); err != nil {
			t.Errorf("binlog_row_image=%s refused: %v", image, err)
		}
	}
	bad := []struct {
		mut  func(v *ServerVars)
		want string
	}{
		{func(v *ServerVars) { v.LogBin = "0" }, "binary log is off"},
		{func(v *ServerVars) { v.Format = "STATEMENT" }, "binlog_format is STATEMENT"},
		{func(v *ServerVars) { v.Format = "MIXED" }, "binlog_format is MIXED"},
		{func(v *ServerVars) { v.RowImage = "PARTIAL" }, "binlog_row_image is PARTIAL, which sluice does not know"},
		{func(v *ServerVars) { v.SessionImage = "COMPACT" }, "binlog_row_image=COMPACT, which sluice does not know"},
		{func(v *ServerVars) { v.Version = "8.0.12" }, "8.0.13 or later"},
		{func(v *ServerVars) { v.Version = "10.5.27-MariaDB" }, "MariaDB 10.6 or later"},
		{func(v *ServerVars) { v.Version, v.VersionComment = "10.4.34", "MariaDB Server" }, "MariaDB 10.6 or later"},
		{func(v *ServerVars) { v.Replica = true }, "log_replica_updates=OFF"},
		{func(v *ServerVars) { v.Database, v.BinlogIgnoreDB = "shop", []string{"x", "shop"} }, "binlog filters"},
		{func(v *ServerVars) { v.Database, v.BinlogDoDB = "shop", []string{"other"} }, "binlog filters"},
		{func(v *ServerVars) { v.Database, v.BinlogDoDB, v.LowerCaseNames = "shop", []string{"Other"}, 1 }, "binlog filters"},
		// Filters that keep shop still drop a TRUNCATE of its table run
		// from a session in another database.
		{func(v *ServerVars) { v.Database, v.BinlogDoDB = "shop", []string{"shop"} }, "binlog filters"},
		{func(v *ServerVars) { v.Database, v.BinlogIgnoreDB = "shop", []string{"other"} }, "binlog filters"},
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
	tables := []string{"t", "_t_new"}
	// TRIGGER on the original alone: information_schema lists its triggers
	// only then.
	if m := MissingPrivileges(Grants{Global: []string{"REPLICATION SLAVE", "REPLICATION CLIENT"}, OnDB: []string{"SELECT", "INSERT", "DELETE", "CREATE", "DROP", "ALTER", "LOCK TABLES"},
		OnTable: map[string][]string{"t": {"TRIGGER"}}}, tables); len(m) != 0 {
		t.Errorf("TRIGGER on the original: missing %v", m)
	}
	if m := MissingPrivileges(Grants{Global: []string{"ALL PRIVILEGES"}}, tables); len(m) != 0 {
		t.Errorf("ALL PRIVILEGES: missing %v", m)
	}
	m := MissingPrivileges(Grants{Global: []string{"REPLICATION SLAVE"}, OnDB: []string{"SELECT", "INSERT", "DELETE", "CREATE", "DROP", "ALTER"}}, tables)
	if len(m) != 3 || m[0] != "LOCK TABLES" || m[1] != "REPLICATION CLIENT" || m[2] != "TRIGGER on t" {
		t.Errorf("missing = %v", m)
	}
	// MariaDB's name for REPLICATION CLIENT.
	if m := MissingPrivileges(Grants{Global: []string{"REPLICATION SLAVE", "BINLOG MONITOR"}, OnDB: []string{"SELECT", "INSERT", "DELETE", "CREATE", "DROP", "ALTER", "LOCK TABLES", "TRIGGER"}}, tables); len(m) != 0 {
		t.Errorf("MariaDB's BINLOG MONITOR: missing %v", m)
	}
}

func TestSessionZone(t *testing.T) {
	intKey := []schema.Column{{Name: "id", DataType: "bigint"}}
	tsKey := []schema.Column{{Name: "s", DataType: "varchar"}, {Name: "at", DataType: "timestamp"}}
	cases := []struct {
		zone, system string
		key          []schema.Column
		want         string
	}{
		{"SYSTEM", "UTC", intKey, ""},
		{"+00:00", "CET", intKey, ""},
		{"SYSTEM", "CET", intKey, "SYSTEM"},
		{"-07:00", "UTC", intKey, "-07:00"},
		{"Europe/Berlin", "UTC", intKey, "Europe/Berlin"},
		{"Europe/Berlin", "UTC", tsKey, ""}, // TIMESTAMP keys are read in UTC
	}
	for _, c := range cases {
		if got := SessionZone(c.zone, c.system, c.key); got != c.want {
			t.Errorf("SessionZone(%q, %q, %v) = %q, want %q", c.zone, c.system, c.key, got, c.want)
		}
	}
}

func TestZoneDependent(t *testing.T) {
	col := func(name, dt string) schema.Column { return schema.Column{Name: name, DataType: dt} }
	now := col("added", "datetime")
	now.DefaultNow = true
	today, instant := col("today", "date"), col("instant", "timestamp") // CURDATE(), CURRENT_TIMESTAMP
	today.DefaultNow, instant.DefaultNow = true, true
	shifted, plus := col("shifted", "datetime"), col("plus", "int") // DEFAULT (expr)
	shifted.DefaultExpr, plus.DefaultExpr = "(`c` + interval 0 second)", "(`plain` + 1)"
	m := &schema.Mapping{
		Target: &schema.Table{Columns: []schema.Column{col("a", "timestamp"), col("b", "datetime"), col("c", "timestamp"), now, today, instant, shifted, plus, col("plain", "datetime")}},
		Pairs: []schema.Pair{
			{From: col("a", "datetime"), To: col("a", "timestamp")},
			{From: col("b", "timestamp"), To: col("b", "datetime")},
			{From: col("c", "timestamp"), To: col("c", "timestamp")},
		},
	}
	gen := func(name, expr string) schema.Column {
		return schema.Column{Name: name, DataType: "int", Generated: true, Expression: expr}
	}
	m.Target.Columns = append(m.Target.Columns, gen("g1", "hour(`c`)"), gen("g2", "hour(C)"), gen("g3", "`cx` + 1"),
		gen("g4", "from_unixtime(`plain`)"), gen("g5", "`b` + `plain`"), gen("g6", "concat(_utf8mb4'c', `b`)"), gen("g7", "`cſ` + 1"))
	if got := ZoneDependent(m); strings.Join(got, ",") != "a,b,added,today,shifted,g1,g2,g4,g6,g7" {
		t.Fatalf("ZoneDependent = %v", got)
	}
}

func TestAutoIncrementParse(t *testing.T) {
	for text, want := range map[string]uint64{
		"CREATE TABLE `t` (\n  `id` int NOT NULL AUTO_INCREMENT,\n  PRIMARY KEY (`id`)\n) ENGINE=InnoDB AUTO_INCREMENT=18 DEFAULT CHARSET=utf8mb4": 18,
		"CREATE TABLE `t` (\n  `id` int NOT NULL AUTO_INCREMENT,\n  PRIMARY KEY (`id`)\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4":                   0,
		"CREATE TABLE `t` (\n  `c` varchar(9) DEFAULT 'AUTO_INCREMENT=5'\n) ENGINE=InnoDB":                                                         0,
	} {
		got, err := AutoIncrement(strings.ReplaceAll(text, "\\n", "\n"))
		if err != nil || got != want {
			t.Errorf("%q: got %d, %v; want %d", text, got, err, want)
		}
	}
}

// TestKeepIndexes: the plain indexes are kept when the operator says so,
// built after the copy when the operator says so, and otherwise kept exactly
// while replicas are watched.
func TestKeepIndexes(t *testing.T) {
	for _, c := range []struct{ keep, deferThem, replicas, want bool }{
		{false, false, false, false},
		{false, false, true, true},
		{true, false, false, true},
		{true, false, true, true},
		{false, true, false, false},
		{false, true, true, false},
	} {
		if got := keepPlainIndexes(c.keep, c.deferThem, c.replicas); got != c.want {
			t.Errorf("keepPlainIndexes(keep=%v, defer=%v, replicas=%v) = %v, want %v", c.keep, c.deferThem, c.replicas, got, c.want)
		}
	}
	cfg := Config{Conn: dbconn.Config{Host: "127.0.0.1", Port: 3306, User: "u"}, Database: "d", Table: "t", Alter: "ADD COLUMN c INT",
		KeepIndexes: true, DeferIndexes: true}
	if err := cfg.validate(); err == nil || !strings.Contains(err.Error(), "contradict") {
		t.Errorf("a config keeping and deferring the indexes: %v", err)
	}
	cfg.DeferIndexes = false
	if err := cfg.validate(); err != nil && strings.Contains(err.Error(), "contradict") {
		t.Errorf("keeping the indexes alone was refused: %v", err)
	}
}

// TestChunkCap: no cap while the replicas keep up; otherwise the workers'
// chunks in flight cost the slowest replica at most half a second (or half
// of --max-lag), never below 10ms a chunk.
func TestChunkCap(t *testing.T) {
	for _, c := range []struct {
		rate    float64
		maxLag  time.Duration
		workers int
		want    time.Duration
	}{
		{1, time.Second, 2, 0},
		{1.5, time.Second, 2, 0},
		{0.5, time.Second, 2, 125 * time.Millisecond},
		{0.25, 1500 * time.Millisecond, 2, 62500 * time.Microsecond},
		{0.5, 400 * time.Millisecond, 1, 100 * time.Millisecond},
		{0.05, time.Second, 4, 10 * time.Millisecond},
	} {
		if got := chunkCap(c.rate, c.maxLag, c.workers); got != c.want {
			t.Errorf("chunkCap(rate %.2f, max-lag %s, %d workers) = %s, want %s", c.rate, c.maxLag, c.workers, got, c.want)
		}
	}
}

// TestMinimalDefaultKey: on MariaDB with MINIMAL images globally, a key
// column with a DEFAULT is refused (a REPLACE to the default would be
// logged without the key); elsewhere, or by trigger capture, it is not.
func TestMinimalDefaultKey(t *testing.T) {
	key, err := rowkey.NewCols([]schema.Column{{Name: "id", DataType: "int", HasDefault: true}})
	if err != nil {
		t.Fatal(err)
	}
	auto, _ := rowkey.NewCols([]schema.Column{{Name: "id", DataType: "int", HasDefault: true, AutoInc: true}})
	maria := ServerVars{Flavor: dbconn.MariaDB, RowImage: "minimal"}
	if err := minimalDefaultKey(maria, key, false); err == nil || !strings.Contains(err.Error(), "primary-key column id has a DEFAULT") {
		t.Errorf("MariaDB, MINIMAL, a defaulted key: got %v", err)
	}
	for name, c := range map[string]struct {
		v        ServerVars
		key      rowkey.Cols
		triggers bool
	}{
		"MySQL":           {ServerVars{Flavor: dbconn.MySQL, RowImage: "MINIMAL"}, key, false},
		"FULL":            {ServerVars{Flavor: dbconn.MariaDB, RowImage: "FULL"}, key, false},
		"trigger capture": {maria, key, true},
		"auto_increment":  {maria, auto, false},
	} {
		if err := minimalDefaultKey(c.v, c.key, c.triggers); err != nil {
			t.Errorf("%s: refused: %v", name, err)
		}
	}
}

func TestSQLModeRefusal(t *testing.T) {
	my := "ONLY_FULL_GROUP_BY,STRICT_TRANS_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION"
	maria := "STRICT_TRANS_TABLES,ERROR_FOR_DIVISION_BY_ZERO,NO_AUTO_CREATE_USER,NO_ENGINE_SUBSTITUTION"
	for _, c := range []struct {
		mode, clause, refused string
	}{
		{my, `ADD COLUMN c VARCHAR(10) NOT NULL DEFAULT ''`, ""},
		{maria, `ADD COLUMN c VARCHAR(10) DEFAULT "x"`, ""},
		{"", `MODIFY c BIGINT`, ""},
		{my + ",ANSI_QUOTES", `ADD COLUMN c VARCHAR(10) DEFAULT 'x'`, ""},
		{my + ",ANSI_QUOTES", `ADD COLUMN c VARCHAR(10) DEFAULT "x"`, "ANSI_QUOTES"},
		{"PIPES_AS_CONCAT", `ADD COLUMN g VARCHAR(20) AS (a || b)`, "PIPES_AS_CONCAT"},
		{"HIGH_NOT_PRECEDENCE", `ADD COLUMN c INT NOT NULL, MODIFY d INT NOT  NULL`, ""},
		{"HIGH_NOT_PRECEDENCE", `ADD COLUMN g INT AS (NOT a BETWEEN 1 AND 2)`, "HIGH_NOT_PRECEDENCE"},
		{"REAL_AS_FLOAT", `MODIFY c REAL`, "REAL_AS_FLOAT"},
		{"REAL_AS_FLOAT", `MODIFY realm INT`, ""},
		{maria + ",EMPTY_STRING_IS_NULL", `ADD COLUMN s VARCHAR(10) DEFAULT ''`, "EMPTY_STRING_IS_NULL"},
		{maria + ",TIME_ROUND_FRACTIONAL", `MODIFY d DATETIME`, "TIME_ROUND_FRACTIONAL"},
		{my + ",TIME_TRUNCATE_FRACTIONAL", `ADD INDEX (c)`, "TIME_TRUNCATE_FRACTIONAL"},
		{"ORACLE", `MODIFY d DATE`, "ORACLE"},
		{"PAD_CHAR_TO_FULL_LENGTH", `MODIFY c VARCHAR(20)`, "PAD_CHAR_TO_FULL_LENGTH"},
		{"SOME_FUTURE_MODE", `MODIFY c BIGINT`, "SOME_FUTURE_MODE"},
	} {
		got := SQLModeRefusal(c.mode, c.clause)
		if (got == "") != (c.refused == "") || !strings.Contains(got, c.refused) {
			t.Errorf("%s / %s: %q, want it to name %q", c.mode, c.clause, got, c.refused)
		}
	}
}

// TestSameKey: a key moved to a column the server keeps apart from the old
// one (ſ beside s) is another key.
func TestSameKey(t *testing.T) {
	if !sameKey([]string{"ID", "b"}, []string{"id", "B"}) || sameKey([]string{"s"}, []string{"ſ"}) || sameKey([]string{"a"}, []string{"a", "b"}) {
		t.Error("sameKey: want the same key in other letter case only")
	}
}
