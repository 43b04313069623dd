package binlog

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/pingcap/tidb/pkg/parser/ast"
	tidbmysql "github.com/pingcap/tidb/pkg/parser/mysql"
	_ "github.com/pingcap/tidb/pkg/parser/test_driver" // the parser needs a value driver
	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/ddl"
)

// sameName reports whether two schema or table names in a statement may
// name the same object: byte for byte, or when FoldCase is set, as the
// server folds them (dbconn.SameName: İ is i) or as Unicode case folding
// does. It errs towards true: a statement it takes for one on the table
// stops the run, one it misses could be undone by the swap.
func (c *Config) sameName(a, b string) bool {
	if c.FoldCase {
		return strings.EqualFold(a, b) || dbconn.SameName(a, b)
	}
	return a == b
}

// isTable reports whether schema.table, as a row event's table map names it,
// is the migrated table.
func (c *Config) isTable(schema, table []byte) bool {
	if c.FoldCase {
		return dbconn.SameName(string(table), c.Table) && dbconn.SameName(string(schema), c.Database)
	}
	return string(table) == c.Table && string(schema) == c.Database
}

// parserModes are the sql_mode flags that change how a statement is lexed or
// parsed: ANSI_QUOTES makes "x" an identifier, NO_BACKSLASH_ESCAPES ends
// 'x\' at its second quote.
const parserModes = tidbmysql.ModeANSIQuotes | tidbmysql.ModeNoBackslashEscapes |
	tidbmysql.ModeIgnoreSpace | tidbmysql.ModePipesAsConcat | tidbmysql.ModeHighNotPrecedence

// sqlMode returns the session's sql_mode from a query event's status
// variables, 0 when they do not hold it. The server writes Q_FLAGS2_CODE (0,
// four bytes) and Q_SQL_MODE_CODE (1, eight bytes) first; TiDB's SQLMode
// flags have MySQL's bit values.
func sqlMode(status []byte) tidbmysql.SQLMode {
	for len(status) > 0 {
		switch status[0] {
		case 0:
			status = status[min(len(status), 5):]
		case 1:
			if len(status) < 9 {
				return 0
			}
			return tidbmysql.SQLMode(binary.LittleEndian.Uint64(status[1:9])) & parserModes
		default:
			return 0
		}
	}
	return 0
}

// loadQuery decodes the schema, sql_mode and statement text of an
// EXECUTE_LOAD_QUERY event (a LOAD DATA logged as a statement), which
// go-mysql leaves undecoded. raw is the whole event, its checksum included
// when checksum is set. Its layout is a query event's: the common header,
// 13 bytes of query post-header plus 13 of its own, the status variables,
// the schema and a NUL, then the statement.
func loadQuery(raw []byte, checksum bool) (schema, query string, mode tidbmysql.SQLMode, err error) {
	const header, postHeader = 19, 13 + 13
	end := len(raw)
	if checksum {
		end -= 4
	}
	if end < header+postHeader {
		return "", "", 0, fmt.Errorf("LOAD DATA event of %d bytes is too short", len(raw))
	}
	dbLen := int(raw[header+8])
	statusLen := int(binary.LittleEndian.Uint16(raw[header+11:]))
	status := header + postHeader
	db := status + statusLen
	stmt := db + dbLen + 1
	if stmt > end {
		return "", "", 0, fmt.Errorf("LOAD DATA event of %d bytes has %d bytes of status and a schema of %d", len(raw), statusLen, dbLen)
	}
	return string(raw[db : db+dbLen]), string(raw[stmt:end]), sqlMode(raw[status:db]), nil
}

// target is a table a statement writes, alters or depends on, and how.
type target struct {
	name *ast.TableName
	how  string
}

