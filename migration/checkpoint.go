package migration

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/sluicedb/sluice/internal/binlog"
	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/ranges"
	"github.com/sluicedb/sluice/internal/rowkey"
	"github.com/sluicedb/sluice/internal/schema"
)

// A checkpoint is what a copy-path run records beside the shadow, in the
// one-row table _T_ckpt, so that the same command run again after a crash,
// a lost connection or a cut-over that could not get its lock resumes
// instead of starting over:
//
//   - the key intervals still to copy (each lane's watermark: everything
//     below it is in the shadow);
//   - a binlog position from which reading the stream again captures every
//     change not yet applied to the shadow's copied rows;
//   - what the work is: the ALTER, the hashes of the original's and the
//     shadow's definitions, the server, sluice's version.
//
// The pair (intervals, position) holds this invariant: every row of the
// shadow outside the intervals reflects every change committed before the
// position. Rows inside the intervals are deleted from the shadow and copied
// again on resume; changes from the position on are read again and applied
// (re-reading each key from the original, which is idempotent).

// checkpointFormat changes when the checkpoint's meaning does.
const checkpointFormat = 1

type checkpoint struct {
	Format   int    `json:"format"`
	Version  string `json:"version"`
	Alter    string `json:"alter"`
	Original string `json:"original"` // hash of the original's definition
	Shadow   string `json:"shadow"`   // hash of the shadow's, without secondary indexes
	// Indexes are the secondary indexes the new table ends with (the
	// shadow has them once built).
	Indexes []schema.KeyDef `json:"indexes"`
	Server  string          `json:"server"` // dbconn.ServerIdentity: server_uuid on MySQL
	File    string          `json:"file"`
	Pos     uint32          `json:"pos"`
	Copied  bool            `json:"copied"` // the copy is done
	Todo    []todoSpan      `json:"todo"`   // key intervals still to copy
	Rows    int64           `json:"rows"`   // rows copied outside Todo
	// Artifacts are the other tables the run created (postponed cut-over,
	// heartbeat), dropped when the work ends.
	Artifacts []string `json:"artifacts"`
	// Sentry is the table a MariaDB cut-over creates under the old table's
	// name (sentry.go); dropped by the next run if it is still a sentry.
	Sentry string `json:"sentry,omitempty"`
	// OldChild is the name the original takes at the swap when it has
	// foreign keys: a run that dies before taking them off it leaves that
	// to the next (foreignkeys.go).
	OldChild string `json:"old_child,omitempty"`
	// Capture is "triggers" for a run that captures changes by triggers
	// (capture.go): it records no position; its queue, which the triggers
	// go on filling after a death, holds every change not yet applied.
	// TableID and OrigDef are the original's InnoDB id and definition hash
	// when the triggers were made; a checkpoint without them (the run died
	// making its triggers) does not resume. CaptureStamp sums up the
	// triggers and the queue as made (stampOf).
	Capture      string `json:"capture,omitempty"`
	TableID      uint64 `json:"table_id,omitempty"`
	OrigDef      string `json:"orig_def,omitempty"`
	CaptureStamp string `json:"capture_stamp,omitempty"`
	// Rebuilt: a logged OPTIMIZE or REPAIR gave the original another InnoDB
	// id since the binlog capture started (intact.go).
	Rebuilt bool      `json:"rebuilt,omitempty"`
	At      time.Time `json:"at"`
	// Run is the RunID of the run that wrote it: a statement of that run
	// may still run on the server after sluice died (resume.go ends them).
	Run string `json:"run"`
}

// todoSpan is a key interval (Lo, Hi] to copy; a missing bound is open.
// Bounds are rowkey.Key.Encode in hex.
type todoSpan struct {
	Lo *string `json:"lo,omitempty"`
	Hi *string `json:"hi,omitempty"`
}

func encodeBound(k rowkey.Key) *string {
	if k == nil {
		return nil
	}
	s := hex.EncodeToString([]byte(k.Encode()))
	return &s
}

func decodeBound(s *string) (rowkey.Key, error) {
	if s == nil {
		return nil, nil
	}
	b, err := hex.DecodeString(*s)
	if err != nil {
		return nil, err
	}
	return rowkey.DecodeKey(string(b))
}

// todoSpans turns intervals into their stored form.
func todoSpans(spans []ranges.Span) []todoSpan {
	out := make([]todoSpan, len(spans))
	for i, s := range spans {
		out[i] = todoSpan{Lo: encodeBound(s.Lo), Hi: encodeBound(s.Hi)}
	}
	return out
}

// spans returns the intervals still to copy.
func (cp *checkpoint) spans() ([]ranges.Span, error) {
	out := make([]ranges.Span, len(cp.Todo))
	for i, t := range cp.Todo {
		lo, err := decodeBound(t.Lo)
		if err != nil {
			return nil, fmt.Errorf("checkpoint interval %d: %w", i, err)
		}
		hi, err := decodeBound(t.Hi)
		if err != nil {
			return nil, fmt.Errorf("checkpoint interval %d: %w", i, err)
		}
		out[i] = ranges.Span{Lo: lo, Hi: hi}
	}
	return out, nil
}

