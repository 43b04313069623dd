package plan

import (
	"context"
	"database/sql"
	"fmt"
	"math/big"
	"slices"
	"sort"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/ddl"
	"github.com/sluicedb/sluice/internal/schema"
)

// Risk kinds: each needs --approve=KIND to run.
const (
	RiskDropColumn   = "drop-column"
	RiskRenameColumn = "rename-column"
	RiskLossyType    = "lossy-type"
	RiskNotNull      = "not-null"
	RiskUniqueKey    = "unique-key"
)

// Risk is a change that can lose data, or fail on existing data, or break
// the application's queries.
type Risk struct {
	Kind   string `json:"kind"`
	Column string `json:"column,omitempty"`
	Detail string `json:"detail"`
	// Query counts the rows at risk ("" when there is no such count); Count
	// is its result once CountRisks ran, -1 before.
	Query string `json:"-"`
	Count int64  `json:"rows_at_risk"`
	// CountWhat says what Count counts.
	CountWhat string `json:"count_of,omitempty"`
}

// Describe is the risk in one line.
func (r Risk) Describe() string {
	s := r.Detail
	if r.Query != "" && r.Count >= 0 {
		s += fmt.Sprintf(" (%d %s)", r.Count, r.CountWhat)
	}
	return s
}

// Kinds lists the distinct kinds of risks, sorted.
func Kinds(rs []Risk) []string {
	seen := map[string]bool{}
	var out []string
	for _, r := range rs {
		if !seen[r.Kind] {
			seen[r.Kind] = true
			out = append(out, r.Kind)
		}
	}
	sort.Strings(out)
	return out
}

// Unapproved returns the kinds of rs not in approved.
func Unapproved(rs []Risk, approved []string) []string {
	ok := map[string]bool{}
	for _, a := range approved {
		ok[strings.TrimSpace(strings.ToLower(a))] = true
	}
	var out []string
	for _, k := range Kinds(rs) {
		if !ok[k] {
			out = append(out, k)
		}
	}
	return out
}

