package migration

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/schema"
)

// keepPlainIndexes says whether the shadow keeps its plain secondary indexes
// during the copy. A build after the copy is cheaper on the primary, but it
// reaches a replica as one statement that stops its applier for as long as
// the build takes, far beyond any --max-lag on a big table; rows copied into
// indexed pages reach it as small transactions the lag throttle can pace. So
// while replicas are watched the plain indexes are kept, unless the operator
// says otherwise.
//
// Unique indexes are always built after the copy: kept during it, a row the
// application moves to another primary key meanwhile can be copied twice,
// at its old key and at its new one, and collide with itself, which cannot
// be told from a real duplicate.
func keepPlainIndexes(keep, deferThem, replicasWatched bool) bool {
	switch {
	case keep:
		return true
	case deferThem:
		return false
	}
	return replicasWatched
}

// shadowHasUnique says whether the shadow has a unique secondary index now
// (one kept during the copy), or a new primary key that rows of the original
// may collide in.
func (r *Runner) shadowHasUnique(ctx context.Context) (bool, error) {
	ddl, err := schema.ShowCreate(ctx, r.db, r.cfg.Database, r.names.Shadow)
	if err != nil {
		return false, err
	}
	return r.newPKCollides || slices.ContainsFunc(r.secondaryKeys(ddl), func(k schema.KeyDef) bool { return k.Unique }), nil
}

// secondaryKeys are the shadow's secondary indexes in its definition ddl,
// but for the unique index its rows are found by when it has no primary key:
// that one is the shadow's row key, as the primary key is, and is never
// dropped or deferred.
func (r *Runner) secondaryKeys(ddl string) []schema.KeyDef {
	keys := schema.SecondaryKeys(ddl)
	if r.shadow != nil && !r.shadow.HasPrimaryKey() {
		keys = slices.DeleteFunc(keys, func(k schema.KeyDef) bool { return dbconn.SameName(k.Name, r.shadow.KeyIndex) })
	}
	return keys
}

