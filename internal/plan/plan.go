package plan

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/pingcap/tidb/pkg/parser/ast"

	"github.com/sluicedb/sluice/internal/ddl"
	"github.com/sluicedb/sluice/internal/schema"
)

// Path is how sluice carries out the whole ALTER.
type Path string

const (
	// PathInstant runs the ALTER with ALGORITHM=INSTANT.
	PathInstant Path = "instant"
	// PathInplace runs the ALTER in place (LOCK=NONE) with tuned parallel
	// index-build settings.
	PathInplace Path = "in-place"
	// PathCopy copies into a shadow table while applying binlog changes in
	// parallel, then swaps the tables.
	PathCopy Path = "copy"
)

// Options are what the path choice depends on besides the ALTER and table.
type Options struct {
	// Replicas is true when replicas read this server's binlog: an in-place
	// build stalls them for as long as it runs on the primary.
	Replicas bool
	// MaxInplace is the longest estimated in-place build allowed with
	// replicas attached.
	MaxInplace time.Duration
	// CPUs is the server's processor count (0: unknown).
	CPUs int
	// DDLMemory is the most memory an index build may use (0: 256 MiB).
	DDLMemory int64
	// LockWait bounds each wait for a metadata lock: INSTANT, in-place start
	// and end; CutoverLock the copy path's table locks (0: LockWait).
	LockWait, CutoverLock time.Duration
	// CopyThreads is the copy path's worker count.
	CopyThreads int
	// CarryTriggers: the operator lets the copy path carry the table's
	// triggers under other names (--carry-triggers, TriggerRefusal).
	CarryTriggers bool
	// CaptureTriggers: the copy path captures changes by triggers
	// (--capture=triggers, CaptureNote).
	CaptureTriggers bool
	// Group: the table is one of several swapped together (GroupNote).
	Group bool
}

// DDL are the session settings of an InnoDB index build.
type DDL struct {
	Threads     int   `json:"innodb_ddl_threads"`
	BufferBytes int64 `json:"innodb_ddl_buffer_size"`
	ReadThreads int   `json:"innodb_parallel_read_threads"`
}

// Estimate is a rough forecast, calibrated on the 2-core sandbox.
type Estimate struct {
	Seconds    float64 `json:"seconds"`
	SpaceBytes int64   `json:"space_bytes"`
	DDLMemory  int64   `json:"ddl_memory_bytes,omitempty"`
	Basis      string  `json:"basis"`
}

// Plan is sluice's decision for one ALTER on one table, before anything runs.
type Plan struct {
	Table    string    `json:"table"`
	Alter    string    `json:"alter"`
	Path     Path      `json:"path"`
	Why      string    `json:"why"`
	Blocks   string    `json:"blocks"`
	Steps    []Step    `json:"clauses"`
	Estimate Estimate  `json:"estimate"`
	DDL      *DDL      `json:"ddl_settings,omitempty"`
	Settings []Setting `json:"session_settings"`
	Risks    []Risk    `json:"risks"`
	Replicas bool      `json:"replicas"`
	// RowKey says, on the copy path of an ALTER that changes the primary
	// key, by which index of the new table rows are found (RowKeyNote).
	RowKey string `json:"row_key,omitempty"`
	// Triggers says, on the copy path of a table with triggers, what becomes
	// of them (TriggersNote).
	Triggers string `json:"triggers,omitempty"`
	// ForeignKeys says, on the copy path of a table with foreign keys, what
	// becomes of them (ForeignKeysNote).
	ForeignKeys string `json:"foreign_keys,omitempty"`
	// Conversions says, on the copy path, which column's type change the
	// copy would refuse ("refused: why", ConversionNote), or "".
	Conversions string `json:"conversions,omitempty"`
	// Capture says, on the copy path with --capture=triggers, how changes
	// are captured (CaptureNote); "" for the binlog.
	Capture string `json:"capture,omitempty"`
	// Group says, for one of several tables swapped together, what that
	// changes for this one.
	Group string `json:"group,omitempty"`
	// LockGuardBlind says why the metadata-lock guard cannot see who holds
	// the table on this server ("" when it can).
	LockGuardBlind string `json:"lock_guard_blind,omitempty"`
}

// Setting is one session variable sluice sets.
type Setting struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Calibration constants, measured on the 2-core sandbox with a 1M-row
// sysbench table (see make bench-ddl and make bench).
const (
	entryNs       = 1400 // one index entry scanned, sorted and inserted, one thread
	entryByteNs   = 24   // and per byte of the entry
	copyNsPerRow  = 5000 // copy path: per row copied, binlog included (measured on 2 cores)
	checkNsPerRow = 1600 // copy path: checksum of both tables
	entryOverhead = 14   // InnoDB record header and page fill per index entry
	defaultDDLMem = 256 << 20
	minDDLBuffer  = 1 << 20
)