// Risks finds the risky parts of an ALTER. It is pure; CountRisks then counts
// the rows concerned on the server.
func Risks(t *schema.Table, a *ddl.Alter) []Risk {
	tq := t.Quoted()
	var out []Risk
	for _, spec := range a.Specs {
		switch spec.Tp {
		case ast.AlterTableDropColumn:
			name := spec.OldColumnName.Name.O
			c, ok := t.Column(name)
			if ok && c.Generated {
				continue // computed from other columns: nothing is lost
			}
			q := dbconn.QuoteIdent(name)
			out = append(out, Risk{Kind: RiskDropColumn, Column: name, Detail: "drops column " + name + " and its data",
				Query: "SELECT COUNT(" + q + ") FROM " + tq, CountWhat: "rows with a value in it"})
		case ast.AlterTableRenameColumn:
			out = append(out, renameRisk(spec.OldColumnName.Name.O, spec.NewColumnName.Name.O))
		case ast.AlterTableModifyColumn, ast.AlterTableChangeColumn:
			name, col, ok := redefinedColumn(spec)
			if !ok {
				continue
			}
			old, ok := t.Column(name)
			if !ok {
				continue
			}
			if !dbconn.SameName(name, col.Name.Name.O) {
				out = append(out, renameRisk(old.Name, col.Name.Name.O))
			}
			q := dbconn.QuoteIdent(old.Name)
			if old.Nullable && !newNullable(col) && !old.Generated {
				out = append(out, Risk{Kind: RiskNotNull, Column: old.Name, Detail: "makes " + old.Name + " NOT NULL",
					Query: "SELECT COUNT(*) FROM " + tq + " WHERE " + q + " IS NULL", CountWhat: "rows hold NULL there, which would fail the copy"})
			}
			if old.Generated || generated(col) {
				continue
			}
			if lossy, why, cond := Lossy(OldType(old), NewType(col), q, t.Charset); lossy {
				r := Risk{Kind: RiskLossyType, Column: old.Name, Detail: fmt.Sprintf("changes %s from %s to %s: %s", old.Name, old.ColumnType, ddl.TypeText(col), why), Count: -1}
				if cond != "" {
					r.Query, r.CountWhat = "SELECT COUNT(*) FROM "+tq+" WHERE "+cond, "rows hold values that would not fit"
				}
				out = append(out, r)
			}
			if colOpt(col, ast.ColumnOptionUniqKey) {
				out = append(out, uniqueRisk(t, "on "+old.Name, []string{old.Name}))
			}
			if colOpt(col, ast.ColumnOptionPrimaryKey) {
				// Its NULLs are the not-null risk above.
				out = append(out, slices.DeleteFunc(primaryKeyRisks(t, []string{old.Name}), func(r Risk) bool { return r.Kind == RiskNotNull })...)
			}
		case ast.AlterTableAddConstraint:
			pk := spec.Constraint.Tp == ast.ConstraintPrimaryKey
			if !isUnique(spec.Constraint.Tp) && !pk {
				continue
			}
			var cols []string
			for _, k := range spec.Constraint.Keys {
				if k.Column == nil {
					cols = nil
					break
				}
				cols = append(cols, k.Column.Name.O)
			}
			if pk {
				out = append(out, primaryKeyRisks(t, cols)...)
				continue
			}
			label := spec.Constraint.Name
			if label == "" {
				label = "(" + strings.Join(cols, ", ") + ")"
			}
			out = append(out, uniqueRisk(t, label, cols))
		case ast.AlterTableAddColumns:
			for _, col := range spec.NewColumns {
				if (colOpt(col, ast.ColumnOptionUniqKey) || colOpt(col, ast.ColumnOptionPrimaryKey)) && colOpt(col, ast.ColumnOptionDefaultValue) && !newNullable(col) {
					out = append(out, Risk{Kind: RiskUniqueKey, Column: col.Name.Name.O, Count: -1,
						Detail: "adds column " + col.Name.Name.O + " with a UNIQUE key and a NOT NULL default: every existing row gets the same value"})
				}
			}
		}
	}
	for i := range out {
		if out[i].Query != "" {
			out[i].Count = -1
		}
	}
	return out
}

func renameRisk(from, to string) Risk {
	return Risk{Kind: RiskRenameColumn, Column: from, Count: -1,
		Detail: fmt.Sprintf("renames column %s to %s: queries that name %s will fail", from, to, from)}
}

// primaryKeyRisks are those of a new primary key on cols: each column that
// may be NULL becomes NOT NULL, and values may repeat unless the key holds
// every column of the table's current row key (then rows distinct by it stay
// distinct).
func primaryKeyRisks(t *schema.Table, cols []string) []Risk {
	var out []Risk
	for _, name := range cols {
		if c, ok := t.Column(name); ok && c.Nullable && !c.Generated {
			q := dbconn.QuoteIdent(c.Name)
			out = append(out, Risk{Kind: RiskNotNull, Column: c.Name, Detail: "makes " + c.Name + " NOT NULL (a primary-key column)",
				Query: "SELECT COUNT(*) FROM " + t.Quoted() + " WHERE " + q + " IS NULL", CountWhat: "rows hold NULL there, which would fail the copy"})
		}
	}
	if len(t.PrimaryKey) == 0 || len(cols) == 0 || !schema.HoldsAll(cols, t.PrimaryKey) {
		r := uniqueRisk(t, "("+strings.Join(cols, ", ")+")", cols)
		r.Detail = "adds PRIMARY KEY (" + strings.Join(cols, ", ") + "), which does not hold every column of the current key (" +
			strings.Join(t.PrimaryKey, ", ") + "): a duplicate stops the migration (no row is dropped)"
		out = append(out, r)
	}
	return out
}

