package rowkey

import (
	"math"
	"reflect"
	"testing"
)

func TestDecodeKeyReversesEncode(t *testing.T) {
	for _, k := range []Key{
		{int64(0)}, {int64(math.MinInt64)}, {uint64(math.MaxUint64)},
		{[]byte{}}, {[]byte{0, 1, 255}}, {""}, {"2024-01-02 03:04:05.123456"},
		{int64(-5), []byte("tenant"), uint64(7), "12.50"},
	} {
		got, err := DecodeKey(k.Encode())
		if err != nil || !reflect.DeepEqual(got, k) {
			t.Errorf("%v: decoded %v, %v", k, got, err)
		}
	}
	for _, bad := range []string{"i\x00", "b\x05ab", "x"} {
		if _, err := DecodeKey(bad); err == nil {
			t.Errorf("%q decoded without error", bad)
		}
	}
}
