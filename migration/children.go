package migration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/schema"
)

// The table as a parent: other tables' foreign keys reference it (on the
// copy path, MySQL).
//
// RENAME TABLE moves the foreign keys that reference a table with it, with
// foreign_key_checks on or off: swapped naively, the children would point at
// the old table. So under the cut-over's lock, which holds the children too,
// each child's keys are re-pointed to the new table before the RENAME, by one
// ALTER of the child with foreign_key_checks off (no row is read: the new
// table's rows are the original's, verified), and the RENAME then carries
// them, with the new table, to the table's name; all in the swap's procedure
// (swapproc.go). One statement cannot drop a constraint and add another of
// the same name, so each re-pointed key takes the other name
// (pt-online-schema-change's underscore, Toggled).
//
// A procedure that fails before its RENAME is undone (childrenBack, or
// afterFailedCutover when the locked connection was lost); should that fail
// too, or the server die mid-procedure, the next run points the keys back
// before anything else (restoreChildren, from previousRun).

// checkChildKeys checks, once the ALTER is applied to the new shadow, that
// every foreign key referencing the table can reference the new table: its
// referenced columns are copied from themselves, with the same types, and the
// new table has its primary key or a unique index on exactly those columns.
func (r *Runner) checkChildKeys(ctx context.Context) error {
	if len(r.orig.Children) == 0 {
		return nil
	}
	origHas := func(n string) bool { _, ok := r.orig.Column(n); return ok }
	// The shadow as the server has it: r.shadow's key may be the row key
	// the copy finds rows by, not its primary key (rowkey.go).
	shadow, err := schema.Load(ctx, r.db, r.cfg.Database, r.names.Shadow)
	if err != nil {
		return err
	}
	for _, c := range r.orig.Children {
		for _, col := range c.RefColumns {
			o, _ := r.orig.Column(col)
			n, ok := r.shadow.Column(col)
			src, copied := r.alter.SourceColumn(col, origHas)
			if !ok || !copied || !dbconn.SameName(src, col) || n.Generated {
				return preflightErr("the ALTER drops, renames or refills column %s, which foreign key %s references; run this ALTER natively", col, c)
			}
			if o.ColumnType != n.ColumnType || o.Collation != n.Collation {
				return preflightErr("the ALTER changes column %s, which foreign key %s references (%s -> %s); run this ALTER natively", col, c, o.ColumnType, n.ColumnType)
			}
		}
		if !uniqueOn(shadow, c.RefColumns) {
			return preflightErr("the new table has no primary key or unique index on exactly (%s), which foreign key %s references; keep one", strings.Join(c.RefColumns, ", "), c)
		}
		if parts, err := r.partitions(ctx, r.names.Shadow); err != nil {
			return err
		} else if parts > 0 {
			return preflightErr("the ALTER partitions table %s, which foreign key %s references (a partitioned InnoDB table cannot be referenced)", r.orig.Name, c)
		}
		if name := schema.Toggled(c.Name); len(name) > 64 {
			return preflightErr("foreign key %s would take the name %s, longer than the server allows; rename it first", c, name)
		} else if taken, err := r.constraintNamed(ctx, name, ""); err != nil {
			return err
		} else if taken {
			return preflightErr("foreign key %s would take the name %s, which another constraint holds; rename one of them first", c, name)
		}
	}
	return nil
}

// uniqueOn reports whether t's primary key or one of its unique indexes is
// exactly cols, whole.
func uniqueOn(t *schema.Table, cols []string) bool {
	same := func(a []string) bool {
		return len(a) == len(cols) && schema.LedBy(a, cols)
	}
	if t.HasPrimaryKey() && same(t.PrimaryKey) {
		return true
	}
	for _, ix := range t.Indexes {
		if ix.Unique && same(ix.Columns) && !slices.Contains(ix.Prefixed, true) {
			return true
		}
	}
	return false
}

