package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicedb/sluice/internal/chunk"
	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/metrics"
	"github.com/sluicedb/sluice/migration"
)

type migrateFlags struct {
	host, user, database, table, alter, dsn string
	tables, alters                          []string // --table, --alter as given (table, alter: the first)
	port                                    int
	passwordFile, defaultsFile, tlsMode     string
	tls                                     dbconn.TLSFiles
	password                                string // refused: only here to say so
	copyWorkers, applyWorkers, checkWorkers int
	chunkTime, progress, cutoverLock        time.Duration
	dropOld, quiet, keepIndexes, postpone   bool
	carryTriggers                           bool
	capture                                 string
	deferIndexes                            bool
	ddlThreads                              int
	ddlBuffer                               int64
	method, format                          string
	approve                                 []string
	replicas, dryRun                        bool
	maxInplace, lockWait                    time.Duration
	lockDeadline                            time.Duration
	maxQueued                               int
	killBlockers                            string
	killMaxRows                             int64
	maxLoad, criticalLoad                   string
	replicaAddrs                            []string
	replicaDiscovery                        bool
	maxLag                                  time.Duration
	restart                                 bool
	checkpointEvery                         time.Duration
	throttleFile, panicFile                 string
	metricsAddr, logFormat                  string
	controlSocket, progressStyle            string
}

// killAfter parses --kill-blockers: "never" (0) or "after=DURATION".
func killAfter(v string) (time.Duration, error) {
	if v == "never" || v == "" {
		return 0, nil
	}
	if d, ok := strings.CutPrefix(v, "after="); ok {
		if dur, err := time.ParseDuration(d); err == nil && dur > 0 {
			return dur, nil
		}
	}
	return 0, fmt.Errorf("--kill-blockers=%s: use never or after=DURATION, e.g. after=30s", v)
}

// connectionFlags registers the flags that say where to connect and what to
// change, shared by migrate and plan.
func connectionFlags(c *cobra.Command, f *migrateFlags) {
	serverFlags(c, f)
	fl := c.Flags()
	fl.StringArrayVar(&f.alters, "alter", nil, `the ALTER clause, e.g. "ADD COLUMN c INT" (a full ALTER TABLE statement of that table is accepted too; partition clauses that move or remove rows are not); one for each --table, in their order`)
	fl.BoolVar(&f.replicas, "replicas", false, "replicas read this server's binlog (detected when connected; say so when they may be down): limits in-place builds to --max-inplace-seconds")
	fl.DurationVar(&f.maxInplace, "max-inplace-seconds", 30*time.Second, "with replicas, the longest estimated in-place index build; longer ones take the copy path")
	fl.DurationVar(&f.lockWait, "lock-wait", time.Second, "longest wait of each metadata-lock attempt (ALTER, LOCK TABLES at checksum and cut-over): no application query waits longer on sluice's request")
	fl.DurationVar(&f.cutoverLock, "cutover-lock-timeout", 0, "longest wait of each table-lock attempt of the copy path (checksum snapshot, cut-over), if it should differ from --lock-wait")
	fl.IntVar(&f.copyWorkers, "threads", 4, "row ranges copied at once")
}

// serverFlags registers the flags that say where to connect and which table.
func serverFlags(c *cobra.Command, f *migrateFlags) {
	fl := c.Flags()
	fl.StringVar(&f.host, "host", "127.0.0.1", "MySQL host")
	fl.IntVar(&f.port, "port", 3306, "MySQL port")
	fl.StringVar(&f.user, "user", "", "MySQL user (default: from --defaults-file, else the login name)")
	fl.StringVar(&f.database, "database", "", "database of the table")
	fl.StringArrayVar(&f.tables, "table", nil, "table to change (repeat --table and --alter to change several tables of the database, swapped together)")
	fl.StringVar(&f.dsn, "dsn", "", "connection as user@tcp(host:port)/database instead of --host/--port/--user/--database (no password in it)")
	fl.StringVar(&f.passwordFile, "password-file", "", "file whose first line is the password")
	fl.StringVar(&f.defaultsFile, "defaults-file", "", "MySQL option file to read user, password, host and port from ([client] section)")
	fl.StringVar(&f.tlsMode, "tls", "false", "TLS for every connection, the binlog one included: false, true (verify the server), skip-verify or preferred")
	fl.StringVar(&f.tls.CA, "tls-ca", "", "PEM file of the CA that signed the server's certificate (implies --tls=true)")
	fl.StringVar(&f.tls.Cert, "tls-cert", "", "PEM file of sluice's client certificate (with --tls-key; implies --tls=true)")
	fl.StringVar(&f.tls.Key, "tls-key", "", "PEM file of the client certificate's private key")
	fl.StringVar(&f.tls.ServerName, "tls-server-name", "", "name the server's certificate must carry (default: --host)")
	fl.StringVar(&f.password, "password", "", "not accepted: use MYSQL_PWD, --password-file or --defaults-file")
	fl.MarkHidden("password")
}

