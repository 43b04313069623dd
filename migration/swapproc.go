package migration

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/mdl"
	"github.com/sluicedb/sluice/internal/schema"
)

// The swap of a table with foreign keys is several statements under the
// cut-over's lock: the new table's keys added, the children's re-pointed,
// the RENAME, the old table's keys dropped. Sent one by one, a death of
// sluice between two of them would release the locks with the work half
// done: children pointing at the shadow, or the old table still a child of
// the parents, until the next run repairs it. So they are sent as one CALL
// of a stored procedure made for this cut-over, which the server runs to its
// end even when the client is gone (measured on MySQL 9.7: a procedure
// whose client is killed mid-call completes). The procedure is created
// before LOCK TABLES, which refuses CREATE PROCEDURE, and dropped after.

// swapPlan is what prepareSwap made for the next attempt.
type swapPlan struct {
	proc     string   // the procedure's name; "" when the swap is a plain RENAME
	children []string // the keys referencing the original it re-points, whole (%+v)
}

// procName is the name of the cut-over's procedure: _<table>_swap_<hash>.
// Routine names are compared without regard to case or accents, table names
// not always: the hash of the exact name keeps the procedures of `Orders`
// and `orders` apart.
func (r *Runner) procName() string {
	base := []rune(r.orig.Name)
	if len(base) > 45 {
		base = base[:45]
	}
	sum := sha256.Sum256([]byte(r.cfg.Database + "." + r.orig.Name))
	return "_" + string(base) + "_swap_" + hex.EncodeToString(sum[:4])
}

// procMark is the procedure's comment: sluice drops only a routine of its
// name that carries it, never a user's.
func (r *Runner) procMark() string {
	return "sluice cut-over of " + r.cfg.Database + "." + r.orig.Name
}

// ownProc reports whether the database has the cut-over's procedure, and
// whether it is sluice's (carries procMark).
func (r *Runner) ownProc(ctx context.Context) (exists, ours bool, err error) {
	var comment string
	err = r.db.QueryRowContext(ctx, `SELECT ROUTINE_COMMENT FROM information_schema.ROUTINES
		WHERE ROUTINE_SCHEMA = ? AND ROUTINE_NAME = ? AND ROUTINE_TYPE = 'PROCEDURE'`, r.cfg.Database, r.procName()).Scan(&comment)
	if errors.Is(err, sql.ErrNoRows) {
		return false, false, nil
	}
	return err == nil, err == nil && comment == r.procMark(), err
}

// prepareSwap (re)creates the procedure for the next cut-over attempt, when
// foreign keys are involved, from the keys as they are now.
func (r *Runner) prepareSwap(ctx context.Context) error {
	r.swapPlan = swapPlan{}
	if !r.renameUnderLock() {
		return nil
	}
	children, err := schema.ChildrenOf(ctx, r.db, r.cfg.Database, r.orig.Name)
	if err != nil {
		return err
	}
	if len(r.orig.ForeignKeys) == 0 && len(children) == 0 {
		return nil
	}
	shadowQ := dbconn.QuoteTable(r.cfg.Database, r.names.Shadow)
	var stmts []string
	if adds, err := r.missingForeignKeys(ctx); err != nil {
		return err
	} else if len(adds) > 0 {
		stmts = append(stmts, "ALTER TABLE "+shadowQ+" "+strings.Join(adds, ", "))
	}
	plan := swapPlan{children: keyDefinitions(children)}
	repoint, err := r.repointing(ctx, children, r.names.Shadow)
	if err != nil {
		return err
	}
	stmts = append(stmts, repoint...)
	oldQ := dbconn.QuoteTable(r.cfg.Database, r.names.Old)
	stmts = append(stmts, "RENAME TABLE "+r.orig.Quoted()+" TO "+oldQ+", "+shadowQ+" TO "+r.orig.Quoted())
	if drops := r.oldKeyDrops(); len(drops) > 0 {
		stmts = append(stmts, "ALTER TABLE "+oldQ+" "+strings.Join(drops, ", "))
	}
	plan.proc = r.procName()
	procQ := dbconn.QuoteTable(r.cfg.Database, plan.proc)
	if err := r.dropSwapProc(ctx); err != nil {
		return err
	}
	if _, err := r.db.ExecContext(ctx, "CREATE PROCEDURE "+procQ+"() COMMENT "+dbconn.QuoteString(r.procMark())+
		" SQL SECURITY INVOKER BEGIN "+strings.Join(stmts, "; ")+"; END"); err != nil {
		return fmt.Errorf("create the cut-over's procedure %s: %w", plan.proc, err)
	}
	r.swapPlan = plan
	return nil
}

