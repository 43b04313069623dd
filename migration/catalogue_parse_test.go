package migration_test

// The scenario catalogue's records (testdata/scenarios.txt, whose head
// documents the format) and their parser. The driver is catalogue_test.go.

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// catScenario is one record of the catalogue.
type catScenario struct {
	Name, Group string
	Line        int // where the record starts in the file
	Server      string
	Table       string
	Setup       []catStep
	Alter       string

	// Config knobs.
	Method         string
	Approve        []string
	Postpone       time.Duration
	PostponeCancel bool
	KeepIndexes    bool
	CarryTriggers  bool
	Capture        string
	Chunk          time.Duration
	CopyWorkers    int
	LockWait       time.Duration
	LockDeadline   time.Duration
	KillAfter      time.Duration
	Conn           map[string]string
	Account        string // "", "least" or "DB PRIVILEGES | GLOBAL PRIVILEGES"
	WrongPassword  bool

	// The reference: columns left out of the comparison, statements run in
	// the native ALTER's session before it.
	Volatile []string
	Native   []string

	// The workload.
	Writers   int
	Rows      int64
	Zones     []string
	Session   []string
	Insert    string
	Update    []string
	Move      string
	Delete    string
	Mix       [4]int // insert, update, move, delete weights
	Txn       int
	Pace      time.Duration
	MinWrites int64 // the fewest writes during a copy that prove something (default 20)

	// Faults.
	Cancel      string
	CancelAfter time.Duration
	At          map[string][]string
	Second      catSecond
	Blocker     catBlocker
	Kill        catKill
	Panic       string // phase at whose start the panic flag file appears
	OrFail      string

	Oracle byte // 'E', 'M' or 'F'
	Expect string
	// Only, when set, is the one server flavour the record runs on
	// (mysql or mariadb), OnlyWhy the reason; MariaDB, when set, replaces
	// the oracle on MariaDB (F TEXT: a refusal there).
	Only, OnlyWhy string
	MariaDB       string
	Known         string
	Design        string
	Serial        bool
}

// catStep is one setup step: a statement, or a fill of rows n = 1..Count.
type catStep struct {
	SQL        string
	FillTable  string
	FillCount  int
	FillSelect string
}

type catSecond struct{ Phase, Alter, Expect string }

type catBlocker struct {
	Phase string
	Hold  time.Duration
}

type catKill struct {
	Phase string
	Times int
	Every time.Duration
}

var (
	catNameRE  = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)
	catPhases  = []string{"preflight", "instant", "in-place", "shadow", "capture", "copy", "index", "catch-up", "checksum", "postponed", "cut-over"}
	catGroups  = []string{"values", "schema", "keys", "concurrency", "faults", "preflight"}
	catRepeats = map[string]bool{"sql": true, "fill": true, "update": true, "native": true, "session": true, "at": true}
)

