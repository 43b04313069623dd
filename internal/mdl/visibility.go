package mdl

import (
	"context"
	"database/sql"
	"fmt"
)

// The guard sees metadata locks in performance_schema.metadata_locks, which
// the server fills only while performance_schema is on, the metadata-lock
// instrument is enabled and the global_instrumentation consumer is on (MySQL
// 8.0+ by default; MariaDB ships with performance_schema off and the
// instrument disabled). Without them the table reads empty: the guard sees no
// blocker and no query queued behind its request. Every attempt is still
// bounded by the lock budget (lock_wait_timeout), but blockers are neither
// named, nor waited out before a request, nor killed, and a pile-up is ended
// only at the budget.

// mdlInstrument is the performance_schema instrument of metadata locks.
const mdlInstrument = "wait/lock/metadata/sql/mdl"

// LockView is what the server lets the guard see.
type LockView struct {
	SchemaOn     bool // @@performance_schema
	Instrument   bool // the metadata-lock instrument is enabled
	Consumer     bool // the global_instrumentation consumer is enabled
	ReadDenied   bool // sluice's account may not read the instrument settings
	ReadDeniedOf string
}

// Blind says why the guard cannot see metadata locks, and what to do about
// it, or "" when it can.
func (v LockView) Blind() string {
	switch {
	case v.ReadDenied:
		return fmt.Sprintf("sluice cannot read performance_schema (%s), so its lock guard cannot see who holds or queues for the table; grant SELECT on performance_schema.*", v.ReadDeniedOf)
	case !v.SchemaOn:
		return "performance_schema is OFF, so the lock guard cannot see who holds or queues for the table: blockers are not named, waited out or killed, and a pile-up ends only at --lock-wait; start the server with performance_schema=ON and performance-schema-instrument='" + mdlInstrument + "=ON' to give it sight"
	case !v.Instrument:
		return "the metadata-lock instrument of performance_schema is off, so the lock guard cannot see who holds or queues for the table: blockers are not named, waited out or killed, and a pile-up ends only at --lock-wait; UPDATE performance_schema.setup_instruments SET ENABLED = 'YES' WHERE NAME = '" + mdlInstrument + "' gives it sight"
	case !v.Consumer:
		return "performance_schema's global_instrumentation consumer is off, so the lock guard cannot see who holds or queues for the table: blockers are not named, waited out or killed, and a pile-up ends only at --lock-wait; UPDATE performance_schema.setup_consumers SET ENABLED = 'YES' WHERE NAME = 'global_instrumentation' gives it sight"
	}
	return ""
}

// ReadLockView reads the settings that decide what the guard sees.
func ReadLockView(ctx context.Context, db *sql.DB) (LockView, error) {
	var v LockView
	var on int
	if err := db.QueryRowContext(ctx, "SELECT @@performance_schema").Scan(&on); err != nil {
		return v, fmt.Errorf("read @@performance_schema: %w", err)
	}
	v.SchemaOn = on == 1
	if !v.SchemaOn {
		return v, nil
	}
	var inst, cons string
	err := db.QueryRowContext(ctx, "SELECT ENABLED FROM performance_schema.setup_instruments WHERE NAME = ?", mdlInstrument).Scan(&inst)
	if err == nil {
		err = db.QueryRowContext(ctx, "SELECT ENABLED FROM performance_schema.setup_consumers WHERE NAME = 'global_instrumentation'").Scan(&cons)
	}
	if err != nil {
		v.ReadDenied, v.ReadDeniedOf = true, err.Error()
		return v, nil
	}
	v.Instrument, v.Consumer = inst == "YES", cons == "YES"
	return v, nil
}
