// Package migration is sluice's library API: it changes a table's schema
// online by building a shadow table with the ALTER applied, copying rows into
// it in parallel while the binlog's changes are applied in parallel, checking
// both tables match, and swapping them under a short bounded lock.
//
//	r, err := migration.New(cfg)
//	res, err := r.Run(ctx)
//
// Run reads as the list of its phases: preflight, shadow, capture, copy,
// catch-up, checksum, cut-over, cleanup. Cancelling ctx at any moment leaves
// the original table as it was and no lock held; the shadow table is dropped.
package migration

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/plan"
	"github.com/sluicedb/sluice/internal/replica"
	"github.com/sluicedb/sluice/internal/throttle"
)

// Config is one migration.
type Config struct {
	Conn     dbconn.Config
	Database string
	Table    string
	Alter    string

	// CopyWorkers copy row ranges at once (default 4: on a busy server more
	// workers get the copy a fairer share of the CPU; idle it costs nothing).
	CopyWorkers int
	// ApplyWorkers apply binlog changes at once (default 4).
	ApplyWorkers int
	// ChecksumWorkers compare ranges at once (default 4). They only read, in
	// consistent snapshots, and take no lock the application waits for.
	ChecksumWorkers int
	// ChunkTime is the target duration of one copy statement (0: the copy's
	// chunk.DefaultTarget).
	ChunkTime time.Duration
	// Method picks the path: "auto" (default: the planner's choice), or
	// "instant", "inplace" or "copy" to force one. A forced instant or
	// in-place path the server refuses is an error; an automatic one falls
	// back to the copy.
	Method string
	// Approve lists the kinds of risk the operator accepts (drop-column,
	// rename-column, lossy-type, not-null, unique-key): an ALTER with another
	// risk is refused before anything runs.
	Approve []string
	// Replicas declares that replicas read this server's binlog, even when
	// none is connected now. With replicas, an in-place index build longer
	// than MaxInplace (default 30s) takes the copy path instead.
	Replicas   bool
	MaxInplace time.Duration
	// LockWait bounds each wait for a metadata lock (default 1s): of an
	// INSTANT or in-place ALTER, and of the copy path's LOCK TABLES (checksum
	// snapshot, unique-index settle, cut-over). It is the longest any
	// application query queues behind sluice's request. Attempts are retried
	// with backoff and jitter until LockDeadline (default 5m).
	LockWait     time.Duration
	LockDeadline time.Duration
	// CutoverLockTimeout, if set, is the budget of the copy path's table
	// locks instead of LockWait.
	CutoverLockTimeout time.Duration
	// MaxQueued ends a lock attempt early once more than this many queries
	// queue behind it (0: only LockWait ends it).
	MaxQueued int
	// KillAfter, if positive, kills a session that has blocked sluice's
	// lock request that long, unless it holds LOCK TABLES or its transaction
	// modified more than KillMaxRows rows (default 10000). 0 never kills.
	KillAfter   time.Duration
	KillMaxRows int64
	// PostponeCutover keeps the shadow in sync after the checksum, applying
	// changes, until the table _T_cutover that sluice creates is dropped
	// (TriggerCutover), or cancelled (CancelCutover).
	PostponeCutover bool
	// MaxLoad pauses the copy between chunks while a global status variable
	// reaches its ceiling: "Threads_running=25[,Name=N...]" ("": never).
	// CriticalLoad, in the same form, stops the migration (the original
	// untouched, the shadow dropped) when reached on two checks in a row.
	// The apply goes on while the copy pauses.
	MaxLoad, CriticalLoad string
	// ThrottleFlagFile pauses the copy while that file exists;
	// PanicFlagFile stops the migration once that file exists (it must not
	// exist at the start).
	ThrottleFlagFile, PanicFlagFile string
	// ReplicaDiscovery finds the replicas with SHOW REPLICAS, from the
	// primary down; ReplicaAddrs (host:port) are replicas named by the
	// operator, reached with Conn's user and password. While the slowest
	// replica lags more than MaxLag (default 1.5s), or cannot be measured,
	// the copy pauses and the cut-over does not start.
	ReplicaDiscovery bool
	ReplicaAddrs     []string
	MaxLag           time.Duration
	// Restart drops the shadow and checkpoint a previous run of this ALTER
	// left (see checkpoint.go) and starts over, instead of resuming.
	Restart bool
	// CheckpointInterval is how often the copy path records its progress
	// (default 10s): a resumed run copies at most about that much again.
	CheckpointInterval time.Duration
	// Version is sluice's version, recorded in the checkpoint: a run of
	// another version does not resume it.
	Version string
	// KeepIndexes keeps the shadow's plain secondary indexes during the copy
	// instead of building them afterwards; DeferIndexes builds them afterwards
	// even with replicas watched. With neither, they are kept while replicas
	// are watched (see keepPlainIndexes) and built afterwards otherwise.
	// Unique indexes are always built after the copy.
	KeepIndexes, DeferIndexes bool
	// DDLBufferSize and DDLThreads override the planner's choice of
	// innodb_ddl_buffer_size and innodb_ddl_threads (and
	// innodb_parallel_read_threads) for index builds; 0 leaves it to the
	// planner, which sizes them from the server's processors, the sort and
	// the free memory.
	DDLBufferSize int64
	DDLThreads    int
	// DropOld drops the original table after the swap instead of keeping it.
	DropOld bool
	// CarryTriggers lets the copy path give the new table copies of the
	// table's triggers under the other name (schema.Toggled): a trigger's
	// name is unique in its database (triggers.go). Without it a table with
	// triggers is refused there.
	CarryTriggers bool
	// Capture is where the copy path learns of the application's changes:
	// "binlog" (the default) reads the binary log as a replica would;
	// "triggers" has triggers on the original record the changed keys in a
	// queue table (capture.go), for a server whose binlog sluice may not
	// read.
	Capture string
	// ProgressInterval is how often progress is logged (default 5s).
	ProgressInterval time.Duration
	// Logger receives progress and phase messages (default: discarded).
	Logger *slog.Logger
	// OnPhase, if set, is called synchronously as each phase starts, with its
	// name (preflight, shadow, capture, copy, index, catch-up, checksum,
	// cut-over).
	OnPhase func(name string)
	// Observe, if set, is called by New with the run's Status, which may
	// then be called at any time from any goroutine (the metrics endpoint).
	Observe func(status func() Status)
	// Attach, if set, is called by New with the run, before it starts: the
	// control socket reaches the run's operator methods (operator.go)
	// through it. An error stops New.
	Attach func(r *Runner) error
}

