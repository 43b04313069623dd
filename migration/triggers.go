package migration

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sluicedb/sluice/internal/capture"
	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/plan"
	"github.com/sluicedb/sluice/internal/schema"
)

// Existing triggers (with --carry-triggers). RENAME TABLE moves a
// table's triggers with it, and a trigger's name is unique in its database.
// So the new table gets copies of the original's triggers under the other
// name (schema.Toggled), created under the cut-over's lock, after the last
// change is applied to it and right before the RENAME; the original keeps
// its own throughout and takes them to the old table. The shadow has no
// trigger at any other moment: one there would fire for sluice's own writes.
//
// Every state a death can leave is safe. Before the RENAME the original
// serves writes with all its triggers; the copies on the shadow are dropped
// by the next run before it writes to the shadow (resumeShadow), or go with
// the shadow (--restart). After it, the new table has one copy of each. A
// cut-over attempt that fails before the RENAME drops the copies before the
// apply resumes; should that drop fail, the apply stays held and the run
// stops (shadowTriggers).

// checkTriggers refuses, in preflight, triggers the copy path cannot carry,
// and proves each can be read back byte for byte.
func (r *Runner) checkTriggers(ctx context.Context) error {
	names := r.orig.Triggers
	if why := plan.TriggerRefusal(r.orig.Name, names, r.cfg.CarryTriggers); why != "" {
		return preflightErr("%s", why)
	}
	if len(names) == 0 {
		return nil
	}
	trs, err := r.readTriggers(ctx, nil)
	if err != nil {
		return err
	}
	if err := r.checkTriggerCopies(ctx, trs); err != nil {
		return err
	}
	r.log.Info("the table's triggers are copied to the new table at the swap, under other names",
		"triggers", strings.Join(schema.TriggerNames(trs), ", "), "copies", strings.Join(plan.CarriedTriggerNames(schema.TriggerNames(trs)), ", "))
	return nil
}

// readTriggers reads the original's triggers with their bodies, on conn
// (nil: a connection of the pool).
func (r *Runner) readTriggers(ctx context.Context, conn *sql.Conn) ([]schema.Trigger, error) {
	trs, err := r.ownTriggers(ctx)
	if err != nil || len(trs) == 0 {
		return trs, err
	}
	for _, t := range trs {
		if !schema.HeadWritable(t, schema.Toggled(t.Name), r.cfg.Database, r.names.Shadow) {
			return nil, preflightErr("trigger %s of %s was created with character_set_client %s, and its definer, its name or the table's has characters outside ASCII, which its copy cannot be written with in that character set; create it again under utf8mb4 first",
				t.Name, r.orig.Name, t.CharsetClient)
		}
	}
	if conn == nil {
		if conn, err = r.db.Conn(ctx); err != nil {
			return nil, err
		}
		defer conn.Close()
	}
	if err := schema.ReadBodies(ctx, conn, r.cfg.Database, r.orig.Name, trs); err != nil {
		return nil, preflightErr("%v; run the ALTER natively", err)
	}
	return trs, nil
}