// checkpointComment begins the comment of every checkpoint table.
const checkpointComment = "sluice checkpoint"

// errNotCheckpoint: the checkpoint's name is a table sluice did not make.
var errNotCheckpoint = errors.New("is a table sluice did not make")

// createCheckpointTable creates _T_ckpt; one that exists is an error.
func (r *Runner) createCheckpointTable(ctx context.Context) error {
	comment := fmt.Sprintf(checkpointComment+" of the migration of %s: run the same sluice migrate again to resume, or with --restart", r.orig.Name)
	err := r.execToEnd(ctx, "CREATE TABLE "+dbconn.QuoteTable(r.cfg.Database, r.names.Checkpoint)+
		" (id TINYINT UNSIGNED NOT NULL PRIMARY KEY, body LONGTEXT NOT NULL, at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)) COMMENT="+
		dbconn.QuoteString(comment))
	if err != nil {
		return fmt.Errorf("create the checkpoint table %s: %w", r.names.Checkpoint, err)
	}
	r.ckptCreated = true
	return nil
}

// saveCheckpoint writes cp.
func (r *Runner) saveCheckpoint(ctx context.Context, cp *checkpoint) error {
	cp.At, cp.Run = time.Now().UTC(), r.cfg.Conn.RunID
	cp.Rebuilt = cp.Rebuilt || r.rebuilt()
	body, err := json.Marshal(cp)
	if err != nil {
		return err
	}
	_, err = r.db.ExecContext(ctx, "REPLACE INTO "+dbconn.QuoteTable(r.cfg.Database, r.names.Checkpoint)+" (id, body) VALUES (1, ?)", string(body))
	if err != nil {
		return fmt.Errorf("write the checkpoint: %w", err)
	}
	return nil
}

// loadCheckpoint reads the checkpoint; found is false when its table does
// not exist, cp is nil when the table holds none.
func loadCheckpoint(ctx context.Context, db *sql.DB, database, table string) (cp *checkpoint, found bool, err error) {
	// A table of that name that sluice did not make (its comment says so)
	// is the user's: never read as a checkpoint, never dropped.
	var comment string
	err = db.QueryRowContext(ctx, `SELECT TABLE_COMMENT FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?`,
		database, table).Scan(&comment)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, false, nil
	case err != nil:
		return nil, true, fmt.Errorf("read the checkpoint %s: %w", table, err)
	case !strings.HasPrefix(comment, checkpointComment):
		return nil, true, fmt.Errorf("%s.%s, the name of sluice's checkpoint for this table, %w (its comment does not say so), so sluice neither reads nor drops it, --restart or not: rename it", database, table, errNotCheckpoint)
	}
	var body string
	err = db.QueryRowContext(ctx, "SELECT body FROM "+dbconn.QuoteTable(database, table)+" WHERE id = 1").Scan(&body)
	switch {
	case dbconn.ErrorNumber(err) == 1146:
		return nil, false, nil
	case errors.Is(err, sql.ErrNoRows):
		return nil, true, nil
	case err != nil:
		return nil, true, fmt.Errorf("read the checkpoint %s: %w", table, err)
	}
	cp = &checkpoint{}
	if err := json.Unmarshal([]byte(body), cp); err != nil {
		return nil, true, fmt.Errorf("the checkpoint in %s cannot be read (%v): run with --restart to start over", table, err)
	}
	return cp, true, nil
}

var autoIncOption = regexp.MustCompile(` AUTO_INCREMENT=[0-9]+`)

// definitionHash hashes a table's definition as SHOW CREATE TABLE gives it,
// without its name and its AUTO_INCREMENT counter, and without its
// secondary indexes and foreign keys when stripIndexes is set (the shadow
// gains them during the run).
func definitionHash(ctx context.Context, db *sql.DB, database, table string, stripIndexes bool) (string, error) {
	ddl, err := schema.ShowCreate(ctx, db, database, table)
	if err != nil {
		return "", err
	}
	return hashDefinition(ddl, stripIndexes), nil
}

func hashDefinition(ddl string, stripIndexes bool) string {
	skip := map[string]bool{}
	if stripIndexes {
		for _, k := range schema.SecondaryKeys(ddl) {
			skip[k.Def] = true
		}
	}
	var keep []string
	for i, line := range strings.Split(autoIncOption.ReplaceAllString(ddl, ""), "\n") {
		l := strings.TrimSuffix(strings.TrimSpace(line), ",")
		switch {
		case i == 0:
			l = "CREATE TABLE" // the name differs once the shadow is swapped in
		case skip[l]:
			continue
		case stripIndexes && strings.HasPrefix(l, "CONSTRAINT ") && strings.Contains(l, " FOREIGN KEY "):
			continue // added at the cut-over (foreignkeys.go)
		}
		keep = append(keep, l)
	}
	sum := sha256.Sum256([]byte(strings.Join(keep, "\n")))
	return hex.EncodeToString(sum[:])
}

