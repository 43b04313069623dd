package migration

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/pingcap/tidb/pkg/parser/ast"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/ddl"
	"github.com/sluicedb/sluice/internal/mdl"
	"github.com/sluicedb/sluice/internal/schema"
)

// The table's own foreign keys (it is their child) on the copy path.
//
// The shadow is made without them (CREATE TABLE LIKE drops them): during
// the copy a constraint on the shadow would refuse a parent's delete that
// the original allows, for a child row the apply has not yet deleted. They
// are added under the cut-over's lock, after the last changes are applied,
// with foreign_key_checks off (the server adds them without reading a row:
// the rows are the original's, checked by the server as they were written),
// in the same server-side procedure as the RENAME and the old table's keys'
// drop (swapproc.go). Those statements take the parents' metadata locks:
// the cut-over write-locks the parents, and the guard watches them.
//
// A CASCADE or SET NULL changes the child's rows when the parent's change;
// the binlog holds those changes only where the server applies foreign keys
// in its SQL layer (ServerVars.CascadesLogged). Elsewhere such a key is
// refused: its changes would be lost.

// foreignKeyRefusal says why the copy path cannot take table t's foreign
// keys with this ALTER, or nil. underLock: the cut-over renames under
// LOCK TABLES (not MariaDB's sentry cut-over). Pure.
func foreignKeyRefusal(t *schema.Table, a *ddl.Alter, v ServerVars, underLock bool) error {
	if a.AddsForeignKey {
		return preflightErr("the ALTER adds a foreign key, which sluice would have to check against every row; run this ALTER natively (or add the key afterwards with a native ALTER)")
	}
	for _, c := range t.Children {
		if sameName(c.Schema, t.Database, v) && sameName(c.Table, t.Name, v) {
			return preflightErr("table %s references itself (foreign key %s); sluice does not migrate such a table yet: run this ALTER natively", t.Name, c.Name)
		}
	}
	if a, b, ok := childOrderDecides(t.Children); ok {
		return preflightErr("table %s is referenced by foreign keys %s and %s, on shared columns with different actions: which the server applies first decides the outcome of a change to %s, and re-pointing them may change that order; run this ALTER natively", t.Name, a, b, t.Name)
	}
	for _, c := range t.Children {
		switch {
		case !underLock:
			return preflightErr("table %s is referenced by foreign keys (%s); sluice re-points them to the new table only on MySQL so far: run this ALTER natively", t.Name, strings.Join(t.ReferencedBy(), ", "))
		case !sameName(c.Schema, t.Database, v):
			return preflightErr("table %s is referenced by foreign key %s, from another database; sluice re-points only foreign keys of tables of the same database so far", t.Name, c)
		}
	}
	if len(t.ForeignKeys) == 0 {
		return nil
	}
	drops := a.DropsForeignKeys
	for _, spec := range a.Specs {
		// DROP CONSTRAINT, which the parser reads as DROP CHECK, drops
		// a foreign key of that name too.
		if spec.Tp == ast.AlterTableDropCheck && spec.Constraint != nil && slices.ContainsFunc(t.ForeignKeys, func(fk schema.ForeignKey) bool { return strings.EqualFold(fk.Name, spec.Constraint.Name) }) {
			drops = append(drops, spec.Constraint.Name)
		}
	}
	if len(drops) > 0 {
		return preflightErr("the ALTER drops foreign key %s; drop it first with its own ALTER TABLE %s DROP FOREIGN KEY %s (in place, instant), then run sluice with the rest", drops[0], t.Name, drops[0])
	}
	if !underLock {
		// MariaDB's cut-over holds only the original (sentry.go): the old
		// table's keys could not be dropped before the parents' writers
		// see it, and would refuse a parent's delete for a row only the
		// old table still has (tried: the writers of
		// TestForeignKeysOfAChildWithWriters hit it at once).
		return preflightErr("table %s has foreign keys; sluice carries them to the new table only on MySQL so far (on MariaDB the old table would keep them past the swap and refuse the parents' deletes): run this ALTER natively", t.Name)
	}
	if a, b, ok := orderDecides(t.ForeignKeys); ok {
		return preflightErr("foreign keys %s and %s of %s reference one table on shared columns with different actions: which the server applies first decides a parent change's outcome, and the new table may apply them in another order; run this ALTER natively", a, b, t.Name)
	}
	for _, fk := range t.ForeignKeys {
		if !sameName(fk.RefSchema, t.Database, v) {
			return preflightErr("foreign key %s of %s references %s, in another database; sluice carries only foreign keys to tables of the same database so far", fk.Name, t.Name, fk.Parent())
		}
		if fk.Cascades() && v.Replica {
			return preflightErr("foreign key %s of %s has ON DELETE %s ON UPDATE %s, and this server is a replica: the changes it makes to %s reach this binlog only if the source writes them to its own, which sluice cannot tell from here; run sluice on the source",
				fk.Name, t.Name, fk.OnDelete, fk.OnUpdate, t.Name)
		}
		if fk.Cascades() && !v.CascadesLogged {
			return preflightErr("foreign key %s of %s has ON DELETE %s ON UPDATE %s, and this server does not write the changes it makes to %s to the binary log (%s), so sluice cannot see them; run this ALTER natively",
				fk.Name, t.Name, fk.OnDelete, fk.OnUpdate, t.Name, cascadeWhy(v))
		}
	}
	return nil
}

