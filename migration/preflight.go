package migration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pingcap/tidb/pkg/parser/ast"

	"github.com/sluicedb/sluice/internal/binlog"
	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/ddl"
	"github.com/sluicedb/sluice/internal/mdl"
	"github.com/sluicedb/sluice/internal/plan"
	"github.com/sluicedb/sluice/internal/rowkey"
	"github.com/sluicedb/sluice/internal/schema"
	"github.com/sluicedb/sluice/internal/throttle"
)

// ErrPreflight wraps every reason the migration refuses to start. Nothing has
// been created on the server when it is returned.
var ErrPreflight = errors.New("preflight")

func preflightErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrPreflight}, args...)...)
}

// ServerVars are the server settings preflight checks.
type ServerVars struct {
	Version        string
	VersionComment string
	Flavor         dbconn.Flavor // from the two above
	LogBin         string
	Format         string // global binlog_format
	RowImage       string // global binlog_row_image
	SessionFormat  string
	SessionImage   string
	TimeZone       string // global time_zone
	SystemZone     string // system_time_zone
	LowerCaseNames int    // lower_case_table_names
	SQLMode        string // global sql_mode
	// Replica: the server replicates from a source; ReplicaUpdates: it
	// writes what it replicates to its own binlog (log_replica_updates).
	Replica        bool
	ReplicaUpdates bool
	// Database is the migrated table's; BinlogDoDB and BinlogIgnoreDB are
	// the server's binlog filters.
	Database                   string
	BinlogDoDB, BinlogIgnoreDB []string
	// CascadesLogged: the server writes the changes a foreign key's
	// CASCADE or SET NULL makes to a child table to the binlog (MySQL with
	// SQL-layer foreign keys, innodb_native_foreign_keys=OFF; not MariaDB,
	// nor MySQL before 9, where InnoDB makes them unseen).
	CascadesLogged bool
}

// filtered reports whether binlog filters are set. Any one is refused, even
// one that keeps the table's database: the server filters a statement (every
// DDL, a TRUNCATE, a statement-format write) by the session's default
// database, not by the tables it changes, so a TRUNCATE of the table run from
// a session in another database would never reach the binary log.
func filtered(do, ignore []string) bool { return len(do) > 0 || len(ignore) > 0 }

// rowImages are the binlog_row_image values whose row events hold every
// key sluice needs: it reads only the keys of changed rows, which FULL logs
// whole, NOBLOB too (a key has no BLOB or TEXT column), MINIMAL in every
// before image and in the after images of inserts (but for a key column an
// INSERT leaves to its DEFAULT, refused when it is read) and of the updates
// that change it (but for MariaDB's REPLACE that moves a row to a key
// column's DEFAULT: minimalDefaultKey), and MariaDB's FULL_NODUP in full
// before images.
var rowImages = map[string]bool{"FULL": true, "NOBLOB": true, "MINIMAL": true, "FULL_NODUP": true}

// readServerVars reads the settings preflight checks.
func readServerVars(ctx context.Context, db *sql.DB, database string) (ServerVars, error) {
	v := ServerVars{Database: database}
	var err error
	if err = db.QueryRowContext(ctx, `SELECT @@version, @@version_comment, @@global.log_bin,
		@@global.binlog_format, @@global.binlog_row_image, @@session.binlog_format, @@session.binlog_row_image,
		@@global.time_zone, @@system_time_zone, @@lower_case_table_names, @@global.sql_mode`).
		Scan(&v.Version, &v.VersionComment, &v.LogBin, &v.Format, &v.RowImage, &v.SessionFormat, &v.SessionImage,
			&v.TimeZone, &v.SystemZone, &v.LowerCaseNames, &v.SQLMode); err != nil {
		return v, fmt.Errorf("%w: read server settings: %w", ErrPreflight, err)
	}
	v.Flavor = dbconn.FlavorOf(v.Version, v.VersionComment)
	var updates sql.NullString
	if db.QueryRowContext(ctx, "SELECT @@global.log_replica_updates").Scan(&updates) != nil {
		db.QueryRowContext(ctx, "SELECT @@global.log_slave_updates").Scan(&updates) // before 8.0.26
	}
	v.ReplicaUpdates = updates.String == "1" || strings.EqualFold(updates.String, "ON")
	var native sql.NullString
	if v.Flavor != dbconn.MariaDB && db.QueryRowContext(ctx, "SELECT @@global.innodb_native_foreign_keys").Scan(&native) == nil {
		v.CascadesLogged = native.String == "0" || strings.EqualFold(native.String, "OFF")
	}
	var channels int
	// A replica has at least one channel configured (REPLICATION CLIENT,
	// which sluice needs anyway, reads it).
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM performance_schema.replication_connection_configuration").Scan(&channels); err == nil {
		v.Replica = channels > 0
	}
	return v, nil
}

