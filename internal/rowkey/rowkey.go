// Package rowkey represents primary-key values and builds the SQL that finds
// rows by them. A Key is a tuple of Go values ready to be bound as statement
// parameters; Cols knows, for each key column, how to read it from the server
// or from a binlog row image, and how to compare a bound value with the column
// without a charset or type surprise.
//
// The invariant: a Key built from the server (FromScan) and a Key built from
// the binlog (FromBinlog) for the same row select that row, and only it, with
// Predicate and InList.
package rowkey

import (
	"encoding/binary"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/schema"
)

// Key is one primary-key tuple, in key-column order.
type Key []any

type kind int

const (
	kindSigned   kind = iota // integer types, YEAR
	kindUnsigned             // unsigned integer types, ENUM, SET, BIT (as numbers)
	kindString               // character strings: bound as bytes, converted to the column's charset
	kindBinary               // BINARY/VARBINARY: bound as bytes
	kindText                 // DECIMAL, DATE, TIME, DATETIME, TIMESTAMP: bound as text
)

// Col is one primary-key column.
type Col struct {
	schema.Column
	kind kind
	bits int // integer width, for two's-complement fix-ups of binlog values
}

// Cols are a table's primary-key columns.
type Cols []Col

// NewCols checks that every key column has a type sluice can compare exactly
// and returns their descriptions.
func NewCols(pk []schema.Column) (Cols, error) {
	out := make(Cols, 0, len(pk))
	for _, c := range pk {
		col := Col{Column: c}
		switch c.DataType {
		case "tinyint":
			col.kind, col.bits = kindSigned, 8
		case "smallint":
			col.kind, col.bits = kindSigned, 16
		case "mediumint":
			col.kind, col.bits = kindSigned, 24
		case "int", "integer":
			col.kind, col.bits = kindSigned, 32
		case "bigint":
			col.kind, col.bits = kindSigned, 64
		case "year":
			col.kind = kindSigned
		case "set":
			if n := len(schema.Members(c.ColumnType)); n > 53 {
				return nil, fmt.Errorf("primary key column %s is a SET of %d members, which sluice cannot compare exactly (the server compares a SET with a number as a double, exact up to 53 members); use a table whose primary key is integer, string, binary, decimal or temporal", c.Name, n)
			}
			col.kind = kindUnsigned
		case "enum", "bit":
			col.kind = kindUnsigned
		case "char", "varchar":
			col.kind = kindString
		case "binary", "varbinary":
			col.kind = kindBinary
		case "decimal", "date", "time", "datetime", "timestamp":
			col.kind = kindText
		default:
			return nil, fmt.Errorf("primary key column %s has type %s, which sluice cannot compare exactly; use a table whose primary key is integer, string, binary, decimal or temporal", c.Name, c.ColumnType)
		}
		if col.kind == kindSigned && c.Unsigned {
			col.kind = kindUnsigned
		}
		out = append(out, col)
	}
	return out, nil
}

// Names returns the quoted column list "`a`, `b`".
func (cs Cols) Names() string {
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = dbconn.QuoteIdent(c.Name)
	}
	return strings.Join(parts, ", ")
}

// SelectExprs returns the expressions that read the key columns so that
// FromScan can turn them into a Key: numbers for ENUM/SET/BIT, raw bytes in the
// column's own charset for strings.
func (cs Cols) SelectExprs() string {
	parts := make([]string, len(cs))
	for i, c := range cs {
		q := dbconn.QuoteIdent(c.Name)
		switch {
		case c.DataType == "enum":
			parts[i] = q + "+0"
		case c.DataType == "set" || c.DataType == "bit":
			// SET+0 is a DOUBLE from 2^53 on: read the bits exactly.
			parts[i] = "CAST(" + q + " AS UNSIGNED)"
		case c.kind == kindString:
			parts[i] = "CAST(" + q + " AS BINARY)"
		default:
			parts[i] = q
		}
	}
	return strings.Join(parts, ", ")
}

// placeholder returns the SQL that stands for a bound value of column c. A
// DECIMAL is compared as a DECIMAL of the column's own size: a string bound
// against a DECIMAL column would be compared as a double, which cannot tell
// apart values that differ beyond its 53 bits.
//
// A BIGINT UNSIGNED value is cast: a literal above 2^63-1 is a DECIMAL to
// the server, and MariaDB plans a DELETE whose IN list mixes it with
// integers as a full table scan (which locks every row it passes).
func (c Col) placeholder() string {
	switch {
	case c.DataType == "bigint" && c.Unsigned:
		return "CAST(? AS UNSIGNED)"
	case c.kind == kindString:
		return fmt.Sprintf("CONVERT(? USING %s) COLLATE %s", c.Charset, dbconn.QuoteIdent(c.Collation))
	case c.DataType == "decimal":
		if m := decimalSize.FindStringSubmatch(c.ColumnType); m != nil {
			return "CAST(? AS DECIMAL(" + m[1] + "," + m[2] + "))"
		}
	}
	return "?"
}