// orderDecides finds two foreign keys of one child table for which the
// order in which the server applies them to a parent row's change decides
// the outcome (clash). That order is the server's own (not the names' order:
// seen on MySQL 9.7), and keys made anew on another table may take another,
// so such keys are not carried. fks are one table's keys. Pure.
func orderDecides(fks []schema.ForeignKey) (a, b string, ok bool) {
	for i, x := range fks {
		for _, y := range fks[i+1:] {
			if clash(x, y) {
				return x.Name, y.Name, true
			}
		}
	}
	return "", "", false
}

// childOrderDecides is orderDecides over the keys that reference a parent,
// pairing only keys of the same child table.
func childOrderDecides(children []schema.ChildKey) (a, b string, ok bool) {
	for i, x := range children {
		for _, y := range children[i+1:] {
			if x.Schema == y.Schema && x.Table == y.Table && clash(x.ForeignKey, y.ForeignKey) {
				return x.String(), y.Name, true
			}
		}
	}
	return "", "", false
}

// clash: x and y reference the same parent, and which the server applies
// first to a parent row's delete or update can decide its outcome:
//   - on shared columns, different actions (a SET NULL first leaves for a
//     CASCADE no row to delete; a CASCADE first leaves a RESTRICT nothing to
//     refuse);
//   - both SET NULL (or SET DEFAULT) on column sets that overlap and differ
//     (the first clears a column the second finds the row by, so the row
//     keeps the second's other columns or loses them);
//   - on a delete, a CASCADE beside a RESTRICT on other columns (the row
//     deleted first leaves the RESTRICT nothing to refuse).
func clash(x, y schema.ForeignKey) bool {
	if !strings.EqualFold(x.Parent(), y.Parent()) {
		return false
	}
	rule := func(r string) string {
		if r == "" || r == "NO ACTION" {
			return "RESTRICT"
		}
		return r
	}
	in := func(c string, cols []string) bool {
		return slices.ContainsFunc(cols, func(d string) bool { return strings.EqualFold(c, d) })
	}
	shared := slices.ContainsFunc(x.Columns, func(c string) bool { return in(c, y.Columns) })
	sameSet := len(x.Columns) == len(y.Columns) && !slices.ContainsFunc(x.Columns, func(c string) bool { return !in(c, y.Columns) })
	for i, ev := range [2][2]string{{rule(x.OnDelete), rule(y.OnDelete)}, {rule(x.OnUpdate), rule(y.OnUpdate)}} {
		a, b := ev[0], ev[1]
		nulls := a == b && (a == "SET NULL" || a == "SET DEFAULT")
		switch {
		case shared && a != b, shared && !sameSet && nulls:
			return true
		case !shared && i == 0 && (a == "CASCADE" && b == "RESTRICT" || a == "RESTRICT" && b == "CASCADE"):
			return true
		}
	}
	return false
}