// ErrConfig wraps every configuration error.
var ErrConfig = errors.New("invalid configuration")

// The ways to capture changes (Config.Capture).
const (
	CaptureBinlog   = "binlog"
	CaptureTriggers = "triggers"
)

func (c *Config) validate() error {
	if err := c.Conn.Validate(); err != nil {
		return fmt.Errorf("%w: %v", ErrConfig, err)
	}
	switch {
	case c.KeepIndexes && c.DeferIndexes:
		return fmt.Errorf("%w: --keep-indexes and --defer-indexes contradict each other: pass one of them", ErrConfig)
	case c.Database == "":
		return fmt.Errorf("%w: no database given: pass --database", ErrConfig)
	case c.Table == "":
		return fmt.Errorf("%w: no table given: pass --table", ErrConfig)
	case c.Alter == "":
		return fmt.Errorf("%w: no ALTER given: pass --alter \"ADD COLUMN ...\"", ErrConfig)
	case c.CopyWorkers < 0 || c.CopyWorkers > 64:
		return fmt.Errorf("%w: copy workers %d out of range 1..64", ErrConfig, c.CopyWorkers)
	case c.ApplyWorkers < 0 || c.ApplyWorkers > 64:
		return fmt.Errorf("%w: apply workers %d out of range 1..64", ErrConfig, c.ApplyWorkers)
	case c.ChecksumWorkers < 0 || c.ChecksumWorkers > 64:
		return fmt.Errorf("%w: checksum workers %d out of range 1..64", ErrConfig, c.ChecksumWorkers)
	}
	if c.CopyWorkers == 0 {
		c.CopyWorkers = 4
	}
	if c.ApplyWorkers == 0 {
		c.ApplyWorkers = 4
	}
	if c.ChecksumWorkers <= 0 {
		c.ChecksumWorkers = 4
	}
	switch c.Capture {
	case "":
		c.Capture = CaptureBinlog
	case CaptureBinlog, CaptureTriggers:
	default:
		return fmt.Errorf("%w: capture %q: use binlog or triggers", ErrConfig, c.Capture)
	}
	switch c.Method {
	case "":
		c.Method = "auto"
	case "auto", "instant", "inplace", "copy":
	default:
		return fmt.Errorf("%w: method %q: use auto, instant, inplace or copy", ErrConfig, c.Method)
	}
	if c.DDLBufferSize < 0 || c.DDLThreads < 0 {
		return fmt.Errorf("%w: DDL buffer size and threads must not be negative", ErrConfig)
	}
	if c.MaxInplace <= 0 {
		c.MaxInplace = 30 * time.Second
	}
	if c.LockWait <= 0 {
		c.LockWait = time.Second
	}
	if c.LockDeadline <= 0 {
		c.LockDeadline = 5 * time.Minute
	}
	if c.MaxQueued < 0 || c.KillAfter < 0 || c.KillMaxRows < 0 {
		return fmt.Errorf("%w: --max-queued, --kill-blockers and --kill-max-rows must not be negative", ErrConfig)
	}
	for _, l := range []struct{ flag, spec string }{{"--max-load", c.MaxLoad}, {"--critical-load", c.CriticalLoad}} {
		if _, err := throttle.ParseLimits(l.spec); err != nil {
			return fmt.Errorf("%w: %s: %v", ErrConfig, l.flag, err)
		}
	}
	if c.KillMaxRows == 0 {
		c.KillMaxRows = 10000
	}
	if c.CheckpointInterval <= 0 {
		c.CheckpointInterval = 10 * time.Second
	}
	if c.Version == "" {
		c.Version = "dev"
	}
	if c.MaxLag < 0 {
		return fmt.Errorf("%w: --max-lag must not be negative", ErrConfig)
	}
	if c.MaxLag == 0 {
		c.MaxLag = 1500 * time.Millisecond
	}
	for _, a := range c.ReplicaAddrs {
		if _, _, err := replica.SplitHostPort(a); err != nil {
			return fmt.Errorf("%w: %v", ErrConfig, err)
		}
	}
	if c.ProgressInterval <= 0 {
		c.ProgressInterval = 5 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return nil
}

// Result describes a finished migration.
type Result struct {
	RowsCopied  int64
	KeysApplied int64
	// CopyLanes is how many lanes the copy cut the key into (see
	// ranges.Cutter.Lanes).
	CopyLanes int
	// SlowestChunk is the longest one copy statement took, SlowestChunkRows
	// its rows, ChunkTarget the chunk time aimed at.
	SlowestChunk, ChunkTarget time.Duration
	SlowestChunkRows          int64
	// KeysAppliedInCopy were applied while the copy ran (a single integer
	// key).
	KeysAppliedInCopy int64
	ChecksumRows      int64
	ChecksumChunks    int64
	// ChecksumSkipped names new-table columns whose type change makes a
	// byte comparison meaningless; they were not compared.
	ChecksumSkipped []string
	// ChecksumWithIndex: the checksum ran beside the secondary-index build.
	ChecksumWithIndex bool
	OldTable          string // the original table's name after the swap ("" if dropped)
	Swapped           bool   // the new table took the original's name
	// ChangedRowsVerified counts the rows changed after the checksum that the
	// final guard found equal in both tables (before or under the cut-over's
	// lock); a row changed again is counted again.
	ChangedRowsVerified int64
	// RenamedChecks are the CHECK constraints the user named on the original;
	// the new table has them under generated names (<table>_chk_N).
	RenamedChecks []string
	// RenamedForeignKeys are the foreign keys the user named on the
	// original, as "name -> new name" (foreignkeys.go).
	RenamedForeignKeys []string
	// LockGuardBlind says why the metadata-lock guard could not see the
	// table's lock holders and queue on this server ("" when it could).
	LockGuardBlind string
	// AutoIncrement is the AUTO_INCREMENT counter carried over to the new
	// table at cut-over (0 when the new table's own was already as high).
	AutoIncrement uint64
	// Path is the path taken: instant, in-place or copy.
	Path string
	// DDL are the index-build settings used (nil when nothing was built);
	// DDLPeakBytes is the most memory InnoDB's DDL used while sluice's build
	// ran (performance_schema memory/innodb/ddl), 0 when unknown.
	DDL          *plan.DDL
	DDLPeakBytes int64
	// LockAttempts counts the metadata-lock attempts of an instant or in-place
	// ALTER.
	LockAttempts int
	CutoverLock  time.Duration
	// CutoverDrain and CutoverVerify are the parts of CutoverLock spent
	// applying the last changes and comparing the rows changed since the
	// checksum (the final guard).
	CutoverDrain, CutoverVerify time.Duration
	// Resumed says the run took up a previous run's work from its
	// checkpoint; ResumedRows were already copied then. AlreadyDone: that
	// run had swapped the tables, and this one only cleaned up after it.
	Resumed     bool
	ResumedRows int64
	// Recopied counts the rows the earlier run had copied after its last
	// checkpoint, which this run deleted and copied again.
	Recopied    int64
	AlreadyDone bool
	// Kept names the shadow and checkpoint left for a later run to resume
	// when the run failed in a way a later run can get past ("" otherwise).
	Kept string
	// Throttled is how long the copy paused for --max-load, --critical-load,
	// the throttle flag file or replica lag.
	Throttled time.Duration
	// Replicas are the replicas watched for lag; ReplicaLagMax is the
	// highest lag measured on any of them during the run, ReplicaPaused how
	// long the copy paused for lag (part of Throttled), CutoverLagWait how
	// long the cut-over waited for the replicas.
	Replicas       []string
	ReplicaLagMax  time.Duration
	ReplicaPaused  time.Duration
	CutoverLagWait time.Duration
	Phases         []PhaseTime
	Total          time.Duration
}

// PhaseTime is how long one phase took.
type PhaseTime struct {
	Name     string
	Duration time.Duration
}