// checkTriggerCopies refuses copies whose names another trigger of the
// database has, and triggers created under another default collation of the
// database than today's (their copies would take today's).
func (r *Runner) checkTriggerCopies(ctx context.Context, trs []schema.Trigger) error {
	var dbColl string
	if err := r.db.QueryRowContext(ctx, "SELECT DEFAULT_COLLATION_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", r.cfg.Database).Scan(&dbColl); err != nil {
		return fmt.Errorf("read the collation of %s: %w", r.cfg.Database, err)
	}
	rows, err := r.db.QueryContext(ctx, "SELECT TRIGGER_NAME, EVENT_OBJECT_TABLE FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = ?", r.cfg.Database)
	if err != nil {
		return err
	}
	defer rows.Close()
	taken := map[string]string{}
	for rows.Next() {
		var name, table string
		if err := rows.Scan(&name, &table); err != nil {
			return err
		}
		taken[strings.ToLower(name)] = table
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, t := range trs {
		copyName := schema.Toggled(t.Name)
		if on, ok := taken[strings.ToLower(copyName)]; ok && on != r.names.Shadow {
			return preflightErr("trigger %s of %s is copied to the new table as %s, a name trigger %s of table %s has; rename one of them first",
				t.Name, r.orig.Name, copyName, copyName, on)
		}
		if !strings.EqualFold(t.DBCollation, dbColl) {
			return preflightErr("trigger %s of %s was created when %s's default collation was %s, now %s, which its copy would take; create it again first (DROP TRIGGER, CREATE TRIGGER)",
				t.Name, r.orig.Name, r.cfg.Database, t.DBCollation, dbColl)
		}
	}
	return nil
}

// probeTriggers proves, on the fresh shadow before anything is written to
// it, that the account can create each copy there as the cut-over will (as
// its definer: SET_ANY_DEFINER, SUPER or log_bin_trust_function_creators
// may be needed) and that the new definition still has the columns each
// uses as NEW.c or OLD.c: each is created and dropped at once.
func (r *Runner) probeTriggers(ctx context.Context) error {
	if len(r.orig.Triggers) == 0 {
		return nil
	}
	conn, err := r.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	trs, err := r.readTriggers(ctx, conn)
	if err != nil {
		return err
	}
	for _, t := range trs {
		err := r.createTriggerCopy(ctx, conn, t)
		if err == nil {
			err = r.checkCopies(ctx, []schema.Trigger{t}, false)
		}
		if err == nil {
			err = r.dropShadowTriggers(ctx, conn)
		}
		if err != nil {
			return preflightErr("trigger %s of %s cannot be created on the new table (%v): grant what the error names (TRIGGER; SET_ANY_DEFINER for another definer; SUPER, or log_bin_trust_function_creators=ON, while the binlog is on), or change the trigger if the ALTER changes a column it uses",
				t.Name, r.orig.Name, err)
		}
	}
	return nil
}

// carryTriggers creates on the shadow, after the last change, copies of the
// triggers the original has now, in the order they fire: on lock, which
// holds both tables on MySQL; on MariaDB, where the shadow is left free for
// the RENAME (sentry.go), on a connection of its own. Without
// --carry-triggers it makes sure the original has none: the binlog reader
// stops the run on a CREATE TRIGGER, and this is the last look before the
// RENAME would take one to the old table.
func (r *Runner) carryTriggers(ctx context.Context, lock *sql.Conn) error {
	if !r.cfg.CarryTriggers {
		trs, err := r.ownTriggers(ctx)
		if err == nil && len(trs) > 0 {
			err = fmt.Errorf("trigger %s was created on %s during the migration, and the swap would leave it on the old table; run the same command again with --carry-triggers",
				trs[0].Name, r.orig.Name)
		}
		return err
	}
	if !r.renameUnderLock() {
		c, err := r.db.Conn(ctx)
		if err != nil {
			return err
		}
		defer c.Close()
		lock = c
	}
	trs, err := r.readTriggers(ctx, lock)
	if err != nil || len(trs) == 0 {
		return err
	}
	for _, t := range trs {
		if err := r.createTriggerCopy(ctx, lock, t); err != nil {
			return fmt.Errorf("copy trigger %s to the new table: %w", t.Name, err)
		}
	}
	if err := r.checkCopies(ctx, trs, true); err != nil {
		return err
	}
	r.log.Info("triggers copied to the new table", "copies", strings.Join(plan.CarriedTriggerNames(schema.TriggerNames(trs)), ", "))
	failpoint("triggers-copied")
	return nil
}

// checkCopies checks that the shadow's triggers are the copies of trs, as
// the server stored them: names, definers, timing, event, and with order
// (trs are all of them) their order.
func (r *Runner) checkCopies(ctx context.Context, trs []schema.Trigger, order bool) error {
	on, err := schema.LoadTriggers(ctx, r.db, r.cfg.Database, r.names.Shadow)
	if err != nil {
		return err
	}
	line := func(name string, t schema.Trigger) string {
		if !order {
			t.Order = 1
		}
		return fmt.Sprintf("%s %s %s %s %d", name, t.Definer, t.Timing, t.Event, t.Order)
	}
	var got, want []string
	// The copies are numbered 1, 2, ... in each timing and event, in the
	// order of trs (the server's); the originals' numbers may count
	// sluice's capture triggers between them (capture.go).
	rank := map[string]int{}
	for _, t := range trs {
		k := t.Timing + " " + t.Event
		rank[k]++
		t.Order = rank[k]
		want = append(want, line(schema.Toggled(t.Name), t))
	}
	for _, t := range on {
		got = append(got, line(t.Name, t))
	}
	if !slices.Equal(got, want) {
		return fmt.Errorf("the copies of the triggers on %s are not what sluice made: %q, want %q", r.names.Shadow, got, want)
	}
	return nil
}

// createTriggerCopy creates on the shadow, on conn, the copy of t, with t's
// sql_mode, character_set_client and collation_connection in the session.
func (r *Runner) createTriggerCopy(ctx context.Context, conn *sql.Conn, t schema.Trigger) error {
	var mode, client, coll string
	if err := conn.QueryRowContext(ctx, "SELECT @@SESSION.sql_mode, @@SESSION.character_set_client, @@SESSION.collation_connection").Scan(&mode, &client, &coll); err != nil {
		return err
	}
	r.shadowTriggers.Store(true)
	if _, err := conn.ExecContext(ctx, "SET SESSION sql_mode = ?, character_set_client = ?, collation_connection = ?", t.SQLMode, t.CharsetClient, t.CollationConn); err != nil {
		return err
	}
	_, err := conn.ExecContext(ctx, schema.CreateTriggerSQL(t, schema.Toggled(t.Name), dbconn.QuoteTable(r.cfg.Database, r.names.Shadow)))
	if _, rerr := conn.ExecContext(context.WithoutCancel(ctx), "SET SESSION sql_mode = ?, character_set_client = ?, collation_connection = ?", mode, client, coll); err == nil {
		err = rerr
	}
	return err
}

// dropShadowTriggers drops every trigger of the shadow, on conn (nil: a
// connection of the pool). Only then may anything write to it again.
func (r *Runner) dropShadowTriggers(ctx context.Context, conn *sql.Conn) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	trs, err := schema.LoadTriggers(ctx, r.db, r.cfg.Database, r.names.Shadow)
	if err != nil {
		return err
	}
	for _, t := range trs {
		q := "DROP TRIGGER IF EXISTS " + dbconn.QuoteTable(r.cfg.Database, t.Name)
		if conn != nil {
			_, err = conn.ExecContext(ctx, q)
		} else {
			_, err = r.db.ExecContext(ctx, q)
		}
		if err != nil {
			return fmt.Errorf("drop trigger %s of %s: %w", t.Name, r.names.Shadow, err)
		}
	}
	r.shadowTriggers.Store(false)
	return nil
}

