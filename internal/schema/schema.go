// Package schema reads a table's definition from information_schema (columns,
// primary key, foreign keys, triggers) and names the tables sluice creates
// beside it.
package schema

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/sluicedb/sluice/internal/dbconn"
)

// Column is one column of a table, as information_schema describes it.
type Column struct {
	Name       string
	Ordinal    int
	DataType   string // lower case: int, varchar, timestamp, ...
	ColumnType string // full type: "int unsigned", "varchar(20)", "enum('a','b')"
	Unsigned   bool
	Nullable   bool
	Charset    string // empty for non-string types
	Collation  string
	MaxLength  int64 // characters for string types
	Generated  bool  // a virtual or stored generated column: never written to
	Stored     bool  // a stored generated column
	// Expression is a generated column's expression as the server shows it.
	Expression string
	AutoInc    bool
	// DefaultNow: the default is the current time (CURRENT_TIMESTAMP,
	// NOW(), ...), whose value depends on the session's time zone.
	DefaultNow bool
	// DefaultExpr is the default's expression as the server shows it, when
	// it is one (DEFAULT (a + 1), CURRENT_TIMESTAMP); "" otherwise.
	DefaultExpr string
	// HasDefault: the column has a DEFAULT clause (information_schema's
	// COLUMN_DEFAULT is not NULL).
	HasDefault bool
}

// Index is one index of a table.
type Index struct {
	Name    string
	Unique  bool
	Kind    string   // BTREE, FULLTEXT, SPATIAL
	Columns []string // in key order; empty names for functional key parts
	// Prefixed says, for each of Columns, whether the part is a prefix of
	// the column (KEY (c(10))).
	Prefixed []bool
}

// Table is a base table's definition.
type Table struct {
	Database string
	Name     string
	Columns  []Column
	// PrimaryKey names the columns, in key order, of the key rows are found
	// by: the primary key, or on a table without one the first unique
	// index of whole NOT NULL columns (KeyIndex says which).
	PrimaryKey []string
	// KeyIndex is PrimaryKey's index: "PRIMARY", a unique index's name, or
	// "" when the table has neither.
	KeyIndex string
	// PKPrefix is true when some primary key part is a column prefix.
	PKPrefix bool
	// ForeignKeys are the table's own foreign keys (it is their child);
	// Children are those of tables, this one included, that reference it.
	ForeignKeys []ForeignKey
	Children    []ChildKey
	// Triggers names the table's triggers, in the order they fire.
	Triggers      []string
	EstimatedRows int64
	Engine        string
	RowFormat     string // Dynamic, Compact, Compressed, Redundant
	Charset       string // the table's default character set
	Collation     string // the table's default collation
	// CharsetDefaults maps each character set to the collation the server
	// gives a column declared with that set and no COLLATE (MariaDB's
	// character_set_collations, MySQL's default_collation_for_utf8mb4 as
	// sluice's own sessions have them).
	CharsetDefaults map[string]string
	DataBytes       int64 // the clustered index (information_schema estimate)
	IndexBytes      int64 // the secondary indexes (estimate)
	Indexes         []Index
	// RowVersions is InnoDB's count of INSTANT column changes since the table
	// was last rebuilt (at 64 the server refuses another); -1 when unknown.
	RowVersions int
}

// Index returns the named index.
func (t *Table) Index(name string) (Index, bool) {
	for _, ix := range t.Indexes {
		if dbconn.SameName(ix.Name, name) {
			return ix, true
		}
	}
	return Index{}, false
}

// Indexed reports whether a column is a part of some index.
func (t *Table) Indexed(col string) bool {
	for _, ix := range t.Indexes {
		for _, c := range ix.Columns {
			if dbconn.SameName(c, col) {
				return true
			}
		}
	}
	return false
}

// InPrimaryKey reports whether a column is a part of the primary key.
func (t *Table) InPrimaryKey(col string) bool {
	for _, c := range t.PKColumns() {
		if dbconn.SameName(c.Name, col) {
			return true
		}
	}
	return false
}

// InAnyKey reports whether a column is a part of some index or of the
// primary key.
func (t *Table) InAnyKey(col string) bool { return t.Indexed(col) || t.InPrimaryKey(col) }

// HasIndexKind reports whether the table has an index of kind (FULLTEXT, ...).
func (t *Table) HasIndexKind(kind string) bool {
	for _, ix := range t.Indexes {
		if ix.Kind == kind {
			return true
		}
	}
	return false
}

// nowDefault matches a default expression that reads the clock in the
// session's time zone.
var nowDefault = regexp.MustCompile(`(?i)\b(current_timestamp|now|localtime|localtimestamp|sysdate|curdate|current_date|curtime|current_time)\b`)