// poolSize is the most connections a run opens at once.
func (r *Runner) poolSize() int {
	return r.cfg.CopyWorkers + r.cfg.ApplyWorkers + r.cfg.ChecksumWorkers + 8
}

// CheckVersion refuses servers sluice does not support at all.
func CheckVersion(v ServerVars) error {
	major, minor, patch := parseVersion(v.Version)
	if dbconn.FlavorOf(v.Version, v.VersionComment) == dbconn.MariaDB {
		// 10.6: the oldest MariaDB still maintained; sluice is tested on
		// 10.11 and 11.8.
		if major < 10 || (major == 10 && minor < 6) {
			return preflightErr("the server is MariaDB %s; sluice needs MariaDB 10.6 or later", v.Version)
		}
		return nil
	}
	if major < 8 || (major == 8 && minor == 0 && patch < 13) {
		return preflightErr("the server is MySQL %s; sluice needs 8.0.13 or later (RENAME TABLE under LOCK TABLES)", v.Version)
	}
	return nil
}

// CheckServer returns the first reason the server cannot host a migration, or
// nil. It is pure so every branch is tested without a server.
func CheckServer(v ServerVars) error {
	if err := CheckVersion(v); err != nil {
		return err
	}
	if v.LogBin != "1" && !strings.EqualFold(v.LogBin, "ON") {
		return preflightErr("the binary log is off (log_bin=%s); start the server with log_bin enabled", v.LogBin)
	}
	if !strings.EqualFold(v.Format, "ROW") {
		return preflightErr("binlog_format is %s; set GLOBAL binlog_format=ROW (and restart the application's connections)", v.Format)
	}
	if !rowImages[strings.ToUpper(v.RowImage)] {
		return preflightErr("binlog_row_image is %s, which sluice does not know; set GLOBAL binlog_row_image=FULL", v.RowImage)
	}
	if v.SessionFormat != "" && !strings.EqualFold(v.SessionFormat, "ROW") {
		return preflightErr("sluice's own session has binlog_format=%s; remove that setting from its connection options", v.SessionFormat)
	}
	if v.SessionImage != "" && !rowImages[strings.ToUpper(v.SessionImage)] {
		return preflightErr("sluice's own session has binlog_row_image=%s, which sluice does not know; remove that setting from its connection options", v.SessionImage)
	}
	if filtered(v.BinlogDoDB, v.BinlogIgnoreDB) {
		return preflightErr("the server has binlog filters (binlog-do-db=%s, binlog-ignore-db=%s), which leave out of the binary log a statement whose session's default database they filter, whatever table it changes (a TRUNCATE of a table of %s run from a session in another database), so sluice could miss it; remove the filters, or use --capture=triggers",
			strings.Join(v.BinlogDoDB, ","), strings.Join(v.BinlogIgnoreDB, ","), v.Database)
	}
	if v.Replica && !v.ReplicaUpdates {
		return preflightErr("the server is a replica with log_replica_updates=OFF: the changes it replicates never reach its binlog, so sluice would miss them; run sluice on the source, or turn log_replica_updates on")
	}
	return nil
}

var versionRE = regexp.MustCompile(`^(\d+)\.(\d+)\.(\d+)`)

func parseVersion(v string) (int, int, int) {
	m := versionRE.FindStringSubmatch(v)
	if m == nil {
		return 0, 0, 0
	}
	a, _ := strconv.Atoi(m[1])
	b, _ := strconv.Atoi(m[2])
	c, _ := strconv.Atoi(m[3])
	return a, b, c
}

