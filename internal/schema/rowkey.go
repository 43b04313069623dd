package schema

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"github.com/sluicedb/sluice/internal/dbconn"
)

// index is one index of a table as SHOW INDEX lists it.
type index struct {
	name   string
	unique bool
	// cols are its parts' columns, in key order; whole is false when a part
	// is an expression or a column prefix, notNull when a part's column may
	// be NULL (either way cols stops before that part).
	cols           []string
	whole, notNull bool
	// hidden: INVISIBLE (MySQL) or IGNORED (MariaDB): queries cannot use it
	// and an index hint naming it fails.
	hidden bool
}

// indexes reads t's indexes, in the server's own order (the primary key
// first).
func indexes(ctx context.Context, db *sql.DB, t *Table) ([]*index, error) {
	rows, err := db.QueryContext(ctx, "SHOW INDEX FROM "+t.Quoted())
	if err != nil {
		return nil, fmt.Errorf("read the indexes of %s: %w", t.Quoted(), err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	at := map[string]int{}
	for i, c := range cols {
		at[strings.ToLower(c)] = i
	}
	for _, c := range []string{"non_unique", "key_name", "column_name", "sub_part", "null"} {
		if _, ok := at[c]; !ok {
			return nil, fmt.Errorf("read the indexes of %s: SHOW INDEX has no %s column", t.Quoted(), c)
		}
	}
	var out []*index
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, fmt.Errorf("read the indexes of %s: %w", t.Quoted(), err)
		}
		name := vals[at["key_name"]].String
		if n := len(out); n == 0 || out[n-1].name != name {
			out = append(out, &index{name: name, unique: vals[at["non_unique"]].String == "0", whole: true, notNull: true})
		}
		k := out[len(out)-1]
		if i, ok := at["visible"]; ok && strings.EqualFold(vals[i].String, "NO") {
			k.hidden = true
		}
		if i, ok := at["ignored"]; ok && strings.EqualFold(vals[i].String, "YES") {
			k.hidden = true
		}
		if !k.whole || !k.notNull {
			continue
		}
		col := vals[at["column_name"]]
		c, ok := t.Column(col.String)
		switch {
		case !col.Valid || vals[at["sub_part"]].Valid || !ok || c.Generated && !c.Stored:
			k.whole = false // a functional part, a prefix, or a virtual column
		case strings.EqualFold(vals[at["null"]].String, "YES") || c.Nullable:
			k.notNull = false
		default:
			k.cols = append(k.cols, col.String)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the indexes of %s: %w", t.Quoted(), err)
	}
	return out, nil
}

// uniqueRowKey finds, on a table without a primary key, the unique index its
// rows are found by: the first, in the server's own order of keys (SHOW
// INDEX), whose every part is a whole column declared NOT NULL. InnoDB
// clusters such a table on that index, so ranges of it are read in order.
// It returns "" and no columns when there is none.
func uniqueRowKey(ctx context.Context, db *sql.DB, t *Table) (string, []string, error) {
	keys, err := indexes(ctx, db, t)
	if err != nil {
		return "", nil, err
	}
	for _, k := range keys {
		if k.unique && k.whole && k.notNull && !k.hidden && len(k.cols) > 0 {
			return k.name, k.cols, nil
		}
	}
	return "", nil, nil
}

// KeyLedBy finds the index of t whose first parts are the whole columns key,
// in that order, by which rows of another table's key can be found in t: the
// first in the server's order (the primary key first) that queries may use
// (not INVISIBLE or IGNORED). It returns "" when t has none.
func KeyLedBy(ctx context.Context, db *sql.DB, t *Table, key []string) (string, error) {
	keys, err := indexes(ctx, db, t)
	if err != nil {
		return "", err
	}
	for _, k := range keys {
		if !k.hidden && LedBy(k.cols, key) {
			return k.name, nil
		}
	}
	return "", nil
}

// LedBy reports whether the index columns cols begin with key's columns, in
// that order (names compared as the server does, case-insensitively).
func LedBy(cols, key []string) bool {
	if len(cols) < len(key) {
		return false
	}
	for i, c := range key {
		if !dbconn.SameName(cols[i], c) {
			return false
		}
	}
	return true
}

// HoldsAll reports whether cols hold every column of key, in any order: a
// unique key on cols then never sees two rows that key tells apart collide.
func HoldsAll(cols, key []string) bool {
	for _, k := range key {
		if !slices.ContainsFunc(cols, func(c string) bool { return dbconn.SameName(c, k) }) {
			return false
		}
	}
	return true
}

// KeyHint is the index hint that reads the table by its row key:
// " FORCE INDEX (PRIMARY)" or " FORCE INDEX (`name`)".
func (t *Table) KeyHint() string {
	if t.KeyIndex == "" || strings.EqualFold(t.KeyIndex, "PRIMARY") {
		return " FORCE INDEX (PRIMARY)"
	}
	return " FORCE INDEX (" + dbconn.QuoteIdent(t.KeyIndex) + ")"
}

// HasPrimaryKey reports whether the row key is the table's primary key.
func (t *Table) HasPrimaryKey() bool { return strings.EqualFold(t.KeyIndex, "PRIMARY") }