// written reports whether the checkpoint was written: with its first
// binlog position, or at once by a run that captures by triggers.
func (cp *checkpoint) written() bool { return cp.File != "" || cp.Capture != "" }

// resumable reports whether a run may take the checkpoint up: it has a
// binlog position, or the capture triggers were all made and what they were
// made on recorded.
func (cp *checkpoint) resumable() bool {
	if cp.Capture == CaptureTriggers {
		return cp.TableID != 0 && cp.OrigDef != "" && cp.CaptureStamp != ""
	}
	return cp.File != ""
}

// position returns the checkpoint's binlog position.
func (cp *checkpoint) position() binlog.Position {
	return binlog.Position{File: cp.File, Pos: cp.Pos}
}

// startCheckpoint prepares the run's checkpoint once the shadow is made (its
// first write, with the binlog position, is in startCapture).
func (r *Runner) startCheckpoint(ctx context.Context) error {
	orig, err := definitionHash(ctx, r.db, r.cfg.Database, r.cfg.Table, false)
	if err != nil {
		return err
	}
	ddl, err := schema.ShowCreate(ctx, r.db, r.cfg.Database, r.names.Shadow)
	if err != nil {
		return err
	}
	uuid, err := dbconn.ServerIdentity(ctx, r.db)
	if err != nil {
		return err
	}
	r.ckpt = &checkpoint{Format: checkpointFormat, Version: r.cfg.Version, Alter: r.cfg.Alter, Original: orig,
		Shadow: hashDefinition(ddl, true), Indexes: append(schema.SecondaryKeys(ddl), r.deferred...), Server: uuid}
	if r.postponeCreated {
		r.ckpt.Artifacts = append(r.ckpt.Artifacts, r.names.Postpone)
	}
	return nil
}

// addArtifact records a table the run is about to create, so that a later
// run can drop it.
func (r *Runner) addArtifact(ctx context.Context, name string) error {
	r.ckptMu.Lock()
	defer r.ckptMu.Unlock()
	if r.ckpt == nil || slices.Contains(r.ckpt.Artifacts, name) {
		return nil
	}
	r.ckpt.Artifacts = append(r.ckpt.Artifacts, name)
	if !r.ckpt.written() {
		return nil // not written yet: the first write carries it
	}
	return r.saveCheckpoint(ctx, r.ckpt)
}

// noteOldChild records in the checkpoint, before the swap, the name the
// original takes, when its foreign keys must be taken off it afterwards.
func (r *Runner) noteOldChild(ctx context.Context) error {
	r.ckptMu.Lock()
	defer r.ckptMu.Unlock()
	if r.ckpt == nil || len(r.orig.ForeignKeys) == 0 || r.ckpt.OldChild == r.names.Old {
		return nil
	}
	r.ckpt.OldChild = r.names.Old
	return r.saveCheckpoint(ctx, r.ckpt)
}

// checkpointLoop records the run's progress every CheckpointInterval until
// ctx is done or the swap begins.
func (r *Runner) checkpointLoop(ctx context.Context) {
	t := time.NewTicker(r.cfg.CheckpointInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if r.settling() {
			return
		}
		if err := r.writeCheckpoint(ctx); err != nil && ctx.Err() == nil {
			r.log.Warn("could not record progress; trying again at the next checkpoint", "error", err)
		}
	}
}

// writeCheckpoint records the copy's intervals still to do and the earliest
// binlog position a resumed run must read from (see Scheduler.Progress).
func (r *Runner) writeCheckpoint(ctx context.Context) error {
	// The stream's position first: every key marked up to it is in the
	// scheduler when Progress looks. Capture by triggers has none to
	// record: the queue keeps every change until it is applied (trimQueue).
	var now binlog.Position
	if r.streamer != nil {
		now = r.streamer.Position()
	}
	p := r.sched.Progress()
	r.ckptMu.Lock()
	defer r.ckptMu.Unlock()
	cp := *r.ckpt
	pos := now
	if r.streamer != nil && p.HasSince && p.Since.Compare(now) < 0 {
		pos = p.Since
	}
	cp.File, cp.Pos, cp.Copied, cp.Todo = pos.File, pos.Pos, p.Copied, todoSpans(p.Todo)
	if p.Copied {
		cp.Todo = nil
	}
	if c := r.copier.Load(); c != nil {
		cp.Rows = r.res.ResumedRows + c.Rows()
	}
	if err := r.saveCheckpoint(ctx, &cp); err != nil {
		return err
	}
	*r.ckpt = cp
	return nil
}

// finalCheckpoint records the progress of a run that stops and keeps its
// work; the apply workers have stopped or are stopping, so it is as late as
// the last applied change.
func (r *Runner) finalCheckpoint(ctx context.Context) error {
	if r.streamer == nil && r.poller == nil || r.sched == nil {
		return nil
	}
	return r.writeCheckpoint(ctx)
}
