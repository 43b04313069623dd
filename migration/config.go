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
	"net"
	"runtime"
	"time"

	"github.com/sluicedb/sluice/internal/dbconn"
)

// Config is one migration.
type Config struct {
	Conn     dbconn.Config
	Database string
	Table    string
	Alter    string

	// CopyWorkers copy row ranges at once (default 2).
	CopyWorkers int
	// ApplyWorkers apply binlog changes at once (default 4).
	ApplyWorkers int
	// ChecksumWorkers compare ranges at once (default 4). They only read, in
	// consistent snapshots, and take no lock the application waits for.
	ChecksumWorkers int
	// ChunkTime is the target duration of one copy statement (default 100ms).
	ChunkTime time.Duration
	// CutoverLockTimeout bounds each attempt to lock the tables (default 2s):
	// no application query waits on sluice longer than that.
	CutoverLockTimeout time.Duration
	// CutoverAttempts is how many lock attempts to make (default 10).
	CutoverAttempts int
	// KeepIndexes keeps the shadow's secondary indexes during the copy instead
	// of building them afterwards.
	KeepIndexes bool
	// DDLBufferSize and DDLThreads tune the deferred index build
	// (innodb_ddl_buffer_size, innodb_ddl_threads). DDLBufferSize defaults to
	// 256 MiB; DDLThreads to min(4, CPUs) for a server on this host (a loopback
	// address), else 4, InnoDB's own default.
	DDLBufferSize int64
	DDLThreads    int
	// DropOld drops the original table after the swap instead of keeping it.
	DropOld bool
	// ProgressInterval is how often progress is logged (default 5s).
	ProgressInterval time.Duration
	// Logger receives progress and phase messages (default: discarded).
	Logger *slog.Logger
	// OnPhase, if set, is called synchronously as each phase starts, with its
	// name (preflight, shadow, capture, copy, index, catch-up, checksum,
	// cut-over).
	OnPhase func(name string)
}

// ErrConfig wraps every configuration error.
var ErrConfig = errors.New("invalid configuration")

func (c *Config) validate() error {
	if err := c.Conn.Validate(); err != nil {
		return fmt.Errorf("%w: %v", ErrConfig, err)
	}
	switch {
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
		c.CopyWorkers = 2
	}
	if c.ApplyWorkers == 0 {
		c.ApplyWorkers = 4
	}
	if c.ChecksumWorkers <= 0 {
		c.ChecksumWorkers = 4
	}
	if c.ChunkTime <= 0 {
		c.ChunkTime = 100 * time.Millisecond
	}
	if c.CutoverLockTimeout <= 0 {
		c.CutoverLockTimeout = 2 * time.Second
	}
	if c.CutoverAttempts <= 0 {
		c.CutoverAttempts = 10
	}
	if c.DDLBufferSize <= 0 {
		c.DDLBufferSize = 256 << 20
	}
	if c.DDLThreads <= 0 {
		c.DDLThreads = defaultDDLThreads(c.Conn.Host, runtime.NumCPU())
	}
	if c.ProgressInterval <= 0 {
		c.ProgressInterval = 5 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return nil
}

// defaultDDLThreads picks innodb_ddl_threads: on a small local server more
// threads than cores only slow the index build down.
func defaultDDLThreads(host string, cpus int) int {
	if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
		return max(1, min(4, cpus))
	}
	return 4
}

// Result describes a finished migration.
type Result struct {
	RowsCopied     int64
	KeysApplied    int64
	ChecksumRows   int64
	ChecksumChunks int64
	// ChecksumSkipped names new-table columns whose type change makes a
	// byte comparison meaningless; they were not compared.
	ChecksumSkipped []string
	OldTable        string // the original table's name after the swap ("" if dropped)
	CutoverLock     time.Duration
	Phases          []PhaseTime
	Total           time.Duration
}

// PhaseTime is how long one phase took.
type PhaseTime struct {
	Name     string
	Duration time.Duration
}