// ErrNotFound means the table does not exist.
var ErrNotFound = errors.New("table not found")

// ErrNotBaseTable means the name is a view, a sequence or a system-versioned
// table: something other than a table of rows alone, which a copy would not
// carry whole.
var ErrNotBaseTable = errors.New("sluice copies base tables only")

// Column returns the named column: the one spelled so, else the one the
// server takes the name for (dbconn.SameName).
func (t *Table) Column(name string) (Column, bool) {
	for _, c := range t.Columns {
		if c.Name == name {
			return c, true
		}
	}
	for _, c := range t.Columns {
		if dbconn.SameName(c.Name, name) {
			return c, true
		}
	}
	return Column{}, false
}

// PKColumns returns the primary key's columns in key order.
func (t *Table) PKColumns() []Column {
	out := make([]Column, 0, len(t.PrimaryKey))
	for _, n := range t.PrimaryKey {
		c, _ := t.Column(n)
		out = append(out, c)
	}
	return out
}

// notBaseTable says what db.name is when it is no base table: ErrNotFound,
// or ErrNotBaseTable with what the server calls it.
func notBaseTable(ctx context.Context, db *sql.DB, database, name string) error {
	var kind string
	err := db.QueryRowContext(ctx, `SELECT TABLE_TYPE FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?`, database, name).Scan(&kind)
	if err != nil || kind == "BASE TABLE" {
		return fmt.Errorf("%s.%s: %w", database, name, ErrNotFound)
	}
	what, why := "a "+strings.ToLower(kind), "name a table"
	switch kind {
	case "SYSTEM VERSIONED":
		what, why = "a system-versioned table", "a copy would keep its current rows and lose their history; run the change with the server's own ALTER TABLE"
	case "VIEW", "SYSTEM VIEW":
		why = "name the table it reads"
	}
	return fmt.Errorf("%s.%s is %s: %s (%w)", database, name, what, why, ErrNotBaseTable)
}

// Quoted is the table's quoted `db`.`name`.
func (t *Table) Quoted() string { return dbconn.QuoteTable(t.Database, t.Name) }

