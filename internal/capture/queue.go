// Package capture records the primary keys of changed rows with triggers, for
// servers where sluice may not read the binlog (no REPLICATION privileges, the
// binlog off). Three AFTER triggers on the original write each changed row's
// key into a small queue table, inside the application's own transaction: a
// key is in the queue exactly when its change committed. A Poller reads the
// queue into the same apply as binlog capture (a binlog.Sink), and deletes a
// queue row once every key read before it was applied or is held, in the
// scheduler's memory, until its range is copied (Forget): the queue is not a
// record of the changes still to apply, and a run by triggers that dies
// starts over.
//
// The queue's sequence numbers are given out when a row is written, not when
// its transaction commits: a later number may become visible first. The
// Poller therefore never takes "every number above the last one read" as
// proof that nothing lies below it; a full read of the queue (Drain, under the
// cut-over's lock, where every change has committed) finds every row not yet
// read.
package capture

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/rowkey"
	"github.com/sluicedb/sluice/internal/schema"
)

// Queue is the queue table of one original table and the triggers that fill
// it.
type Queue struct {
	orig *schema.Table
	key  rowkey.Cols
	// Table is the queue table's name, in the original's database.
	Table string
	// Triggers are the names of the insert, update and delete triggers.
	Triggers [3]string
	// Formats: the triggers record a write made in statement format
	// (MariaDB; on MySQL every read of binlog_format warns, in the
	// application's own session, so they do not look).
	Formats bool
	// StopStatements: the poller fails with ErrStatementFormat on a write
	// recorded as made in statement format (the server writes a binlog).
	StopStatements bool
}

// LogColumn records how the session that made a change logged it: logRow,
// logStatement or logNone.
const LogColumn = "_sluice_log"

const (
	logRow       = 0 // in row format
	logStatement = 1 // in statement format (Formats only)
	logNone      = 2 // not at all: sql_log_bin=0
)

// ErrStatementFormat is returned by the poller for a change written in
// statement format: a replica replays such a statement with the capture's
// triggers, which write queue rows of its own, and its applier stops on the
// queue's next logged change.
var ErrStatementFormat = errors.New("a statement-format write (binlog_format=STATEMENT in a session) reached the change queue: replicas replay it with the capture's triggers, whose queue rows then collide with the queue's logged changes and stop their appliers")

// SeqColumn is the queue's sequence number, beside the key's columns: a
// name no application key is expected to have (New refuses one that has).
const SeqColumn = "_sluice_seq"

// seq is SeqColumn quoted.
var seq = dbconn.QuoteIdent(SeqColumn)

// ErrKeyType is returned by New for a key sluice cannot record by trigger.
var ErrKeyType = errors.New("capture: key column type not recorded by trigger")

// New describes the queue of table orig, whose row key is key, named after
// base (the names of the queue and its triggers: _base_chg, _base_chg_i,
// _base_chg_u, _base_chg_d, within MySQL's 64 characters). A TIMESTAMP key
// column is refused (ErrKeyType): a trigger would copy its value through the
// application session's time zone, which may repeat an hour.
func New(orig *schema.Table, key rowkey.Cols, base string) (*Queue, error) {
	if orig == nil || len(key) == 0 {
		return nil, errors.New("capture: a table and its key are required")
	}
	for _, c := range key {
		if dbconn.SameName(c.Name, SeqColumn) || dbconn.SameName(c.Name, LogColumn) {
			return nil, fmt.Errorf("%w: key column %s has the name of one of the queue's own columns", ErrKeyType, c.Name)
		}
		if c.DataType == "timestamp" {
			return nil, fmt.Errorf("%w: key column %s is a TIMESTAMP (a trigger copies it through the session's time zone)", ErrKeyType, c.Name)
		}
	}
	t, trs := Names(base)
	return &Queue{orig: orig, key: key, Table: t, Triggers: trs}, nil
}

// Names returns the names of the queue of table base and of its insert,
// update and delete triggers: _base_chg, _base_chg_i, _base_chg_u and
// _base_chg_d, the table's part shortened to keep them within MySQL's 64
// characters.
func Names(base string) (table string, triggers [3]string) {
	const extra = len("__chg_i")
	if r := []rune(base); len(r) > 64-extra {
		// Two long names that share a prefix keep apart: a hash of the
		// whole name ends the shortened one.
		sum := sha256.Sum256([]byte(base))
		base = string(r[:64-extra-9]) + "_" + hex.EncodeToString(sum[:4])
	}
	t := "_" + base + "_chg"
	return t, [3]string{t + "_i", t + "_u", t + "_d"}
}

// Comment marks a queue table as sluice's, for table (so that a table of
// the same name that is not is never dropped as a leftover).
func Comment(table string) string { return "sluice change-capture queue of " + table }

// quoted returns the queue table's qualified name.
func (q *Queue) quoted() string { return dbconn.QuoteTable(q.orig.Database, q.Table) }

