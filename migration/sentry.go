package migration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/go-sql-driver/mysql"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/mdl"
)

// MariaDB refuses RENAME TABLE under LOCK TABLES (MySQL allows it since
// 8.0.13), so there the swap is sent from a second connection while the
// first holds the locks, and everything rests on the order in which the
// server grants the locks once they are released. gh-ost's form of this
// (lock the original and a sentry under the old name, queue the RENAME, drop
// the sentry, unlock) loses writes: the server takes a statement's metadata
// locks in the byte order of their names, so its RENAME waits on the first
// locked name it meets (_t_del sorts before t), and the application's writes
// queued on the original are granted the moment the locks go, before the
// RENAME has even asked for the original. They land in the table about to
// become the old one, after the last change was applied.
//
// Here the RENAME is made to wait on the original itself, where a waiting
// exclusive request goes ahead of every write queued before or after it:
//
//  1. A sentry table is created under a name that sorts right after the
//     original's (the original's name is its prefix, sentryName).
//  2. The locking connection takes LOCK TABLES original READ, sentry WRITE:
//     writes stop, reads go on. The shadow is left unlocked: the last changes
//     are applied and checked on another connection.
//  3. A second connection sends RENAME TABLE original TO sentry, shadow TO
//     original, sentry TO old. The names sorted before the original (the
//     shadow's and the old one, for a lower-case name) are free, so it takes
//     them and waits on the original.
//  4. A probe proves it waits there: a read of the original, which the
//     READ lock allows, is refused at once while an exclusive request is
//     queued on it. If the probe gets in, the RENAME waits elsewhere (another
//     session holds the shadow): it is killed and the cut-over tried again.
//  5. The locking connection drops the sentry and unlocks. The RENAME goes
//     first; the writes queued behind it reach the new table.
//
// If the locking connection is lost before step 5, its locks go and the RENAME
// fails on the sentry, which still exists: nothing is renamed, and the writes
// land in the original, which is still the table the binlog is read for. A
// sentry left behind is dropped by the next run (its checkpoint names it).

// sentryColumn is the sentry's only column: no table of the user's has a
// name like it, so a table of that one column is sluice's sentry.
const sentryColumn = "sluice_cutover_sentry"

// sentrySuffix makes the sentry's name from the original's.
const sentrySuffix = "_sluice_swap"

// sentryName is the sentry's name for table orig: a name whose metadata-lock
// key sorts right after orig's, so that a statement locking both meets orig
// first. orig + anything sorts after orig (the key ends in a zero byte); a
// name too long for the suffix is cut before an ASCII character below '~',
// which is raised to '~'. Case folding (lower_case_table_names) keeps both
// orders. It is "" if no such name exists (a name of 64 characters none of
// which is below '~').
func sentryName(orig string) string {
	if utf8.RuneCountInString(orig)+len(sentrySuffix) <= 64 {
		return orig + sentrySuffix
	}
	for k := len(orig) - 1; k >= 0; k-- {
		if orig[k] < '~' {
			return orig[:k] + "~"
		}
	}
	return ""
}

// renameUnderLock reports whether the server renames tables under LOCK TABLES.
func (r *Runner) renameUnderLock() bool { return r.vars.Flavor != dbconn.MariaDB }

// makeSentry records the sentry in the checkpoint first, so that a later run
// drops it, and creates it (if the last attempt dropped it).
func (r *Runner) makeSentry(ctx context.Context) error {
	name := sentryName(r.orig.Name)
	if name == "" {
		return fmt.Errorf("the name %s leaves no name for the cut-over's sentry table on MariaDB; rename the table first", r.orig.Name)
	}
	if err := r.recordSentry(ctx, name); err != nil {
		return err
	}
	r.sentry = name
	q := "CREATE TABLE IF NOT EXISTS " + dbconn.QuoteTable(r.cfg.Database, name) + " (" + dbconn.QuoteIdent(sentryColumn) +
		" INT) ENGINE=InnoDB COMMENT='sluice: while this table exists the cut-over cannot rename the table to this name'"
	if _, err := r.db.ExecContext(ctx, q); err != nil {
		return fmt.Errorf("create the cut-over sentry %s: %w", name, err)
	}
	if ok, err := r.isSentry(ctx, name); err != nil || !ok {
		return errors.Join(err, fmt.Errorf("%s exists and is not sluice's cut-over sentry; the cut-over stops", name))
	}
	return nil
}