// checkQuery returns an error wrapping ErrTableChanged when query, logged as
// a statement with default database schema and the session's sql_mode, may
// change the table's rows or definition without row events, or make the
// cut-over wrong: a DDL on the table (ALTER, including its partition
// operations, DROP, TRUNCATE, RENAME from or to its name, EXCHANGE PARTITION
// with it, CREATE/DROP INDEX), DROP DATABASE of its database, a foreign key
// or trigger created on or towards it, or a statement-format write to it
// (INSERT, REPLACE, UPDATE, DELETE, LOAD DATA). A statement the parser
// cannot read stops the migration too when it names the table, unless it can
// only create or drop a routine, an event or a trigger on another table.
// Names are compared as Config.FoldCase says; an unqualified name belongs to
// schema.
func (s *Streamer) checkQuery(schema, query string, mode tidbmysql.SQLMode) error {
	q := strings.TrimSpace(query)
	if q == "BEGIN" || q == "COMMIT" {
		return nil
	}
	if !utf8.ValidString(q) && !s.asciiNames() {
		// Logged in the client's character set (latin1, gbk, ...): the
		// names cannot be looked for in it.
		return fmt.Errorf("%w: the binlog holds a statement in a character set other than UTF-8, which may name %s.%s (or a table or routine that writes it) in it: %.200q",
			ErrTableChanged, s.cfg.Database, s.cfg.Table, q)
	}
	q = unwrapExecutable(q)
	lower := strings.ToLower(q)
	s.learnWriter(schema, lower) // newwriters.go
	s.countRebuild(schema, lower)
	if err := s.checkWriters(q, lower, mode); err != nil {
		return err
	}
	namesTable, namesDB := mentions(lower, s.cfg.Table), mentions(lower, s.cfg.Database)
	for _, p := range s.cfg.CascadeParents {
		namesTable = namesTable || mentions(lower, p)
	}
	inOurDB := s.cfg.sameName(schema, s.cfg.Database)
	if !namesTable && !namesDB || namesTable && !namesDB && !inOurDB {
		// It names neither, or names the table but runs in another
		// database without naming ours: its unqualified names are that
		// database's tables.
		return nil
	}
	stmts, err := ddl.ParseSQL(q, mode)
	if err != nil {
		if !namesTable {
			return nil // only DROP DATABASE matters then, which the parser reads
		}
		return s.checkUnparsed(schema, q, mode)
	}
	for _, st := range stmts {
		if d, ok := st.(*ast.DropDatabaseStmt); ok && s.cfg.sameName(d.Name.O, s.cfg.Database) {
			return fmt.Errorf("%w: DROP DATABASE %s during the migration", ErrTableChanged, d.Name.O)
		}
		for _, t := range targets(st) {
			db := t.name.Schema.O
			if db == "" {
				db = schema
			}
			if (t.how == fkAdded || t.how == fkCreated) && s.cfg.ChildrenFollow {
				continue
			}
			if s.cfg.sameName(t.name.Name.O, s.cfg.Table) && s.cfg.sameName(db, s.cfg.Database) {
				return fmt.Errorf("%w: %s %s.%s during the migration", ErrTableChanged, t.how, s.cfg.Database, s.cfg.Table)
			}
			for _, p := range s.cfg.CascadeParents {
				if (t.how == stmtWrite || t.how == stmtLoad) && s.cfg.sameName(t.name.Name.O, p) && s.cfg.sameName(db, s.cfg.Database) {
					return fmt.Errorf("%w: %s %s.%s, whose foreign key changes %s's rows without row events, during the migration", ErrTableChanged, t.how, s.cfg.Database, p, s.cfg.Table)
				}
			}
		}
	}
	return nil
}

// checkWriters stops on a statement-format write or call that names one of
// Config.Writers: a view over the table, a table whose trigger writes it, a
// routine that does (a CREATE TABLE ... SELECT included). A statement the
// parser cannot read stops when its first word is a write's or a call's;
// one that only maintains or grants (REPAIR, GRANT, ...) goes on.
func (s *Streamer) checkWriters(q, lower string, mode tidbmysql.SQLMode) error {
	named := ""
	for _, w := range s.cfg.Writers {
		if mentionsWord(lower, w) {
			named = w
			break
		}
	}
	if named == "" {
		return nil
	}
	stop := fmt.Errorf("%w: a statement in the binlog names %s, which may write %s.%s (a view, a trigger's table or a routine), and the rows it changes are not in the binlog: %.200s",
		ErrTableChanged, named, s.cfg.Database, s.cfg.Table, q)
	stmts, err := ddl.ParseSQL(q, mode)
	if err != nil {
		// Unread: a write or a call stops, anything else (REPAIR, ...)
		// goes on.
		f := strings.FieldsFunc(lower, func(r rune) bool { return r == ' ' || r == '\t' || r == '\n' || r == '(' })
		// A RENAME of a writer unread would leave its new name unknown.
		if len(f) > 0 && slices.Contains([]string{"insert", "replace", "update", "delete", "load", "select", "with", "do", "set", "call", "values", "table", "handler", "rename"}, f[0]) {
			return stop
		}
		return nil
	}
	for _, st := range stmts {
		s.learnRenamed(st) // newwriters.go
		switch x := st.(type) {
		case *ast.InsertStmt, *ast.UpdateStmt, *ast.DeleteStmt, *ast.LoadDataStmt, *ast.SelectStmt, *ast.SetOprStmt,
			*ast.DoStmt, *ast.SetStmt, *ast.CallStmt:
			return stop
		case *ast.CreateTableStmt:
			if x.Select != nil { // CREATE TABLE ... SELECT f()
				return stop
			}
		}
	}
	return nil
}