// Decide chooses the path for a classified ALTER. It is pure.
func Decide(t *schema.Table, a *ddl.Alter, srv Server, o Options) *Plan {
	steps := Classify(t, a, srv)
	p := &Plan{Table: t.Name, Alter: a.Clause, Steps: steps, Replicas: o.Replicas}
	worst := Worst(steps)
	builds := newIndexes(t, a)
	entryBytes := int64(0)
	for _, b := range builds {
		entryBytes += b
	}
	rows := max(t.EstimatedRows, 0)
	lock := o.LockWait
	if lock <= 0 {
		lock = time.Second
	}
	lockSetting := Setting{"lock_wait_timeout", fmt.Sprint(int(math.Ceil(lock.Seconds())))}

	switch {
	case worst == Instant:
		p.Path = PathInstant
		p.Why = "every clause is INSTANT: only the data dictionary changes"
		p.Blocks = fmt.Sprintf("an exclusive metadata lock for milliseconds; each wait for it is bounded by %s, then retried", lock)
		p.Estimate = Estimate{Seconds: 0.1, Basis: "metadata only"}
		p.Settings = []Setting{lockSetting}
	case worst == Inplace:
		d := TuneDDL(o.CPUs, rows*entryBytes, o.DDLMemory)
		build := BuildTime(rows, builds, d)
		if o.Replicas && len(builds) > 0 && build > o.MaxInplace {
			p.Path = PathCopy
			p.Why = fmt.Sprintf("the index build would run in place for about %s, and replicas would stall for as long (over --max-inplace-seconds=%s), so sluice copies instead",
				round(build), o.MaxInplace)
			break
		}
		p.Path = PathInplace
		p.DDL = &d
		switch {
		case len(builds) == 0:
			p.Why = "no clause needs a table rebuild or an index build: the server changes metadata in place"
		case o.Replicas:
			p.Why = fmt.Sprintf("only secondary-index work: built in place with tuned parallel DDL; replicas stall for about %s, within --max-inplace-seconds=%s", round(build), o.MaxInplace)
		default:
			p.Why = "only secondary-index work: built in place by the server with tuned parallel DDL, reads and writes go on"
		}
		p.Blocks = fmt.Sprintf("an exclusive metadata lock for milliseconds at the start and at the end (each wait bounded by %s, then retried); reads and writes go on during the build", lock)
		if o.Replicas {
			p.Blocks += fmt.Sprintf("; replicas apply the ALTER after it ends here and lag by about %s", round(build))
		}
		space := rows * (entryBytes + int64(entryOverhead*len(builds))) * 3 / 2
		p.Estimate = Estimate{Seconds: build.Seconds(), SpaceBytes: space * 2, DDLMemory: d.Memory(),
			Basis: fmt.Sprintf("%d rows x %d new index(es); space: the new indexes plus their sort files", rows, len(builds))}
		p.Settings = append(d.Settings(), lockSetting)
	default:
		p.Path = PathCopy
		if worst == Rebuild {
			p.Why = "the server would rebuild the table in place, which holds replicas back for the whole rebuild and buffers concurrent writes in a log that can overflow; sluice copies into a shadow table and applies changes from the binlog in parallel instead"
		} else {
			p.Why = "some clause needs a table copy, which the server does with writes blocked; sluice copies into a shadow table and applies changes from the binlog in parallel instead"
		}
	}
	if o.Group {
		if p.Path != PathCopy {
			p.Why = fmt.Sprintf("alone, this ALTER would take the %s path (%s); with other", p.Path, p.Why)
			p.Path, p.DDL, p.Settings = PathCopy, nil, nil
			p.Why += " tables swapped together, sluice copies into a shadow table and applies changes from the binlog in parallel instead, so that no table changes before the others"
		}
		p.Group = GroupPart(t, srv)
	}
	if p.Path == PathCopy {
		p.RowKey = RowKeyNote(t, a)
		p.Conversions = ConversionNote(t, a, srv)
		p.Triggers = TriggersNote(t, o.CarryTriggers)
		p.ForeignKeys = ForeignKeysNote(t)
		if o.CaptureTriggers {
			p.Capture = CaptureNote(t)
		}
		var sum int64
		for _, b := range secondaryEntries(t) {
			sum += b
		}
		d := TuneDDL(o.CPUs, rows*sum, o.DDLMemory)
		p.DDL = &d
		cut := o.CutoverLock
		if cut <= 0 {
			cut = lock
		}
		p.Blocks = fmt.Sprintf("nothing during the copy; at the checksum snapshot and at the cut-over, writes to %s wait at most %s per attempt for sluice's table lock and about a second while it holds it", t.Name, cut)
		// The copy's server work is CPU-bound: workers beyond the server's
		// processors do not make it faster.
		threads := max(o.CopyThreads, 1)
		if o.CPUs > 0 {
			threads = min(threads, o.CPUs)
		}
		secs := float64(rows)*(copyNsPerRow*2/float64(threads)+checkNsPerRow)/1e9 + BuildTime(rows, secondaryEntries(t), d).Seconds()
		p.Estimate = Estimate{Seconds: secs, SpaceBytes: t.DataBytes*2 + t.IndexBytes, DDLMemory: d.Memory(),
			Basis: fmt.Sprintf("%d rows copied, indexed and checksummed; space: a second copy of the table and its indexes, and the copy's rows in the binlog", rows)}
		p.Settings = []Setting{{"transaction_isolation", "READ-COMMITTED"}, {"time_zone", "+00:00"}, {"sql_mode", "strict, no zero dates"}}
		if o.CaptureTriggers {
			p.Why = strings.Replace(p.Why, "applies changes from the binlog", "applies the changes its triggers record", 1)
		} else {
			p.Settings = append(p.Settings, Setting{"binlog_format", "ROW (checked)"}, Setting{"binlog_row_image", "FULL, NOBLOB or MINIMAL (checked)"})
		}
		p.Settings = append(p.Settings, d.Settings()...)
		p.Settings = append(p.Settings, Setting{"lock_wait_timeout", fmt.Sprint(int(math.Ceil(cut.Seconds()))) + " (table locks)"})
	}
	p.Risks = Risks(t, a)
	return p
}