// recordSentry writes the sentry's name into the checkpoint.
func (r *Runner) recordSentry(ctx context.Context, name string) error {
	r.ckptMu.Lock()
	defer r.ckptMu.Unlock()
	if r.ckpt == nil || r.ckpt.Sentry == name {
		return nil
	}
	r.ckpt.Sentry = name
	if !r.ckpt.written() {
		return nil
	}
	return r.saveCheckpoint(ctx, r.ckpt)
}

// isSentry reports whether table name is a cut-over sentry: one column,
// sentryColumn.
func (r *Runner) isSentry(ctx context.Context, name string) (bool, error) {
	var cols, sentry int
	err := r.db.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(COLUMN_NAME = ?), 0) FROM information_schema.COLUMNS
		WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?`, sentryColumn, r.cfg.Database, name).Scan(&cols, &sentry)
	if err != nil {
		return false, err
	}
	return cols == 1 && sentry == 1, nil
}

// dropSentry drops table name if it is a cut-over sentry (a run that died in
// its cut-over left it).
func (r *Runner) dropSentry(ctx context.Context, name string) error {
	if name == "" {
		return nil
	}
	ok, err := r.isSentry(ctx, name)
	if err != nil || !ok {
		return err
	}
	r.log.Info("dropping the cut-over sentry an earlier run left", "table", name)
	return r.dropGuarded(ctx, name)
}

// renameBySentry is steps 3 to 5, on lock, which holds the original READ and
// the sentry WRITE after the last changes were applied: it returns once the
// RENAME has ended, with its error.
func (r *Runner) renameBySentry(ctx context.Context, lock *sql.Conn) error {
	conn, err := r.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer discard(conn) // its lock_wait_timeout is the swap's
	var id int64
	if err := conn.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
		return err
	}
	// Its wait is the cut-over's request: the guard watches it (kill
	// policy, pile-ups) as it watches the locking connection's.
	mdl.AlsoWaits(ctx, id)
	// It waits only while the locking connection drops the sentry.
	if _, err := conn.ExecContext(ctx, fmt.Sprintf("SET SESSION lock_wait_timeout = %d", r.lockGuard().Policy.LockWaitSeconds())); err != nil {
		return err
	}
	origQ, sentryQ := r.orig.Quoted(), dbconn.QuoteTable(r.cfg.Database, r.sentry)
	done := make(chan error, 1)
	go func() {
		_, err := conn.ExecContext(context.WithoutCancel(ctx), "RENAME TABLE "+origQ+" TO "+sentryQ+", "+
			dbconn.QuoteTable(r.cfg.Database, r.names.Shadow)+" TO "+origQ+", "+sentryQ+" TO "+dbconn.QuoteTable(r.cfg.Database, r.names.Old))
		done <- err
	}()
	abandon := func(why error) error {
		// The RENAME must not run: it is still waiting on our locks. Kill
		// it, and wait for it to end before the locks go.
		kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		r.db.ExecContext(kctx, fmt.Sprintf("KILL QUERY %d", id))
		if err := <-done; err == nil {
			return fmt.Errorf("%w (and the RENAME ran)", why)
		}
		return why
	}
	if ended, err := r.waitMDLWait(ctx, id, done); ended {
		return err // it could not wait: nothing was renamed unless err is nil
	} else if err != nil {
		return abandon(err)
	}
	if err := r.probeQueued(ctx); err != nil {
		return abandon(err)
	}
	if err := r.noneQueuedAhead(ctx, id); err != nil {
		return abandon(err)
	}
	if _, err := lock.ExecContext(ctx, "DROP TABLE "+sentryQ); err != nil {
		return abandon(fmt.Errorf("drop the cut-over sentry: %w", err))
	}
	if _, err := lock.ExecContext(ctx, "UNLOCK TABLES"); err != nil {
		// The locks go with the connection, which the guard discards.
		return fmt.Errorf("unlock tables: %w", errors.Join(err, <-done))
	}
	return <-done
}

// probeQueued checks that an exclusive lock request waits on the original
// (step 4): a read of it, which the cut-over's READ lock allows, must be
// refused without waiting. Queued behind our locks, that request can only be
// the RENAME's (or another DDL's on the original, which holds the writes
// back as well).
func (r *Runner) probeQueued(ctx context.Context) error {
	conn, err := r.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer discard(conn)
	if _, err := conn.ExecContext(ctx, "SET SESSION lock_wait_timeout = 0"); err != nil {
		return err
	}
	// A RENAME still taking the locks sorted before the original's gets
	// there within moments.
	for i := 0; ; i++ {
		_, err := conn.ExecContext(ctx, "SELECT 1 FROM "+r.orig.Quoted()+" LIMIT 0")
		var me *mysql.MySQLError
		switch {
		case errors.As(err, &me) && me.Number == 1205:
			return nil
		case err != nil:
			return fmt.Errorf("probe the cut-over's RENAME: %w", err)
		case i == 20:
			return fmt.Errorf("%w: the RENAME waits on a lock other than the original's (another session holds %s or %s)",
				mdl.ErrRetry, r.names.Shadow, r.names.Old)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// noneQueuedAhead checks that no other session could take the original
// before the RENAME, whose request (connection rename) waits there now. The
// server grants waiting exclusive requests in their order: a TRUNCATE, ALTER
// or LOCK TABLES ... WRITE queued before the RENAME would run on the table
// about to become the old one, and be lost. Reads and row writes queue
// behind it (the RENAME's request goes first); what asks later queues behind
// it too. Where the lock guard sees metadata locks, a session holding or
// waiting for a lock on the original that shuts out writes (an ALTER's
// upgradable one included) is one; where it does not, the session list is
// read: a session running anything but a read or a row write that names the
// original, or waits on a metadata lock in its database. That list shows
// other accounts' sessions only to one with PROCESS, which preflight asks for
// on MariaDB (grants.go).
func (r *Runner) noneQueuedAhead(ctx context.Context, rename int64) error {
	if r.res.LockGuardBlind == "" && !sessionListOnly(r.cfg.Database) {
		return r.noneAheadByLocks(ctx, rename)
	}
	return r.noneAheadInList(ctx, rename)
}

// noneAheadByLocks is noneQueuedAhead from performance_schema's metadata
// locks.
func (r *Runner) noneAheadByLocks(ctx context.Context, rename int64) error {
	ss, err := mdl.Sessions(ctx, r.db, r.cfg.Database, []string{r.orig.Name}, r.cfg.Conn.RunID, rename)
	if err != nil {
		return err
	}
	for _, s := range ss {
		for _, typ := range slices.Concat(s.Held, s.Pending) {
			switch typ {
			case "EXCLUSIVE", "SHARED_NO_READ_WRITE", "SHARED_NO_WRITE", "SHARED_UPGRADABLE":
				return fmt.Errorf("%w: session %d holds or asks for %s on %s (%q), which the server could run on %s before the RENAME; the cut-over tries again",
					mdl.ErrRetry, s.ID, typ, r.orig.Name, clip(s.Query, 80), r.orig.Name)
			}
		}
	}
	return nil
}

// noneAheadInList is noneQueuedAhead from the session list, where the lock
// guard is blind.
func (r *Runner) noneAheadInList(ctx context.Context, rename int64) error {
	// TIME_MS is the time in the current state: a session that has waited
	// on a lock for less time than the RENAME asked after it.
	rows, err := r.db.QueryContext(ctx, `SELECT ID, COALESCE(DB, ''), COALESCE(STATE, ''), COALESCE(INFO, ''), TIME_MS
		FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID() AND (INFO IS NOT NULL OR ID = ?)`, rename)
	if err != nil {
		return fmt.Errorf("list the sessions before the cut-over's RENAME: %w", err)
	}
	defer rows.Close()
	type session struct {
		id              int64
		db, state, info string
		ms              float64
	}
	var ss []session
	renameMS := -1.0
	for rows.Next() {
		var s session
		if err := rows.Scan(&s.id, &s.db, &s.state, &s.info, &s.ms); err != nil {
			return err
		}
		if s.id == rename {
			renameMS = s.ms
			continue
		}
		ss = append(ss, s)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, s := range ss {
		later := renameMS >= 0 && s.ms < renameMS && strings.Contains(strings.ToLower(s.state), "metadata lock")
		if !later && aheadOfRename(s.state, s.info, r.orig.Name, s.db == r.cfg.Database) {
			return fmt.Errorf("%w: session %d runs %q, which the server could run on %s before the RENAME; the cut-over tries again",
				mdl.ErrRetry, s.id, clip(s.info, 80), r.orig.Name)
		}
	}
	return nil
}

// sessionListOnly makes, in tests, noneQueuedAhead read the session list as
// where the guard is blind (export_test.go); it is false otherwise.
var sessionListOnly = func(database string) bool { return false }

// aheadOfRename reports whether a session in state running statement info
// may take table before a RENAME queued on it: a statement other than a read
// or a row write that names table, or, in table's database (here), waits on
// a metadata lock.
func aheadOfRename(state, info, table string, here bool) bool {
	kw := firstKeyword(info)
	if kw == "SET" {
		// SET STATEMENT ... FOR a statement: that statement.
		if m := setStatementFor.FindStringSubmatch(skipComments(info)); m != nil {
			return aheadOfRename(state, m[1], table, here)
		}
	}
	switch kw {
	case "SELECT", "INSERT", "UPDATE", "DELETE", "REPLACE", "WITH", "VALUES", "TABLE", "LOAD",
		"SHOW", "DESCRIBE", "DESC", "EXPLAIN", "SET", "DO", "BEGIN", "START", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE", "XA":
		return false
	}
	if here && strings.Contains(strings.ToLower(state), "metadata lock") {
		return true
	}
	return namesTable(info, table)
}

// setStatementFor matches MariaDB's SET STATEMENT ... FOR statement.
var setStatementFor = regexp.MustCompile(`(?is)^SET\s+STATEMENT\s.*?\sFOR\s+(.*)$`)

// firstKeyword is the first word of statement s, upper-cased, past leading
// comments, blanks and parentheses; "" if none is found, or if a comment is
// one the server runs (/*! ... */, /*M! ... */).
func firstKeyword(s string) string {
	s = skipComments(s)
	end := strings.IndexFunc(s, func(c rune) bool { return !unicode.IsLetter(c) })
	if end < 0 {
		end = len(s)
	}
	return strings.ToUpper(s[:end])
}

// skipComments returns s past its leading comments, blanks and
// parentheses: "" at a comment the server runs, or one that does not end.
func skipComments(s string) string {
	for {
		s = strings.TrimLeft(s, " \t\r\n(")
		switch {
		case strings.HasPrefix(s, "/*!"), strings.HasPrefix(s, "/*M!"):
			return ""
		case strings.HasPrefix(s, "/*"):
			end := strings.Index(s, "*/")
			if end < 0 {
				return ""
			}
			s = s[end+2:]
		case strings.HasPrefix(s, "#"), strings.HasPrefix(s, "-- "):
			end := strings.IndexByte(s, '\n')
			if end < 0 {
				return ""
			}
			s = s[end+1:]
		default:
			return s
		}
	}
}

// namesTable reports whether statement s names table, as a whole word,
// quoted or not, in any case.
func namesTable(s, table string) bool {
	// Quoted, a backtick in a name is doubled.
	return namesWord(s, table) || strings.Contains(table, "`") && namesWord(s, strings.ReplaceAll(table, "`", "``"))
}

// namesWord reports whether s holds word, in any case, between characters
// that cannot be part of a name.
func namesWord(s, table string) bool {
	ls, lt := strings.ToLower(s), strings.ToLower(table)
	ident := func(c byte) bool {
		return c == '_' || c == '$' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 0x80
	}
	for from := 0; ; {
		k := strings.Index(ls[from:], lt)
		if k < 0 {
			return false
		}
		k += from
		end := k + len(lt)
		if (k == 0 || !ident(ls[k-1])) && (end == len(ls) || !ident(ls[end])) {
			return true
		}
		from = k + 1
	}
}

// clip cuts s to n bytes for a message.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// waitMDLWait waits until connection id waits for a metadata lock. If its
// statement ends first, ended is true and err is the statement's result.
func (r *Runner) waitMDLWait(ctx context.Context, id int64, done <-chan error) (ended bool, err error) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		var state sql.NullString
		err := r.db.QueryRowContext(ctx, "SELECT STATE FROM information_schema.PROCESSLIST WHERE ID = ?", id).Scan(&state)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return false, err
		}
		if strings.Contains(strings.ToLower(state.String), "metadata lock") {
			return false, nil
		}
		select {
		case err := <-done:
			if err != nil {
				err = fmt.Errorf("the RENAME ended before it waited on the cut-over's locks: %w", err)
			}
			return true, err
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(time.Millisecond):
		}
		if time.Now().After(deadline) {
			return false, fmt.Errorf("the RENAME was not seen waiting on the cut-over's locks within 5s (state %q)", state.String)
		}
	}
}