// unwrapExecutable opens MariaDB's executable comments, /*M! ... */ and
// /*M!NNNNNN ... */, whose text MariaDB runs and the parser would skip as a
// comment. (On MySQL they are comments: a statement in one may stop a run
// needlessly, the safe side.)
func unwrapExecutable(q string) string {
	for {
		i := strings.Index(q, "/*M!")
		if i < 0 {
			return q
		}
		j := i + len("/*M!")
		for j < len(q) && q[j] >= '0' && q[j] <= '9' {
			j++
		}
		end := strings.Index(q[j:], "*/")
		if end < 0 {
			return q[:i] + " " + q[j:]
		}
		q = q[:i] + " " + q[j:j+end] + " " + q[j+end+2:]
	}
}

// asciiNames reports whether every name the statements are searched for is
// plain ASCII: the table's, its database's, the writers' and the parents'.
func (s *Streamer) asciiNames() bool {
	for _, n := range append(append([]string{s.cfg.Table, s.cfg.Database}, s.cfg.Writers...), s.cfg.CascadeParents...) {
		if !ascii(n) {
			return false
		}
	}
	return true
}

// ascii reports whether a name is plain ASCII.
func ascii(name string) bool {
	for i := 0; i < len(name); i++ {
		if name[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// mentions reports whether lower, a lower-cased statement, may name the
// identifier name: as is, or quoted with its backquotes or double quotes
// doubled. It is a cheap filter that errs towards true.
// mentionsWord is mentions of name as a whole word: not inside a longer
// identifier ('v' is not in VALUES, 'o' not in o1). Digits count as a
// boundary after a versioned comment's /*!50700, which the server reads as
// the comment's version.
func mentionsWord(lower, name string) bool {
	n := strings.ToLower(name)
	for _, spelt := range []string{n, strings.ReplaceAll(n, "`", "``"), strings.ReplaceAll(n, `"`, `""`)} {
		for from := 0; ; {
			i := strings.Index(lower[from:], spelt)
			if i < 0 {
				break
			}
			i += from
			if end := i + len(spelt); !identByte(lower, end) && (i == 0 || !identByte(lower, i-1) || afterVersion(lower, i)) {
				return true
			}
			from = i + 1
		}
	}
	return false
}

// identByte reports whether s[i] can be part of an unquoted identifier
// (ASCII letters, digits, _ and $, or any byte of a character beyond ASCII).
func identByte(s string, i int) bool {
	if i < 0 || i >= len(s) {
		return false
	}
	c := s[i]
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '$' || c >= 0x80
}

// afterVersion reports whether s[:i] ends with a versioned comment's opening
// and version: /*!50700 or /*M!100500.
func afterVersion(s string, i int) bool {
	j := i
	for j > 0 && s[j-1] >= '0' && s[j-1] <= '9' {
		j--
	}
	return j < i && j > 0 && s[j-1] == '!'
}

func mentions(lower, name string) bool {
	n := strings.ToLower(name)
	return strings.Contains(lower, n) ||
		strings.Contains(n, "`") && strings.Contains(lower, strings.ReplaceAll(n, "`", "``")) ||
		strings.Contains(n, `"`) && strings.Contains(lower, strings.ReplaceAll(n, `"`, `""`))
}

const (
	stmtWrite = "a statement-format write (binlog_format=STATEMENT or MIXED in a session) to"
	stmtLoad  = "a statement-format LOAD DATA into"
	fkAdded   = "a foreign key added towards"
	fkCreated = "a foreign key created towards"
)

// targets returns the tables st changes the rows or the definition of, or
// makes depend on another table (a foreign key).
func targets(st ast.StmtNode) []target {
	var out []target
	add := func(how string, names ...*ast.TableName) {
		for _, n := range names {
			if n != nil {
				out = append(out, target{n, how})
			}
		}
	}
	switch x := st.(type) {
	case *ast.AlterTableStmt:
		add("ALTER TABLE of", x.Table)
		for _, spec := range x.Specs {
			switch spec.Tp {
			case ast.AlterTableExchangePartition:
				add("ALTER TABLE ... EXCHANGE PARTITION with", spec.NewTable)
			case ast.AlterTableRenameTable:
				add("ALTER TABLE ... RENAME to", spec.NewTable)
			default:
				add("ALTER TABLE naming", spec.NewTable)
			}
			add(fkAdded, references(spec.Constraint, spec.NewColumns)...)
		}
	case *ast.CreateTableStmt:
		add(fkCreated, references(nil, x.Cols)...)
		for _, c := range x.Constraints {
			add(fkCreated, references(c, nil)...)
		}
	case *ast.DropTableStmt:
		if !x.IsView && x.TemporaryKeyword == ast.TemporaryNone {
			add("DROP TABLE of", x.Tables...)
		}
	case *ast.TruncateTableStmt:
		add("TRUNCATE TABLE of", x.Table)
	case *ast.RenameTableStmt:
		for _, t := range x.TableToTables {
			add("RENAME TABLE of", t.OldTable)
			add("RENAME TABLE to", t.NewTable)
		}
	case *ast.CreateIndexStmt:
		add("CREATE INDEX on", x.Table)
	case *ast.DropIndexStmt:
		add("DROP INDEX on", x.Table)
	case *ast.InsertStmt:
		// The target only: a table it reads from is not written.
		add(stmtWrite, tableRefs(x.Table)...)
	case *ast.UpdateStmt:
		// Any table it joins may be one it sets.
		add(stmtWrite, tableRefs(x.TableRefs)...)
	case *ast.DeleteStmt:
		add(stmtWrite, tableRefs(x.TableRefs)...)
	case *ast.LoadDataStmt:
		add(stmtLoad, x.Table)
	}
	return out
}

// references returns the tables that a constraint's or columns' foreign keys
// point to (MySQL 9 enforces inline REFERENCES too).
func references(c *ast.Constraint, cols []*ast.ColumnDef) []*ast.TableName {
	var out []*ast.TableName
	if c != nil && c.Refer != nil {
		out = append(out, c.Refer.Table)
	}
	for _, col := range cols {
		for _, o := range col.Options {
			if o.Refer != nil {
				out = append(out, o.Refer.Table)
			}
		}
	}
	return out
}

type tableCollector struct{ names []*ast.TableName }

func (c *tableCollector) Enter(n ast.Node) (ast.Node, bool) {
	if t, ok := n.(*ast.TableName); ok {
		c.names = append(c.names, t)
	}
	return n, false
}
func (c *tableCollector) Leave(n ast.Node) (ast.Node, bool) { return n, true }

// tableRefs returns every table name under n, subqueries included.
func tableRefs(n *ast.TableRefsClause) []*ast.TableName {
	if n == nil {
		return nil
	}
	c := &tableCollector{}
	n.Accept(c)
	return c.names
}

// checkUnparsed decides on a statement that names the table but that the
// parser cannot read. It lets through what can create or drop only stored
// routines, events or triggers on another table (their effects on rows are
// logged when they run), and XA control statements; anything else stops.
func (s *Streamer) checkUnparsed(schema, q string, mode tidbmysql.SQLMode) error {
	stop := fmt.Errorf("%w: the binlog holds a statement on it that sluice cannot read: %.200s", ErrTableChanged, q)
	toks := tokenize(q, mode)
	kw := func(i int, words ...string) bool {
		if i >= len(toks) || toks[i].quoted {
			return false
		}
		for _, w := range words {
			if strings.EqualFold(toks[i].text, w) {
				return true
			}
		}
		return false
	}
	switch {
	case kw(0, "XA"):
		return nil
	case kw(0, "DROP") && kw(1, "TRIGGER", "FUNCTION", "PROCEDURE", "EVENT"):
		// A trigger of the table dropped meanwhile is not copied to the
		// new table: the cut-over reads them under its lock.
		return nil
	case kw(0, "CREATE", "ALTER"):
	default:
		return stop
	}
	i := 1
	if kw(i, "OR") && kw(i+1, "REPLACE") {
		i += 2
	}
	if kw(i, "DEFINER") {
		i = skipUser(toks, i+1)
	}
	if kw(i, "AGGREGATE") {
		i++
	}
	switch {
	case kw(i, "FUNCTION", "PROCEDURE", "EVENT"):
		return nil
	case !kw(i, "TRIGGER") || !kw(0, "CREATE"):
		return stop
	}
	// TRIGGER [IF NOT EXISTS] [db.]name {BEFORE|AFTER} {INSERT|UPDATE|DELETE} ON [db.]table
	i++
	if kw(i, "IF") && kw(i+1, "NOT") && kw(i+2, "EXISTS") {
		i += 3
	}
	trgDB, _, i, ok := qualifiedName(toks, i)
	if !ok || !kw(i, "BEFORE", "AFTER") || !kw(i+1, "INSERT", "UPDATE", "DELETE") || !kw(i+2, "ON") {
		return stop
	}
	db, table, _, ok := qualifiedName(toks, i+3)
	if !ok {
		return stop
	}
	if db == "" {
		db = trgDB
	}
	if db == "" {
		db = schema
	}
	if s.cfg.sameName(table, s.cfg.Table) && s.cfg.sameName(db, s.cfg.Database) {
		return fmt.Errorf("%w: CREATE TRIGGER on %s.%s during the migration", ErrTableChanged, s.cfg.Database, s.cfg.Table)
	}
	return nil
}

// skipUser skips "= user" after DEFINER: CURRENT_USER[()] or name[@host],
// each part an identifier or a string. It returns the index after it.
func skipUser(toks []token, i int) int {
	if i < len(toks) && toks[i].text == "=" && !toks[i].quoted {
		i++
	}
	if i < len(toks) && !toks[i].quoted && strings.EqualFold(toks[i].text, "CURRENT_USER") {
		i++
		if i+1 < len(toks) && toks[i].text == "(" && toks[i+1].text == ")" {
			i += 2
		}
		return i
	}
	i++
	if i+1 < len(toks) && toks[i].text == "@" && !toks[i].quoted {
		i += 2
	}
	return i
}

// qualifiedName reads name or db.name at toks[i]; it returns the index after
// it and whether there was one.
func qualifiedName(toks []token, i int) (db, name string, next int, ok bool) {
	if i >= len(toks) || !toks[i].ident() {
		return "", "", i, false
	}
	if i+2 < len(toks) && toks[i+1].text == "." && !toks[i+1].quoted && toks[i+2].ident() {
		return toks[i].text, toks[i+2].text, i + 3, true
	}
	return "", toks[i].text, i + 1, true
}

// token is a word, a quoted identifier or string (quoted, with its quotes
// removed and its escapes undone), or one punctuation character.
type token struct {
	text   string
	quoted bool
	str    bool // a string literal
}

func (t token) ident() bool {
	if t.str {
		return false
	}
	if t.quoted {
		return true
	}
	return t.text != "" && isWordByte(t.text[0])
}

func isWordByte(c byte) bool {
	return c == '_' || c == '$' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

// tokenize splits a statement into tokens the way MySQL's lexer does for the
// parts checkUnparsed reads: comments are skipped, but the content of an
// executable comment (/*!80000 ... */) is read.
func tokenize(q string, mode tidbmysql.SQLMode) []token {
	var out []token
	inExec := false
	for i := 0; i < len(q); {
		c := q[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			i++
		case strings.HasPrefix(q[i:], "/*!"):
			i += 3
			for i < len(q) && q[i] >= '0' && q[i] <= '9' {
				i++
			}
			inExec = true
		case inExec && strings.HasPrefix(q[i:], "*/"):
			i += 2
			inExec = false
		case strings.HasPrefix(q[i:], "/*"):
			end := strings.Index(q[i+2:], "*/")
			if end < 0 {
				return out
			}
			i += end + 4
		case c == '#' || strings.HasPrefix(q[i:], "-- ") || strings.HasPrefix(q[i:], "--\t") || q[i:] == "--":
			end := strings.IndexByte(q[i:], '\n')
			if end < 0 {
				return out
			}
			i += end + 1
		case c == '`' || c == '"' || c == '\'':
			str := c == '\'' || c == '"' && !mode.HasANSIQuotesMode()
			escapes := str && !mode.HasNoBackslashEscapesMode()
			var b strings.Builder
			j := i + 1
			for ; j < len(q); j++ {
				if escapes && q[j] == '\\' && j+1 < len(q) {
					b.WriteByte(q[j+1])
					j++
					continue
				}
				if q[j] == c {
					if j+1 < len(q) && q[j+1] == c {
						b.WriteByte(c)
						j++
						continue
					}
					break
				}
				b.WriteByte(q[j])
			}
			out = append(out, token{text: b.String(), quoted: true, str: str})
			i = j + 1
		case isWordByte(c):
			j := i
			for j < len(q) && isWordByte(q[j]) {
				j++
			}
			out = append(out, token{text: q[i:j]})
			i = j
		default:
			out = append(out, token{text: q[i : i+1]})
			i++
		}
	}
	return out
}
