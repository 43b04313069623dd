package schema

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/sluicedb/sluice/internal/dbconn"
)

// uniqueRowKey finds, on a table without a primary key, the unique index its
// rows are found by: the first, in the server's own order of keys (SHOW
// INDEX), whose every part is a whole column declared NOT NULL. InnoDB
// clusters such a table on that index, so ranges of it are read in order.
// It returns "" and no columns when there is none.
func uniqueRowKey(ctx context.Context, db *sql.DB, t *Table) (string, []string, error) {
	rows, err := db.QueryContext(ctx, "SHOW INDEX FROM "+t.Quoted())
	if err != nil {
		return "", nil, fmt.Errorf("read the indexes of %s: %w", t.Quoted(), err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return "", nil, err
	}
	at := map[string]int{}
	for i, c := range cols {
		at[strings.ToLower(c)] = i
	}
	for _, c := range []string{"non_unique", "key_name", "column_name", "sub_part", "null"} {
		if _, ok := at[c]; !ok {
			return "", nil, fmt.Errorf("read the indexes of %s: SHOW INDEX has no %s column", t.Quoted(), c)
		}
	}
	type key struct {
		name   string
		cols   []string
		usable bool
	}
	var keys []*key
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return "", nil, fmt.Errorf("read the indexes of %s: %w", t.Quoted(), err)
		}
		name := vals[at["key_name"]].String
		if n := len(keys); n == 0 || keys[n-1].name != name {
			keys = append(keys, &key{name: name, usable: vals[at["non_unique"]].String == "0"})
		}
		k := keys[len(keys)-1]
		col := vals[at["column_name"]]
		if !col.Valid || vals[at["sub_part"]].Valid || strings.EqualFold(vals[at["null"]].String, "YES") {
			k.usable = false // a functional part, a prefix, or a column that may be NULL
			continue
		}
		if c, ok := t.Column(col.String); !ok || c.Nullable || c.Generated && !c.Stored {
			k.usable = false
			continue
		}
		k.cols = append(k.cols, col.String)
	}
	if err := rows.Err(); err != nil {
		return "", nil, fmt.Errorf("read the indexes of %s: %w", t.Quoted(), err)
	}
	for _, k := range keys {
		if k.usable && len(k.cols) > 0 {
			return k.name, k.cols, nil
		}
	}
	return "", nil, nil
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