// oldKeyDrops drops, on the old table, the original's own foreign keys under
// the names the RENAME gives them: a generated <table>_ibfk_<n> follows the
// table's name, another name stays.
func (r *Runner) oldKeyDrops() []string {
	var drops []string
	prefix := strings.ToLower(r.orig.Name) + "_ibfk_"
	for _, fk := range r.orig.ForeignKeys {
		name := fk.Name
		if n, ok := strings.CutPrefix(strings.ToLower(name), prefix); ok && digitsOnly(n) {
			name = r.names.Old + "_ibfk_" + n
		}
		drops = append(drops, "DROP FOREIGN KEY "+dbconn.QuoteIdent(name))
	}
	return drops
}

func digitsOnly(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// keyDefinitions writes keys out whole, to be compared.
func keyDefinitions(keys []schema.ChildKey) []string {
	var out []string
	for _, k := range keys {
		out = append(out, fmt.Sprintf("%+v", k))
	}
	return out
}

// callSwap runs the prepared procedure on lock, which holds the cut-over's
// locks, after checking that the keys referencing the original are still
// those it re-points.
func (r *Runner) callSwap(ctx context.Context, lock *sql.Conn) error {
	children, err := schema.ChildrenOf(ctx, r.db, r.cfg.Database, r.orig.Name)
	if err != nil {
		return err
	}
	if !slices.Equal(keyDefinitions(children), r.swapPlan.children) {
		return fmt.Errorf("%w: the foreign keys referencing %s changed since the cut-over's procedure was made", mdl.ErrRetry, r.orig.Name)
	}
	locked := r.childTables()
	for _, c := range children {
		if !slices.ContainsFunc(locked, func(t string) bool { return sameName(t, c.Table, r.vars) }) {
			return fmt.Errorf("foreign key %s, towards %s, was added during the migration, and the cut-over did not lock its table; run the same command again", c, r.orig.Name)
		}
	}
	if _, err := lock.ExecContext(ctx, "SET SESSION foreign_key_checks = 0"); err != nil {
		return err
	}
	sent := make(chan struct{})
	go func() {
		// The kill tests die here, the CALL on its way (export_test.go).
		select {
		case <-sent:
		case <-time.After(time.Millisecond):
			failpoint("in-call")
		}
	}()
	_, err = lock.ExecContext(ctx, "CALL "+dbconn.QuoteTable(r.cfg.Database, r.swapPlan.proc)+"()")
	close(sent)
	if _, rerr := lock.ExecContext(context.WithoutCancel(ctx), "SET SESSION foreign_key_checks = 1"); rerr != nil && err == nil {
		err = rerr
	}
	return err
}

// dropSwapProc drops the cut-over's procedure, if a run made one; a routine
// of that name that is not sluice's is an error.
func (r *Runner) dropSwapProc(ctx context.Context) error {
	if r.orig == nil || !r.renameUnderLock() {
		return nil
	}
	exists, ours, err := r.ownProc(ctx)
	switch {
	case err != nil:
		return fmt.Errorf("read the routines of %s: %w", r.cfg.Database, err)
	case !exists:
		return nil
	case !ours:
		return fmt.Errorf("a procedure %s that sluice did not make has the name of the cut-over's; rename or drop it", r.procName())
	}
	if _, err := r.db.ExecContext(ctx, "DROP PROCEDURE IF EXISTS "+dbconn.QuoteTable(r.cfg.Database, r.procName())); err != nil {
		return fmt.Errorf("drop the cut-over's procedure %s: %w", r.procName(), err)
	}
	return nil
}
