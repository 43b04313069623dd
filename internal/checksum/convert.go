package checksum

import (
	"regexp"
	"slices"
	"strings"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/schema"
)

var (
	decimalTypes = map[string]bool{"decimal": true}
	typeArgs     = regexp.MustCompile(`\(([0-9]+)(?:,([0-9]+))?\)`)
)

// Convert returns the SQL expression that reads column from of the original
// so that its text equals what the copy stored in column to of the new table,
// and false when sluice knows no such expression (the column is then left
// out of the checksum, and reported). Unchanged columns, and changes that keep
// the text (integer widths, string lengths, ENUM/SET members moved or added),
// read the column as it is. Otherwise the value is converted as the copy's
// assignment converts it: integers and decimals to DECIMAL(p,s) (rounded half
// away from zero on both paths), temporal values to the new type and precision
// (in the session's time zone, as the copy), and character data to the new
// character set. It is pure.
func Convert(from, to schema.Column) (string, bool) {
	q := dbconn.QuoteIdent(from.Name)
	fromText, toText := schema.TextTypes[from.DataType] || schema.MemberTypes[from.DataType], schema.TextTypes[to.DataType]
	padded := to.DataType == "char" && from.DataType != "char"
	if Comparable(from, to) && !padded {
		return q, true
	}
	switch {
	case from.DataType == "enum" && to.DataType == "enum" && sameCharset(from, to):
		// A member reads as its text, wherever it stands in the list.
		return q, true
	case from.DataType == "set" && to.DataType == "set" && sameCharset(from, to):
		// A SET reads as its members in the order of the definition:
		// appending members keeps the text, reordering them does not.
		old, nw := schema.Members(from.ColumnType), schema.Members(to.ColumnType)
		if len(nw) >= len(old) && slices.Equal(old, nw[:len(old)]) {
			return q, true
		}
		return "", false
	case decimalTypes[to.DataType] && (schema.IntegerTypes[from.DataType] || decimalTypes[from.DataType]):
		p, s, ok := precision(to.ColumnType)
		if !ok {
			return "", false
		}
		return "CAST(" + q + " AS DECIMAL(" + p + "," + s + "))", true
	case schema.IntegerTypes[to.DataType] && decimalTypes[from.DataType]:
		if to.Unsigned {
			return "CAST(" + q + " AS UNSIGNED)", true
		}
		return "CAST(" + q + " AS SIGNED)", true
	case schema.TemporalTypes[to.DataType] && schema.TemporalTypes[from.DataType]:
		return temporalCast(q, from, to)
	case schema.BinaryTypes[from.DataType] && schema.BinaryTypes[to.DataType]:
		// Bytes are kept; BINARY(m) pads them with 0x00 to m.
		if to.DataType == "binary" {
			m, _, ok := precision(to.ColumnType)
			if !ok {
				return "", false
			}
			return "CAST(" + q + " AS BINARY(" + m + "))", true
		}
		return q, true
	case to.DataType == "double" && !strings.Contains(to.ColumnType, "(") &&
		(from.DataType == "float" || schema.IntegerTypes[from.DataType] || decimalTypes[from.DataType]):
		// The assignment converts to the nearest DOUBLE, as this does
		// (a DOUBLE(M,D) rounds and prints D decimals: not this).
		return toDouble(from.Name), true
	case toText && (fromText || schema.IntegerTypes[from.DataType] || decimalTypes[from.DataType]):
		v := q
		if !fromText {
			v = "CAST(" + q + " AS CHAR)"
		}
		v = "CONVERT(" + v + " USING " + to.Charset + ")"
		if to.DataType == "char" {
			// CHAR drops trailing spaces when it is read.
			v = "TRIM(TRAILING ' ' FROM " + v + ")"
		}
		return v, true
	}
	return "", false
}

// toDouble reads a column as the nearest DOUBLE, as text: MySQL prints an
// expression's DOUBLE with 16 significant digits, which two DOUBLEs may
// share, so what those digits leave is printed after them (0 where they say
// it all). Both sides of a pair read through it alike.
func toDouble(name string) string {
	d := "(" + dbconn.QuoteIdent(name) + " * 1e0)"
	return "CONCAT(" + d + ", ' ', " + d + " - CAST(CAST(" + d + " AS CHAR) AS DOUBLE))"
}

func sameCharset(a, b schema.Column) bool { return strings.EqualFold(a.Charset, b.Charset) }

// precision reads "(p,s)" or "(p)" from a column type.
func precision(columnType string) (p, s string, ok bool) {
	m := typeArgs.FindStringSubmatch(columnType)
	if m == nil {
		return "", "", false
	}
	if m[2] == "" {
		return m[1], "0", true
	}
	return m[1], m[2], true
}

// temporalCast converts between DATE, TIME, DATETIME and TIMESTAMP. A TIMESTAMP
// reads as DATETIME text in the session's zone, so both go through DATETIME.
func temporalCast(q string, from, to schema.Column) (string, bool) {
	fsp := "0"
	if m := typeArgs.FindStringSubmatch(to.ColumnType); m != nil {
		fsp = m[1]
	}
	switch to.DataType {
	case "date":
		if from.DataType == "time" {
			return "", false // the date part comes from the current date
		}
		return "CAST(" + q + " AS DATE)", true
	case "time":
		if from.DataType == "date" {
			return "", false
		}
		return "CAST(" + q + " AS TIME(" + fsp + "))", true
	default: // datetime, timestamp
		if from.DataType == "time" {
			return "", false
		}
		return "CAST(" + q + " AS DATETIME(" + fsp + "))", true
	}
}
