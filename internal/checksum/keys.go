package checksum

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/rowkey"
	"github.com/sluicedb/sluice/internal/schema"
)

// KeyOutcome is what CompareKeys found for one key.
type KeyOutcome struct {
	Key            rowkey.Key
	Source, Target bool // a row with the key is in the original, in the new table
	Same           bool // both or neither, and their hashes agree
}

// CompareKeys compares the rows of keys in both tables, row by row, on q,
// which must see both tables as of one instant (a consistent snapshot, or
// under a lock that stops every write), and returns an outcome for each key,
// in the order of keys. Each table is read by statements that name it once
// (LOCK TABLES allows no more).
//
// A key's rows are the rows its predicate (the apply's, rowkey.Cols.InList)
// selects, not the rows that spell it alike: the binlog and the server may
// spell one value differently ('12:00:00' and '12:00:00.000'), and a
// case-insensitive collation makes 'a' select 'A'. byPredicate tells each row
// which keys it answers by testing every key's predicate on it, a cost of
// keys x rows comparisons that a string key under a UCA collation makes
// seconds a batch. byBytes first matches rows to keys by their exact values
// (see exactMatch for when that is the same answer), and leaves to
// byPredicate only the keys it cannot settle.
func CompareKeys(ctx context.Context, q dbconn.Querier, cfg Config, keys []rowkey.Key) ([]KeyOutcome, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	h := hashes(cfg)
	src, dst, err := byBytes(ctx, q, cfg, h, keys)
	if err != nil {
		return nil, err
	}
	out := make([]KeyOutcome, len(keys))
	for i, k := range keys {
		a, inSrc := src[i]
		b, inDst := dst[i]
		out[i] = KeyOutcome{Key: k, Source: inSrc, Target: inDst, Same: inSrc == inDst && a == b}
	}
	return out, nil
}

// byBytes returns the hash of the row each key selects in the original and
// in the new table, by key index. It reads each table's rows of keys with
// their key values and matches them to the keys byte for byte. That is the
// predicate's answer for a key found alike in both tables when:
//
//   - the key is exact (rowkey.Cols.Exact: equal encodings are equal values)
//     and both tables' key columns have the key's own type and collation, so
//     the predicate selects the row that spells the key;
//   - the key's predicate selects no other row. The original's key is
//     unique: a row of it that spells no requested key was selected by the
//     predicate of a key it does not hold alike. In the new table, whose key
//     may not be unique, a row that spells no requested key sends the whole
//     batch to byPredicate; of two rows that one key selects there, each
//     spelling a requested key, at most one spells a key the original holds
//     alike.
//
// So a key not found alike in both tables (deleted, or another case of it in
// one of them) is read again by predicate in both, which reports a second
// row, and its answers replace the bytes'.
func byBytes(ctx context.Context, q dbconn.Querier, cfg Config, h rowHashes, keys []rowkey.Key) (src, dst map[int]string, err error) {
	index := make(map[string]int, len(keys))
	for i, k := range keys {
		index[k.Encode()] = i
	}
	if len(index) < len(keys) || !exactMatch(cfg) {
		return byPredicateBoth(ctx, q, cfg, h, keys)
	}
	src, ok, err := readExact(ctx, q, cfg, cfg.Mapping.Source, h.src, keys, index, true)
	if err != nil {
		return nil, nil, err
	}
	if ok {
		dst, ok, err = readExact(ctx, q, cfg, cfg.Mapping.Target, h.dst, keys, index, false)
		if err != nil {
			return nil, nil, err
		}
	}
	if !ok {
		return byPredicateBoth(ctx, q, cfg, h, keys)
	}
	var left []int
	for i := range keys {
		_, inSrc := src[i]
		_, inDst := dst[i]
		if !inSrc || !inDst {
			left = append(left, i)
		}
	}
	settledByBytes.Add(int64(len(keys) - len(left)))
	if len(left) == 0 {
		return src, dst, nil
	}
	sub := make([]rowkey.Key, len(left))
	for j, i := range left {
		sub[j] = keys[i]
		delete(src, i)
		delete(dst, i)
	}
	s2, d2, err := byPredicateBoth(ctx, q, cfg, h, sub)
	if err != nil {
		return nil, nil, err
	}
	for j, i := range left {
		if v, ok := s2[j]; ok {
			src[i] = v
		}
		if v, ok := d2[j]; ok {
			dst[i] = v
		}
	}
	return src, dst, nil
}

// settledByBytes counts the keys byBytes settled without a predicate (tests).
var settledByBytes atomic.Int64

