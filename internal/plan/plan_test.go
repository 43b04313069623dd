package plan

import (
	"strings"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/ddl"
	"github.com/sluicedb/sluice/internal/schema"
)

// sbtest is sysbench's table as schema.Load describes it.
func sbtest() *schema.Table {
	return &schema.Table{
		Database: "sbtest", Name: "sbtest1", Engine: "InnoDB", RowFormat: "Dynamic", Charset: "utf8mb4",
		EstimatedRows: 1_000_000, DataBytes: 240 << 20, IndexBytes: 20 << 20, RowVersions: 0,
		PrimaryKey: []string{"id"},
		Columns: []schema.Column{
			{Name: "id", DataType: "int", ColumnType: "int"},
			{Name: "k", DataType: "int", ColumnType: "int"},
			{Name: "c", DataType: "char", ColumnType: "char(120)", Charset: "utf8mb4", MaxLength: 120},
			{Name: "pad", DataType: "char", ColumnType: "char(60)", Charset: "utf8mb4", MaxLength: 60},
			{Name: "note", DataType: "varchar", ColumnType: "varchar(30)", Charset: "utf8mb4", MaxLength: 30, Nullable: true},
			{Name: "amount", DataType: "decimal", ColumnType: "decimal(10,2)", Nullable: true},
			{Name: "at", DataType: "datetime", ColumnType: "datetime(6)", Nullable: true},
		},
		Indexes: []schema.Index{{Name: "k_1", Kind: "BTREE", Columns: []string{"k"}}},
	}
}

