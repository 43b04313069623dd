package rowkey

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// DecodeKey reverses Key.Encode for keys of int64, uint64, []byte and string
// values (every value FromScan and FromBinlog make).
func DecodeKey(s string) (Key, error) {
	b := []byte(s)
	var k Key
	for len(b) > 0 {
		tag := b[0]
		b = b[1:]
		switch tag {
		case 'i', 'u':
			if len(b) < 8 {
				return nil, errors.New("truncated integer")
			}
			n := binary.BigEndian.Uint64(b)
			b = b[8:]
			if tag == 'i' {
				k = append(k, int64(n))
			} else {
				k = append(k, n)
			}
		case 'b', 's':
			n, w := binary.Uvarint(b)
			if w <= 0 || uint64(len(b)-w) < n {
				return nil, errors.New("truncated string")
			}
			v := b[w : w+int(n)]
			b = b[w+int(n):]
			if tag == 'b' {
				k = append(k, append([]byte{}, v...))
			} else {
				k = append(k, string(v))
			}
		default:
			return nil, fmt.Errorf("key value of unknown kind %q", tag)
		}
	}
	return k, nil
}