// learnNames teaches the SQL parser the server's character sets and
// collations, for the ALTER and for the statements the binlog holds, and
// parses an ALTER that named one the parser did not know.
func (r *Runner) learnNames(ctx context.Context) error {
	if err := ddl.LearnNames(ctx, r.db); err != nil {
		return fmt.Errorf("%w: %w", ErrPreflight, err)
	}
	if r.alter != nil {
		return nil
	}
	alter, err := ddl.Parse(r.cfg.Alter)
	if err != nil {
		return err
	}
	r.alter = alter
	return nil
}

func (r *Runner) preflight(ctx context.Context) error {
	db, err := dbconn.Open(ctx, r.cfg.Conn, r.cfg.Database, r.poolSize())
	if err != nil {
		return fmt.Errorf("%w: %w", ErrPreflight, err)
	}
	r.db = db

	v, err := readServerVars(ctx, db, r.cfg.Database)
	if err != nil {
		return err
	}
	r.vars = v
	if err := CheckVersion(v); err != nil {
		return err
	}
	if err := r.learnNames(ctx); err != nil {
		return err
	}
	if err := r.checkPrivileges(ctx); err != nil {
		return err
	}
	if view, err := mdl.ReadLockView(ctx, db); err != nil {
		return fmt.Errorf("%w: %w", ErrPreflight, err)
	} else if r.res.LockGuardBlind = view.Blind(); r.res.LockGuardBlind != "" {
		r.log.Warn(r.res.LockGuardBlind)
	}

	r.orig, err = schema.Load(ctx, db, r.cfg.Database, r.cfg.Table)
	if errors.Is(err, schema.ErrNotFound) {
		return preflightErr("table %s.%s does not exist; check --database and --table", r.cfg.Database, r.cfg.Table)
	}
	if errors.Is(err, schema.ErrNotBaseTable) {
		return preflightErr("%v", err)
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrPreflight, err)
	}
	t := r.orig
	// From here on the table is named as the server stores it (the binlog
	// and the metadata locks spell it so under lower_case_table_names=1).
	r.cfg.Database, r.cfg.Table, r.names = t.Database, t.Name, schema.NamesFor(t.Name)
	if err := r.alter.NamesOther(t.Database, t.Name, r.vars.LowerCaseNames != 0); err != nil {
		return err
	}
	if why := SQLModeRefusal(r.vars.SQLMode, r.alter.Clause); why != "" {
		return preflightErr("%s", why)
	}
	for _, v := range r.alter.NonDeterministic {
		// On every path: even an INSTANT ALTER takes the value in sluice's
		// session, whose settings are its own.
		if strings.HasPrefix(v.Cause, "@") {
			return preflightErr("column %s: its DEFAULT reads the variable %s, which takes the value of the session that runs the ALTER or inserts the row, and sluice's sessions are not yours: give it a constant default, or run this ALTER with the server's own ALTER TABLE", v.Column, v.Cause)
		}
	}
	r.live.name(t.Database, t.Name)
	r.vars.Database = t.Database
	if err := r.useServerZone(ctx, t.PKColumns()); err != nil {
		return err
	}
	db = r.db
	if !strings.EqualFold(t.Engine, "InnoDB") {
		return preflightErr("table %s uses the %s engine; sluice migrates InnoDB tables only", t.Name, t.Engine)
	}
	if err := plan.CheckEngine(r.alter); err != nil {
		return preflightErr("%v", err)
	}
	for _, spec := range r.alter.Specs {
		if spec.Tp == ast.AlterTableAlgorithm || spec.Tp == ast.AlterTableLock {
			return preflightErr("the ALTER names ALGORITHM= or LOCK=; leave them out, sluice chooses them (see sluice plan)")
		}
	}
	if err := r.takeRunLock(ctx); err != nil {
		return err
	}
	if err := r.previousRun(ctx); err != nil || r.res.AlreadyDone {
		return err
	}
	// After previousRun: a run that already swapped the tables has a
	// table the ALTER no longer names the columns of.
	if err := plan.CheckColumns(t, r.alter); err != nil {
		return preflightErr("the ALTER does not apply to %s: %v", t.Name, err)
	}
	if err := r.makePlan(ctx); err != nil {
		return err
	}
	if r.resume != nil && r.path != plan.PathCopy {
		r.log.Info("an earlier run took the copy path; resuming it", "planned", string(r.path))
		r.path = plan.PathCopy
	}
	if r.cfg.PostponeCutover && r.path != plan.PathCopy {
		// Only the copy path has a cut-over to hold back: the others change
		// the table in one statement, which would go ahead at once.
		return preflightErr("--postpone-cutover holds back the copy path's swap, and this ALTER takes the %s path, which changes the table in one statement with no swap to hold: drop --postpone-cutover, or add --method copy to copy the table and postpone its swap", r.path)
	}
	if r.path == plan.PathCopy {
		return r.copyPreflight(ctx)
	}
	return nil
}