// catParse reads the catalogue.
func catParse(path string) ([]*catScenario, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var (
		out   []*catScenario
		cur   *catScenario
		group string
		// the field being read, its value so far and the line it began on
		key, val string
		keyLine  int
	)
	flush := func() error {
		if key == "" {
			return nil
		}
		err := cur.set(key, strings.TrimSpace(val))
		if err != nil {
			return fmt.Errorf("%s:%d: %s: %w", path, keyLine, key, err)
		}
		key, val = "", ""
		return nil
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case trimmed == "" || strings.HasPrefix(trimmed, "#"):
			continue
		case line[0] == ' ' || line[0] == '\t':
			if key == "" {
				return nil, fmt.Errorf("%s:%d: a continuation line with no field before it", path, n)
			}
			val += "\n" + trimmed
			continue
		}
		if err := flush(); err != nil {
			return nil, err
		}
		switch {
		case strings.HasPrefix(line, "[") && strings.HasSuffix(trimmed, "]"):
			group = strings.Trim(trimmed, "[]")
			if !slices.Contains(catGroups, group) {
				return nil, fmt.Errorf("%s:%d: unknown group %q (one of %v)", path, n, group, catGroups)
			}
		case strings.HasPrefix(line, "== "):
			name := strings.TrimSpace(line[3:])
			if !catNameRE.MatchString(name) {
				return nil, fmt.Errorf("%s:%d: scenario name %q: use lower case letters, digits and dashes", path, n, name)
			}
			if group == "" {
				return nil, fmt.Errorf("%s:%d: scenario %s before any [group] line", path, n, name)
			}
			cur = &catScenario{Name: name, Group: group, Line: n, Server: "default", Table: "t", Method: "copy",
				Mix: [4]int{25, 40, 15, 20}, At: map[string][]string{}, MinWrites: 20}
			out = append(out, cur)
		default:
			k, v, ok := strings.Cut(line, ":")
			if !ok || cur == nil {
				return nil, fmt.Errorf("%s:%d: want \"field: value\" inside a scenario, got %q", path, n, line)
			}
			key, val, keyLine = strings.TrimSpace(k), v, n
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if err := flush(); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, s := range out {
		if seen[s.Name] {
			return nil, fmt.Errorf("%s:%d: scenario %s appears twice", path, s.Line, s.Name)
		}
		seen[s.Name] = true
		if err := s.check(); err != nil {
			return nil, fmt.Errorf("%s:%d: scenario %s: %w", path, s.Line, s.Name, err)
		}
	}
	return out, nil
}

// set stores one field.
func (s *catScenario) set(key, v string) error {
	if s.seen(key) && !catRepeats[key] {
		return fmt.Errorf("given twice")
	}
	var err error
	switch key {
	case "server":
		if v != "default" && v != "alt" {
			return fmt.Errorf("%q: want default or alt", v)
		}
		s.Server = v
	case "table":
		s.Table = v
	case "sql":
		s.Setup = append(s.Setup, catStep{SQL: v})
	case "fill":
		// fill: TABLE COUNT SELECT-LIST; TABLE may be `quoted`.
		table, rest, ok := catIdent(v)
		count, list, ok2 := strings.Cut(rest, " ")
		if !ok || !ok2 {
			return fmt.Errorf("want TABLE COUNT SELECT-LIST")
		}
		st := catStep{FillTable: table, FillSelect: list}
		if st.FillCount, err = strconv.Atoi(count); err != nil {
			return err
		}
		s.Setup = append(s.Setup, st)
	case "alter":
		s.Alter = strings.ReplaceAll(v, "\n", " ")
	case "method":
		s.Method = v
	case "approve":
		s.Approve = catList(v)
	case "postpone":
		if v == "cancel" {
			s.PostponeCancel, v = true, "300ms"
		}
		s.Postpone, err = time.ParseDuration(v)
	case "keep-indexes":
		s.KeepIndexes, err = catYes(v)
	case "carry-triggers":
		s.CarryTriggers, err = catYes(v)
	case "capture":
		s.Capture = v
	case "chunk":
		s.Chunk, err = time.ParseDuration(v)
	case "copy-workers":
		s.CopyWorkers, err = strconv.Atoi(v)
	case "lock-wait":
		s.LockWait, err = time.ParseDuration(v)
	case "lock-deadline":
		s.LockDeadline, err = time.ParseDuration(v)
	case "kill-blockers":
		s.KillAfter, err = time.ParseDuration(v)
	case "panic":
		s.Panic = v
	case "conn":
		s.Conn = map[string]string{}
		for _, kv := range strings.Fields(v) {
			k, val, ok := strings.Cut(kv, "=")
			if !ok {
				return fmt.Errorf("%q: want NAME=VALUE", kv)
			}
			s.Conn[k] = val
		}
	case "account":
		s.Account = v
	case "password":
		if v != "wrong" {
			return fmt.Errorf("%q: the only value is wrong", v)
		}
		s.WrongPassword = true
	case "volatile":
		s.Volatile = catList(v)
	case "native":
		s.Native = append(s.Native, v)
	case "writers":
		s.Writers, err = strconv.Atoi(v)
	case "rows":
		s.Rows, err = strconv.ParseInt(v, 10, 64)
	case "zones":
		s.Zones = strings.Fields(v)
	case "session":
		s.Session = append(s.Session, v)
	case "insert":
		s.Insert = v
	case "update":
		s.Update = append(s.Update, v)
	case "move":
		s.Move = v
	case "delete":
		s.Delete = v
	case "mix":
		f := strings.Fields(v)
		if len(f) != 4 {
			return fmt.Errorf("want four weights: insert update move delete")
		}
		for i := range f {
			if s.Mix[i], err = strconv.Atoi(f[i]); err != nil {
				return err
			}
		}
	case "txn":
		s.Txn, err = strconv.Atoi(v)
	case "pace":
		s.Pace, err = time.ParseDuration(v)
	case "min-writes":
		s.MinWrites, err = strconv.ParseInt(v, 10, 64)
	case "cancel":
		phase, delay, _ := strings.Cut(v, " +")
		s.Cancel = phase
		if delay != "" {
			s.CancelAfter, err = time.ParseDuration(delay)
		}
	case "at":
		phase, q, ok := strings.Cut(v, " ")
		if !ok {
			return fmt.Errorf("want PHASE STATEMENT")
		}
		s.At[phase] = append(s.At[phase], strings.TrimSpace(q))
	case "second":
		phase, rest, _ := strings.Cut(v, " ")
		alter, expect, ok := strings.Cut(rest, "=>")
		if !ok {
			return fmt.Errorf("want PHASE ALTER => EXPECTED ERROR")
		}
		s.Second = catSecond{Phase: phase, Alter: strings.TrimSpace(alter), Expect: strings.TrimSpace(expect)}
	case "blocker":
		f := strings.Fields(v)
		if len(f) != 2 {
			return fmt.Errorf("want PHASE DURATION")
		}
		s.Blocker.Phase = f[0]
		s.Blocker.Hold, err = time.ParseDuration(f[1])
	case "kill-binlog":
		f := strings.Fields(v)
		s.Kill = catKill{Phase: f[0], Times: 1, Every: 300 * time.Millisecond}
		if len(f) > 1 {
			s.Kill.Times, err = strconv.Atoi(f[1])
		}
		if len(f) > 2 && err == nil {
			s.Kill.Every, err = time.ParseDuration(f[2])
		}
	case "or-fail":
		s.OrFail = v
	case "oracle":
		o, expect, _ := strings.Cut(v, " ")
		if o != "E" && o != "M" && o != "F" {
			return fmt.Errorf("%q: want E, M or F", o)
		}
		s.Oracle, s.Expect = o[0], strings.TrimSpace(expect)
	case "known":
		s.Known = v
	case "design":
		s.Design = v
	case "only":
		f, why, _ := strings.Cut(v, " ")
		if f != "mysql" && f != "mariadb" || strings.TrimSpace(why) == "" {
			return fmt.Errorf("%q: want mysql or mariadb, then the reason", v)
		}
		s.Only, s.OnlyWhy = f, strings.TrimSpace(why)
	case "mariadb":
		if !strings.HasPrefix(v, "F ") {
			return fmt.Errorf("%q: want F TEXT (the refusal on MariaDB)", v)
		}
		s.MariaDB = strings.TrimSpace(strings.TrimPrefix(v, "F "))
	case "serial":
		s.Serial, err = catYes(v)
	default:
		return fmt.Errorf("unknown field")
	}
	return err
}

// seen reports whether a single-valued field was already set; the parser
// calls it before set.
func (s *catScenario) seen(key string) bool {
	switch key {
	case "alter":
		return s.Alter != ""
	case "oracle":
		return s.Oracle != 0
	case "known":
		return s.Known != ""
	case "design":
		return s.Design != ""
	}
	return false
}

// check refuses records the driver could not run meaningfully.
func (s *catScenario) check() error {
	phase := func(p string) error {
		if p != "" && !slices.Contains(catPhases, p) {
			return fmt.Errorf("unknown phase %q (one of %v)", p, catPhases)
		}
		return nil
	}
	for p := range s.At {
		if err := phase(p); err != nil {
			return err
		}
	}
	for _, p := range []string{s.Cancel, s.Second.Phase, s.Blocker.Phase, s.Kill.Phase, s.Panic} {
		if err := phase(p); err != nil {
			return err
		}
	}
	switch {
	case s.Oracle == 0:
		return fmt.Errorf("no oracle")
	case s.Alter == "":
		return fmt.Errorf("no alter")
	case s.Oracle == 'F' && s.Expect == "":
		return fmt.Errorf("oracle F needs the expected error text")
	case s.Oracle != 'F' && s.Expect != "":
		return fmt.Errorf("only oracle F takes an expected error")
	case s.Design != "" && s.Oracle != 'F':
		return fmt.Errorf("design: is for refusals (oracle F)")
	case s.Oracle == 'M' && s.Writers == 0:
		return fmt.Errorf("oracle M needs writers")
	case s.Writers > 0 && (s.Rows <= 0 || s.Insert == ""):
		return fmt.Errorf("writers need rows: and insert:")
	case s.Cancel != "" && s.Oracle != 'F':
		return fmt.Errorf("a cancel ends in a failure: oracle F")
	case s.Kill.Phase != "" && s.Account == "":
		return fmt.Errorf("kill-binlog finds the run's binlog connection by its account: give account:")
	case !slices.Contains([]string{"auto", "copy", "instant", "inplace"}, s.Method):
		return fmt.Errorf("method %q", s.Method)
	}
	return nil
}

func catList(v string) []string {
	var out []string
	for _, f := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' }) {
		out = append(out, f)
	}
	return out
}

func catYes(v string) (bool, error) {
	switch v {
	case "yes":
		return true, nil
	case "no":
		return false, nil
	}
	return false, fmt.Errorf("%q: want yes or no", v)
}

// catIdent reads a leading identifier, bare or `quoted` (“ for a backtick),
// and returns it and the rest after one space.
func catIdent(v string) (name, rest string, ok bool) {
	if !strings.HasPrefix(v, "`") {
		name, rest, ok = strings.Cut(v, " ")
		return name, rest, ok
	}
	var b strings.Builder
	for i := 1; i < len(v); i++ {
		if v[i] != '`' {
			b.WriteByte(v[i])
			continue
		}
		if i+1 < len(v) && v[i+1] == '`' {
			b.WriteByte('`')
			i++
			continue
		}
		return b.String(), strings.TrimPrefix(v[i+1:], " "), true
	}
	return "", "", false
}