func mustParse(t *testing.T, s string) *ddl.Alter {
	t.Helper()
	a, err := ddl.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestDecidePaths(t *testing.T) {
	srv := Server{Major: 9, Minor: 7, Patch: 4}
	o := Options{CPUs: 2, MaxInplace: 30 * time.Second}
	cases := []struct {
		alter string
		o     Options
		want  Path
	}{
		{"ADD COLUMN x INT", o, PathInstant},
		{"DROP COLUMN pad, RENAME COLUMN c TO c2", o, PathInstant},
		{"ADD INDEX kc (c)", o, PathInplace},
		{"ADD INDEX kc (c), ADD INDEX kp (pad), DROP INDEX k_1", o, PathInplace},
		{"MODIFY note VARCHAR(60)", o, PathInplace},
		{"MODIFY k BIGINT NOT NULL DEFAULT 0", o, PathCopy},
		{"ENGINE=InnoDB", o, PathCopy},
		{"ADD COLUMN x INT, ADD INDEX kx (x)", o, PathCopy}, // ADD COLUMN rebuilds when not INSTANT
		{"ADD INDEX kc (c)", Options{CPUs: 2, Replicas: true, MaxInplace: 100 * time.Millisecond}, PathCopy},
		{"ADD INDEX kc (c)", Options{CPUs: 2, Replicas: true, MaxInplace: time.Hour}, PathInplace},
	}
	for _, c := range cases {
		p := Decide(sbtest(), mustParse(t, c.alter), srv, c.o)
		if p.Path != c.want {
			t.Errorf("%s: path %s (%s), want %s", c.alter, p.Path, p.Why, c.want)
		}
		if p.Why == "" || p.Blocks == "" || len(p.Settings) == 0 {
			t.Errorf("%s: plan lacks why/blocks/settings: %+v", c.alter, p)
		}
		if c.want == PathInplace && strings.Contains(c.alter, "INDEX k") && (p.DDL == nil || p.Estimate.Seconds <= 0) {
			t.Errorf("%s: an index build needs DDL settings and a time estimate: %+v", c.alter, p)
		}
	}
	if p := Decide(sbtest(), mustParse(t, "ADD INDEX kc (c)"), srv, Options{CPUs: 2, Replicas: true, MaxInplace: 100 * time.Millisecond}); !strings.Contains(p.Why, "replicas") {
		t.Errorf("the copy chosen over an in-place build must say it is for the replicas: %s", p.Why)
	}
}

func TestOldServerRules(t *testing.T) {
	old := Server{Major: 8, Minor: 0, Patch: 27}
	for alter, want := range map[string]Algorithm{
		"ADD COLUMN x INT":      Rebuild,
		"DROP COLUMN pad":       Rebuild,
		"RENAME COLUMN c TO c2": Inplace,
	} {
		if got := Worst(Classify(sbtest(), mustParse(t, alter), old)); got != want {
			t.Errorf("8.0.27 %s: %s, want %s", alter, got, want)
		}
	}
	versions := sbtest()
	versions.RowVersions = 64
	if got := Worst(Classify(versions, mustParse(t, "ADD COLUMN x INT"), Server{Major: 8, Minor: 0, Patch: 40})); got != Rebuild {
		t.Errorf("8.0.40 with 64 row versions: %s, want a rebuild", got)
	}
	if got := Worst(Classify(versions, mustParse(t, "ADD COLUMN x INT"), Server{Major: 9, Minor: 1})); got != Instant {
		t.Errorf("9.1 with 64 row versions: %s, want instant (the limit is 255)", got)
	}
}

func TestTuneDDL(t *testing.T) {
	d := TuneDDL(2, 130<<20, 256<<20)
	if d.Threads != 2 || d.ReadThreads != 2 {
		t.Errorf("threads = %+v, want one per processor", d)
	}
	if d.BufferBytes != 4<<20 {
		t.Errorf("buffer %d for a 130 MiB sort: want a 64th of it, rounded up to a power of two", d.BufferBytes)
	}
	if d := TuneDDL(64, 100<<30, 512<<20); d.Threads != 8 || d.Memory() > 512<<20+1<<20 || d.BufferBytes < 64<<20 {
		t.Errorf("big server, big sort: %+v (memory %d), want 8 threads and the most buffer within the cap", d, d.Memory())
	}
	if d := TuneDDL(0, 0, 0); d.Threads != 4 || d.BufferBytes != 1<<20 {
		t.Errorf("unknown server, nothing to sort: %+v", d)
	}
}

func TestLossy(t *testing.T) {
	ty := func(name string, l, s int, unsigned bool, cs string, elems ...string) ColType {
		return ColType{Name: name, Length: l, Scale: s, Unsigned: unsigned, Charset: cs, Elems: elems}
	}
	cases := []struct {
		from, to ColType
		lossy    bool
		cond     string
	}{
		{ty("int", -1, -1, false, ""), ty("bigint", -1, -1, false, ""), false, ""},
		{ty("int", -1, -1, true, ""), ty("int", -1, -1, false, ""), true, "`c` NOT BETWEEN -2147483648 AND 2147483647"},
		{ty("bigint", -1, -1, false, ""), ty("int", -1, -1, false, ""), true, "`c` NOT BETWEEN -2147483648 AND 2147483647"},
		{ty("int", -1, -1, false, ""), ty("bigint", -1, -1, true, ""), true, "`c` NOT BETWEEN 0 AND 18446744073709551615"},
		{ty("varchar", 30, -1, false, "utf8mb4"), ty("varchar", 10, -1, false, ""), true, "CHAR_LENGTH(`c`) > 10"},
		{ty("varchar", 30, -1, false, "utf8mb4"), ty("text", -1, -1, false, ""), false, ""},
		{ty("varchar", 30, -1, false, "utf8mb4"), ty("varchar", 30, -1, false, "latin1"), true,
			"`c` <> CONVERT(CONVERT(`c` USING latin1) USING utf8mb4)"},
		{ty("decimal", 10, 2, false, ""), ty("decimal", 10, 1, false, ""), true, "`c` <> ROUND(`c`, 1)"},
		{ty("decimal", 10, 2, false, ""), ty("decimal", 12, 2, false, ""), false, ""},
		{ty("datetime", -1, 6, false, ""), ty("datetime", -1, -1, false, ""), true, "MICROSECOND(`c`) % 1000000 <> 0"},
		{ty("enum", -1, -1, false, "", "a", "b"), ty("enum", -1, -1, false, "", "a", "b", "c"), false, ""},
		{ty("enum", -1, -1, false, "", "a", "b"), ty("enum", -1, -1, false, "", "a"), true, "`c` NOT IN ('a')"},
		{ty("varchar", 30, -1, false, "utf8mb4"), ty("int", -1, -1, false, ""), true, ""},
		{ty("double", -1, -1, false, ""), ty("float", -1, -1, false, ""), true, "`c` <> CAST(`c` AS FLOAT)"},
	}
	for _, c := range cases {
		lossy, why, cond := Lossy(c.from, c.to, "`c`", "utf8mb4")
		if lossy != c.lossy || cond != c.cond {
			t.Errorf("%+v -> %+v: lossy=%v (%s) cond=%q, want %v %q", c.from, c.to, lossy, why, cond, c.lossy, c.cond)
		}
	}
}

func TestRisks(t *testing.T) {
	a := mustParse(t, "DROP COLUMN pad, CHANGE note memo VARCHAR(30), MODIFY amount DECIMAL(10,2) NOT NULL, ADD UNIQUE KEY uk (c, k), MODIFY at DATETIME")
	rs := Risks(sbtest(), a)
	got := strings.Join(Kinds(rs), ",")
	if got != "drop-column,lossy-type,not-null,rename-column,unique-key" {
		t.Fatalf("risk kinds = %s; risks %+v", got, rs)
	}
	for _, r := range rs {
		if r.Kind != RiskRenameColumn && r.Query == "" {
			t.Errorf("%s: no count query", r.Kind)
		}
		if r.Kind == RiskUniqueKey && !strings.Contains(r.Query, "GROUP BY `c`, `k` HAVING COUNT(*) > 1") {
			t.Errorf("unique count query: %s", r.Query)
		}
	}
	if u := Unapproved(rs, []string{"drop-column", "Rename-Column "}); strings.Join(u, ",") != "lossy-type,not-null,unique-key" {
		t.Errorf("unapproved = %v", u)
	}
	if rs := Risks(sbtest(), mustParse(t, "ADD COLUMN x INT, MODIFY k BIGINT NOT NULL DEFAULT 0, ADD INDEX kc (c)")); len(rs) != 0 {
		t.Errorf("a widening change and new columns are not risks: %+v", rs)
	}
}

// A new primary key: NULLs in its columns would fail the copy, and values
// repeat unless it holds every column of the current key.
func TestPrimaryKeyRisks(t *testing.T) {
	for _, c := range []struct{ alter, want string }{
		{"DROP PRIMARY KEY, ADD PRIMARY KEY (id, k)", ""},
		{"DROP PRIMARY KEY, ADD PRIMARY KEY (K, ID)", ""},
		{"DROP PRIMARY KEY, ADD PRIMARY KEY (id, note)", "not-null"},
		{"DROP PRIMARY KEY, ADD PRIMARY KEY (k)", "unique-key"},
		{"DROP PRIMARY KEY, ADD PRIMARY KEY (c, note)", "not-null,unique-key"},
		{"DROP PRIMARY KEY, MODIFY k INT NOT NULL PRIMARY KEY", "unique-key"},
		{"DROP PRIMARY KEY, MODIFY note VARCHAR(30) PRIMARY KEY", "not-null,unique-key"},
	} {
		rs := Risks(sbtest(), mustParse(t, c.alter))
		if got := strings.Join(Kinds(rs), ","); got != c.want {
			t.Errorf("%s: risks %q, want %q (%+v)", c.alter, got, c.want, rs)
		}
		for _, r := range rs {
			if r.Query == "" {
				t.Errorf("%s: %s has no count query", c.alter, r.Kind)
			}
		}
	}
}

// The plan names the index of the new table that rows are found by when the
// primary key changes, or says the copy path refuses.
func TestRowKeyNote(t *testing.T) {
	for _, c := range []struct{ alter, want string }{
		{"ADD COLUMN z INT", ""},
		{"DROP PRIMARY KEY, ADD PRIMARY KEY (id, k)", "by the new primary key"},
		{"DROP PRIMARY KEY, ADD PRIMARY KEY (k, id), ADD KEY by_id (id)", "by index by_id"},
		{"DROP PRIMARY KEY, ADD PRIMARY KEY (c), ADD UNIQUE KEY (id, k)", "by the index the ALTER adds"},
		{"DROP PRIMARY KEY, ADD PRIMARY KEY (k, id)", "refused"},
		{"DROP PRIMARY KEY", "refused"},
	} {
		tb := sbtest()
		tb.KeyIndex = "PRIMARY"
		got := RowKeyNote(tb, mustParse(t, c.alter))
		if c.want == "" && got != "" || !strings.HasPrefix(got, c.want) {
			t.Errorf("%s: %q, want it to begin with %q", c.alter, got, c.want)
		}
	}
	tb := sbtest()
	tb.KeyIndex = "PRIMARY"
	tb.Indexes = append(tb.Indexes, schema.Index{Name: "k_id", Columns: []string{"id", "k"}})
	if got := RowKeyNote(tb, mustParse(t, "DROP PRIMARY KEY, ADD PRIMARY KEY (k, id)")); !strings.HasPrefix(got, "by index k_id") {
		t.Errorf("an index the table has: %q", got)
	}
	if got := RowKeyNote(tb, mustParse(t, "DROP PRIMARY KEY, ADD PRIMARY KEY (k, id), DROP INDEX k_id")); !strings.HasPrefix(got, "refused") {
		t.Errorf("an index the ALTER drops: %q", got)
	}
}

func TestCopyEstimateCountsWorkersUpToCPUs(t *testing.T) {
	srv := Server{Major: 9, Minor: 7, Patch: 4}
	a := mustParse(t, "MODIFY k BIGINT NOT NULL DEFAULT 0")
	secs := func(cpus, workers int) float64 {
		p := Decide(sbtest(), a, srv, Options{CPUs: cpus, CopyThreads: workers})
		if p.Path != PathCopy {
			t.Fatalf("path %s, want copy", p.Path)
		}
		return p.Estimate.Seconds
	}
	if two, four := secs(2, 2), secs(2, 4); four != two {
		t.Errorf("2 CPUs: 4 workers estimated at %.2fs, 2 at %.2fs; workers beyond the CPUs copy no faster", four, two)
	}
	if two, four := secs(8, 2), secs(8, 4); four >= two {
		t.Errorf("8 CPUs: 4 workers estimated at %.2fs, not below 2 workers' %.2fs", four, two)
	}
}

// On the copy path the plan says what becomes of the table's triggers.
func TestPlanSaysWhatBecomesOfTriggers(t *testing.T) {
	tb := sbtest()
	tb.Triggers = []string{"audit_ins", "_audit_upd"}
	a := mustParse(t, "MODIFY k BIGINT NOT NULL DEFAULT 0")
	for _, c := range []struct {
		srv   Server
		carry bool
		want  string
	}{
		{Server{Major: 9, Minor: 7}, false, "refused: table sbtest1 has triggers (audit_ins, _audit_upd), which the swap would leave on the old table; a trigger's name is unique in its database, so their copies on the new table take the other name (_audit_ins, audit_upd): pass --carry-triggers"},
		{Server{Major: 9, Minor: 7}, true, "audit_ins -> _audit_ins, _audit_upd -> audit_upd: copied to the new table under the cut-over's lock"},
		{Server{Major: 11, Minor: 8, MariaDB: true}, true, "audit_ins -> _audit_ins, _audit_upd -> audit_upd: copied to the new table under the cut-over's lock"},
	} {
		p := Decide(tb, a, c.srv, Options{CPUs: 2, CopyThreads: 4, CarryTriggers: c.carry})
		if p.Path != PathCopy || !strings.HasPrefix(p.Triggers, c.want) || !strings.Contains(p.Text(), "triggers: "+p.Triggers) {
			t.Errorf("%+v carry=%v: path %s, triggers %q; want it to begin with %q", c.srv, c.carry, p.Path, p.Triggers, c.want)
		}
	}
	if p := Decide(sbtest(), a, Server{Major: 9, Minor: 7}, Options{CPUs: 2}); p.Triggers != "" {
		t.Errorf("no triggers: triggers line %q", p.Triggers)
	}
}

// The copies' names: a name either way round, never one the table has,
// never beyond the servers' 64 characters.
func TestTriggerRefusal(t *testing.T) {
	long := strings.Repeat("x", 64)
	for _, c := range []struct {
		names []string
		want  string
	}{
		{nil, ""},
		{[]string{"a", "b"}, ""},
		{[]string{"a", "_a"}, "triggers a and _a of t: the copy of the one takes the other's name"},
		{[]string{"A", "_a"}, "triggers A and _a of t"},
		{[]string{long}, "trigger " + long + " of t: its copy's name"},
		{[]string{"_" + long[1:]}, ""},
		{[]string{strings.Repeat("\u00e9", 63)}, ""},
		{[]string{"_"}, "trigger _ of t: its copy's name \"\" is not a valid name"},
	} {
		if got := TriggerRefusal("t", c.names, true); !strings.HasPrefix(got, c.want) || (c.want == "") != (got == "") {
			t.Errorf("%q: %q, want %q", c.names, got, c.want)
		}
	}
}

// TestConversionRefusal: the conversions a copy makes otherwise than the
// server's own ALTER are refused; others, and unchanged types, are not.
func TestConversionRefusal(t *testing.T) {
	col := func(dataType, columnType string) schema.Column {
		return schema.Column{Name: "c", DataType: dataType, ColumnType: columnType}
	}
	for _, c := range []struct {
		from, to schema.Column
		refused  bool
	}{
		{col("float", "float"), col("varchar", "varchar(40)"), true},
		{col("double", "double"), col("varchar", "varchar(40)"), false},
		{col("int", "int"), col("enum", "enum('a','1')"), true},
		{col("int", "int"), col("enum", "enum('x','y','z')"), false},
		{col("bigint", "bigint"), col("set", "set('a',' 2')"), true},
		{col("decimal", "decimal(5,1)"), col("enum", "enum('x','y')"), true},
		{col("decimal", "decimal(10,3)"), col("date", "date"), true},
		{col("year", "year"), col("char", "char(4)"), true},
		{col("date", "date"), col("year", "year"), true},
		{col("json", "json"), col("int", "int"), true},
		{col("json", "json"), col("longtext", "longtext"), false},
		{col("double", "double"), col("bit", "bit(8)"), true},
		{col("int", "int"), col("bigint", "bigint"), false},
		{col("varchar", "varchar(10)"), col("int", "int"), false},
		{col("float", "float"), col("float", "float(7,2)"), false},
	} {
		if got := ConversionRefusal(c.from, c.to); (got != "") != c.refused {
			t.Errorf("%s -> %s: %q, want refused %v", c.from.ColumnType, c.to.ColumnType, got, c.refused)
		}
	}
}

// TestPlanSaysWhichConversionIsRefused: the plan names the column whose
// conversion the run would refuse; MariaDB's JSON is a LONGTEXT.
func TestPlanSaysWhichConversionIsRefused(t *testing.T) {
	my, maria := Server{Major: 9, Minor: 7}, Server{Major: 11, Minor: 8, MariaDB: true}
	for _, c := range []struct {
		alter string
		srv   Server
		want  string
	}{
		{"MODIFY amount ENUM('x','1')", my, "refused: column amount changes from decimal(10,2) to enum('x','1')"},
		{"CHANGE amount amt DATE", my, "refused: column amt changes from decimal(10,2) to date"},
		{"MODIFY amount DECIMAL(12,2)", my, ""},
		{"MODIFY amount DATE, DROP COLUMN amount", my, ""},
		{"MODIFY k JSON", my, ""},
		{"MODIFY k JSON", maria, ""},
	} {
		p := Decide(sbtest(), mustParse(t, c.alter), c.srv, Options{CPUs: 2})
		if !strings.HasPrefix(p.Conversions, c.want) || (c.want == "") != (p.Conversions == "") {
			t.Errorf("%s on %+v: %q, want it to begin with %q", c.alter, c.srv, p.Conversions, c.want)
		}
		if why, ok := strings.CutPrefix(p.Conversions, "refused: "); ok && !strings.Contains(p.Text(), "types:    sluice will refuse the copy: "+why) {
			t.Errorf("%s: the text does not say it:\n%s", c.alter, p.Text())
		}
	}
	tb := sbtest()
	tb.Columns = append(tb.Columns, schema.Column{Name: "f", DataType: "float", ColumnType: "float"})
	if p := Decide(tb, mustParse(t, "MODIFY f JSON"), maria, Options{CPUs: 2}); !strings.HasPrefix(p.Conversions, "refused: column f changes from float to longtext") {
		t.Errorf("FLOAT -> JSON on MariaDB: %q", p.Conversions)
	}
}

// TestCheckColumns: a column the ALTER names must be the table's, unless the
// clause made it earlier; a name the server may join to a column (ſ for s on
// MariaDB) but sluice does not is refused, never left uncopied.
func TestCheckColumns(t *testing.T) {
	tb := sbtest()
	tb.Columns = append(tb.Columns, schema.Column{Name: "s", DataType: "int", ColumnType: "int"})
	for alter, ok := range map[string]bool{
		"MODIFY K BIGINT": true,
		"ADD COLUMN y INT, ALTER COLUMN y SET DEFAULT 1":     true,
		"RENAME COLUMN k TO kk, MODIFY kk BIGINT":            true,
		"CHANGE k kk INT, DROP COLUMN kk":                    true,
		"MODIFY kk BIGINT, RENAME COLUMN k TO kk":            false,
		"MODIFY nope INT":                                    false,
		"CHANGE `ſ` x INT":                                   false,
		"DROP COLUMN `ſ`":                                    false,
		"CHANGE s x INT":                                     true,
		"ADD COLUMN IF NOT EXISTS k INT, MODIFY c CHAR(200)": false, // the server skips it: k is kept
		"ADD COLUMN IF NOT EXISTS y INT":                     true,
		"CHANGE COLUMN IF EXISTS zz k BIGINT":                false, // the server skips it
		"DROP COLUMN IF EXISTS zz":                           false,
	} {
		if err := CheckColumns(tb, mustParse(t, alter)); (err == nil) != ok {
			t.Errorf("%s: %v, want accepted %v", alter, err, ok)
		}
	}
}