// makePlan classifies the ALTER, picks the path (or takes the forced one)
// and refuses risks the operator did not approve.
func (r *Runner) makePlan(ctx context.Context) error {
	facts, err := plan.ReadFacts(ctx, r.db, r.cfg.Conn.Host)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrPreflight, err)
	}
	r.plan = plan.Decide(r.orig, r.alter, facts.Server, plan.Options{
		Replicas: r.cfg.Replicas || facts.Replicas > 0, MaxInplace: r.cfg.MaxInplace, CPUs: facts.CPUs,
		DDLMemory: facts.DDLMemory(), LockWait: r.cfg.LockWait, CutoverLock: r.cfg.CutoverLockTimeout, CopyThreads: r.cfg.CopyWorkers,
		CarryTriggers: r.cfg.CarryTriggers, CaptureTriggers: r.triggerCapture(),
	})
	if u := plan.Unapproved(r.plan.Risks, r.cfg.Approve); len(u) > 0 {
		var what []string
		for _, rk := range r.plan.Risks {
			what = append(what, rk.Detail)
		}
		return preflightErr("the ALTER %s; check it with sluice plan, then add --approve=%s to go ahead",
			strings.Join(what, "; "), strings.Join(u, ","))
	}
	r.path = r.plan.Path
	if r.cfg.Method != "auto" {
		r.path = map[string]plan.Path{"instant": plan.PathInstant, "inplace": plan.PathInplace, "copy": plan.PathCopy}[r.cfg.Method]
	}
	d := plan.TuneDDL(facts.CPUs, 0, facts.DDLMemory())
	if r.plan.DDL != nil {
		d = *r.plan.DDL
	}
	if r.cfg.DDLThreads > 0 {
		d.Threads, d.ReadThreads = r.cfg.DDLThreads, r.cfg.DDLThreads
	}
	if r.cfg.DDLBufferSize > 0 {
		d.BufferBytes = r.cfg.DDLBufferSize
	}
	r.ddl = d
	r.log.Info("plan", "path", r.path, "planned", r.plan.Path, "why", r.plan.Why)
	return nil
}