// exactMatch reports whether rows can be matched to keys by their bytes:
// the key is exact, and both tables' key columns are the key's columns with
// their type, character set and collation unchanged.
func exactMatch(cfg Config) bool {
	if !cfg.Key.Exact() {
		return false
	}
	for _, t := range []*schema.Table{cfg.Mapping.Source, cfg.Mapping.Target} {
		for _, k := range cfg.Key {
			c, ok := t.Column(k.Name)
			if !ok || c.DataType != k.DataType || c.ColumnType != k.ColumnType || c.Unsigned != k.Unsigned ||
				c.Charset != k.Charset || c.Collation != k.Collation {
				return false
			}
		}
	}
	return true
}

// readExact reads the rows of table that keys' predicate selects, with their
// key values, and returns each row's hash by the index of the key it spells.
// ok is false when two rows spell one key, or a row spells no requested key
// and stray is false.
func readExact(ctx context.Context, q dbconn.Querier, cfg Config, table *schema.Table, hash string, keys []rowkey.Key, index map[string]int, stray bool) (map[int]string, bool, error) {
	in, args := cfg.Key.InList(keys)
	rows, err := q.QueryContext(ctx, "SELECT "+cfg.Key.SelectExprs()+", "+hash+" FROM "+table.Quoted()+" WHERE "+in, args...)
	if err != nil {
		return nil, false, fmt.Errorf("compare changed rows of %s: %w", table.Name, err)
	}
	defer rows.Close()
	out := make(map[int]string, len(keys))
	raw := make([][]byte, len(cfg.Key)+1)
	dest := make([]any, len(raw))
	for i := range raw {
		dest[i] = &raw[i]
	}
	ok := true
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return nil, false, fmt.Errorf("compare changed rows of %s: %w", table.Name, err)
		}
		k, err := cfg.Key.FromScan(raw[:len(cfg.Key)])
		if err != nil {
			ok = false
			continue
		}
		i, found := index[k.Encode()]
		if !found {
			ok = ok && stray
			continue
		}
		if _, twice := out[i]; twice {
			ok = false
			continue
		}
		if raw[len(cfg.Key)] == nil {
			return nil, false, fmt.Errorf("compare changed rows of %s: key %v: the row's hash is NULL", table.Name, keys[i])
		}
		out[i] = string(raw[len(cfg.Key)])
	}
	return out, ok, rows.Err()
}

// byPredicateBoth is byPredicate on the original, then on the new table.
func byPredicateBoth(ctx context.Context, q dbconn.Querier, cfg Config, h rowHashes, keys []rowkey.Key) (src, dst map[int]string, err error) {
	if src, err = byPredicate(ctx, q, cfg, cfg.Mapping.Source, h.src, keys); err != nil {
		return nil, nil, err
	}
	if dst, err = byPredicate(ctx, q, cfg, cfg.Mapping.Target, h.dst, keys); err != nil {
		return nil, nil, err
	}
	return src, dst, nil
}

// byPredicate reads the rows of table that keys' predicate selects and
// returns each row's hash by the index of every key whose own predicate
// selects it; a key that selects two rows is an error.
func byPredicate(ctx context.Context, q dbconn.Querier, cfg Config, table *schema.Table, hash string, keys []rowkey.Key) (map[int]string, error) {
	var which []string
	var args []any
	for i, k := range keys {
		where, a := cfg.Key.InList([]rowkey.Key{k})
		which = append(which, fmt.Sprintf("IF(%s, %d, NULL)", where, i))
		args = append(args, a...)
	}
	in, inArgs := cfg.Key.InList(keys)
	args = append(args, inArgs...)
	rows, err := q.QueryContext(ctx, "SELECT CONCAT_WS(',', "+strings.Join(which, ", ")+"), "+hash+
		" FROM "+table.Quoted()+" WHERE "+in, args...)
	if err != nil {
		return nil, fmt.Errorf("compare changed rows of %s: %w", table.Name, err)
	}
	defer rows.Close()
	out := map[int]string{}
	for rows.Next() {
		var list, hv string
		if err := rows.Scan(&list, &hv); err != nil {
			return nil, fmt.Errorf("compare changed rows of %s: %w", table.Name, err)
		}
		for _, f := range strings.Split(list, ",") {
			i, err := strconv.Atoi(f)
			if err != nil || i < 0 || i >= len(keys) {
				return nil, fmt.Errorf("compare changed rows of %s: a row answers no requested key (%q)", table.Name, list)
			}
			if _, twice := out[i]; twice {
				return nil, fmt.Errorf("compare changed rows of %s: key %v selects more than one row", table.Name, keys[i])
			}
			out[i] = hv
		}
	}
	return out, rows.Err()
}
