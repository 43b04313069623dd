package rowkey

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/sluicedb/sluice/internal/schema"
)

func cols(t *testing.T, cs ...schema.Column) Cols {
	t.Helper()
	for i := range cs {
		cs[i].Ordinal = i + 1
	}
	c, err := NewCols(cs)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestFromBinlogUnsigned(t *testing.T) {
	c := cols(t,
		schema.Column{Name: "a", DataType: "bigint", Unsigned: true},
		schema.Column{Name: "b", DataType: "int", Unsigned: true},
		schema.Column{Name: "m", DataType: "mediumint", Unsigned: true},
		schema.Column{Name: "s", DataType: "smallint"})
	k, err := c.FromBinlog([]any{int64(-1), int32(-1), int32(-1), int16(-5)})
	if err != nil {
		t.Fatal(err)
	}
	want := Key{uint64(18446744073709551615), uint64(4294967295), uint64(16777215), int64(-5)}
	if !reflect.DeepEqual(k, want) {
		t.Errorf("got %v want %v", k, want)
	}
}

func TestFromBinlogBinaryPadding(t *testing.T) {
	c := cols(t, schema.Column{Name: "b", DataType: "binary", MaxLength: 4})
	k, err := c.FromBinlog([]any{"a\x00"})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(k[0].([]byte), []byte("a\x00\x00\x00")) {
		t.Errorf("got %q", k[0])
	}
}

func TestFromBinlogNullKey(t *testing.T) {
	c := cols(t, schema.Column{Name: "a", DataType: "int"})
	if _, err := c.FromBinlog([]any{nil}); err == nil {
		t.Error("want an error for a missing key value")
	}
}

func TestRefusesFloatKey(t *testing.T) {
	if _, err := NewCols([]schema.Column{{Name: "f", DataType: "double", ColumnType: "double"}}); err == nil {
		t.Error("want an error for a DOUBLE key")
	}
}

func TestEncodeDistinguishes(t *testing.T) {
	keys := []Key{{int64(1)}, {uint64(1)}, {[]byte("1")}, {"1"}, {[]byte("a"), []byte("bc")}, {[]byte("ab"), []byte("c")}}
	seen := map[string]int{}
	for i, k := range keys {
		e := k.Encode()
		if j, dup := seen[e]; dup {
			t.Errorf("keys %d and %d encode alike", i, j)
		}
		seen[e] = i
	}
	if (Key{int64(7), []byte("x")}).Encode() != (Key{int64(7), []byte("x")}).Encode() {
		t.Error("equal keys must encode alike")
	}
}

func TestPredicate(t *testing.T) {
	c := cols(t,
		schema.Column{Name: "a", DataType: "int"},
		schema.Column{Name: "b", DataType: "varchar", Charset: "latin1", Collation: "latin1_swedish_ci"})
	sql, args := c.Predicate(">", Key{int64(1), []byte("x")})
	want := "((`a` > ?) OR (`a` = ? AND `b` > CONVERT(? USING latin1) COLLATE `latin1_swedish_ci`))"
	if sql != want {
		t.Errorf("got  %s\nwant %s", sql, want)
	}
	if len(args) != 3 {
		t.Errorf("args = %v", args)
	}
	sql, _ = c.Predicate("<=", Key{int64(1), []byte("x")})
	if !strings.Contains(sql, "(`a` < ?)") || !strings.Contains(sql, "`b` <= CONVERT") {
		t.Errorf("<= predicate: %s", sql)
	}
}

func TestInList(t *testing.T) {
	c := cols(t, schema.Column{Name: "id", DataType: "int"})
	sql, args := c.InList([]Key{{int64(1)}, {int64(2)}})
	if sql != "`id` IN (?, ?)" || len(args) != 2 {
		t.Errorf("got %s %v", sql, args)
	}
	c2 := cols(t, schema.Column{Name: "a", DataType: "int"}, schema.Column{Name: "b", DataType: "int"})
	sql, args = c2.InList([]Key{{int64(1), int64(2)}})
	if sql != "(`a`, `b`) IN ((?, ?))" || len(args) != 2 {
		t.Errorf("got %s %v", sql, args)
	}
}

func TestWideSetRefused(t *testing.T) {
	var wide []string
	for i := range 54 {
		wide = append(wide, "'m"+strings.Repeat("x", i)+"'")
	}
	if _, err := NewCols([]schema.Column{{Name: "s", DataType: "set", ColumnType: "set(" + strings.Join(wide, ",") + ")"}}); err == nil || !strings.Contains(err.Error(), "54 members") {
		t.Errorf("a 54-member SET key: %v", err)
	}
	if _, err := NewCols([]schema.Column{{Name: "s", DataType: "set", ColumnType: "set(" + strings.Join(wide[:53], ",") + ")"}}); err != nil {
		t.Errorf("a 53-member SET key: %v", err)
	}
}