func newMigrate() *cobra.Command {
	var f migrateFlags
	c := &cobra.Command{
		Use:   "migrate",
		Short: "Apply an ALTER to a table online: shadow copy, parallel binlog apply, checksum, atomic swap",
		Long: `migrate changes a table's schema without blocking its writes.

It creates _<table>_new with the ALTER applied, copies rows into it in parallel
primary-key ranges while applying the binlog's changes in parallel, compares both
tables chunk by chunk, and swaps them with RENAME TABLE under a lock whose wait is
bounded by --lock-wait. The original is kept as _<table>_old unless --drop-old.
With --postpone-cutover it keeps the new table in sync after the checksum and
swaps only when told to (sluice cutover). Interrupting it at any moment leaves
the original table's rows untouched; a run with --capture=triggers stopped by
kill -9 leaves its three triggers on the table, which the same command run
again takes up and removes.

The password is read from --password-file, the MYSQL_PWD environment variable,
or the [client] section of --defaults-file; never from the command line.`,
		Example: `  MYSQL_PWD=... sluice migrate --host db1 --user dba --database shop --table orders \
      --alter "ADD COLUMN note VARCHAR(64), ADD INDEX (created_at)"`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := f.pairs(true); err != nil {
				return err
			}
			return runMigrate(c.Context(), c, f)
		},
	}
	connectionFlags(c, &f)
	fl := c.Flags()
	fl.StringVar(&f.method, "method", "auto", "path: auto (the planner's choice, see sluice plan), instant, inplace or copy")
	fl.StringSliceVar(&f.approve, "approve", nil, "risks to accept: drop-column, rename-column, lossy-type, not-null, unique-key (sluice plan lists them)")
	fl.BoolVar(&f.dryRun, "dry-run", false, "print the plan (as sluice plan does) and change nothing")
	fl.StringVar(&f.format, "format", "text", "with --dry-run: text or json")
	fl.IntVar(&f.applyWorkers, "apply-threads", 4, "binlog change batches applied at once")
	fl.IntVar(&f.checkWorkers, "checksum-threads", 4, "ranges compared at once by the checksum")
	fl.DurationVar(&f.chunkTime, "chunk-time", chunk.DefaultTarget, "target duration of one copy statement")
	fl.DurationVar(&f.lockDeadline, "lock-deadline", 5*time.Minute, "how long the attempts to get one metadata lock may go on before sluice gives up, naming the blockers (and how long it waits for XA transactions prepared before it started to end)")
	fl.BoolVar(&f.postpone, "postpone-cutover", false, "after the copy and checksum, keep applying changes and wait for 'sluice cutover' (or DROP TABLE _<table>_cutover) before swapping (copy path only: an ALTER planned INSTANT or in-place is refused with it; add --method copy)")
	fl.IntVar(&f.maxQueued, "max-queued", 0, "end a metadata-lock attempt early once more than this many queries queue behind it (0: only --lock-wait ends it)")
	fl.StringVar(&f.killBlockers, "kill-blockers", "never", "never, or after=DURATION: kill a session that has blocked sluice's metadata-lock request that long (never one under LOCK TABLES or past --kill-max-rows)")
	fl.Int64Var(&f.killMaxRows, "kill-max-rows", 10000, "never kill a blocker whose transaction modified more rows than this")
	fl.StringVar(&f.maxLoad, "max-load", "", "pause the copy while a global status variable reaches its ceiling, e.g. Threads_running=25[,Name=N...] (the apply goes on)")
	fl.StringVar(&f.criticalLoad, "critical-load", "", "stop the migration (original untouched, shadow dropped) when a status ceiling is reached on two checks in a row, e.g. Threads_running=200")
	fl.StringVar(&f.throttleFile, "throttle-flag-file", "", "pause the copy while this file exists")
	fl.DurationVar(&f.maxLag, "max-lag", 1500*time.Millisecond, "pause the copy, and hold the cut-over, while the slowest replica lags more than this (or cannot be reached)")
	fl.StringArrayVar(&f.replicaAddrs, "replica", nil, "a replica to watch, host:port (repeatable; reached with the same user and password)")
	fl.BoolVar(&f.replicaDiscovery, "replica-discovery", true, "find the replicas with SHOW REPLICAS, from this server down")
	fl.BoolVar(&f.restart, "restart", false, "drop the work an earlier run of this migration left (its new table and checkpoint) and start over, instead of resuming it")
	fl.DurationVar(&f.checkpointEvery, "checkpoint-interval", 10*time.Second, "how often the copy records its progress; a resumed run copies at most about this much again")
	fl.StringVar(&f.panicFile, "panic-flag-file", "", "stop the migration (original untouched, shadow dropped) once this file exists")
	fl.BoolVar(&f.keepIndexes, "keep-indexes", false, "keep plain secondary indexes during the copy instead of building them after it (the default while replicas are watched: a build after the copy would stop their appliers for its whole duration); unique ones are always built after the copy")
	fl.BoolVar(&f.deferIndexes, "defer-indexes", false, "build secondary indexes after the copy even while replicas are watched (faster; the build lags the replicas by its duration)")
	fl.IntVar(&f.ddlThreads, "ddl-threads", 0, "innodb_ddl_threads and innodb_parallel_read_threads for index builds (default: the planner's, one per server CPU up to 8)")
	fl.Int64Var(&f.ddlBuffer, "ddl-buffer-size", 0, "innodb_ddl_buffer_size in bytes for index builds (default: the planner's, sized to the sort within the free memory)")
	carryTriggersFlag(c, &f)
	captureFlag(c, &f)
	fl.BoolVar(&f.dropOld, "drop-old", false, "drop the original table after the swap instead of keeping it as _<table>_old")
	fl.DurationVar(&f.progress, "progress-interval", 5*time.Second, "how often to print progress")
	fl.StringVar(&f.logFormat, "log-format", "text", "log lines as text (key=value) or json (one object a line)")
	fl.StringVar(&f.metricsAddr, "metrics-addr", "", "serve Prometheus metrics of the run at http://ADDR/metrics (HOST:PORT; :PORT listens on 127.0.0.1 only)")
	fl.StringVar(&f.controlSocket, "control-socket", "", "unix socket for sluice ctl (mode 0600; default: DATABASE.TABLE.sock in $XDG_RUNTIME_DIR/sluice, else in sluice-UID under the temporary directory; off: none)")
	fl.StringVar(&f.progressStyle, "progress-style", "auto", "progress as a live bar (bar), as log lines every --progress-interval (lines), or a bar when stderr is a terminal and logs are text (auto); several tables always get lines")
	fl.BoolVar(&f.quiet, "quiet", false, "print only errors and the final summary")
	return c
}

