package migration

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluicedb/sluice/internal/capture"
	"github.com/sluicedb/sluice/internal/dbconn"
)

// The original as the binlog capture reads it. A TRUNCATE, an ALTER or a
// RENAME run in a session with sql_log_bin=0 writes nothing to the binlog:
// the capture cannot see it, and the swap would undo it (the new table holds
// the rows and the definition as they were). So the original's definition
// (SHOW CREATE TABLE) and InnoDB id are read when the capture starts, and
// read again under the cut-over's lock, where nothing can change them any
// more. The id is compared only where both reads found it (a plain ASCII
// name, not partitioned, and on MySQL an account with PROCESS): otherwise a
// TRUNCATE, which keeps the definition, goes unseen. A logged OPTIMIZE or
// REPAIR of the table gives it another id too: after one (this run's
// streamer, or an earlier run's, noted in the checkpoint) the id is not
// compared. (Row changes made with sql_log_bin=0 are not seen either: the
// README says so.)

// errOriginalUnlogged: the original changed without the binlog showing it.
var errOriginalUnlogged = errors.New("the table changed in a way the binlog does not show")

// recordOriginal notes the original's InnoDB id and definition for
// originalIntact, once the binlog is read: a change after that is seen in
// it, one before by recheckOriginal. A resumed run takes the earlier run's.
func (r *Runner) recordOriginal(ctx context.Context) error {
	if r.resume != nil && r.resume.OrigDef != "" {
		r.tableID, r.origDef = r.resume.TableID, r.resume.OrigDef
		return nil
	}
	var err error
	if r.tableID, err = r.identityOf(ctx, r.db); err != nil {
		return err
	}
	r.origDef, err = r.showCreateHash(ctx, r.db)
	return err
}

// identityOf is the original's InnoDB id, or 0 where it has no single one
// (partitioned), its name is stored encoded, or the account may not read it
// (MySQL without PROCESS).
func (r *Runner) identityOf(ctx context.Context, q dbconn.Querier) (uint64, error) {
	id, err := capture.Identity(ctx, q, r.vars.Flavor, r.orig.Database, r.orig.Name)
	if errors.Is(err, capture.ErrIdentityName) || errors.Is(err, capture.ErrIdentityNone) ||
		dbconn.ErrorNumber(err) == errSpecificAccessDenied {
		return 0, nil
	}
	return id, err
}

// rebuilt reports whether a logged OPTIMIZE or REPAIR rebuilt the original
// since its InnoDB id was last read (rebase): in this run, or, before this
// run read it, in the run it takes up.
func (r *Runner) rebuilt() bool {
	return (r.streamer != nil && r.streamer.Rebuilds() > r.rebuildBase.Load()) || (r.resume != nil && r.resume.Rebuilt && !r.rebased.Load())
}

// rebase reads the original's InnoDB id again as the one the cut-over
// compares, while a lock stops writes to it and the checksum's snapshot of
// its rows is taken (openSnapshots). A logged rebuild gives the table
// another id, as a TRUNCATE without the binlog does, so after one the id
// tells nothing; the checksum that follows compares every row, and from its
// snapshot on, the id tells again. (With capture by triggers the id is the
// capture's, and any rebuild stops the run.)
func (r *Runner) rebase(ctx context.Context) error {
	if r.origDef == "" || r.streamer == nil || r.triggerCapture() {
		return nil
	}
	id, err := r.identityOf(ctx, r.db)
	if err != nil {
		return err
	}
	r.ckptMu.Lock()
	defer r.ckptMu.Unlock()
	r.tableID = id
	r.rebuildBase.Store(r.streamer.Rebuilds())
	r.rebased.Store(true)
	if r.ckpt != nil {
		r.ckpt.TableID, r.ckpt.Rebuilt = id, false
	}
	return nil
}

// originalIntact, on a connection that sees every change committed (writes
// to the original are stopped by a lock), checks that the original is the
// table the binlog capture started on, with the same definition.
func (r *Runner) originalIntact(ctx context.Context, q dbconn.Querier) error {
	if r.origDef == "" {
		return nil
	}
	id, err := r.identityOf(ctx, q)
	if err != nil {
		return err
	}
	r.ckptMu.Lock() // rebase may write it, from a checksum beside the index build
	ref := r.tableID
	r.ckptMu.Unlock()
	// After a logged rebuild, before the cut-over, the id tells nothing: the
	// tables are compared again first (compareAgainIfRebuilt).
	if ref != 0 && id != 0 && id != ref && (!r.rebuilt() || r.atCutover.Load()) {
		if r.rebuilt() {
			// Compared again just before the cut-over: this one came
			// while it began.
			return fmt.Errorf("%w: %s was rebuilt (a logged OPTIMIZE or REPAIR) as the cut-over began, which hides a TRUNCATE made in a session that did not write to the binlog (sql_log_bin=0); run sluice again", errOriginalUnlogged, r.orig.Name)
		}
		return fmt.Errorf("%w: %s was truncated, made again or rebuilt during the migration in a session that did not write to the binlog (sql_log_bin=0, or OPTIMIZE NO_WRITE_TO_BINLOG), so its rows may differ from what sluice copied; run sluice again", errOriginalUnlogged, r.orig.Name)
	}
	def, err := r.showCreateHash(ctx, q)
	if err != nil {
		return err
	}
	if def != r.origDef {
		return fmt.Errorf("%w: %s was altered during the migration in a session that did not write to the binlog (sql_log_bin=0), and the swap would undo that; run sluice again", errOriginalUnlogged, r.orig.Name)
	}
	return nil
}

// compareAgainIfRebuilt compares the tables again, before the cut-over, when
// a logged rebuild of the original came after they were compared: its new
// InnoDB id would hide a TRUNCATE made without the binlog around it (the
// truncated rows came back with the swap). The comparison takes the id
// again (rebase).
func (r *Runner) compareAgainIfRebuilt(ctx context.Context) error {
	defer r.atCutover.Store(true)
	if !r.rebuilt() {
		return nil
	}
	r.log.Warn("the original was rebuilt (a logged OPTIMIZE or REPAIR) after the tables were compared; its new InnoDB id hides a TRUNCATE made without the binlog, so they are compared again before the swap")
	r.checksummed = false
	if err := r.checksum(ctx); err != nil {
		return fmt.Errorf("the original was rebuilt (a logged OPTIMIZE or REPAIR) after the tables were compared, and comparing them again failed (a TRUNCATE in a session that did not write to the binlog, sql_log_bin=0, would do that): %w", err)
	}
	return nil
}
