package binlog

import (
	"regexp"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
)

// Writers made during the migration. Config.Writers lists the views, the
// tables with triggers and the routines that may write the table when the
// run starts; one made later is learnt from its CREATE (or ALTER) in the
// binlog, when its text names the table or a writer already known: a
// statement-format write through it (which writes no row events for the
// table) then stops the run like one through the others.

// ident is a name as a statement spells it, lower-cased: quoted, or plain.
const ident = "(?:`(?:[^`]|``)+`|[0-9a-z_$\u0080-\U0010ffff]+)"

// madeWriter matches a CREATE or ALTER of a view or a routine (its name in
// group 1) or a CREATE of a trigger (its table in group 2); a database
// before the name is left out. Only the options the servers allow come
// between CREATE and the kind of object: the kind is never read in a body
// (a trigger whose body says "view" is a trigger).
var madeWriter = regexp.MustCompile(`(?s)^\s*(?:create|alter)\s+` + headOptions +
	`(?:(?:view|function|procedure)\s+(?:if\s+not\s+exists\s+)?(?:` + ident + `\s*\.\s*)?(` + ident + `)` +
	`|trigger\s+(?:if\s+not\s+exists\s+)?(?:` + ident + `\s*\.\s*)?` + ident + `\s+(?:before|after)\s+(?:insert|update|delete)(?:\s+or\s+(?:insert|update|delete))*\s+on\s+(?:` + ident + `\s*\.\s*)?(` + ident + `))`)

// headOptions are what may stand between CREATE (or ALTER) and the kind of
// object: OR REPLACE, ALGORITHM, DEFINER, SQL SECURITY, AGGREGATE.
const headOptions = `(?:or\s+replace\s+)?(?:algorithm\s*=\s*[a-z]+\s+)?(?:definer\s*=\s*` + account + `\s+)?(?:sql\s+security\s+[a-z]+\s+)?(?:aggregate\s+)?`

// account is a DEFINER: CURRENT_USER, or a user name and perhaps a host,
// each quoted or plain.
const account = `(?:current_user(?:\s*\(\s*\))?|` + accountPart + `(?:\s*@\s*` + accountPart + `)?)`

const accountPart = "(?:`(?:[^`]|``)*`|'(?:[^'\\\\]|\\\\.|'')*'|\"(?:[^\"\\\\]|\\\\.|\"\")*\"|[0-9a-z_$.%\\-\u0080-\U0010ffff]+)"

// learnWriter adds to Config.Writers the view, routine or trigger's table
// that lower (a statement, lower-cased, run with default database schema)
// makes, if it names the table or a known writer.
func (s *Streamer) learnWriter(schema, lower string) {
	m := madeWriter.FindStringSubmatch(lower)
	if m == nil {
		return
	}
	if !s.cfg.sameName(schema, s.cfg.Database) && !mentions(lower, s.cfg.Database) {
		// Made in another database without naming ours: its unqualified
		// names are that database's tables (as checkQuery reads them).
		return
	}
	body := lower[len(m[0]):]
	writes := mentionsWord(body, s.cfg.Table)
	for _, w := range s.cfg.Writers {
		writes = writes || mentionsWord(body, w)
	}
	if writes {
		s.addWriter(unquote(m[1] + m[2]))
	}
}

// isWriter reports whether name is one of Config.Writers.
func (s *Streamer) isWriter(name string) bool {
	for _, w := range s.cfg.Writers {
		if strings.EqualFold(w, name) {
			return true
		}
	}
	return false
}

// addWriter adds name to Config.Writers, once.
func (s *Streamer) addWriter(name string) {
	if s.isWriter(name) {
		return
	}
	s.cfg.Writers = append(s.cfg.Writers, strings.ToLower(name))
	if s.log != nil {
		s.log.Info("a view, trigger or routine made or renamed during the migration may write the table: a statement-format write through it stops the run", "name", name)
	}
}

// learnRenamed adds to Config.Writers the new name of a writer that st
// renames (RENAME TABLE, ALTER TABLE ... RENAME): a write through it under
// its new name is one through the writer.
func (s *Streamer) learnRenamed(st ast.StmtNode) {
	switch x := st.(type) {
	case *ast.RenameTableStmt:
		for _, tt := range x.TableToTables {
			if s.isWriter(tt.OldTable.Name.O) {
				s.addWriter(tt.NewTable.Name.O)
			}
		}
	case *ast.AlterTableStmt:
		if !s.isWriter(x.Table.Name.O) {
			return
		}
		for _, spec := range x.Specs {
			if spec.Tp == ast.AlterTableRenameTable && spec.NewTable != nil {
				s.addWriter(spec.NewTable.Name.O)
			}
		}
	}
}

// rebuild matches an OPTIMIZE or REPAIR statement (written to the binlog),
// its list of tables in group 1.
var rebuild = regexp.MustCompile(`(?s)^\s*(?:optimize|repair)\s+(?:no_write_to_binlog\s+|local\s+)?tables?\s+(.*)$`)

// listed is one name of a list: [db.]name, each perhaps quoted.
var listed = regexp.MustCompile(`^\s*(` + ident + `)(?:\s*\.\s*(` + ident + `))?`)

// unquote returns a lower-cased name without its backquotes.
func unquote(name string) string {
	if strings.HasPrefix(name, "`") {
		return strings.ReplaceAll(name[1:len(name)-1], "``", "`")
	}
	return name
}

// countRebuild counts lower (a statement, lower-cased, run with default
// database schema) if it rebuilds the table.
func (s *Streamer) countRebuild(schema, lower string) {
	m := rebuild.FindStringSubmatch(lower)
	if m == nil {
		return
	}
	for _, part := range strings.Split(m[1], ",") {
		n := listed.FindStringSubmatch(part)
		if n == nil {
			continue
		}
		db, name := schema, unquote(n[1])
		if n[2] != "" {
			db, name = name, unquote(n[2])
		}
		if s.cfg.sameName(name, s.cfg.Table) && s.cfg.sameName(db, s.cfg.Database) {
			s.rebuilds.Add(1)
			return
		}
	}
}

// Rebuilds returns how many OPTIMIZE or REPAIR statements of the table the
// streamer has read: each gives the table another InnoDB id, which the
// cut-over then does not take for an unlogged TRUNCATE.
func (s *Streamer) Rebuilds() int64 { return s.rebuilds.Load() }
