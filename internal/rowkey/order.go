package rowkey

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"

	"github.com/sluicedb/sluice/internal/dbconn"
)

// SortKey is a key's place in the primary key's index order: one byte string
// per key column, compared column by column (Compare), each part ordering and
// equating values as the server does for that column.
type SortKey []string

// Compare returns -1, 0 or +1 as a sorts before, with or after b.
func (a SortKey) Compare(b SortKey) int {
	for i := range min(len(a), len(b)) {
		if c := strings.Compare(a[i], b[i]); c != 0 {
			return c
		}
	}
	return cmp.Compare(len(a), len(b))
}

// Collated reports whether c is a character string column, whose order is its
// collation's: only the server knows it (WeightExpr). Every other key column
// is ordered by SortPart.
func (c Col) Collated() bool { return c.kind == kindString }

// WeightExpr returns an expression with one placeholder, for a value of c
// bound as FromScan and FromBinlog make it: the value's weight string in c's
// collation. For a NO PAD collation, the weights compare (as bytes) and
// equate values as the collation does; for a PAD SPACE one, see
// PadSpaceWeight.
func (c Col) WeightExpr() string {
	return fmt.Sprintf("WEIGHT_STRING(CONVERT(? USING %s) COLLATE %s)", c.Charset, dbconn.QuoteIdent(c.Collation))
}

// PadSpaceWeight encodes w, a value's weight string in a PAD SPACE collation
// whose space weighs space, so that the encodings compare as the server
// compares the values: as if the shorter weight string were padded with
// space's weight. (Padding the value with spaces would not do: an ignorable
// character has no weight, and one character may weigh as two.) w is read
// as units of len(space) bytes: trailing space units are dropped, the rest
// is cut into blocks, each a run of r space units then one other unit c, and
// each block is written as one of
//
//	0x00, r (4 bytes), c   when c sorts below a space
//	0x02, ^r (4 bytes), c  when c sorts above a space
//
// (at a run's end, a shorter run meets c where a longer one still has a
// space), then 0x01 ends the string (spaces from there on).
func PadSpaceWeight(w, space string) (string, error) {
	k := len(space)
	if k == 0 || len(w)%k != 0 {
		return "", fmt.Errorf("weight of %d bytes is not in units of %d", len(w), k)
	}
	for len(w) >= k && w[len(w)-k:] == space {
		w = w[:len(w)-k]
	}
	var b strings.Builder
	run := uint32(0)
	for ; len(w) > 0; w = w[k:] {
		c := w[:k]
		if c == space {
			run++
			continue
		}
		r := run
		if c < space {
			b.WriteByte(0)
		} else {
			b.WriteByte(2)
			r = ^r
		}
		b.Write(binary.BigEndian.AppendUint32(nil, r))
		b.WriteString(c)
		run = 0
	}
	b.WriteByte(1)
	return b.String(), nil
}

// SortPart returns the order-preserving bytes of v, a value of column c as
// FromScan or FromBinlog make it: byte strings compared as bytes order and
// equate them as the server orders the column. c must not be Collated.
func (c Col) SortPart(v any) (string, error) {
	switch c.kind {
	case kindSigned:
		n, ok := v.(int64)
		if !ok {
			return "", fmt.Errorf("key column %s: %T is not a signed integer", c.Name, v)
		}
		return string(binary.BigEndian.AppendUint64(nil, uint64(n)^(1<<63))), nil
	case kindUnsigned:
		n, ok := v.(uint64)
		if !ok {
			return "", fmt.Errorf("key column %s: %T is not an unsigned integer", c.Name, v)
		}
		return string(binary.BigEndian.AppendUint64(nil, n)), nil
	case kindBinary:
		b, ok := v.([]byte)
		if !ok {
			return "", fmt.Errorf("key column %s: %T is not a byte string", c.Name, v)
		}
		if c.DataType == "binary" && int64(len(b)) < c.MaxLength {
			// BINARY(n) is stored padded with 0x00.
			b = append(append([]byte{}, b...), make([]byte, int(c.MaxLength)-len(b))...)
		}
		return string(b), nil
	case kindText:
		s, ok := v.(string)
		if !ok {
			return "", fmt.Errorf("key column %s: %T is not text", c.Name, v)
		}
		var out string
		var err error
		switch c.DataType {
		case "decimal":
			out, err = decimalSort(s)
		case "date", "datetime", "timestamp":
			out, err = datetimeSort(s)
		case "time":
			out, err = timeSort(s)
		default:
			err = fmt.Errorf("no order for type %s", c.DataType)
		}
		if err != nil {
			return "", fmt.Errorf("key column %s: %w", c.Name, err)
		}
		return out, nil
	}
	return "", fmt.Errorf("key column %s: no order for type %s", c.Name, c.DataType)
}