// sameName compares two database or table names as the server does:
// exactly, unless lower_case_table_names folds them.
func sameName(a, b string, v ServerVars) bool {
	if v.LowerCaseNames == 0 {
		return a == b
	}
	return dbconn.SameName(a, b)
}

func cascadeWhy(v ServerVars) string {
	if v.Flavor == dbconn.MariaDB {
		return "MariaDB's InnoDB applies them"
	}
	return "InnoDB applies them: MySQL before 9, or innodb_native_foreign_keys=ON"
}

// checkForeignKeyColumns checks, once the ALTER is applied to the new
// shadow and before any index is deferred, that each of the original's
// foreign keys will hold on the new table as the server would have it: its
// columns are copied from the same columns with the same types, an index
// begins with them whole, a SET NULL column may be NULL, and the table is not
// partitioned. The keys are added without reading a row, so anything that
// could make a row break them is refused here.
func (r *Runner) checkForeignKeyColumns(ctx context.Context) error {
	if len(r.orig.ForeignKeys) == 0 {
		return nil
	}
	origHas := func(n string) bool { _, ok := r.orig.Column(n); return ok }
	for _, fk := range r.orig.ForeignKeys {
		for _, c := range fk.Columns {
			o, _ := r.orig.Column(c)
			n, ok := r.shadow.Column(c)
			src, copied := r.alter.SourceColumn(c, origHas)
			if !ok || !copied || !dbconn.SameName(src, c) || n.Generated {
				return preflightErr("the ALTER drops, renames or refills column %s of foreign key %s; drop the foreign key first with its own ALTER", c, fk.Name)
			}
			if o.ColumnType != n.ColumnType || o.Collation != n.Collation {
				return preflightErr("the ALTER changes column %s of foreign key %s (%s -> %s); drop the foreign key first, or run this ALTER natively", c, fk.Name, o.ColumnType, n.ColumnType)
			}
			if !n.Nullable && (fk.OnDelete == "SET NULL" || fk.OnUpdate == "SET NULL") {
				return preflightErr("the ALTER makes column %s NOT NULL, which foreign key %s sets to NULL; drop the foreign key first, or run this ALTER natively", c, fk.Name)
			}
		}
		if !indexLedBy(r.shadow, fk.Columns) {
			return preflightErr("the new table has no index that begins with the whole columns of foreign key %s (%s); keep or add one", fk.Name, strings.Join(fk.Columns, ", "))
		}
	}
	if parts, err := r.partitions(ctx, r.names.Shadow); err != nil {
		return err
	} else if parts > 0 {
		return preflightErr("the ALTER partitions table %s, which has foreign keys (a partitioned InnoDB table cannot have them)", r.orig.Name)
	}
	return nil
}

// noteForeignKeyNames checks the names the original's foreign keys take on
// the new table and reports the ones that change.
func (r *Runner) noteForeignKeyNames(ctx context.Context) error {
	r.res.RenamedForeignKeys = nil
	for _, fk := range r.orig.ForeignKeys {
		onShadow, after := schema.ForeignKeyFor(r.orig.Name, r.names.Shadow, fk.Name)
		if len(onShadow) > 64 {
			return preflightErr("foreign key %s would take the name %s on the new table, longer than the server allows; rename it first", fk.Name, onShadow)
		}
		if n, generated := strings.CutPrefix(strings.ToLower(fk.Name), strings.ToLower(r.orig.Name)+"_ibfk_"); generated && after == fk.Name {
			// The swap renames the original, and with it this name, to
			// the old table's, stamped with the time when taken.
			if old := schema.StampedOld(r.orig.Name, time.Now()); len(old)+len("_ibfk_")+len(n) > 64 {
				return preflightErr("foreign key %s would take a name longer than the server allows when the swap renames %s to %s; rename the foreign key first", fk.Name, r.orig.Name, old)
			}
		}
		for _, name := range []string{onShadow, after} {
			if name == fk.Name {
				continue
			}
			if taken, err := r.constraintNamed(ctx, name, r.names.Shadow); err != nil {
				return err
			} else if taken {
				return preflightErr("foreign key %s would take the name %s on the new table, which another constraint holds; rename one of them first", fk.Name, name)
			}
		}
		if after != fk.Name {
			r.res.RenamedForeignKeys = append(r.res.RenamedForeignKeys, fk.Name+" -> "+after)
		}
	}
	if len(r.res.RenamedForeignKeys) > 0 {
		r.log.Warn("foreign keys the user named take another name on the new table (a constraint name is unique in a database, and the original holds it until the swap)",
			"renamed", strings.Join(r.res.RenamedForeignKeys, ","))
	}
	return nil
}