// deferIndexes drops the shadow's secondary indexes (only the unique ones
// with uniqueOnly), to be built after the copy by buildIndexes: a sorted bulk
// build is cheaper than maintaining them row by row during the copy.
func (r *Runner) deferIndexes(ctx context.Context, uniqueOnly bool) error {
	ddl, err := schema.ShowCreate(ctx, r.db, r.cfg.Database, r.names.Shadow)
	if err != nil {
		return err
	}
	all := r.secondaryKeys(ddl)
	keys := all
	if uniqueOnly {
		keys = slices.DeleteFunc(slices.Clone(all), func(k schema.KeyDef) bool { return !k.Unique })
	}
	if keys, err = r.keepAutoIncrementKey(ddl, all, keys); err != nil {
		return err
	}
	for _, k := range keys {
		if k.Unique && strings.Contains(k.Def, " WITHOUT OVERLAPS)") {
			// Its build after the copy is ALGORITHM=COPY only, and the binlog
			// reader cannot read the statement.
			return preflightErr("unique key %s (WITHOUT OVERLAPS) is one sluice cannot build after the copy: run this ALTER with the server's own ALTER TABLE", k.Name)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	drops := make([]string, len(keys))
	names := make([]string, len(keys))
	for i, k := range keys {
		drops[i] = "DROP INDEX " + dbconn.QuoteIdent(k.Name)
		names[i] = k.Name
	}
	if _, err := r.db.ExecContext(ctx, "ALTER TABLE "+dbconn.QuoteTable(r.cfg.Database, r.names.Shadow)+" "+strings.Join(drops, ", ")); err != nil {
		return fmt.Errorf("defer the secondary indexes of the shadow table: %w", err)
	}
	r.deferred = keys
	r.log.Info("secondary indexes will be built after the copy", "indexes", strings.Join(names, ","))
	return nil
}

// keepAutoIncrementKey returns drop without the plain index the shadow's
// AUTO_INCREMENT column needs: InnoDB wants that column first in some index,
// and refuses to drop the last one (a key (tenant, id) with KEY (id) for its
// id). Where only unique indexes begin with it, which are built after the
// copy, it refuses in one line.
func (r *Runner) keepAutoIncrementKey(ddl string, all, drop []schema.KeyDef) ([]schema.KeyDef, error) {
	if r.shadow == nil {
		return drop, nil
	}
	auto := ""
	for _, c := range r.shadow.Columns {
		if c.AutoInc {
			auto = c.Name
		}
	}
	first := func(name string) bool {
		ix, ok := r.shadow.Index(name)
		return ok && len(ix.Columns) > 0 && dbconn.SameName(ix.Columns[0], auto) && !(len(ix.Prefixed) > 0 && ix.Prefixed[0])
	}
	// The shadow's own primary key, from its definition: r.shadow's row key
	// is the original's (shadowRowKey).
	if cols, prefixed := schema.PrimaryKeyColumns(ddl); len(cols) > 0 && dbconn.SameName(cols[0], auto) && !prefixed[0] {
		return drop, nil
	}
	if auto == "" {
		return drop, nil
	}
	var unique string
	for _, k := range all {
		switch {
		case !first(k.Name):
		case !slices.ContainsFunc(drop, func(d schema.KeyDef) bool { return d.Name == k.Name }):
			return drop, nil // one stays
		case !k.Unique:
			return slices.DeleteFunc(slices.Clone(drop), func(d schema.KeyDef) bool { return d.Name == k.Name }), nil
		default:
			unique = k.Name
		}
	}
	if unique == "" {
		return drop, nil // the primary key or the row key holds it, or the server will say
	}
	return nil, preflightErr("the AUTO_INCREMENT column %s begins only unique index %s, which sluice builds after the copy, and InnoDB needs it first in some index meanwhile: add a plain index on it in the same ALTER (ADD KEY (%s)), or run this ALTER with the server's own ALTER TABLE",
		auto, unique, dbconn.QuoteIdent(auto))
}

// dropBuiltUnique drops the unique indexes among have (the shadow's) and adds
// them to the indexes to build after the copy.
func (r *Runner) dropBuiltUnique(ctx context.Context, have []schema.KeyDef) error {
	var drops, names []string
	for _, k := range have {
		if k.Unique && !(r.shadow != nil && !r.shadow.HasPrimaryKey() && dbconn.SameName(k.Name, r.shadow.KeyIndex)) {
			drops = append(drops, "DROP INDEX "+dbconn.QuoteIdent(k.Name))
			names = append(names, k.Name)
			r.deferred = append(r.deferred, k)
		}
	}
	if len(drops) == 0 {
		return nil
	}
	if _, err := r.db.ExecContext(ctx, "ALTER TABLE "+dbconn.QuoteTable(r.cfg.Database, r.names.Shadow)+" "+strings.Join(drops, ", ")); err != nil {
		return fmt.Errorf("drop the shadow's unique indexes until the copy is done: %w", err)
	}
	r.log.Info("the copy is not done: unique indexes of the new table are built again after it", "indexes", strings.Join(names, ","))
	return nil
}

// buildIndexes adds the deferred indexes with InnoDB's parallel index build
// tuned for it (innodb_ddl_threads, innodb_ddl_buffer_size,
// innodb_parallel_read_threads, MySQL 8.0.27+): first the plain ones, in one
// online ALTER, then the unique ones. The apply is held during the builds.
//
// The plain build runs beside the checksum (buildWithChecksum): both read the
// whole table, neither needs the other, and on a machine with cores to spare
// the checksum then costs little time.
//
// Before the unique build, every change is applied under a brief read lock on
// the original and the apply is held, so the shadow equals the original at one
// instant: a duplicate the build meets is one the original really holds, and
// it stops the migration. No row is ever dropped to make a key unique.
func (r *Runner) buildIndexes(ctx context.Context) error {
	if len(r.deferred) == 0 {
		return nil
	}
	var plain, unique []string
	online := ", ALGORITHM=INPLACE, LOCK=NONE"
	for _, k := range r.deferred {
		if k.Functional {
			online = "" // ALGORITHM=COPY only; the apply is held anyway
		}
		if k.Unique {
			unique = append(unique, "ADD "+k.Def)
		} else {
			plain = append(plain, "ADD "+k.Def)
		}
	}
	conn, err := r.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer func() {
		// Its session settings are the build's: keep it out of the pool.
		conn.Raw(func(any) error { return driver.ErrBadConn })
		conn.Close()
	}()
	for _, set := range []string{
		fmt.Sprintf("SET SESSION innodb_ddl_buffer_size = %d", r.ddl.BufferBytes),
		fmt.Sprintf("SET SESSION innodb_ddl_threads = %d", r.ddl.Threads),
		fmt.Sprintf("SET SESSION innodb_parallel_read_threads = %d", r.ddl.ReadThreads),
	} {
		if _, err := conn.ExecContext(ctx, set); err != nil {
			r.log.Info("cannot tune the index build; using the server's defaults", "setting", set, "err", err)
		}
	}
	d := r.ddl
	r.res.DDL = &d
	peak := watchDDLMemory(ctx, r.db)
	defer func() { r.res.DDLPeakBytes = peak() }()
	shadow := dbconn.QuoteTable(r.cfg.Database, r.names.Shadow)
	if len(plain) > 0 {
		stmt := "ALTER TABLE " + shadow + " " + strings.Join(plain, ", ") + ", ALGORITHM=INPLACE, LOCK=NONE"
		if err := r.buildWithChecksum(ctx, conn, stmt); err != nil {
			return err
		}
	} else {
		// The apply waits during the build: changes applied meanwhile go to
		// the build's online log and slow it more than applying them after.
		r.holdApply()
	}
	if len(unique) == 0 {
		return nil
	}
	if err := r.settleShadow(ctx); err != nil {
		return fmt.Errorf("before building the unique indexes: %w", err)
	}
	if _, err := conn.ExecContext(ctx, "ALTER TABLE "+shadow+" "+strings.Join(unique, ", ")+online); err != nil {
		if dbconn.ErrorNumber(err) == dbconn.ErrDupEntry {
			return fmt.Errorf("the original table holds rows that collide under a unique key of the new table, so the migration stops (no row was dropped; find them with the count query of sluice plan): %w", err)
		}
		return fmt.Errorf("build the unique indexes: %w", err)
	}
	return nil
}

// holdApply holds the apply until the catch-up.
func (r *Runner) holdApply() {
	if !r.copyHeld {
		r.sched.Hold(true)
		r.copyHeld = true
	}
}

// buildWithChecksum runs the plain index build stmt on conn while the
// checksum compares the tables. The checksum's snapshots are opened first
// (under the usual brief read lock); then the build starts, and once it is
// past its exclusive start the checksum connections open the shadow table. The
// build's exclusive end then waits for the checksum, whose transactions it
// does not disturb: the build adds a secondary index and the checksum reads
// the primary key only. If the checksum connections cannot open the shadow
// at once (the build was already ending), they let go, and the checksum runs
// after the build as its own phase.
func (r *Runner) buildWithChecksum(ctx context.Context, conn *sql.Conn, stmt string) error {
	r.releaseCopyHold()
	if err := r.waitBacklog(ctx, 1000); err != nil {
		return err
	}
	snap, err := r.openSnapshots(ctx)
	if err != nil {
		return err
	}
	defer snap.close()
	r.holdApply()

	var id int64
	if err := conn.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
		return err
	}
	// The build's end waits for the checksum, however long it takes; only
	// sluice uses the shadow table.
	if _, err := conn.ExecContext(ctx, "SET SESSION lock_wait_timeout = 31536000"); err != nil {
		return err
	}
	built := make(chan error, 1)
	go func() {
		_, err := conn.ExecContext(ctx, stmt)
		built <- err
	}()
	buildErr := func(err error) error {
		if err != nil {
			return fmt.Errorf("build the secondary indexes: %w", err)
		}
		return nil
	}
	stop := func() {
		kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		r.db.ExecContext(kctx, fmt.Sprintf("KILL QUERY %d", id))
		<-built
	}
	finished, err := r.waitBuildRunning(ctx, id, built)
	if err != nil {
		stop()
		return err
	}
	if finished != nil {
		// Done before it was seen running (a small table): checksum after.
		return buildErr(*finished)
	}
	if err := r.openShadow(ctx, snap.conns); err != nil {
		r.log.Info("the checksum waits for the index build", "reason", err)
		snap.close()
		return buildErr(<-built)
	}
	r.res.ChecksumWithIndex = true
	if err := r.compare(ctx, snap.conns); err != nil {
		snap.close()
		stop()
		return err
	}
	snap.close() // ends the snapshots: the build may finish
	if err := buildErr(<-built); err != nil {
		return err
	}
	r.checksummed = true
	return nil
}

// waitBuildRunning waits until the ALTER on connection id is past its
// exclusive start (its stage is one of InnoDB's "alter table (...)"), or has
// finished (then its result is returned).
func (r *Runner) waitBuildRunning(ctx context.Context, id int64, built <-chan error) (*error, error) {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-built:
			return &err, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
		var state sql.NullString
		err := r.db.QueryRowContext(ctx, "SELECT PROCESSLIST_STATE FROM performance_schema.threads WHERE PROCESSLIST_ID = ?", id).Scan(&state)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			break // no performance_schema: go on; openShadow copes
		}
		if strings.HasPrefix(state.String, "alter table (") {
			return nil, nil
		}
	}
	return nil, nil
}