// CreateSQL returns the statements that create the queue table, then its
// triggers. The table has a sequence number and the key columns with the
// original's types, character sets and collations. An insert records the new
// key, a delete the old one, an update the new one and, when the key's bytes
// changed, the old one first.
func (q *Queue) CreateSQL() []string {
	cols := []string{seq + " BIGINT UNSIGNED NOT NULL AUTO_INCREMENT", dbconn.QuoteIdent(LogColumn) + " TINYINT UNSIGNED NOT NULL DEFAULT 0"}
	for _, c := range q.key {
		def := dbconn.QuoteIdent(c.Name) + " " + c.ColumnType
		if c.Charset != "" {
			def += " CHARACTER SET " + c.Charset + " COLLATE " + dbconn.QuoteIdent(c.Collation)
		}
		cols = append(cols, def+" NOT NULL")
	}
	table := "CREATE TABLE " + q.quoted() + " (" + strings.Join(cols, ", ") + ", PRIMARY KEY (" + seq + ")) ENGINE=InnoDB COMMENT='" +
		strings.ReplaceAll(Comment(q.orig.Name), "'", "''") + "'"
	on := " ON " + q.orig.Quoted() + " FOR EACH ROW "
	trig := func(name, event string) string {
		return "CREATE TRIGGER " + dbconn.QuoteTable(q.orig.Database, name) + " AFTER " + event + on
	}
	// The old key is recorded only when its bytes changed: an update that
	// keeps the key (most of them) writes one queue row.
	var same []string
	for _, c := range q.key {
		o, n := "OLD."+dbconn.QuoteIdent(c.Name), "NEW."+dbconn.QuoteIdent(c.Name)
		if c.Charset != "" {
			o, n = "CAST("+o+" AS BINARY)", "CAST("+n+" AS BINARY)"
		}
		same = append(same, o+" <=> "+n)
	}
	return []string{
		table,
		trig(q.Triggers[0], "INSERT") + q.insert("NEW"),
		trig(q.Triggers[1], "UPDATE") + "BEGIN IF NOT (" + strings.Join(same, " AND ") + ") THEN " + q.insert("OLD") +
			"; END IF; " + q.insert("NEW") + "; END",
		trig(q.Triggers[2], "DELETE") + q.insert("OLD"),
	}
}

// insert returns the statement that records the key of row (NEW or OLD),
// and how the session logs it.
func (q *Queue) insert(row string) string {
	logged := fmt.Sprintf("IF(@@session.sql_log_bin, %d, %d)", logRow, logNone)
	if q.Formats {
		// MIXED logs a write that fires these triggers in row format
		// (they insert into an AUTO_INCREMENT column).
		logged = fmt.Sprintf("IF(@@session.sql_log_bin, IF(@@session.binlog_format = 'STATEMENT', %d, %d), %d)", logStatement, logRow, logNone)
	}
	names, vals := []string{dbconn.QuoteIdent(LogColumn)}, []string{logged}
	for _, c := range q.key {
		names = append(names, dbconn.QuoteIdent(c.Name))
		vals = append(vals, row+"."+dbconn.QuoteIdent(c.Name))
	}
	return "INSERT INTO " + q.quoted() + " (" + strings.Join(names, ", ") + ") VALUES (" + strings.Join(vals, ", ") + ")"
}

// Create creates the queue table and its triggers. Changes committed before
// the triggers exist are not recorded: the copy must start after Create
// returns. On failure it drops what it made.
func (q *Queue) Create(ctx context.Context, db *sql.DB) error {
	for i, stmt := range q.CreateSQL() {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			err = fmt.Errorf("capture: %w", err)
			if i == 0 {
				return err // a table of that name may be another's
			}
			// What this call made, triggers first.
			for _, name := range q.Triggers[:i-1] {
				if _, derr := db.ExecContext(context.WithoutCancel(ctx), "DROP TRIGGER "+dbconn.QuoteTable(q.orig.Database, name)); derr != nil {
					return errors.Join(err, derr)
				}
			}
			_, derr := db.ExecContext(context.WithoutCancel(ctx), "DROP TABLE "+q.quoted())
			return errors.Join(err, derr)
		}
	}
	return nil
}

// Drop drops the triggers, then the queue table, each if it exists.
func (q *Queue) Drop(ctx context.Context, db *sql.DB) error {
	for _, name := range q.Triggers {
		if _, err := db.ExecContext(ctx, "DROP TRIGGER IF EXISTS "+dbconn.QuoteTable(q.orig.Database, name)); err != nil {
			return fmt.Errorf("capture: drop trigger %s: %w", name, err)
		}
	}
	if _, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS "+q.quoted()); err != nil {
		return fmt.Errorf("capture: drop %s: %w", q.Table, err)
	}
	return nil
}