func runMigrate(ctx context.Context, c *cobra.Command, f migrateFlags) error {
	if c.Flags().Changed("password") {
		return errPasswordFlag
	}
	if f.dryRun {
		return runPlan(ctx, c, f)
	}
	conn, database, err := connection(c, f)
	if err != nil {
		return err
	}
	level := slog.LevelInfo
	if f.quiet {
		level = slog.LevelWarn
	}
	opts := &slog.HandlerOptions{Level: level}
	drawBar, err := useBar(f.progressStyle, f.logFormat, f.quiet, c.ErrOrStderr())
	if err != nil {
		return err
	}
	var pb *bar
	logOut := c.ErrOrStderr()
	if drawBar && len(f.tables) == 1 {
		pb = newBar(logOut)
		logOut = pb
	}
	var handler slog.Handler
	switch f.logFormat {
	case "text":
		handler = slog.NewTextHandler(logOut, opts)
	case "json":
		handler = slog.NewJSONHandler(logOut, opts)
	default:
		return fmt.Errorf("--log-format %q: use text or json", f.logFormat)
	}
	if pb != nil {
		handler = dropProgress{handler}
	}
	logger := slog.New(handler)
	kill, err := killAfter(f.killBlockers)
	if err != nil {
		return err
	}
	cfg := migration.Config{
		Conn: conn, Database: database, Table: f.table, Alter: f.alter,
		CopyWorkers: f.copyWorkers, ApplyWorkers: f.applyWorkers, ChecksumWorkers: f.checkWorkers, ChunkTime: f.chunkTime,
		PostponeCutover: f.postpone, CutoverLockTimeout: f.cutoverLock,
		KeepIndexes: f.keepIndexes, DeferIndexes: f.deferIndexes, DDLThreads: f.ddlThreads, DDLBufferSize: f.ddlBuffer,
		DropOld: f.dropOld, CarryTriggers: f.carryTriggers, Capture: f.capture, ProgressInterval: f.progress, Logger: logger,
		Method: f.method, Approve: f.approve, Replicas: f.replicas, MaxInplace: f.maxInplace, LockWait: f.lockWait,
		LockDeadline: f.lockDeadline, MaxQueued: f.maxQueued, KillAfter: kill, KillMaxRows: f.killMaxRows,
		MaxLoad: f.maxLoad, CriticalLoad: f.criticalLoad, ThrottleFlagFile: f.throttleFile, PanicFlagFile: f.panicFile,
		ReplicaDiscovery: f.replicaDiscovery, ReplicaAddrs: f.replicaAddrs, MaxLag: f.maxLag,
		Restart: f.restart, CheckpointInterval: f.checkpointEvery, Version: version,
	}
	var observers []func(func() migration.Status)
	cfg.Observe = func(s func() migration.Status) {
		for _, o := range observers {
			o(s)
		}
	}
	if pb != nil {
		observers = append(observers, func(s func() migration.Status) { pb.start(ctx, s) })
		defer pb.stop()
	}
	if f.metricsAddr != "" {
		l, err := metrics.Listen(f.metricsAddr)
		if err != nil {
			return err
		}
		board := &metrics.Board{}
		observers = append(observers, board.Add)
		mctx, stop := context.WithCancel(ctx)
		defer stop()
		go metrics.Serve(mctx, l, board, logger)
		logger.Info("metrics served", "url", "http://"+l.Addr().String()+"/metrics")
	}
	if f.controlSocket != "off" {
		sockets := &controlSockets{path: f.controlSocket, server: fmt.Sprintf("%s:%d", conn.Host, conn.Port), ctx: ctx, log: logger}
		defer sockets.close()
		cfg.Attach = sockets.attach
	}
	if len(f.tables) > 1 {
		return runGroup(ctx, c, f, cfg)
	}
	r, err := migration.New(cfg)
	if err != nil {
		return err
	}
	res, err := r.Run(ctx)
	if pb != nil {
		pb.stop()
	}
	if err != nil && res.Kept != "" {
		return fmt.Errorf("%w\nsluice: the new table %s.%s and its checkpoint are kept: run the same command again to resume, or add --restart to start over", err, database, res.Kept)
	}
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("interrupted during %s; the original table %s.%s is untouched and no lock is held", r.Phase(), database, f.table)
		}
		return err
	}
	printResult(c.OutOrStdout(), database, f.table, res)
	return nil
}