var decimalSize = regexp.MustCompile(`\(([0-9]+),([0-9]+)\)`)

// FromScan builds a Key from the raw values a query of SelectExprs returned.
func (cs Cols) FromScan(raw [][]byte) (Key, error) {
	if len(raw) != len(cs) {
		return nil, fmt.Errorf("key has %d values for %d columns", len(raw), len(cs))
	}
	k := make(Key, len(cs))
	for i, c := range cs {
		v := raw[i]
		if v == nil {
			return nil, fmt.Errorf("primary key column %s is NULL", c.Name)
		}
		switch c.kind {
		case kindSigned:
			n, err := strconv.ParseInt(string(v), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("key column %s: %w", c.Name, err)
			}
			k[i] = n
		case kindUnsigned:
			n, err := strconv.ParseUint(string(v), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("key column %s: %w", c.Name, err)
			}
			k[i] = n
		case kindString, kindBinary:
			k[i] = bytesOf(v)
		default:
			k[i] = string(v)
		}
	}
	return k, nil
}

// FromBinlog builds a Key from a decoded binlog row image (all of the table's
// columns, in table order). go-mysql decodes integers as signed Go integers of
// the column's width, ENUM/SET/BIT as int64, and strings as Go strings of the
// column's raw bytes.
func (cs Cols) FromBinlog(row []any) (Key, error) {
	k := make(Key, len(cs))
	for i, c := range cs {
		idx := c.Ordinal - 1
		if idx < 0 || idx >= len(row) {
			return nil, fmt.Errorf("binlog row has %d columns, key column %s is number %d", len(row), c.Name, c.Ordinal)
		}
		v := row[idx]
		if v == nil {
			return nil, fmt.Errorf("binlog row has no value for key column %s: a session with binlog_row_image=MINIMAL inserted a row leaving that column to its DEFAULT, so which row changed is unknown; have the application name every key column in its INSERTs, or log FULL or NOBLOB images, and run sluice again", c.Name)
		}
		var err error
		k[i], err = c.fromBinlogValue(v)
		if err != nil {
			return nil, fmt.Errorf("key column %s: %w", c.Name, err)
		}
	}
	return k, nil
}

func (c Col) fromBinlogValue(v any) (any, error) {
	switch c.kind {
	case kindSigned:
		n, ok := asInt64(v)
		if !ok {
			return nil, fmt.Errorf("unexpected binlog value %T", v)
		}
		return n, nil
	case kindUnsigned:
		n, ok := asInt64(v)
		if !ok {
			if u, isU := v.(uint64); isU {
				return u, nil
			}
			return nil, fmt.Errorf("unexpected binlog value %T", v)
		}
		if n >= 0 || c.bits == 0 {
			return uint64(n), nil
		}
		// A signed decoding of an unsigned column: undo two's complement.
		if c.bits == 64 {
			return uint64(n), nil
		}
		return uint64(n) & (1<<uint(c.bits) - 1), nil
	case kindString, kindBinary:
		var b []byte
		switch s := v.(type) {
		case string:
			b = []byte(s)
		case []byte:
			b = bytesOf(s)
		default:
			return nil, fmt.Errorf("unexpected binlog value %T", v)
		}
		if b == nil {
			b = []byte{}
		}
		// The binlog drops BINARY(n)'s trailing 0x00 padding; the stored value has it.
		if c.DataType == "binary" && int64(len(b)) < c.MaxLength {
			b = append(b, make([]byte, int(c.MaxLength)-len(b))...)
		}
		return b, nil
	default:
		switch s := v.(type) {
		case string:
			return s, nil
		case []byte:
			return string(s), nil
		case fmt.Stringer:
			return s.String(), nil
		}
		return fmt.Sprint(v), nil
	}
}

// bytesOf copies v into a slice that is never nil, even when v is empty: a
// nil []byte is bound as SQL NULL, and a key part compared with NULL matches
// no row (an empty-string key value would select nothing).
func bytesOf(v []byte) []byte {
	out := make([]byte, len(v))
	copy(out, v)
	return out
}

func asInt64(v any) (int64, bool) {
	switch n := v.(type) {
	case int8:
		return int64(n), true
	case int16:
		return int64(n), true
	case int32:
		return int64(n), true
	case int64:
		return n, true
	case int:
		return int64(n), true
	case uint8:
		return int64(n), true
	case uint16:
		return int64(n), true
	case uint32:
		return int64(n), true
	case uint64:
		if n > math.MaxInt64 {
			return 0, false
		}
		return int64(n), true
	}
	return 0, false
}