// indexLedBy reports whether t has an index (its primary key included)
// whose first parts are cols, whole.
func indexLedBy(t *schema.Table, cols []string) bool {
	if t.HasPrimaryKey() && schema.LedBy(t.PrimaryKey, cols) {
		return true
	}
	for _, ix := range t.Indexes {
		if ix.Kind == "FULLTEXT" || ix.Kind == "SPATIAL" || !schema.LedBy(ix.Columns, cols) {
			continue
		}
		whole := true
		for i := range cols {
			if i < len(ix.Prefixed) && ix.Prefixed[i] {
				whole = false
			}
		}
		if whole {
			return true
		}
	}
	return false
}

// checkRelatedPrivileges refuses the run when the account cannot do what
// the cut-over does to the tables foreign keys relate to the original: lock
// the parents and point the new table's keys at them, lock and alter the
// children and point their keys at the new table. Found out at the
// cut-over, it would throw the whole copy away.
func (r *Runner) checkRelatedPrivileges() error {
	need := map[string][]string{}
	name := func(t string) string {
		if r.vars.LowerCaseNames != 0 {
			return strings.ToLower(t)
		}
		return t
	}
	for _, p := range r.parentTables() {
		need[name(p)] = append(need[name(p)], "SELECT", "REFERENCES")
	}
	for _, c := range r.childTables() {
		need[name(c)] = append(need[name(c)], "SELECT", "ALTER")
	}
	if len(r.orig.Children) > 0 {
		// The children's keys point at the new table, and back at the
		// original after a failed attempt.
		need[name(r.names.Shadow)] = append(need[name(r.names.Shadow)], "REFERENCES")
		need[name(r.orig.Name)] = append(need[name(r.orig.Name)], "REFERENCES")
	}
	missing := MissingOn(r.grants, need)
	if len(r.orig.Children) > 0 || len(r.orig.ForeignKeys) > 0 {
		// The swap is one CALL of a procedure made for it (swapproc.go):
		// routine privileges on the database (or all), not on a table.
		dbOnly := Grants{Global: r.grants.Global, OnDB: r.grants.OnDB}
		missing = append(missing, MissingOn(dbOnly, map[string][]string{"database " + r.cfg.Database: {"CREATE ROUTINE", "ALTER ROUTINE", "EXECUTE"}})...)
	}
	if len(missing) > 0 {
		return preflightErr("the account lacks %s, which the cut-over needs for the tables foreign keys relate to %s; GRANT them", strings.Join(missing, "; "), r.orig.Name)
	}
	return nil
}

// parentTables names the tables the original's foreign keys reference,
// other than itself: the cut-over's statements take their metadata locks.
func (r *Runner) parentTables() []string {
	if r.orig == nil {
		return nil
	}
	var names []string
	for _, fk := range r.orig.ForeignKeys {
		names = append(names, fk.RefTable)
	}
	return r.distinct(names...)
}

// cascadeParents names the parents whose foreign keys change the original's
// rows (CASCADE, SET NULL): the binlog reader stops the run at a
// statement-format write to one of them.
func (r *Runner) cascadeParents() []string {
	var out []string
	for _, fk := range r.orig.ForeignKeys {
		if fk.Cascades() && !slices.Contains(out, fk.RefTable) {
			out = append(out, fk.RefTable)
		}
	}
	return out
}