// Load reads table db.name. The Table's Database and Name are spelled as the
// server stores them, which may differ in case from the arguments. It returns
// ErrNotFound (wrapped) when there is no such base table.
func Load(ctx context.Context, db *sql.DB, database, name string) (*Table, error) {
	t := &Table{Database: database, Name: name}
	var rows, dataLen, indexLen sql.NullInt64
	var engine, rowFormat, charset, collation, version sql.NullString
	// The names as the server stores them: with lower_case_table_names=1 the
	// server finds "Orders" as "orders", and the binlog and the metadata
	// locks name it so.
	err := db.QueryRowContext(ctx, `SELECT t.TABLE_SCHEMA, t.TABLE_NAME, t.TABLE_ROWS, t.ENGINE, t.ROW_FORMAT, t.DATA_LENGTH, t.INDEX_LENGTH, c.CHARACTER_SET_NAME, t.TABLE_COLLATION, VERSION()
		FROM information_schema.TABLES t LEFT JOIN information_schema.COLLATIONS c ON c.COLLATION_NAME = t.TABLE_COLLATION
		WHERE t.TABLE_SCHEMA = ? AND t.TABLE_NAME = ? AND t.TABLE_TYPE = 'BASE TABLE'`, database, name).Scan(&t.Database, &t.Name, &rows, &engine, &rowFormat, &dataLen, &indexLen, &charset, &collation, &version)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notBaseTable(ctx, db, database, name)
	}
	if err != nil {
		return nil, fmt.Errorf("read table %s.%s: %w", database, name, err)
	}
	database, name = t.Database, t.Name
	t.EstimatedRows = rows.Int64
	t.Engine = engine.String
	t.RowFormat, t.DataBytes, t.IndexBytes, t.Charset = rowFormat.String, dataLen.Int64, indexLen.Int64, strings.ToLower(charset.String)
	t.Collation = strings.ToLower(collation.String)
	if t.CharsetDefaults, err = charsetDefaults(ctx, db); err != nil {
		return nil, err
	}

	mariadb := strings.Contains(strings.ToLower(version.String), "mariadb")
	crows, err := db.QueryContext(ctx, `SELECT COLUMN_NAME, ORDINAL_POSITION, DATA_TYPE, COLUMN_TYPE,
			IS_NULLABLE, CHARACTER_SET_NAME, COLLATION_NAME, CHARACTER_MAXIMUM_LENGTH, EXTRA, COLUMN_DEFAULT,
			COALESCE(GENERATION_EXPRESSION, '')
		FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?
		ORDER BY ORDINAL_POSITION`, database, name)
	if err != nil {
		return nil, fmt.Errorf("read columns of %s.%s: %w", database, name, err)
	}
	defer crows.Close()
	for crows.Next() {
		var c Column
		var nullable, extra string
		var cs, coll sql.NullString
		var maxLen sql.NullInt64
		var def sql.NullString
		if err := crows.Scan(&c.Name, &c.Ordinal, &c.DataType, &c.ColumnType, &nullable, &cs, &coll, &maxLen, &extra, &def, &c.Expression); err != nil {
			return nil, fmt.Errorf("read columns of %s.%s: %w", database, name, err)
		}
		c.DataType = strings.ToLower(c.DataType)
		c.Unsigned = strings.Contains(strings.ToLower(c.ColumnType), "unsigned")
		c.Nullable = nullable == "YES"
		c.Charset, c.Collation, c.MaxLength = cs.String, coll.String, maxLen.Int64
		ex := strings.ToUpper(extra)
		c.Stored = strings.Contains(ex, "STORED GENERATED")
		c.Generated = c.Stored || strings.Contains(ex, "VIRTUAL GENERATED")
		c.AutoInc = strings.Contains(ex, "AUTO_INCREMENT")
		// MySQL marks an expression default DEFAULT_GENERATED (a literal
		// string is shown bare); MariaDB marks none, and quotes literals.
		expr := strings.Contains(ex, "DEFAULT_GENERATED") ||
			mariadb && def.Valid && !strings.HasPrefix(def.String, "'")
		c.DefaultNow = expr && nowDefault.MatchString(def.String)
		if expr {
			c.DefaultExpr = def.String
		}
		c.HasDefault = def.Valid
		t.Columns = append(t.Columns, c)
	}
	if err := crows.Err(); err != nil {
		return nil, fmt.Errorf("read columns of %s.%s: %w", database, name, err)
	}

	if err := loadIndexes(ctx, db, t); err != nil {
		return nil, err
	}
	t.RowVersions = -1
	var versions sql.NullInt64
	// TOTAL_ROW_VERSIONS needs the PROCESS privilege; without it, unknown.
	if db.QueryRowContext(ctx, `SELECT TOTAL_ROW_VERSIONS FROM information_schema.INNODB_TABLES WHERE NAME = ?`,
		database+"/"+name).Scan(&versions) == nil && versions.Valid {
		t.RowVersions = int(versions.Int64)
	}

	krows, err := db.QueryContext(ctx, `SELECT COLUMN_NAME, SUB_PART FROM information_schema.STATISTICS
		WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND INDEX_NAME = 'PRIMARY' ORDER BY SEQ_IN_INDEX`, database, name)
	if err != nil {
		return nil, fmt.Errorf("read primary key of %s.%s: %w", database, name, err)
	}
	defer krows.Close()
	for krows.Next() {
		var col string
		var sub sql.NullInt64
		if err := krows.Scan(&col, &sub); err != nil {
			return nil, fmt.Errorf("read primary key of %s.%s: %w", database, name, err)
		}
		t.PrimaryKey = append(t.PrimaryKey, col)
		if sub.Valid {
			t.PKPrefix = true
		}
	}
	if err := krows.Err(); err != nil {
		return nil, fmt.Errorf("read primary key of %s.%s: %w", database, name, err)
	}
	if len(t.PrimaryKey) > 0 {
		t.KeyIndex = "PRIMARY"
	} else if t.KeyIndex, t.PrimaryKey, err = uniqueRowKey(ctx, db, t); err != nil {
		return nil, err
	}

	if err := loadForeignKeys(ctx, db, t); err != nil {
		return nil, err
	}
	trs, err := LoadTriggers(ctx, db, database, name)
	if err != nil {
		return nil, err
	}
	t.Triggers = TriggerNames(trs)
	return t, nil
}