// uniqueRisk counts the key values held by more than one row (rows with a
// NULL in the key never collide).
func uniqueRisk(t *schema.Table, label string, cols []string) Risk {
	r := Risk{Kind: RiskUniqueKey, Detail: "adds UNIQUE key " + label + ": a duplicate stops the migration (no row is dropped)", Count: -1}
	if len(cols) == 0 {
		return r
	}
	for _, c := range cols {
		if _, ok := t.Column(c); !ok {
			return r // a column the ALTER adds: no data to count yet
		}
	}
	qs := make([]string, len(cols))
	notNull := make([]string, len(cols))
	for i, c := range cols {
		qs[i] = dbconn.QuoteIdent(c)
		notNull[i] = qs[i] + " IS NOT NULL"
	}
	r.Column = strings.Join(cols, ",")
	r.Query = "SELECT COUNT(*) FROM (SELECT 1 FROM " + t.Quoted() + " WHERE " + strings.Join(notNull, " AND ") +
		" GROUP BY " + strings.Join(qs, ", ") + " HAVING COUNT(*) > 1) d"
	r.CountWhat = "values held by more than one row"
	return r
}

// CountRisks runs each risk's count on the server.
func CountRisks(ctx context.Context, db *sql.DB, rs []Risk) error {
	for i := range rs {
		if rs[i].Query == "" {
			continue
		}
		if err := db.QueryRowContext(ctx, rs[i].Query).Scan(&rs[i].Count); err != nil {
			return fmt.Errorf("count the rows at risk (%s): %w", rs[i].Kind, err)
		}
	}
	return nil
}

var intRange = map[string][2]*big.Int{}

func init() {
	for _, x := range []struct {
		name string
		bits uint
	}{{"tinyint", 8}, {"smallint", 16}, {"mediumint", 24}, {"int", 32}, {"bigint", 64}} {
		one := big.NewInt(1)
		hi := new(big.Int).Lsh(one, x.bits-1)
		lo := new(big.Int).Neg(hi)
		intRange[x.name] = [2]*big.Int{lo, new(big.Int).Sub(hi, one)}
		intRange[x.name+" unsigned"] = [2]*big.Int{big.NewInt(0), new(big.Int).Sub(new(big.Int).Lsh(one, x.bits), one)}
	}
}

func intKey(t ColType) string {
	if t.Unsigned {
		return t.Name + " unsigned"
	}
	return t.Name
}

var textBytes = map[string]int64{"tinytext": 255, "text": 65535, "mediumtext": 16777215, "longtext": 4294967295,
	"tinyblob": 255, "blob": 65535, "mediumblob": 16777215, "longblob": 4294967295}

var stringTypes = map[string]bool{"char": true, "varchar": true, "tinytext": true, "text": true, "mediumtext": true, "longtext": true}
var binaryTypes = map[string]bool{"binary": true, "varbinary": true, "tinyblob": true, "blob": true, "mediumblob": true, "longblob": true}