// printResult prints what a migration of table did.
func printResult(out io.Writer, database, table string, res migration.Result) {
	if res.AlreadyDone {
		fmt.Fprintf(out, "sluice: %s.%s was already migrated by an earlier run, which stopped after the swap; its leftovers are dropped\n", database, table)
		return
	}
	if res.Resumed {
		fmt.Fprintf(out, "sluice: resumed the earlier run from its checkpoint (%d rows had been copied; %d rows copied after it were copied again)\n", res.ResumedRows, res.Recopied)
	}
	if res.LockGuardBlind != "" {
		fmt.Fprintf(out, "sluice: warning: %s\n", res.LockGuardBlind)
	}
	switch res.Path {
	case "instant":
		fmt.Fprintf(out, "sluice: %s.%s changed INSTANTly in %s (%d metadata-lock attempt(s))\n", database, table, res.Total.Round(time.Millisecond), res.LockAttempts)
		return
	case "in-place":
		if res.DDL == nil {
			fmt.Fprintf(out, "sluice: %s.%s changed in place in %s (the server's own index build settings)\n", database, table, res.Total.Round(time.Millisecond))
			return
		}
		fmt.Fprintf(out, "sluice: %s.%s changed in place in %s with innodb_ddl_threads=%d innodb_ddl_buffer_size=%d innodb_parallel_read_threads=%d; peak DDL memory %s\n",
			database, table, res.Total.Round(time.Millisecond), res.DDL.Threads, res.DDL.BufferBytes, res.DDL.ReadThreads, mib(res.DDLPeakBytes))
		return
	}
	fmt.Fprintf(out, "sluice: %s.%s migrated in %s: %d rows copied, %d changes applied, checksum %d rows in %d chunks, tables locked %s for the swap\n",
		database, table, res.Total.Round(time.Millisecond), res.RowsCopied, res.KeysApplied, res.ChecksumRows, res.ChecksumChunks,
		res.CutoverLock.Round(time.Millisecond))
	fmt.Fprintf(out, "sluice: %d rows changed after the checksum were compared in both tables before the swap\n", res.ChangedRowsVerified)
	if res.SlowestChunk > 0 {
		fmt.Fprintf(out, "sluice: slowest copy chunk %s (%d rows), target %s\n", res.SlowestChunk.Round(time.Millisecond), res.SlowestChunkRows, res.ChunkTarget)
	}
	if len(res.RenamedChecks) > 0 {
		fmt.Fprintf(out, "sluice: the CHECK constraints %s keep their conditions under generated names (%s_chk_N): MySQL keeps constraint names unique in a database and cannot rename one\n",
			strings.Join(res.RenamedChecks, ", "), table)
	}
	if len(res.RenamedForeignKeys) > 0 {
		fmt.Fprintf(out, "sluice: foreign keys renamed on the new table (MySQL keeps constraint names unique in a database): %s\n", strings.Join(res.RenamedForeignKeys, ", "))
	}
	if len(res.ChecksumSkipped) > 0 {
		fmt.Fprintf(out, "sluice: columns the checksum compared only as NULL or not (their conversion has no exact SQL form): %s\n", strings.Join(res.ChecksumSkipped, ", "))
	}
	if res.Throttled > 0 {
		fmt.Fprintf(out, "sluice: the copy paused for %s in all (--max-load, --critical-load, --throttle-flag-file, --max-lag, sluice ctl pause)\n", res.Throttled.Round(time.Millisecond))
	}
	if len(res.Replicas) > 0 {
		fmt.Fprintf(out, "sluice: replicas %s: worst lag %s; the copy paused %s and the cut-over waited %s for them\n", strings.Join(res.Replicas, ", "),
			res.ReplicaLagMax.Round(10*time.Millisecond), res.ReplicaPaused.Round(time.Millisecond), res.CutoverLagWait.Round(time.Millisecond))
	}
	if res.OldTable != "" {
		fmt.Fprintf(out, "sluice: the original table is kept as %s.%s; drop it when you no longer need it\n", database, res.OldTable)
	}
}

// errPasswordFlag refuses --password.
var errPasswordFlag = errors.New("passwords are not accepted on the command line (other users can read it in the process list): use MYSQL_PWD, --password-file or --defaults-file")

func mib(n int64) string {
	if n <= 0 {
		return "unknown"
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

// carryTriggersFlag is --carry-triggers, for migrate and plan.
func carryTriggersFlag(c *cobra.Command, f *migrateFlags) {
	c.Flags().BoolVar(&f.carryTriggers, "carry-triggers", false, "give the new table copies of the table's triggers, made under the cut-over's lock right before the swap, under the other name (_name, or name for _name): a trigger's name is unique in its database")
}

// captureFlag is --capture, for migrate and plan.
func captureFlag(c *cobra.Command, f *migrateFlags) {
	c.Flags().StringVar(&f.capture, "capture", "binlog", "how the copy path learns of the application's changes: binlog (read as a replica) or triggers (three triggers on the table record the changed keys in a queue table: for a server whose binlog sluice may not read; the application's writes pay for them)")
}