// decimalSort encodes a decimal string ("-12.50", "0", ".5") so that byte
// order is numeric order and equal numbers encode equally: a class byte
// (negative, zero, positive), then the number of integer digits (two bytes)
// and the digits without leading or trailing zeros; for a negative number
// every byte after the class is complemented and 0xFF ends it, so that a
// longer magnitude sorts first.
func decimalSort(s string) (string, error) {
	neg := false
	t := s
	switch {
	case strings.HasPrefix(t, "-"):
		neg, t = true, t[1:]
	case strings.HasPrefix(t, "+"):
		t = t[1:]
	}
	intPart, frac, _ := strings.Cut(t, ".")
	if intPart == "" && frac == "" || !digits(intPart) || !digits(frac) {
		return "", fmt.Errorf("%q is not a decimal number", s)
	}
	intPart = strings.TrimLeft(intPart, "0")
	frac = strings.TrimRight(frac, "0")
	if intPart == "" && frac == "" {
		return "\x01", nil
	}
	if len(intPart) > 0xFFFF {
		return "", fmt.Errorf("%q has too many digits", s)
	}
	mag := binary.BigEndian.AppendUint16(nil, uint16(len(intPart)))
	mag = append(append(mag, intPart...), frac...)
	if !neg {
		return "\x02" + string(mag), nil
	}
	for i := range mag {
		mag[i] = ^mag[i]
	}
	return "\x00" + string(mag) + "\xff", nil
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// datetimeSort encodes "YYYY-MM-DD[ HH:MM:SS[.ffffff]]" (DATE, DATETIME and
// TIMESTAMP as the server and the binlog print them, zero dates included) as
// the fixed-width digits YYYYMMDDHHMMSSffffff.
func datetimeSort(s string) (string, error) {
	date, clock, hasClock := strings.Cut(s, " ")
	d := strings.Split(date, "-")
	if len(d) != 3 || len(d[0]) != 4 || len(d[1]) != 2 || len(d[2]) != 2 {
		return "", fmt.Errorf("%q is not a date", s)
	}
	out := d[0] + d[1] + d[2]
	if !hasClock {
		out += "000000000000"
	} else {
		hms, frac, _ := strings.Cut(clock, ".")
		p := strings.Split(hms, ":")
		if len(p) != 3 || len(p[0]) != 2 || len(p[1]) != 2 || len(p[2]) != 2 || len(frac) > 6 {
			return "", fmt.Errorf("%q is not a date and time", s)
		}
		out += p[0] + p[1] + p[2] + frac + strings.Repeat("0", 6-len(frac))
	}
	if !digits(out) {
		return "", fmt.Errorf("%q is not a date and time", s)
	}
	return out, nil
}

// timeSort encodes a TIME "[-]H:MM:SS[.ffffff]" (up to 838 hours either
// way) as its signed number of microseconds, big-endian with the sign bit
// flipped.
func timeSort(s string) (string, error) {
	t, neg := strings.CutPrefix(s, "-")
	hms, frac, _ := strings.Cut(t, ".")
	p := strings.Split(hms, ":")
	if len(p) != 3 || len(p[0]) == 0 || len(p[0]) > 4 || len(p[1]) != 2 || len(p[2]) != 2 || len(frac) > 6 ||
		!digits(p[0]+p[1]+p[2]+frac) {
		return "", fmt.Errorf("%q is not a time", s)
	}
	h, _ := strconv.ParseInt(p[0], 10, 64)
	m, _ := strconv.ParseInt(p[1], 10, 64)
	sec, _ := strconv.ParseInt(p[2], 10, 64)
	us, _ := strconv.ParseInt(frac+strings.Repeat("0", 6-len(frac)), 10, 64)
	n := ((h*60+m)*60+sec)*1_000_000 + us
	if neg {
		n = -n
	}
	return string(binary.BigEndian.AppendUint64(nil, uint64(n)^(1<<63))), nil
}