// Lossy reports whether converting a column from one type to another can
// lose or alter values, why, and a condition (on column q) that is true for
// the rows whose value would not survive ("" when sluice cannot say).
// tableCharset is the character set a new definition without one gets.
func Lossy(from, to ColType, q, tableCharset string) (bool, string, string) {
	if fr, ok := intRange[intKey(from)]; ok {
		if tr, ok := intRange[intKey(to)]; ok {
			if tr[0].Cmp(fr[0]) <= 0 && tr[1].Cmp(fr[1]) >= 0 {
				return false, "", ""
			}
			return true, "the new range is narrower", fmt.Sprintf("%s NOT BETWEEN %s AND %s", q, tr[0], tr[1])
		}
		if to.Name == "decimal" {
			digits := len(fr[1].String())
			if lenOr(to.Length, 10)-max(to.Scale, 0) >= digits {
				return false, "", ""
			}
			return true, "the DECIMAL has fewer integer digits", fmt.Sprintf("ABS(%s) >= 1e%d", q, lenOr(to.Length, 10)-max(to.Scale, 0))
		}
	}
	if from.Name == "decimal" && to.Name == "decimal" {
		fi, ti := from.Length-from.Scale, lenOr(to.Length, 10)-max(to.Scale, 0)
		switch {
		case ti < fi && max(to.Scale, 0) < from.Scale:
			return true, "fewer integer and decimal digits", fmt.Sprintf("(ABS(%s) >= 1e%d OR %s <> ROUND(%s, %d))", q, ti, q, q, max(to.Scale, 0))
		case ti < fi:
			return true, "fewer integer digits", fmt.Sprintf("ABS(%s) >= 1e%d", q, ti)
		case max(to.Scale, 0) < from.Scale:
			return true, "fewer decimal digits: values are rounded", fmt.Sprintf("%s <> ROUND(%s, %d)", q, q, max(to.Scale, 0))
		}
		return false, "", ""
	}
	if (from.Name == "float" && (to.Name == "float" || to.Name == "double")) || (from.Name == "double" && to.Name == "double") {
		return false, "", ""
	}
	if from.Name == "double" && to.Name == "float" {
		return true, "FLOAT keeps fewer digits: values are rounded", fmt.Sprintf("%s <> CAST(%s AS FLOAT)", q, q)
	}
	if isTime(from.Name) && from.Name == to.Name {
		if max(to.Scale, 0) < from.Scale {
			return true, "fewer fractional-second digits: values are rounded", fmt.Sprintf("MICROSECOND(%s) %% %d <> 0", q, pow10(6-max(to.Scale, 0)))
		}
		return false, "", ""
	}
	if from.Name == "date" && to.Name == "datetime" {
		return false, "", ""
	}
	if (stringTypes[from.Name] && stringTypes[to.Name]) || (binaryTypes[from.Name] && binaryTypes[to.Name]) {
		toCS := to.Charset
		if toCS == "" {
			toCS = tableCharset
		}
		var why, cond []string
		if maxLen(to) < maxLen(from) {
			why = append(why, "it is shorter")
			if stringTypes[to.Name] && to.Name != "char" && to.Name != "varchar" {
				cond = append(cond, fmt.Sprintf("LENGTH(%s) > %d", q, maxLen(to)))
			} else if stringTypes[to.Name] {
				cond = append(cond, fmt.Sprintf("CHAR_LENGTH(%s) > %d", q, maxLen(to)))
			} else {
				cond = append(cond, fmt.Sprintf("LENGTH(%s) > %d", q, maxLen(to)))
			}
		}
		if stringTypes[from.Name] && toCS != "" && from.Charset != "" && toCS != from.Charset && !widerCharset(from.Charset, toCS) {
			why = append(why, "the character set "+toCS+" cannot hold every "+from.Charset+" character")
			cond = append(cond, fmt.Sprintf("%s <> CONVERT(CONVERT(%s USING %s) USING %s)", q, q, toCS, from.Charset))
		}
		if len(why) == 0 {
			return false, "", ""
		}
		return true, strings.Join(why, "; "), strings.Join(cond, " OR ")
	}
	if (from.Name == "enum" || from.Name == "set") && from.Name == to.Name {
		if len(to.Elems) >= len(from.Elems) && equalStrings(from.Elems, to.Elems[:len(from.Elems)]) {
			return false, "", ""
		}
		if from.Name == "enum" {
			vals := make([]string, len(to.Elems))
			for i, e := range to.Elems {
				vals[i] = dbconn.QuoteString(e)
			}
			return true, "values are removed or reordered", fmt.Sprintf("%s NOT IN (%s)", q, strings.Join(vals, ", "))
		}
		return true, "values are removed or reordered", ""
	}
	if from.Name == to.Name && from.Unsigned == to.Unsigned {
		return false, "", ""
	}
	return true, "a conversion to another type family", ""
}

func isTime(n string) bool { return n == "datetime" || n == "timestamp" || n == "time" }

func pow10(n int) int {
	p := 1
	for i := 0; i < n; i++ {
		p *= 10
	}
	return p
}

// maxLen is a string type's capacity: characters for CHAR/VARCHAR, bytes
// otherwise.
func maxLen(t ColType) int64 {
	if b, ok := textBytes[t.Name]; ok {
		return b
	}
	return int64(lenOr(t.Length, 1))
}

// widerCharset: every character of from exists in to.
func widerCharset(from, to string) bool {
	if to == "utf8mb4" || to == from {
		return true
	}
	return from == "ascii" && (to == "latin1" || to == "utf8mb3" || to == "utf8")
}