// Encode returns a compact string that identifies k, for use as a map key.
func (k Key) Encode() string {
	var b []byte
	for _, v := range k {
		switch x := v.(type) {
		case int64:
			b = append(b, 'i')
			b = binary.BigEndian.AppendUint64(b, uint64(x))
		case uint64:
			b = append(b, 'u')
			b = binary.BigEndian.AppendUint64(b, x)
		case []byte:
			b = append(b, 'b')
			b = binary.AppendUvarint(b, uint64(len(x)))
			b = append(b, x...)
		case string:
			b = append(b, 's')
			b = binary.AppendUvarint(b, uint64(len(x)))
			b = append(b, x...)
		default:
			s := fmt.Sprint(x)
			b = append(b, '?')
			b = binary.AppendUvarint(b, uint64(len(s)))
			b = append(b, s...)
		}
	}
	return string(b)
}

// String renders k for messages.
func (k Key) String() string {
	parts := make([]string, len(k))
	for i, v := range k {
		switch x := v.(type) {
		case []byte:
			parts[i] = strconv.Quote(string(x))
		default:
			parts[i] = fmt.Sprint(x)
		}
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// Predicate returns a WHERE fragment comparing the key columns with k in
// lexicographic order, op being one of > >= < <=, and its arguments. It is
// written as a disjunction of conjunctions so the range optimizer uses the
// primary key.
func (cs Cols) Predicate(op string, k Key) (string, []any) {
	strict := op == ">" || op == "<"
	cmp := op[:1]
	var ors []string
	var args []any
	for i := range cs {
		var ands []string
		for j := 0; j < i; j++ {
			ands = append(ands, dbconn.QuoteIdent(cs[j].Name)+" = "+cs[j].placeholder())
			args = append(args, k[j])
		}
		o := cmp
		if i == len(cs)-1 && !strict {
			o = op
		}
		ands = append(ands, dbconn.QuoteIdent(cs[i].Name)+" "+o+" "+cs[i].placeholder())
		args = append(args, k[i])
		ors = append(ors, "("+strings.Join(ands, " AND ")+")")
	}
	return "(" + strings.Join(ors, " OR ") + ")", args
}

// InList returns the predicate selecting the rows of keys, and its
// arguments: "(cols) IN ((...), (...))" when every key column is an integer
// or a string, else a disjunction of conjunctions of equalities. MySQL
// compares a row constructor's ENUM or SET part with a number as a string
// once the list holds two tuples, and a TIME part with a string as text when
// it holds one (so '838:59:59' misses a TIME(3) '838:59:59.000'); a plain
// equality compares each with the column's own type.
func (cs Cols) InList(keys []Key) (string, []any) {
	if !cs.plainIn() {
		return cs.orList(keys)
	}
	one := make([]string, len(cs))
	for i, c := range cs {
		one[i] = c.placeholder()
	}
	tuple := strings.Join(one, ", ")
	if len(cs) > 1 {
		tuple = "(" + tuple + ")"
	}
	var sb strings.Builder
	if len(cs) > 1 {
		sb.WriteString("(" + cs.Names() + ") IN (")
	} else {
		sb.WriteString(cs.Names() + " IN (")
	}
	args := make([]any, 0, len(keys)*len(cs))
	for i, k := range keys {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(tuple)
		args = append(args, k...)
	}
	sb.WriteString(")")
	return sb.String(), args
}

// plainIn reports whether an IN list compares every key column by its own
// type: integers (not ENUM, SET or BIT) and strings.
func (cs Cols) plainIn() bool {
	for _, c := range cs {
		if c.bits == 0 && c.kind != kindString && c.kind != kindBinary {
			return false
		}
	}
	return true
}

// orList is InList as "(a = ? AND b = ?) OR (...)".
func (cs Cols) orList(keys []Key) (string, []any) {
	eqs := make([]string, len(cs))
	for i, c := range cs {
		eqs[i] = dbconn.QuoteIdent(c.Name) + " = " + c.placeholder()
	}
	tuple := "(" + strings.Join(eqs, " AND ") + ")"
	parts := make([]string, len(keys))
	args := make([]any, 0, len(keys)*len(cs))
	for i, k := range keys {
		parts[i] = tuple
		args = append(args, k...)
	}
	return "(" + strings.Join(parts, " OR ") + ")", args
}

// OrderBy returns "`a`, `b`" for ORDER BY in key order.
func (cs Cols) OrderBy() string { return cs.Names() }

// Integer reports whether cs is a single integer column (not ENUM, SET or
// BIT), whose ranges can be cut by arithmetic, and whether it is unsigned.
func (cs Cols) Integer() (unsigned, ok bool) {
	if len(cs) != 1 || cs[0].bits == 0 {
		return false, false
	}
	return cs[0].kind == kindUnsigned, true
}

// Exact reports whether two keys of cs that Encode alike stand for the same
// row: every key column is an integer (ENUM, SET and BIT by number), a
// character string (its raw bytes in the column's charset) or a binary
// string. A temporal or DECIMAL key is text whose spelling varies ('12:00'
// and '12:00:00.000'), and a TIMESTAMP's text is one of two instants in a
// daylight-saving fold.
func (cs Cols) Exact() bool {
	for _, c := range cs {
		if c.kind == kindText {
			return false
		}
	}
	return true
}