func loadIndexes(ctx context.Context, db *sql.DB, t *Table) error {
	rows, err := db.QueryContext(ctx, `SELECT INDEX_NAME, NON_UNIQUE, INDEX_TYPE, COALESCE(COLUMN_NAME, ''), SUB_PART IS NOT NULL
		FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND INDEX_NAME <> 'PRIMARY'
		ORDER BY INDEX_NAME, SEQ_IN_INDEX`, t.Database, t.Name)
	if err != nil {
		return fmt.Errorf("read indexes of %s: %w", t.Quoted(), err)
	}
	defer rows.Close()
	for rows.Next() {
		var name, kind, col string
		var nonUnique int
		var prefix bool
		if err := rows.Scan(&name, &nonUnique, &kind, &col, &prefix); err != nil {
			return fmt.Errorf("read indexes of %s: %w", t.Quoted(), err)
		}
		if n := len(t.Indexes); n == 0 || t.Indexes[n-1].Name != name {
			t.Indexes = append(t.Indexes, Index{Name: name, Unique: nonUnique == 0, Kind: strings.ToUpper(kind)})
		}
		ix := &t.Indexes[len(t.Indexes)-1]
		ix.Columns = append(ix.Columns, col)
		ix.Prefixed = append(ix.Prefixed, prefix)
	}
	return rows.Err()
}

// ShowCreate returns SHOW CREATE TABLE's text.
func ShowCreate(ctx context.Context, db *sql.DB, database, name string) (string, error) {
	var n, ddl string
	if err := db.QueryRowContext(ctx, "SHOW CREATE TABLE "+dbconn.QuoteTable(database, name)).Scan(&n, &ddl); err != nil {
		return "", fmt.Errorf("show create table %s.%s: %w", database, name, err)
	}
	return ddl, nil
}

// Names are the tables sluice creates beside table T.
type Names struct {
	Shadow string // the new table being filled: _T_new
	Old    string // the original after cut-over: _T_old
	// Postpone exists while a postponed cut-over waits: _T_cutover. Dropping
	// it lets the cut-over go ahead.
	Postpone string
	// Heartbeat holds the replica-lag heartbeat while replicas are watched:
	// _T_hb.
	Heartbeat string
	// Checkpoint holds the copy path's progress, from which a run resumes:
	// _T_ckpt.
	Checkpoint string
}

// maxIdent is MySQL's identifier length limit.
const maxIdent = 64

// NamesFor returns the artifact names for table, shortening the table part so
// that every name stays within MySQL's 64-character limit.
func NamesFor(table string) Names {
	base := table
	const extra = len("__cutover")
	if r := []rune(base); len(r) > maxIdent-extra {
		base = string(r[:maxIdent-extra])
	}
	return Names{Shadow: "_" + base + "_new", Old: "_" + base + "_old", Postpone: "_" + base + "_cutover", Heartbeat: "_" + base + "_hb",
		Checkpoint: "_" + base + "_ckpt"}
}

// StampedOld returns the name the original takes at cut-over when Names.Old
// is already taken (a kept old table of an earlier migration): _T_old_ and the
// time of day stamp, within MySQL's 64-character limit.
func StampedOld(table string, at time.Time) string {
	stamp := at.UTC().Format("20060102150405")
	base := table
	if r := []rune(base); len(r) > maxIdent-len("__old_")-len(stamp) {
		base = string(r[:maxIdent-len("__old_")-len(stamp)])
	}
	return "_" + base + "_old_" + stamp
}

// Members returns the members of an ENUM or SET column type, in definition
// order, e.g. "set('a','b,c','d')" has a, "b,c" and d (a quote inside a
// member is doubled or escaped).
func Members(columnType string) []string {
	var out []string
	var cur []byte
	quoted := false
	for i := 0; i < len(columnType); i++ {
		c := columnType[i]
		switch {
		case quoted && c == '\\' && i+1 < len(columnType):
			i++
			cur = append(cur, columnType[i])
		case quoted && c == '\'' && i+1 < len(columnType) && columnType[i+1] == '\'':
			i++
			cur = append(cur, '\'')
		case c == '\'':
			if quoted {
				out = append(out, string(cur))
				cur = cur[:0]
			}
			quoted = !quoted
		case quoted:
			cur = append(cur, c)
		}
	}
	return out
}

// charsetDefaults reads the collation each character set gives a column
// declared without COLLATE, on a session of the pool as sluice's DDL has it.
func charsetDefaults(ctx context.Context, db *sql.DB) (map[string]string, error) {
	rows, err := db.QueryContext(ctx, "SELECT CHARACTER_SET_NAME, DEFAULT_COLLATE_NAME FROM information_schema.CHARACTER_SETS")
	if err != nil {
		return nil, fmt.Errorf("read the default collations: %w", err)
	}
	defer rows.Close()
	m := map[string]string{}
	for rows.Next() {
		var cs, coll string
		if err := rows.Scan(&cs, &coll); err != nil {
			return nil, fmt.Errorf("read the default collations: %w", err)
		}
		m[strings.ToLower(cs)] = strings.ToLower(coll)
	}
	return m, rows.Err()
}