// constraintNamed reports whether a constraint of the database, on a table
// other than except, has name.
func (r *Runner) constraintNamed(ctx context.Context, name, except string) (bool, error) {
	var n int
	if err := r.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.TABLE_CONSTRAINTS
		WHERE CONSTRAINT_SCHEMA = ? AND CONSTRAINT_NAME = ? AND TABLE_NAME <> ?`, r.cfg.Database, name, except).Scan(&n); err != nil {
		return false, fmt.Errorf("read the constraint names of %s: %w", r.cfg.Database, err)
	}
	return n > 0, nil
}

// distinct returns names without the repeats, as the server tells names
// apart (lower_case_table_names), in their first order.
func (r *Runner) distinct(names ...string) []string {
	var out []string
	for _, n := range names {
		if !slices.ContainsFunc(out, func(o string) bool { return sameName(o, n, r.vars) }) {
			out = append(out, n)
		}
	}
	return out
}

// childTables names the tables whose foreign keys reference the original.
func (r *Runner) childTables() []string {
	if r.orig == nil {
		return nil
	}
	var names []string
	for _, c := range r.orig.Children {
		names = append(names, c.Table)
	}
	return r.distinct(names...)
}

// relatedTables names the parents and the children: the cut-over locks them
// with the table, and the guard watches them.
func (r *Runner) relatedTables() []string {
	return r.distinct(append(r.parentTables(), r.childTables()...)...)
}

// repointing returns the ALTER statements that make keys, which reference
// one table, reference table to of the database instead: one per child
// table (keys come grouped by table, as ChildrenOf reads them), each key
// dropped and made again under its other name (Toggled).
func (r *Runner) repointing(ctx context.Context, keys []schema.ChildKey, to string) ([]string, error) {
	var stmts []string
	for i := 0; i < len(keys); {
		j := i
		var specs []string
		var cols [][]string
		for ; j < len(keys) && keys[j].Table == keys[i].Table; j++ {
			k := keys[j].ForeignKey
			k.RefSchema, k.RefTable = r.cfg.Database, to
			specs = append(specs, "DROP FOREIGN KEY "+dbconn.QuoteIdent(keys[j].Name), "ADD "+k.Definition(schema.Toggled(keys[j].Name)))
			cols = append(cols, k.Columns)
		}
		child, err := schema.Load(ctx, r.db, keys[i].Schema, keys[i].Table)
		if err != nil {
			return nil, fmt.Errorf("read the indexes of %s: %w", keys[i].Table, err)
		}
		specs = append(keepIndexNames(child, cols), specs...)
		stmts = append(stmts, "ALTER TABLE "+dbconn.QuoteTable(keys[i].Schema, keys[i].Table)+" "+strings.Join(specs, ", "))
		i = j
	}
	return stmts, nil
}

// pointChildren re-points, on conn, every foreign key that references table
// from so that it references table to instead, one ALTER per child table,
// without checking rows. A key already pointing at to is left alone, so it
// can be run again after a partial run. conn must hold the locks the ALTERs
// need (the cut-over's), or be a guarded connection.
func (r *Runner) pointChildren(ctx context.Context, conn *sql.Conn, from, to string) error {
	keys, err := schema.ChildrenOf(ctx, r.db, r.cfg.Database, from)
	if err != nil || len(keys) == 0 {
		return err
	}
	if _, err := conn.ExecContext(ctx, "SET SESSION foreign_key_checks = 0"); err != nil {
		return err
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), "SET SESSION foreign_key_checks = 1")
	stmts, err := r.repointing(ctx, keys, to)
	if err != nil {
		return err
	}
	for _, q := range stmts {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("re-point the foreign keys referencing %s to %s: %w", from, to, err)
		}
	}
	return nil
}

// childrenBack points back to the original the children a failed cut-over
// attempt re-pointed to the shadow, on lock, which still holds the locks.
// A failure is logged: the next attempt, or the next run, tries again.
func (r *Runner) childrenBack(ctx context.Context, lock *sql.Conn) {
	if err := r.pointChildren(context.WithoutCancel(ctx), lock, r.names.Shadow, r.orig.Name); err != nil {
		r.log.Warn("could not point the children's foreign keys back to the original after a failed swap; run the same command again to repair them", "err", err)
	}
}

// restoreChildren points back to the original, through the metadata-lock
// guard, foreign keys a run that died in its cut-over left on the shadow,
// before the shadow is resumed or dropped.
func (r *Runner) restoreChildren(ctx context.Context) error {
	if r.orig == nil {
		return nil
	}
	keys, err := schema.ChildrenOf(ctx, r.db, r.cfg.Database, r.names.Shadow)
	if err != nil || len(keys) == 0 {
		return err
	}
	tables := []string{r.orig.Name, r.names.Shadow}
	for _, k := range keys {
		if !slices.Contains(tables, k.Table) {
			tables = append(tables, k.Table)
		}
	}
	r.log.Info("an earlier run died in its cut-over with foreign keys pointing at the new table; pointing them back", "keys", len(keys))
	err = r.lockGuard(tables...).Run(ctx, "point foreign keys back to "+r.orig.Name, func(ctx context.Context, conn *sql.Conn) error {
		return r.pointChildren(ctx, conn, r.names.Shadow, r.orig.Name)
	})
	if err != nil {
		return fmt.Errorf("%w: point the foreign keys an earlier run left on %s back to %s: %w", ErrPreflight, r.names.Shadow, r.orig.Name, err)
	}
	if r.orig, err = schema.Load(ctx, r.db, r.cfg.Database, r.orig.Name); err != nil {
		return err
	}
	// While they pointed at the shadow, the server checked the children's
	// writes against it: a row written then may reference a parent row the
	// original lacks. The keys are back without a check; say so.
	for _, k := range keys {
		var on, notNull []string
		for i, c := range k.Columns {
			on = append(on, "c."+dbconn.QuoteIdent(c)+" = p."+dbconn.QuoteIdent(k.RefColumns[i]))
			notNull = append(notNull, "c."+dbconn.QuoteIdent(c)+" IS NOT NULL")
		}
		q := fmt.Sprintf("SELECT 1 FROM %s c LEFT JOIN %s p ON %s WHERE %s AND p.%s IS NULL LIMIT 1",
			dbconn.QuoteTable(k.Schema, k.Table), r.orig.Quoted(), strings.Join(on, " AND "), strings.Join(notNull, " AND "), dbconn.QuoteIdent(k.RefColumns[0]))
		var one int
		switch err := r.db.QueryRowContext(ctx, q).Scan(&one); {
		case err == nil:
			r.log.Warn("a child has rows whose parent row is missing, written while its foreign key pointed at the new table; find them and fix them", "child", k.Table, "key", schema.Toggled(k.Name), "query", q)
		case !errors.Is(err, sql.ErrNoRows):
			r.log.Warn("could not check a child's rows against the original", "child", k.Table, "err", err)
		}
	}
	return nil
}

// loadRelated finds the tables of the database that foreign keys connect to
// the original, directly or through others: LOCK TABLES locks the parents of
// the tables it is given and the children a change can reach, implicitly,
// so the guard and the wait before the cut-over watch all of them.
func (r *Runner) loadRelated(ctx context.Context) error {
	r.related = nil
	if len(r.orig.ForeignKeys) == 0 && len(r.orig.Children) == 0 {
		return nil
	}
	rows, err := r.db.QueryContext(ctx, `SELECT DISTINCT TABLE_NAME, REFERENCED_TABLE_NAME FROM information_schema.KEY_COLUMN_USAGE
		WHERE TABLE_SCHEMA = ? AND REFERENCED_TABLE_SCHEMA = ? AND REFERENCED_TABLE_NAME IS NOT NULL`, r.cfg.Database, r.cfg.Database)
	if err != nil {
		return fmt.Errorf("%w: read the foreign keys of %s: %w", ErrPreflight, r.cfg.Database, err)
	}
	defer rows.Close()
	edges := map[string][]string{}
	for rows.Next() {
		var a, b string
		if err := rows.Scan(&a, &b); err != nil {
			return err
		}
		edges[a] = append(edges[a], b)
		edges[b] = append(edges[b], a)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	seen := map[string]bool{r.orig.Name: true}
	queue := []string{r.orig.Name}
	for len(queue) > 0 {
		t := queue[0]
		queue = queue[1:]
		for _, n := range edges[t] {
			if !seen[n] {
				seen[n] = true
				queue = append(queue, n)
				r.related = append(r.related, n)
			}
		}
	}
	slices.Sort(r.related)
	return nil
}

// ErrChildrenOnShadow: foreign keys of other tables still reference the new
// table after a failed cut-over, and could not be pointed back; the shadow
// and the checkpoint are kept, and the next run points them back first.
var ErrChildrenOnShadow = errors.New("foreign keys of other tables still point at the new table")

// afterFailedCutover makes sure no child's key is left on the shadow once a
// cut-over has failed: the locked connection points them back when it can
// (childrenBack); when it could not (it was lost, and its locks with it),
// this does it through the guard on a connection of its own.
func (r *Runner) afterFailedCutover(ctx context.Context, cause error) error {
	keys, err := schema.ChildrenOf(context.WithoutCancel(ctx), r.db, r.cfg.Database, r.names.Shadow)
	if err == nil && len(keys) == 0 {
		return cause
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.LockDeadline)
	defer cancel()
	if err == nil {
		err = r.restoreChildren(rctx)
	}
	if err != nil {
		return fmt.Errorf("%w (%w): run the same command again to point them back at %s (%w)", cause, ErrChildrenOnShadow, r.orig.Name, err)
	}
	return cause
}