// missingForeignKeys returns the ADD clauses of the original's foreign keys
// the shadow has not got (an earlier attempt of the cut-over may have added
// them), under the names they take there.
func (r *Runner) missingForeignKeys(ctx context.Context) ([]string, error) {
	if len(r.orig.ForeignKeys) == 0 {
		return nil, nil
	}
	shadow, err := schema.Load(ctx, r.db, r.cfg.Database, r.names.Shadow)
	if err != nil {
		return nil, fmt.Errorf("read the new table's foreign keys: %w", err)
	}
	var adds []string
	var cols [][]string
	for _, fk := range r.orig.ForeignKeys {
		name, _ := schema.ForeignKeyFor(r.orig.Name, r.names.Shadow, fk.Name)
		if !slices.ContainsFunc(shadow.ForeignKeys, func(h schema.ForeignKey) bool { return dbconn.SameName(h.Name, name) }) {
			adds = append(adds, "ADD "+fk.Definition(name))
			cols = append(cols, fk.Columns)
		}
	}
	return append(keepIndexNames(shadow, cols), adds...), nil
}

// keepIndexNames returns RENAME INDEX clauses, each of an index of t to its
// own name, for the indexes that begin with one of keys' columns. The
// server replaces an index it made for a foreign key (CREATE TABLE LIKE
// copies it as such) with one named after the constraint when a key on
// those columns is added, as the swap adds them to the new table and to
// the children under their other names: renamed in the same ALTER, the
// index is an ordinary one and keeps its name, as the server's own ALTER
// keeps it.
func keepIndexNames(t *schema.Table, keys [][]string) []string {
	var out []string
	seen := map[string]bool{}
	for _, cols := range keys {
		for _, ix := range t.Indexes {
			k := dbconn.NameKey(ix.Name)
			if seen[k] || strings.EqualFold(ix.Name, "PRIMARY") || ix.Kind == "FULLTEXT" || ix.Kind == "SPATIAL" || !schema.LedBy(ix.Columns, cols) {
				continue
			}
			seen[k] = true
			out = append(out, "RENAME INDEX "+dbconn.QuoteIdent(ix.Name)+" TO "+dbconn.QuoteIdent(ix.Name))
		}
	}
	return out
}

// dropShadowForeignKeys takes the foreign keys off the shadow again, when the
// RENAME that was to follow their addition failed: until the next attempt
// the apply runs behind the original, and a constraint on the shadow would
// refuse a parent's delete for a child row the apply has yet to delete.
// conn holds the cut-over's locks, the parents' among them. A failure is
// logged: the next attempt, or the next run (resumeForeignKeys), tries again.
func (r *Runner) dropShadowForeignKeys(ctx context.Context, conn *sql.Conn) {
	if len(r.orig.ForeignKeys) == 0 {
		return
	}
	if err := r.dropForeignKeys(context.WithoutCancel(ctx), conn); err != nil {
		r.log.Warn("could not take the foreign keys off the new table after a failed swap", "err", err)
	}
}

// dropForeignKeys drops every foreign key the shadow has, on conn.
func (r *Runner) dropForeignKeys(ctx context.Context, conn *sql.Conn) error {
	return r.dropForeignKeysOf(ctx, conn, r.names.Shadow)
}

// dropForeignKeysOf drops every foreign key table has, on conn.
func (r *Runner) dropForeignKeysOf(ctx context.Context, conn *sql.Conn, table string) error {
	t, err := schema.Load(ctx, r.db, r.cfg.Database, table)
	if err != nil || len(t.ForeignKeys) == 0 {
		return err
	}
	var drops []string
	for _, fk := range t.ForeignKeys {
		drops = append(drops, "DROP FOREIGN KEY "+dbconn.QuoteIdent(fk.Name))
	}
	_, err = conn.ExecContext(ctx, "ALTER TABLE "+dbconn.QuoteTable(r.cfg.Database, table)+" "+strings.Join(drops, ", "))
	return err
}