// Settings lists the build's session variables.
func (d DDL) Settings() []Setting {
	return []Setting{
		{"innodb_ddl_threads", fmt.Sprint(d.Threads)},
		{"innodb_ddl_buffer_size", fmt.Sprint(d.BufferBytes)},
		{"innodb_parallel_read_threads", fmt.Sprint(d.ReadThreads)},
	}
}

// TuneDDL chooses an index build's settings from the server's processors,
// the bytes of index entries to sort, and the memory the build may use: one
// sort thread and one read thread per processor (the seeds find little gain
// past 8; on the 2-core sandbox the read threads matter most), and a buffer
// of a 64th of the sort, so the merge has at most 64 runs per thread: on
// the sandbox a buffer larger than that bought nothing (make bench-ddl),
// while on tables whose sort files outgrow the page cache (the seeds'
// 50M-row ones) it saves merge passes. It stays within memory.
func TuneDDL(cpus int, sortBytes, memory int64) DDL {
	if cpus <= 0 {
		cpus = 4
	}
	if memory <= 0 {
		memory = defaultDDLMem
	}
	threads := min(cpus, 8)
	buf := int64(minDDLBuffer)
	for buf < sortBytes/64 && buf*2*int64(threads) <= memory {
		buf *= 2
	}
	return DDL{Threads: threads, BufferBytes: buf, ReadThreads: threads}
}

// Memory bounds what InnoDB's DDL allocates for a build with these settings:
// measured on the sandbox at up to threads times the buffer when several
// indexes build at once (make bench-ddl: 4 threads x 512M used 2051M), plus
// a MiB.
func (d DDL) Memory() int64 {
	return d.BufferBytes*int64(max(d.Threads, 1)) + 1<<20
}

// BuildTime estimates an in-place build, over rows rows, of indexes whose
// entries take the given bytes.
func BuildTime(rows int64, entries []int64, d DDL) time.Duration {
	if len(entries) == 0 || rows == 0 {
		return 0
	}
	perRow := 0.0
	for _, b := range entries {
		perRow += entryNs + entryByteNs*float64(b)
	}
	speedup := math.Pow(float64(max(min(d.Threads, d.ReadThreads), 1)), 0.4)
	return time.Duration(float64(rows) * perRow / speedup)
}

func round(d time.Duration) time.Duration {
	if d < time.Second {
		return d.Round(10 * time.Millisecond)
	}
	return d.Round(100 * time.Millisecond)
}

// newIndexes returns the estimated entry size (key + primary key bytes) of
// every secondary index the ALTER builds.
func newIndexes(t *schema.Table, a *ddl.Alter) []int64 {
	pk := keyBytes(t, t.PrimaryKey)
	var out []int64
	for _, spec := range a.Specs {
		switch spec.Tp {
		case ast.AlterTableAddConstraint:
			if !isIndex(spec.Constraint.Tp) {
				continue
			}
			var cols []string
			for _, k := range spec.Constraint.Keys {
				if k.Column != nil {
					cols = append(cols, k.Column.Name.O)
				}
			}
			out = append(out, pk+keyBytes(t, cols))
		case ast.AlterTableAddColumns:
			for _, col := range spec.NewColumns {
				if colOpt(col, ast.ColumnOptionUniqKey) {
					out = append(out, pk+8)
				}
			}
		}
	}
	return out
}

