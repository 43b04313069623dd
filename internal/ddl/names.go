package ddl

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/charset"
	tidbmysql "github.com/pingcap/tidb/pkg/parser/mysql"
)

// The SQL parser knows a few character sets and collations of its own. A
// statement that names another one (cp1251, utf16, MariaDB's uca1400
// collations...) is valid SQL on a server that has it, so sluice teaches the
// parser the server's own names (LearnNames) before it reads the ALTER.
// The parser's tables are global: every parse holds namesMu for reading, a
// lesson for writing.
var namesMu sync.RWMutex

// ErrUnknownName wraps a parse error that names a character set or
// collation the parser does not know (yet): the server may know it.
var ErrUnknownName = errors.New("unknown character set or collation")

// ParseSQL parses q in the SQL mode given, under the names learnt so far.
func ParseSQL(q string, mode tidbmysql.SQLMode) ([]ast.StmtNode, error) {
	namesMu.RLock()
	defer namesMu.RUnlock()
	p := parser.New()
	p.SetSQLMode(mode)
	stmts, _, err := p.Parse(q, "", "")
	if err != nil && unknownName(err) {
		err = nameErr{err.Error()}
	}
	return stmts, err
}

// nameErr is a parse error that is ErrUnknownName, with the parser's message.
type nameErr struct{ msg string }

func (e nameErr) Error() string        { return e.msg }
func (e nameErr) Is(target error) bool { return target == ErrUnknownName }

func unknownName(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "Unknown character set") || strings.Contains(msg, "Unknown collation") ||
		strings.Contains(msg, "Unknown charset")
}

// LearnNames teaches the parser every character set and collation the server
// has (information_schema's CHARACTER_SETS and
// COLLATION_CHARACTER_SET_APPLICABILITY, whose FULL_COLLATION_NAME holds
// MariaDB's charset-qualified names). Names the parser knows are left alone.
func LearnNames(ctx context.Context, db *sql.DB) error {
	type cs struct {
		name, def string
		maxlen    int
	}
	var sets []cs
	rows, err := db.QueryContext(ctx, "SELECT CHARACTER_SET_NAME, DEFAULT_COLLATE_NAME, MAXLEN FROM information_schema.CHARACTER_SETS")
	if err != nil {
		return fmt.Errorf("read the server's character sets: %w", err)
	}
	for rows.Next() {
		var c cs
		if err := rows.Scan(&c.name, &c.def, &c.maxlen); err != nil {
			rows.Close()
			return fmt.Errorf("read the server's character sets: %w", err)
		}
		sets = append(sets, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read the server's character sets: %w", err)
	}
	type coll struct{ name, set string }
	var colls []coll
	rows, err = db.QueryContext(ctx, "SELECT * FROM information_schema.COLLATION_CHARACTER_SET_APPLICABILITY")
	if err != nil {
		return fmt.Errorf("read the server's collations: %w", err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return fmt.Errorf("read the server's collations: %w", err)
	}
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return fmt.Errorf("read the server's collations: %w", err)
		}
		var set string
		var names []string
		for i, c := range cols {
			switch strings.ToUpper(c) {
			case "CHARACTER_SET_NAME":
				set = vals[i].String
			case "COLLATION_NAME", "FULL_COLLATION_NAME":
				names = append(names, vals[i].String)
			}
		}
		for _, n := range names {
			if n != "" {
				colls = append(colls, coll{strings.ToLower(n), strings.ToLower(set)})
			}
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read the server's collations: %w", err)
	}

	namesMu.Lock()
	defer namesMu.Unlock()
	for _, c := range sets {
		name := parserCharset(c.name)
		if _, err := charset.GetCharsetInfo(name); err == nil {
			continue
		}
		charset.AddCharset(&charset.Charset{Name: name, DefaultCollation: strings.ToLower(c.def),
			Collations: map[string]*charset.Collation{}, Desc: name, Maxlen: c.maxlen})
	}
	for _, c := range colls {
		if _, err := charset.GetCollationByName(c.name); err == nil {
			continue
		}
		learntID++
		charset.AddCollation(&charset.Collation{ID: learntID, CharsetName: parserCharset(c.set), Name: c.name, Sortlen: 1,
			PadAttribute: charset.PadSpace})
	}
	return nil
}

// learntID numbers the collations LearnNames adds, clear of the parser's
// and the servers' own ids (the parser looks collations up by name).
var learntID = 1 << 24

// parserCharset is the parser's name of a character set: it calls utf8mb3
// utf8.
func parserCharset(name string) string {
	name = strings.ToLower(name)
	if name == charset.CharsetUTF8MB3 {
		return charset.CharsetUTF8
	}
	return name
}