// releaseOld takes the foreign keys off the old table right after the
// RENAME, on conn, which still holds the cut-over's locks (the renamed
// tables stay locked under their new names). Kept, the old table would stay
// a child of the parents: a RESTRICT key would refuse a parent's delete for
// rows only the old table still has, and a CASCADE would write to it. The
// swap is done: a failure is reported, not returned.
func (r *Runner) releaseOld(ctx context.Context, conn *sql.Conn) {
	if len(r.orig.ForeignKeys) == 0 {
		return
	}
	if err := r.dropForeignKeysOf(context.WithoutCancel(ctx), conn, r.names.Old); err != nil {
		r.log.Warn("the old table keeps its foreign keys: drop it, or its foreign keys, before its parents' rows are deleted", "table", r.names.Old, "err", err)
	}
}

// resumeForeignKeys takes off a resumed shadow the foreign keys a run that
// died in its cut-over added, through the metadata-lock guard (the ALTER
// takes the parents' locks).
func (r *Runner) resumeForeignKeys(ctx context.Context) error {
	if len(r.shadow.ForeignKeys) == 0 {
		return nil
	}
	tables := append([]string{r.names.Shadow}, r.parentTables()...)
	err := r.lockGuard(tables...).Run(ctx, "drop the foreign keys of "+r.names.Shadow, func(ctx context.Context, conn *sql.Conn) error {
		return r.dropForeignKeys(ctx, conn)
	})
	if err != nil {
		return fmt.Errorf("take the foreign keys a cut-over added off %s: %w", r.names.Shadow, err)
	}
	r.shadow.ForeignKeys = nil
	return nil
}

// releaseOldChild takes the foreign keys off the old table a run that died
// right after its swap left them on (name, from its checkpoint; "" when the
// table had none), through the metadata-lock guard.
func (r *Runner) releaseOldChild(ctx context.Context, name string) error {
	if name == "" {
		return nil
	}
	if ok, err := r.tableExists(ctx, name); err != nil || !ok {
		return err
	}
	err := r.lockGuard(append([]string{name}, r.parentTables()...)...).Run(ctx, "drop the foreign keys of "+name, func(ctx context.Context, conn *sql.Conn) error {
		return r.dropForeignKeysOf(ctx, conn, name)
	})
	if err != nil {
		return fmt.Errorf("%w: take the foreign keys off %s, which an earlier run swapped out: %w", ErrPreflight, name, err)
	}
	return nil
}

// waitQuietParents waits, before the cut-over asks for its locks, for a
// moment when no other session is inside a transaction that holds a lock on
// the table or on a table foreign keys relate to it, up to the lock budget. LOCK TABLES takes its
// locks one at a time, in name order, keeping those it has: a transaction
// that holds one of the tables and then asks for another that sluice got
// first would close a cycle, and the server's deadlock detector would roll
// the application's transaction back (error 1213), not sluice's request.
// Waiting for such transactions to end first leaves a race of milliseconds.
func (r *Runner) waitQuietParents(ctx context.Context) {
	if len(r.related) == 0 {
		return // neither foreign keys nor triggers connect other tables
	}
	r.waitQuiet(ctx, append([]string{r.orig.Name}, r.related...))
}

// waitQuiet waits, up to the lock budget, for a moment when no other session
// is inside a transaction that holds a lock on one of tables.
func (r *Runner) waitQuiet(ctx context.Context, tables []string) {
	limit := time.Now().Add(r.cfg.LockWait)
	for {
		ss, err := mdl.Sessions(ctx, r.db, r.cfg.Database, tables, r.cfg.Conn.RunID)
		if err != nil {
			r.log.Warn("could not read who holds the tables before the cut-over", "err", err)
			return
		}
		var open []string
		for _, s := range ss {
			if s.InTrx && s.Blocking() {
				open = append(open, s.String())
			}
		}
		if len(open) == 0 {
			return
		}
		if time.Now().After(limit) || ctx.Err() != nil {
			r.log.Info("transactions still hold the tables; the cut-over asks for its locks anyway", "sessions", strings.Join(open, "; "))
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// partitions counts table's partitions (0: not partitioned).
func (r *Runner) partitions(ctx context.Context, table string) (int, error) {
	var n int
	if err := r.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.PARTITIONS
		WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND PARTITION_NAME IS NOT NULL`, r.cfg.Database, table).Scan(&n); err != nil {
		return 0, fmt.Errorf("read the partitions of %s: %w", table, err)
	}
	return n, nil
}