func isIndex(tp ast.ConstraintType) bool {
	switch tp {
	case ast.ConstraintKey, ast.ConstraintIndex, ast.ConstraintUniq, ast.ConstraintUniqKey, ast.ConstraintUniqIndex, ast.ConstraintFulltext:
		return true
	}
	return false
}

func isUnique(tp ast.ConstraintType) bool {
	return tp == ast.ConstraintUniq || tp == ast.ConstraintUniqKey || tp == ast.ConstraintUniqIndex
}

func secondaryEntries(t *schema.Table) []int64 {
	pk := keyBytes(t, t.PrimaryKey)
	var out []int64
	for _, ix := range t.Indexes {
		out = append(out, pk+keyBytes(t, ix.Columns))
	}
	return out
}

// keyBytes estimates the stored bytes of a key over cols.
func keyBytes(t *schema.Table, cols []string) int64 {
	var n int64
	for _, name := range cols {
		c, ok := t.Column(name)
		if !ok {
			n += 8
			continue
		}
		n += columnBytes(c)
	}
	return n
}

func columnBytes(c schema.Column) int64 {
	switch c.DataType {
	case "tinyint", "year":
		return 1
	case "smallint":
		return 2
	case "mediumint", "date", "time":
		return 3
	case "int", "float", "timestamp":
		return 4
	case "bigint", "double", "datetime":
		return 8
	case "decimal":
		return 8
	case "char", "varchar", "binary", "varbinary":
		return min(c.MaxLength, 767) + 1
	}
	return 32
}

// Text renders the plan for a person.
func (p *Plan) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "table:    %s\nalter:    %s\npath:     %s\nwhy:      %s\nblocks:   %s\n", p.Table, p.Alter, p.Path, p.Why, p.Blocks)
	est := fmt.Sprintf("about %s", round(time.Duration(p.Estimate.Seconds*float64(time.Second))))
	if p.Estimate.SpaceBytes > 0 {
		est += ", " + bytes(p.Estimate.SpaceBytes) + " of disk"
	}
	if p.Estimate.DDLMemory > 0 {
		est += ", at most " + bytes(p.Estimate.DDLMemory) + " of index-build memory"
	}
	fmt.Fprintf(&b, "estimate: %s (%s; rough)\n", est, p.Estimate.Basis)
	b.WriteString("clauses:\n")
	for _, s := range p.Steps {
		fmt.Fprintf(&b, "  - %s: %s (%s)\n", s.Clause, s.Algorithm, s.Why)
	}
	if why, refused := strings.CutPrefix(p.RowKey, "refused: "); refused {
		fmt.Fprintf(&b, "rows:     the primary key changes, and sluice will refuse the copy: %s\n", why)
	} else if p.RowKey != "" {
		fmt.Fprintf(&b, "rows:     the primary key changes; the original's rows are found in the new table %s\n", p.RowKey)
	}
	if why, refused := strings.CutPrefix(p.Conversions, "refused: "); refused {
		fmt.Fprintf(&b, "types:    sluice will refuse the copy: %s\n", why)
	}
	if p.Group != "" {
		fmt.Fprintf(&b, "with the others: %s\n", p.Group)
	}
	if p.Capture != "" {
		fmt.Fprintf(&b, "changes captured: %s\n", p.Capture)
	}
	if p.Triggers != "" {
		fmt.Fprintf(&b, "triggers: %s\n", p.Triggers)
	}
	if p.ForeignKeys != "" {
		fmt.Fprintf(&b, "foreign keys: %s\n", p.ForeignKeys)
	}
	b.WriteString("session settings:\n")
	for _, s := range p.Settings {
		fmt.Fprintf(&b, "  %s = %s\n", s.Name, s.Value)
	}
	if len(p.Risks) == 0 {
		b.WriteString("risks: none\n")
	} else {
		b.WriteString("risks:\n")
		for _, r := range p.Risks {
			fmt.Fprintf(&b, "  - %s: %s\n", r.Kind, r.Describe())
		}
		fmt.Fprintf(&b, "to run it: sluice migrate ... --approve=%s\n", strings.Join(Kinds(p.Risks), ","))
	}
	if p.LockGuardBlind != "" {
		fmt.Fprintf(&b, "lock guard: %s\n", p.LockGuardBlind)
	}
	return b.String()
}

func bytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20))
	default:
		return fmt.Sprintf("%d KiB", max(n>>10, 1))
	}
}