// openShadow takes the checksum connections' shared metadata lock on the
// shadow table, each within a second: one that waits longer is queued behind
// the build's exclusive end while the others hold theirs, and would never
// get it.
func (r *Runner) openShadow(ctx context.Context, conns []*sql.Conn) error {
	shadow := dbconn.QuoteTable(r.cfg.Database, r.names.Shadow)
	g, gctx := errgroup.WithContext(ctx)
	for _, c := range conns {
		g.Go(func() error {
			if _, err := c.ExecContext(gctx, "SET SESSION lock_wait_timeout = 1"); err != nil {
				return err
			}
			var n int
			if err := c.QueryRowContext(gctx, "SELECT COUNT(*) FROM "+shadow+" WHERE 1 = 0").Scan(&n); err != nil {
				return err
			}
			return nil
		})
	}
	return g.Wait()
}

// settleShadow applies every pending change under a brief read lock on the
// original and returns with the apply held: the shadow then equals the
// original as of that lock, and stays so until the apply is released.
func (r *Runner) settleShadow(ctx context.Context) error {
	r.releaseCopyHold()
	if err := r.waitBacklog(ctx, 1000); err != nil {
		return err
	}
	if err := r.drainUnderReadLock(ctx, "unique-index settle", true, nil); err != nil {
		return err
	}
	r.copyHeld = true // until the catch-up, after the unique build
	return nil
}