// copyPreflight checks what only the copy path needs: the binlog, a primary
// key it can range over, and no foreign keys, triggers or leftovers.
func (r *Runner) copyPreflight(ctx context.Context) error {
	var err error
	if !r.triggerCapture() {
		// Read once the privileges are known to be there (REPLICATION CLIENT).
		if r.vars.BinlogDoDB, r.vars.BinlogIgnoreDB, err = binlog.Filters(ctx, r.db); err != nil {
			return fmt.Errorf("%w: %w", ErrPreflight, err)
		}
		if err := CheckServer(r.vars); err != nil {
			return err
		}
	}
	if err := r.captureRefusal(ctx); err != nil { // capture.go
		return err
	}
	t := r.orig
	db := r.db
	switch {
	case len(t.PrimaryKey) == 0:
		return preflightErr("table %s has no primary key, nor a unique index of whole NOT NULL columns; sluice needs one to copy in ranges and to find changed rows: add a primary key first", t.Name)
	case t.PKPrefix:
		return preflightErr("table %s's primary key uses a column prefix; sluice needs whole-column keys", t.Name)
	case r.alter.ChangesPrimaryKey && !t.HasPrimaryKey():
		return preflightErr("the ALTER changes the primary key of a table whose rows are found by its %s; sluice does not support that yet", rowKeyName(t))
	}
	if err := foreignKeyRefusal(t, r.alter, r.vars, r.renameUnderLock()); err != nil {
		return err
	}
	if err := r.groupRefusal(); err != nil { // group.go
		return err
	}
	if err := r.checkTriggers(ctx); err != nil {
		return err
	}
	if err := r.checkRelatedPrivileges(); err != nil {
		return err
	}
	if err := r.loadRelated(ctx); err != nil {
		return err
	}
	if err := r.learnTriggerTables(ctx); err != nil {
		return err
	}
	for _, k := range t.PrimaryKey {
		if r.alter.Dropped[dbconn.NameKey(k)] {
			return preflightErr("the ALTER drops column %s of the %s; sluice does not support that yet", k, rowKeyName(t))
		}
		if _, ok := r.alter.Renames[dbconn.NameKey(k)]; ok {
			return preflightErr("the ALTER renames column %s of the %s; sluice does not support that yet", k, rowKeyName(t))
		}
	}
	if err := r.checkVolatile(); err != nil {
		return err
	}
	maxLoad, _ := throttle.ParseLimits(r.cfg.MaxLoad) // checked by Config.validate
	critical, _ := throttle.ParseLimits(r.cfg.CriticalLoad)
	if err := r.findReplicas(ctx); err != nil {
		return err
	}
	var lag func() string
	interval := time.Duration(0)
	if r.lag != nil {
		lag, interval = r.lagReason, 100*time.Millisecond
	}
	r.throttle = throttle.New(throttle.Config{DB: db, MaxLoad: maxLoad, CriticalLoad: critical,
		FlagFile: r.cfg.ThrottleFlagFile, PanicFile: r.cfg.PanicFlagFile, Lag: lag, Interval: interval,
		OnChange: func(reason string) {
			if p := r.Phase(); p != "capture" && p != "copy" {
				return // only the copy pauses (the first check is made before it)
			}
			if reason != "" {
				r.log.Info("copy paused", "reason", reason)
			} else {
				r.log.Info("copy resumed")
			}
		}})
	if err := r.throttle.Preflight(ctx); err != nil {
		return fmt.Errorf("%w: %w", ErrPreflight, err)
	}
	r.key, err = rowkey.NewCols(t.PKColumns())
	if err != nil {
		return fmt.Errorf("%w: %w", ErrPreflight, err)
	}
	if err := r.checkCharNoPadKey(ctx, t.PKColumns()); err != nil {
		return err
	}
	if err := minimalDefaultKey(r.vars, r.key, r.triggerCapture()); err != nil {
		return err
	}
	if err := binlogUnreadable(t, r.triggerCapture()); err != nil { // capture.go
		return err
	}
	if err := r.checkTriggerCapture(ctx); err != nil { // capture.go
		return err
	}
	exists := func(name string) (bool, error) {
		var n int
		err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?`,
			r.cfg.Database, name).Scan(&n)
		return n > 0, err
	}
	// An old table kept by an earlier migration stays; this one's old table
	// takes a stamped name.
	if taken, err := exists(r.names.Old); err != nil {
		return fmt.Errorf("%w: %w", ErrPreflight, err)
	} else if taken {
		r.names.Old = schema.StampedOld(t.Name, time.Now())
		if taken, err := exists(r.names.Old); err != nil || taken {
			return preflightErr("tables %s and %s.%s already exist; drop the stale one", schema.NamesFor(t.Name).Old, r.cfg.Database, r.names.Old)
		}
	}
	ours := []string{r.names.Shadow, r.names.Postpone, r.names.Checkpoint}
	if r.lag != nil {
		ours = append(ours, r.names.Heartbeat)
	}
	if r.resume != nil {
		ours = nil // the earlier run's, checked by previousRun
	}
	for _, name := range ours {
		n, err := exists(name)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrPreflight, err)
		}
		if n && name == r.names.Postpone && r.cfg.PostponeCutover && r.leftPostpone(ctx) {
			continue // an earlier run's, made again (postpone.go)
		}
		if n {
			return preflightErr("table %s.%s already exists: another migration of %s is running, or one left it behind; drop it if it is stale",
				r.cfg.Database, name, t.Name)
		}
	}
	return nil
}

// createShadow creates the shadow table as a copy of the original and applies
// the ALTER to it: this is where the server itself judges the ALTER.
func (r *Runner) createShadow(ctx context.Context) error {
	if r.resume != nil {
		return r.resumeShadow(ctx)
	}
	// The checkpoint table first: a run that dies after it leaves a shadow
	// the next run knows to be sluice's (resume.go).
	if err := r.createCheckpointTable(ctx); err != nil {
		return err
	}
	shadowQ := dbconn.QuoteTable(r.cfg.Database, r.names.Shadow)
	if err := r.execToEnd(ctx, "CREATE TABLE "+shadowQ+" LIKE "+r.orig.Quoted()); err != nil {
		if dbconn.ErrorNumber(err) == dbconn.ErrTableExists {
			return preflightErr("table %s already exists: another migration of %s is running", r.names.Shadow, r.orig.Name)
		}
		return fmt.Errorf("create the shadow table: %w", err)
	}
	r.shadowCreated = true
	if r.cfg.PostponeCutover {
		if err := r.createPostpone(ctx); err != nil {
			return err
		}
	}
	if _, err := r.db.ExecContext(ctx, "ALTER TABLE "+shadowQ+" "+r.alter.Clause); err != nil {
		if ctx.Err() != nil {
			return err // cancelled, not refused
		}
		if name, clause := namedCheck(r.alter, err.Error()); name != "" && r.vars.Flavor != dbconn.MariaDB &&
			(dbconn.ErrorNumber(err) == errCheckNotFound || dbconn.ErrorNumber(err) == errConstraintNotFound) {
			return preflightErr("the ALTER names CHECK constraint %s, which the new table holds under a generated name (MySQL keeps a constraint name unique in a database); run ALTER TABLE %s %s natively first, then sluice with the rest",
				name, dbconn.QuoteIdent(r.orig.Name), clause)
		}
		return preflightErr("the ALTER does not apply to %s: %v", r.orig.Name, err)
	}
	var err error
	r.shadow, err = schema.Load(ctx, r.db, r.cfg.Database, r.names.Shadow)
	if err != nil {
		return err
	}
	if err := r.shadowRowKey(ctx); err != nil {
		return err
	}
	if col, from, to := keyCharsetChange(r.orig, r.shadow); col != "" && r.vars.Flavor == dbconn.MariaDB {
		// The new table's rows are found by the original's key values in
		// the original's collation; MariaDB refuses to compare a column of
		// one character set under an explicit collation of another.
		return preflightErr("the ALTER changes the character set of primary-key column %s (%s -> %s), which sluice cannot do on MariaDB yet; change it with a native ALTER, or on MySQL", col, from, to)
	}
	if err := r.checkForeignKeyColumns(ctx); err != nil {
		return err
	}
	if err := r.checkChildKeys(ctx); err != nil {
		return err
	}
	if err := r.probeCapture(ctx); err != nil { // capture.go
		return err
	}
	if err := r.probeTriggers(ctx); err != nil {
		return err
	}
	keep := keepPlainIndexes(r.cfg.KeepIndexes, r.cfg.DeferIndexes, r.lag != nil)
	switch {
	case keep && !r.cfg.KeepIndexes:
		r.log.Info("plain secondary indexes are kept during the copy: replicas are watched, and a build after the copy would stop their appliers for its whole duration (--defer-indexes to build them after it anyway)")
	case keep:
		r.log.Info("plain secondary indexes are kept during the copy (--keep-indexes)")
	}
	if err := r.deferIndexes(ctx, keep); err != nil {
		return err
	}
	if err := r.startCheckpoint(ctx); err != nil {
		return err
	}
	return r.shadowReady(ctx)
}

// checkCharNoPadKey refuses, on MariaDB, a primary key with a CHAR column
// in a NO PAD collation: MariaDB answers a range read on such a column
// inconsistently with its equality and its order (a range from a value to
// itself returns a second row: the empty string and 0x00, 'a' and 'a' then
// 0x00, under utf8mb4_uca1400_nopad_as_cs, on 10.11 and 11.8), and the
// copy's ranges then miss a row (the checksum caught it). The binary ones
// too: the index keeps the value padded with spaces ('k' sorts after 'k'
// then a tab) while the range compares it stripped ('k' before 'k' then a
// tab), under utf8mb4_nopad_bin, latin1_nopad_bin and utf8mb4_0900_bin.
func (r *Runner) checkCharNoPadKey(ctx context.Context, pk []schema.Column) error {
	if r.vars.Flavor != dbconn.MariaDB {
		return nil
	}
	for _, c := range pk {
		if c.DataType != "char" || c.Collation == "" {
			continue
		}
		var pads sql.NullBool
		q := "SELECT CONVERT('a' USING " + c.Charset + ") COLLATE " + dbconn.QuoteIdent(c.Collation) + " = CONVERT('a ' USING " + c.Charset + ")"
		if err := r.db.QueryRowContext(ctx, q).Scan(&pads); err != nil {
			return fmt.Errorf("%w: read the pad attribute of collation %s: %w", ErrPreflight, c.Collation, err)
		}
		if pads.Valid && !pads.Bool {
			return preflightErr("primary-key column %s is CHAR in the NO PAD collation %s, whose range reads MariaDB answers inconsistently with its own order, so sluice cannot copy it by ranges; make the column VARCHAR or give it a PAD SPACE collation first, or migrate it on MySQL", c.Name, c.Collation)
		}
	}
	return nil
}

// minimalDefaultKey refuses, on a MariaDB whose binlog_row_image is
// MINIMAL, a key column with a DEFAULT: MariaDB logs a REPLACE that moves a
// row to that default as an update whose after image leaves the column out,
// as if the key had not changed, so the row's new key would be unknown. (A
// session that sets MINIMAL itself is stopped when such an update is read:
// internal/binlog.) Pure.
func minimalDefaultKey(v ServerVars, key rowkey.Cols, triggers bool) error {
	if v.Flavor != dbconn.MariaDB || !strings.EqualFold(v.RowImage, "MINIMAL") || triggers {
		return nil
	}
	for _, c := range key {
		if c.HasDefault && !c.AutoInc {
			return preflightErr("primary-key column %s has a DEFAULT and binlog_row_image is MINIMAL: MariaDB logs a REPLACE that moves a row to the default key without that key, so sluice could not find the row; set GLOBAL binlog_row_image=FULL (or NOBLOB) and restart the application's connections, or use --capture=triggers", c.Name)
		}
	}
	return nil
}

// keyCharsetChange names the first primary-key column whose character set
// differs between tables a and b, or "".
func keyCharsetChange(a, b *schema.Table) (col, from, to string) {
	for _, name := range a.PrimaryKey {
		ca, okA := a.Column(name)
		cb, okB := b.Column(name)
		if okA && okB && ca.Charset != cb.Charset {
			return name, ca.Charset, cb.Charset
		}
	}
	return "", "", ""
}

// shadowReady maps the original's columns to the shadow's and checks the
// new table, for a new shadow and a resumed one.
func (r *Runner) shadowReady(ctx context.Context) error {
	r.mapping = schema.NewMapping(r.orig, r.shadow, func(newName string) (string, bool) {
		return r.alter.SourceColumn(newName, func(n string) bool { _, ok := r.orig.Column(n); return ok })
	})
	for _, p := range r.mapping.Pairs {
		if why := plan.ConversionRefusal(p.From, p.To); why != "" {
			return preflightErr("%s", why)
		}
	}
	for _, name := range r.orig.PrimaryKey { // the row key: rows of the new table are found by its values
		from, _ := r.orig.Column(name)
		if to, ok := r.shadow.Column(name); ok {
			if why := plan.KeyChangeRefusal(from, to); why != "" {
				return preflightErr("%s", why)
			}
		}
	}
	if err := r.checkZone(); err != nil {
		return err
	}
	if err := r.checkShadowVolatile(); err != nil {
		return err
	}
	if err := r.checkFills(ctx); err != nil { // fills.go
		return err
	}
	if err := r.noteNamedChecks(ctx); err != nil {
		return err
	}
	if err := r.noteForeignKeyNames(ctx); err != nil {
		return err
	}
	r.log.Info("shadow table ready", "table", r.names.Shadow, "columns_copied", len(r.mapping.Pairs))
	return nil
}

// execToEnd runs a statement that makes a table of sluice's to its end, even
// when ctx is cancelled meanwhile: a statement cut short on the client may
// still run in the server, and the table it makes would be left behind;
// run to its end, its outcome is known, and teardown drops what it made.
func (r *Runner) execToEnd(ctx context.Context, q string) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	_, err := r.db.ExecContext(cctx, q)
	return err
}

// rowKeyName names the key t's rows are found by, for a message.
func rowKeyName(t *schema.Table) string {
	if t.HasPrimaryKey() {
		return "primary key"
	}
	return "unique key " + dbconn.QuoteIdent(t.KeyIndex) + " (the key rows are found by: the table has no primary key)"
}

func sameKey(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !dbconn.SameName(a[i], b[i]) {
			return false
		}
	}
	return true
}

// checkVolatile refuses, on the copy path, new columns whose value the server
// draws anew at each insert (UUID(), RAND(), AUTO_INCREMENT...): the copy
// inserts a row again each time the application changes it, so such a value
// would change under the application. A default of the current time is
// accepted: a row gets the time it was last copied.
func (r *Runner) checkVolatile() error {
	for _, v := range r.alter.NonDeterministic {
		if v.Kind == ddl.VolatileTime {
			continue
		}
		return preflightErr("%s; %s", v, v.Alternative)
	}
	for name := range r.alter.AutoIncrementRedefined {
		c, ok := r.orig.Column(name)
		if ok && !c.AutoInc && c.Nullable {
			return preflightErr("the ALTER makes %s AUTO_INCREMENT while it may hold NULLs, which would be numbered anew each time sluice copies their row; fill them first, or make it NOT NULL in a migration of its own", c.Name)
		}
	}
	return nil
}

// checkShadowVolatile is the server's word on checkVolatile: a column of the
// new table that takes no copied value and is AUTO_INCREMENT would be
// numbered anew each time a row is copied.
func (r *Runner) checkShadowVolatile() error {
	paired := map[string]bool{}
	for _, p := range r.mapping.Pairs {
		paired[p.To.Name] = true
	}
	var now []string
	for _, v := range r.alter.NonDeterministic {
		if v.Kind == ddl.VolatileTime && !slices.ContainsFunc(now, func(n string) bool { return dbconn.SameName(n, v.Column) }) {
			now = append(now, v.Column)
		}
	}
	for _, c := range r.shadow.Columns {
		if !paired[c.Name] && c.AutoInc {
			return preflightErr("the new column %s is AUTO_INCREMENT: sluice would number a row anew each time it copies it; add it with ALTER TABLE directly (it blocks writes), or add a plain column, fill it, then make it AUTO_INCREMENT", c.Name)
		}
		if !paired[c.Name] && c.DefaultNow && !slices.ContainsFunc(now, func(n string) bool { return dbconn.SameName(n, c.Name) }) {
			now = append(now, c.Name) // a default the server gave (explicit_defaults_for_timestamp=OFF)
		}
	}
	if len(now) > 0 {
		r.log.Warn("new columns take the current time as sluice copies each row: a row holds the time it was last copied, where the server's own ALTER gives every row one moment; to have one, add them in an ALTER of their own (INSTANT) or set them after the run",
			"columns", strings.Join(now, ","))
	}
	return nil
}

// recheckOriginal reads the original's definition again, once the binlog
// reader runs, and stops if it changed since preflight (a column, the
// primary key, an index, a trigger or a foreign key): the shadow, the column
// mapping and the refusals were made for the definition read then.
func (r *Runner) recheckOriginal(ctx context.Context) error {
	now, err := schema.Load(ctx, r.db, r.cfg.Database, r.cfg.Table)
	if err != nil {
		return fmt.Errorf("read %s again: %w", r.orig.Name, err)
	}
	trs := now.Triggers
	if r.queue != nil {
		trs = slicesWithout(trs, r.queue.Triggers[:]) // sluice's own (capture.go)
	}
	same := len(now.Columns) == len(r.orig.Columns) && sameKey(now.PrimaryKey, r.orig.PrimaryKey) &&
		slices.Equal(trs, r.orig.Triggers) && fmt.Sprint(now.ForeignKeys, now.Children) == fmt.Sprint(r.orig.ForeignKeys, r.orig.Children) && len(now.Indexes) == len(r.orig.Indexes)
	for i := 0; same && i < len(now.Columns); i++ {
		a, b := now.Columns[i], r.orig.Columns[i]
		same = a.Name == b.Name && a.ColumnType == b.ColumnType && a.Collation == b.Collation && a.Nullable == b.Nullable && a.Generated == b.Generated
	}
	if !same {
		return fmt.Errorf("%w: %s was altered while sluice prepared its migration; run sluice again", binlog.ErrTableChanged, r.orig.Name)
	}
	return nil
}
