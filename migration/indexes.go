package migration

import (
	"context"
	"fmt"
	"strings"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/schema"
)

// deferIndexes drops the shadow's secondary indexes, to be built after the
// copy by buildIndexes: a sorted bulk build is cheaper than maintaining them
// row by row during the copy.
func (r *Runner) deferIndexes(ctx context.Context) error {
	ddl, err := schema.ShowCreate(ctx, r.db, r.cfg.Database, r.names.Shadow)
	if err != nil {
		return err
	}
	keys := schema.SecondaryKeys(ddl)
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

// buildIndexes adds the deferred indexes with InnoDB's parallel index build
// tuned for it (innodb_ddl_threads, innodb_ddl_buffer_size,
// innodb_parallel_read_threads, MySQL 8.0.27+): first the plain ones, in one
// online ALTER, then the unique ones. Before the unique build, every change is
// applied under a brief read lock on the original and the apply is held, so the
// shadow equals the original at one instant: a duplicate the build meets is
// one the original really holds, and it stops the migration. No row is ever
// dropped to make a key unique.
func (r *Runner) buildIndexes(ctx context.Context) error {
	if len(r.deferred) == 0 {
		return nil
	}
	// The apply waits during the build: changes applied meanwhile go to the
	// build's online log and slow it more than applying them afterwards.
	if !r.copyHeld {
		r.sched.Hold(true)
		r.copyHeld = true
	}
	var plain, unique []string
	for _, k := range r.deferred {
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
	defer conn.Close()
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
		if _, err := conn.ExecContext(ctx, "ALTER TABLE "+shadow+" "+strings.Join(plain, ", ")+", ALGORITHM=INPLACE, LOCK=NONE"); err != nil {
			return fmt.Errorf("build the secondary indexes: %w", err)
		}
	}
	if len(unique) == 0 {
		return nil
	}
	if err := r.settleShadow(ctx); err != nil {
		return fmt.Errorf("before building the unique indexes: %w", err)
	}
	if _, err := conn.ExecContext(ctx, "ALTER TABLE "+shadow+" "+strings.Join(unique, ", ")+", ALGORITHM=INPLACE, LOCK=NONE"); err != nil {
		if dbconn.ErrorNumber(err) == dbconn.ErrDupEntry {
			return fmt.Errorf("the original table holds rows that collide under a unique key of the new table, so the migration stops (no row was dropped; find them with the count query of sluice plan): %w", err)
		}
		return fmt.Errorf("build the unique indexes: %w", err)
	}
	return nil
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
