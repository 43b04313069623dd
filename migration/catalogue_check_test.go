package migration_test

// The catalogue's oracles: a table's definition and rows read as bytes, the
// native ALTER applied to a reference, and the comparisons.

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/schema"
	"github.com/sluicedb/sluice/internal/testdb"
	"github.com/sluicedb/sluice/migration"
)

// catQuery returns every row of a query as text (NULL as the bare word,
// values quoted), read as the bytes the server sends.
func catQuery(db *testdb.DB, q string, args ...any) ([][]string, error) {
	rows, err := db.Query(q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var out [][]string
	for rows.Next() {
		raw := make([]sql.RawBytes, len(cols))
		ptrs := make([]any, len(cols))
		for i := range raw {
			ptrs[i] = &raw[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		row := make([]string, len(raw))
		for i, v := range raw {
			if v == nil {
				row[i] = "NULL"
			} else {
				row[i] = fmt.Sprintf("%q", v)
			}
		}
		out = append(out, row)
	}
	return out, rows.Err()
}

// catTableName returns the table's name as the server stores it ("" when it
// does not exist): under lower_case_table_names=1 it is lower case.
func catTableName(t *testing.T, db *testdb.DB, table string) string {
	t.Helper()
	var name string
	err := db.QueryRow("SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND LOWER(TABLE_NAME) = LOWER(?) ORDER BY TABLE_NAME = ? DESC LIMIT 1",
		db.Name, table, table).Scan(&name)
	if err == sql.ErrNoRows {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return name
}

// catColumns lists the table's columns, invisible ones included, in order.
func catColumns(t *testing.T, db *testdb.DB, table string) (all, stored []string) {
	t.Helper()
	rows, err := catQuery(db, "SELECT COLUMN_NAME, COALESCE(GENERATION_EXPRESSION, '') = '' FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION", db.Name, table)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		name := catUnquote(r[0])
		all = append(all, name)
		if r[1] == `"1"` {
			stored = append(stored, name)
		}
	}
	return all, stored
}

func catUnquote(s string) string {
	var out string
	fmt.Sscanf(s, "%q", &out)
	return out
}

// catPK returns the primary key's columns (all columns when there is none).
func catPK(t *testing.T, db *testdb.DB, table string) []string {
	t.Helper()
	rows, err := catQuery(db, "SELECT COLUMN_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND INDEX_NAME = 'PRIMARY' ORDER BY SEQ_IN_INDEX", db.Name, table)
	if err != nil {
		t.Fatal(err)
	}
	var pk []string
	for _, r := range rows {
		pk = append(pk, catUnquote(r[0]))
	}
	if len(pk) == 0 {
		pk, _ = catColumns(t, db, table)
	}
	return pk
}

func catQuoteAll(cols []string) string {
	q := make([]string, len(cols))
	for i, c := range cols {
		q[i] = dbconn.QuoteIdent(c)
	}
	return strings.Join(q, ", ")
}

// catRows returns the table's rows over cols, ordered by its primary key.
func catRows(t *testing.T, db *testdb.DB, table string, cols []string) [][]string {
	t.Helper()
	q := "SELECT " + catQuoteAll(cols) + " FROM " + dbconn.QuoteIdent(table) + " ORDER BY " + catQuoteAll(catPK(t, db, table))
	rows, err := catQuery(db, q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return rows
}

// catSnapshot is the table's whole state: SHOW CREATE TABLE and every row
// of every column, as bytes ("" when the table does not exist).
func catSnapshot(t *testing.T, db *testdb.DB, table string) string {
	t.Helper()
	name := catTableName(t, db, table)
	if name == "" {
		return ""
	}
	var n, create string
	if err := db.QueryRow("SHOW CREATE TABLE "+dbconn.QuoteIdent(name)).Scan(&n, &create); err != nil {
		t.Fatal(err)
	}
	all, _ := catColumns(t, db, name)
	return create + "\n" + fmt.Sprint(catRows(t, db, name, all))
}

// catDefinition describes a table's definition for comparison: columns,
// indexes, CHECK constraints (generated names normalised), partitions and
// table options.
func catDefinition(t *testing.T, db *testdb.DB, table string) []string {
	t.Helper()
	var out []string
	add := func(what, q string) {
		rows, err := catQuery(db, q, db.Name, table)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		for _, r := range rows {
			out = append(out, what+" "+strings.Join(r, " "))
		}
	}
	// MariaDB has no SRS_ID, IS_VISIBLE or EXPRESSION; IGNORED is its
	// invisible index.
	srs, visible, expr := "SRS_ID", "IS_VISIBLE", "EXPRESSION"
	if db.Flavor == dbconn.MariaDB {
		srs, visible, expr = "NULL", "IGNORED", "NULL"
	}
	add("column", `SELECT ORDINAL_POSITION, COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE, COLUMN_DEFAULT, EXTRA, GENERATION_EXPRESSION,
		CHARACTER_SET_NAME, COLLATION_NAME, COLUMN_COMMENT, `+srs+` FROM information_schema.COLUMNS
		WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION`)
	add("index", `SELECT INDEX_NAME, SEQ_IN_INDEX, COLUMN_NAME, COLLATION, SUB_PART, NON_UNIQUE, INDEX_TYPE, `+visible+`, `+expr+`,
		INDEX_COMMENT FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY INDEX_NAME, SEQ_IN_INDEX`)
	add("partition", `SELECT PARTITION_NAME, PARTITION_METHOD, PARTITION_EXPRESSION, PARTITION_DESCRIPTION, SUBPARTITION_NAME
		FROM information_schema.PARTITIONS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND PARTITION_NAME IS NOT NULL
		ORDER BY PARTITION_ORDINAL_POSITION, SUBPARTITION_ORDINAL_POSITION`)
	add("table", `SELECT ENGINE, TABLE_COLLATION, CREATE_OPTIONS, TABLE_COMMENT FROM information_schema.TABLES
		WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?`)
	// Foreign keys: a generated name (<table>_ibfk_N) follows the table's name.
	fks, err := catQuery(db, `SELECT rc.CONSTRAINT_NAME, k.COLUMN_NAME, k.REFERENCED_TABLE_NAME, k.REFERENCED_COLUMN_NAME,
		rc.UPDATE_RULE, rc.DELETE_RULE FROM information_schema.REFERENTIAL_CONSTRAINTS rc
		JOIN information_schema.KEY_COLUMN_USAGE k ON k.CONSTRAINT_SCHEMA = rc.CONSTRAINT_SCHEMA AND k.CONSTRAINT_NAME = rc.CONSTRAINT_NAME
		AND k.TABLE_NAME = rc.TABLE_NAME WHERE rc.CONSTRAINT_SCHEMA = ? AND rc.TABLE_NAME = ? ORDER BY k.COLUMN_NAME`, db.Name, table)
	if err != nil {
		t.Fatal(err)
	}
	fkGen := regexp.MustCompile(`^` + regexp.QuoteMeta(strings.ToLower(table)) + `_ibfk_[0-9]+$`)
	for _, r := range fks {
		if fkGen.MatchString(strings.ToLower(catUnquote(r[0]))) {
			r[0] = "(generated)"
		}
		out = append(out, "foreign key "+strings.Join(r, " "))
	}
	// CHECK constraints: a generated name (<table>_chk_N) follows the table's
	// name; a name the user chose must stay.
	checks := `SELECT tc.CONSTRAINT_NAME, cc.CHECK_CLAUSE, tc.ENFORCED FROM information_schema.TABLE_CONSTRAINTS tc
		JOIN information_schema.CHECK_CONSTRAINTS cc ON cc.CONSTRAINT_SCHEMA = tc.CONSTRAINT_SCHEMA AND cc.CONSTRAINT_NAME = tc.CONSTRAINT_NAME
		WHERE tc.TABLE_SCHEMA = ? AND tc.TABLE_NAME = ? AND tc.CONSTRAINT_TYPE = 'CHECK' ORDER BY cc.CHECK_CLAUSE`
	gen := regexp.MustCompile(`^` + regexp.QuoteMeta(strings.ToLower(table)) + `_chk_[0-9]+$`)
	if db.Flavor == dbconn.MariaDB {
		// Constraint names are the table's own there (CONSTRAINT_N when
		// not given), and every constraint is enforced.
		checks = `SELECT cc.CONSTRAINT_NAME, cc.CHECK_CLAUSE, 'YES' FROM information_schema.CHECK_CONSTRAINTS cc
			WHERE cc.CONSTRAINT_SCHEMA = ? AND cc.TABLE_NAME = ? ORDER BY cc.CHECK_CLAUSE`
		gen = regexp.MustCompile(`^constraint_[0-9]+$`)
	}
	rows, err := catQuery(db, checks, db.Name, table)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		name := catUnquote(r[0])
		if gen.MatchString(strings.ToLower(name)) {
			name = "(generated)"
		}
		out = append(out, "check "+name+" "+r[1]+" "+r[2])
	}
	return out
}

// catNativeAlter applies alter to table as a plain ALTER TABLE in a session
// with the server's own settings (global time zone and sql_mode), after the
// scenario's native statements.
func catNativeAlter(t *testing.T, db *testdb.DB, sc *catScenario, table string) error {
	t.Helper()
	ctx := context.Background()
	c, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := catAppSession(ctx, c, "", sc.Native); err != nil {
		t.Fatal(err)
	}
	_, err = c.ExecContext(ctx, "ALTER TABLE "+dbconn.QuoteIdent(table)+" "+sc.Alter)
	return err
}

// catCompare checks that the migrated table equals the reference: the same
// definition, the same number of rows, and row by row (ordered by the
// primary key) the same bytes in every column but the volatile ones.
func catCompare(t *testing.T, db *testdb.DB, sc *catScenario, table, ref string) {
	t.Helper()
	got, want := catDefinition(t, db, table), catDefinition(t, db, ref)
	if !slices.Equal(got, want) {
		for _, g := range got {
			if !slices.Contains(want, g) {
				t.Errorf("definition: the migrated table has  %s", g)
			}
		}
		for _, w := range want {
			if !slices.Contains(got, w) {
				t.Errorf("definition: the native ALTER gives %s", w)
			}
		}
	}
	all, _ := catColumns(t, db, table)
	var cols []string
	for _, c := range all {
		if !slices.ContainsFunc(sc.Volatile, func(v string) bool { return strings.EqualFold(v, c) }) {
			cols = append(cols, c)
		}
	}
	var nGot, nWant int64
	db.QueryRow("SELECT COUNT(*) FROM " + dbconn.QuoteIdent(table)).Scan(&nGot)
	db.QueryRow("SELECT COUNT(*) FROM " + dbconn.QuoteIdent(ref)).Scan(&nWant)
	if nGot != nWant {
		t.Errorf("the migrated table has %d rows, the reference %d", nGot, nWant)
	}
	a, b := catRows(t, db, table, cols), catRows(t, db, ref, cols)
	// Rows are matched by their primary-key values (the key's columns are
	// never volatile), so a missing row does not shift the others.
	var keyAt []int
	for _, k := range catPK(t, db, table) {
		keyAt = append(keyAt, slices.IndexFunc(cols, func(c string) bool { return strings.EqualFold(c, k) }))
	}
	key := func(row []string) string {
		parts := make([]string, len(keyAt))
		for i, at := range keyAt {
			if at >= 0 {
				parts[i] = row[at]
			}
		}
		return strings.Join(parts, ",")
	}
	byKey := make(map[string][]string, len(b))
	for _, r := range b {
		byKey[key(r)] = r
	}
	var differ, extra, missing int
	report := func(n *int, format string, args ...any) {
		if *n < 3 {
			t.Errorf(format, args...)
		}
		*n++
	}
	for _, r := range a {
		w, ok := byKey[key(r)]
		switch {
		case !ok:
			report(&extra, "a row the reference does not have (columns %s): %v", strings.Join(cols, ","), r)
		case !slices.Equal(r, w):
			var diffs []string
			for i := range cols {
				if r[i] != w[i] {
					diffs = append(diffs, fmt.Sprintf("%s: migrated %s, reference %s", cols[i], r[i], w[i]))
				}
			}
			report(&differ, "the row of key (%s) differs: %s", key(r), strings.Join(diffs, "; "))
		}
		delete(byKey, key(r))
	}
	for _, r := range b {
		if _, ok := byKey[key(r)]; ok {
			report(&missing, "a row of the reference is missing (columns %s): %v", strings.Join(cols, ","), r)
		}
	}
	if differ+extra+missing > 0 {
		t.Errorf("of %d reference rows: %d differ, %d are missing; %d rows are extra", len(b), differ, missing, extra)
	}
	if len(b) == 0 {
		t.Errorf("the reference has no row: the comparison proves nothing")
	}
	t.Logf("compared %d rows over %d columns with the reference %s", len(b), len(cols), ref)
}

// catAutoIncrement reads the table's AUTO_INCREMENT counter (0 if none).
func catAutoIncrement(t *testing.T, db *testdb.DB, table string) uint64 {
	t.Helper()
	var n, create string
	if err := db.QueryRow("SHOW CREATE TABLE "+dbconn.QuoteIdent(table)).Scan(&n, &create); err != nil {
		t.Fatal(err)
	}
	v, err := migration.AutoIncrement(create)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// catLeftovers reports sluice's tables of table that exist besides want.
func catLeftovers(t *testing.T, db *testdb.DB, table string, want ...string) []string {
	t.Helper()
	names := schema.NamesFor(table)
	var out []string
	for _, n := range db.Tables(t) {
		for _, s := range []string{names.Shadow, names.Old, names.Postpone} {
			if strings.EqualFold(n, s) && !slices.ContainsFunc(want, func(w string) bool { return strings.EqualFold(w, n) }) {
				out = append(out, n)
			}
		}
	}
	return out
}

// catUnlocked checks that no lock is held on the table: an exclusive lock
// is granted within a second.
func catUnlocked(t *testing.T, db *testdb.DB, table string) {
	t.Helper()
	ctx := context.Background()
	c, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.ExecContext(ctx, "SET SESSION lock_wait_timeout = 1")
	if _, err := c.ExecContext(ctx, "LOCK TABLES "+dbconn.QuoteIdent(table)+" WRITE"); err != nil {
		t.Errorf("the table is still locked: %v", err)
	}
	c.ExecContext(ctx, "UNLOCK TABLES")
}

// catCopyTable creates model as a copy of table (definition and rows).
func catCopyTable(t *testing.T, db *testdb.DB, table, model string) {
	t.Helper()
	_, stored := catColumns(t, db, table)
	cols := catQuoteAll(stored)
	ctx := context.Background()
	orig, err := schema.Load(ctx, db.DB, db.Name, table)
	if err != nil {
		t.Fatal(err)
	}
	if len(orig.ForeignKeys) == 0 {
		db.MustExec(t, "CREATE TABLE "+dbconn.QuoteIdent(model)+" LIKE "+dbconn.QuoteIdent(table),
			"INSERT INTO "+dbconn.QuoteIdent(model)+" ("+cols+") SELECT "+cols+" FROM "+dbconn.QuoteIdent(table))
		return
	}
	// CREATE TABLE LIKE leaves foreign keys out: the model is made from the
	// table's own definition instead, its constraints under names of its
	// own (a constraint name is unique in a database), on one session
	// without foreign-key checks (the rows are the table's).
	def, err := schema.ShowCreate(ctx, db.DB, db.Name, table)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	def = regexp.MustCompile("CONSTRAINT `(?:[^`]|``)+` FOREIGN KEY").ReplaceAllStringFunc(def, func(string) string {
		n++
		return fmt.Sprintf("CONSTRAINT `%s_ibfk_%d` FOREIGN KEY", model, n)
	})
	def = "CREATE TABLE " + dbconn.QuoteIdent(model) + def[strings.Index(def, " ("):]
	c, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, q := range []string{"SET SESSION foreign_key_checks = 0", def,
		"INSERT INTO " + dbconn.QuoteIdent(model) + " (" + cols + ") SELECT " + cols + " FROM " + dbconn.QuoteIdent(table),
		"SET SESSION foreign_key_checks = 1"} {
		if _, err := c.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}