// triggersOff drops the copies after a cut-over attempt that failed before
// the RENAME, on lock (on MariaDB, on a connection of the pool). Not after a
// lost connection: its last statement (a CREATE TRIGGER, the RENAME, the
// procedure) may still run in the server, and a DROP sent meanwhile could
// land after it, on the live table or in the middle of the procedure. An
// error it returns is no longer one to retry on: the apply stays held, the
// run stops, and the next run drops the copies before it writes (or finds
// the swap done).
func (r *Runner) triggersOff(ctx context.Context, lock *sql.Conn, cause error) error {
	if !r.shadowTriggers.Load() {
		return cause
	}
	if !r.renameUnderLock() {
		lock = nil // MariaDB: the shadow is not among lock's tables
	}
	err := fmt.Errorf("the connection was lost")
	if !dbconn.ConnectionLost(cause) {
		err = r.dropShadowTriggers(ctx, lock)
	}
	if err != nil {
		return fmt.Errorf("%s; the copies of the triggers could not be dropped from %s (%w): nothing is written to it, run the same command again",
			cause, r.names.Shadow, err)
	}
	return cause
}

// learnTriggerTables adds to r.related the tables of the database the
// original's triggers use: MySQL locks them along with the original for the
// cut-over's LOCK TABLES ... WRITE (prelocking), so the guard and the wait
// before the cut-over must watch them as they watch the tables foreign keys
// connect (a transaction that holds one and then writes to the original
// would otherwise be rolled back as a deadlock's victim). A statement of
// each kind that changes no row takes their metadata locks in a transaction
// rolled back at once; performance_schema lists them. MariaDB's cut-over
// locks the original for READ, which fires no trigger.
func (r *Runner) learnTriggerTables(ctx context.Context) error {
	if len(r.orig.Triggers) == 0 || !r.renameUnderLock() {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tx, err := r.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	k := dbconn.QuoteIdent(r.orig.PrimaryKey[0])
	for _, q := range []string{
		"DELETE FROM " + r.orig.Quoted() + " WHERE FALSE",
		"UPDATE " + r.orig.Quoted() + " SET " + k + " = " + k + " WHERE FALSE",
		"INSERT INTO " + r.orig.Quoted() + " (" + k + ") SELECT " + k + " FROM " + r.orig.Quoted() + " WHERE FALSE",
	} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			// The README's account may not UPDATE: those triggers' tables
			// go unwatched (the warning says so).
			r.log.Warn("could not find every table the triggers use: the cut-over locks them too, unwatched", "statement", q, "err", err)
		}
	}
	rows, err := tx.QueryContext(ctx, `SELECT DISTINCT m.OBJECT_SCHEMA, m.OBJECT_NAME FROM performance_schema.metadata_locks m
		JOIN performance_schema.threads th ON th.THREAD_ID = m.OWNER_THREAD_ID
		WHERE th.PROCESSLIST_ID = CONNECTION_ID() AND m.OBJECT_TYPE = 'TABLE' AND m.OBJECT_SCHEMA <> 'performance_schema'`)
	if err != nil {
		r.log.Warn("could not read which tables the triggers use: the cut-over locks them too, unwatched", "err", err)
		return nil
	}
	defer rows.Close()
	var same, other []string
	for rows.Next() {
		var db, name string
		if err := rows.Scan(&db, &name); err != nil {
			return err
		}
		switch {
		case db == r.cfg.Database && sameName(name, r.orig.Name, r.vars):
		case db == r.cfg.Database:
			same = append(same, name)
		default:
			other = append(other, db+"."+name)
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(same) > 0 {
		r.related = r.distinct(append(r.related, same...)...)
		slices.Sort(r.related)
		r.log.Info("the cut-over also locks the tables the triggers use", "tables", strings.Join(same, ", "))
	}
	if len(other) > 0 {
		r.log.Warn("the cut-over also locks tables of other databases the triggers use, which the lock guard does not watch", "tables", strings.Join(other, ", "))
	}
	return nil
}

// ownTriggers reads the original's triggers, but for sluice's own capture
// triggers (capture.go).
func (r *Runner) ownTriggers(ctx context.Context) ([]schema.Trigger, error) {
	trs, err := schema.LoadTriggers(ctx, r.db, r.cfg.Database, r.orig.Name)
	var mine [3]string
	switch {
	case err != nil:
		return trs, err
	case r.queue != nil:
		mine = r.queue.Triggers
	case r.resume != nil && r.triggerCapture():
		// The earlier run's, taken up (takeUpCapture) before the queue
		// is described.
		_, mine = capture.Names(r.orig.Name)
	default:
		return trs, nil
	}
	return slices.DeleteFunc(trs, func(t schema.Trigger) bool { return slices.Contains(mine[:], t.Name) }), nil
}
