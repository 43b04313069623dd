package apply

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/rowkey"
)

// Order gives keys their place in the primary key's index order (the order in
// which the copy cuts its ranges), as rowkey.SortKeys. Integer, binary,
// decimal and temporal parts are encoded in Go; a character string part is
// ordered by its collation, which only the server knows, so its part is the
// server's WEIGHT_STRING of the value: that needs a round trip, made for many
// keys at once.
type Order struct {
	cols rowkey.Cols
	// weigh returns, for each key, the weights of its collated columns in key
	// order (nil when no column is collated), in one statement.
	weigh func(ctx context.Context, keys []rowkey.Key) ([][]string, error)
	// perQuery is the most keys one call of weigh converts (0: any number).
	perQuery int
}

// WeightBatch is the most keys the scheduler converts at once.
const WeightBatch = 256

// maxWeights is the most weights one statement selects.
const maxWeights = 512

// NewOrder returns the order of key, reading from db how each collated key
// column pads (information_schema.COLLATIONS.PAD_ATTRIBUTE) and what a
// space weighs in its collation. It fails for a collation whose order sluice
// does not reproduce (see weighable): keys then wait for the end of the copy.
func NewOrder(ctx context.Context, db *sql.DB, key rowkey.Cols) (*Order, error) {
	return newOrder(ctx, db, key, true)
}

// weighable reports whether the order of collation coll (of charset cs,
// with pad attribute pad) is reproduced from its weight strings: the NO PAD
// UCA 9.0.0 collations, compared as the bytes of their weights, and the PAD
// SPACE collations of the Unicode charsets, latin1 and ascii, compared as
// their weights padded with a space's (rowkey.PadSpaceWeight). Each was
// checked against the server's own comparison (TestOrderEveryCollation).
// Others are not: some legacy multi-byte charsets weigh characters in units
// of several widths (big5, gb18030), and the server's comparison disagrees
// with its own weights for some (latin2_czech_cs, cp1250_czech_cs, latin7).
func weighable(f dbconn.Flavor, cs, coll, pad string) bool {
	if f == dbconn.MariaDB {
		return mariadbWeighable(cs, coll)
	}
	switch pad {
	case "NO PAD":
		return cs == "utf8mb4" && strings.Contains(coll, "_0900_")
	case "PAD SPACE":
		switch cs {
		case "utf8mb4", "utf8mb3", "utf8", "utf16", "utf16le", "utf32", "ucs2", "latin1", "ascii":
			return true
		}
	}
	return false
}

// collationPad reads whether collation c pads with spaces (MySQL's
// information_schema says so; MariaDB names its NO PAD collations _nopad_)
// and the weight of a space in it.
func collationPad(ctx context.Context, db *sql.DB, f dbconn.Flavor, c rowkey.Col) (pad, space string, err error) {
	space = "WEIGHT_STRING(CONVERT(' ' USING " + c.Charset + ") COLLATE " + dbconn.QuoteIdent(c.Collation) + ")"
	if f == dbconn.MariaDB {
		// From 10.10 information_schema.COLLATIONS lists a collation that
		// serves several charsets (uca1400_ai_ci) under its short name.
		err = db.QueryRowContext(ctx, "SELECT IF(LOCATE('_nopad_', ?) > 0, 'NO PAD', 'PAD SPACE'), "+space, c.Collation).Scan(&pad, &space)
	} else {
		err = db.QueryRowContext(ctx, "SELECT PAD_ATTRIBUTE, "+space+" FROM information_schema.COLLATIONS WHERE COLLATION_NAME = ?",
			c.Collation).Scan(&pad, &space)
	}
	return pad, space, err
}

// mariadbWeighable is weighable for MariaDB (10.11 and 11.8 checked by
// TestOrderEveryCollation): the Unicode charsets, latin1 and ascii, in their
// binary collations, their single-level PAD SPACE collations (_ci, not
// accent-sensitive: the weights of several levels are not in units of a
// space's weight) and their NO PAD collations but _ai_cs. Not the _0900_
// aliases of MariaDB 11 nor the _w2 ones, which disagree with the server's
// own comparisons.
func mariadbWeighable(cs, coll string) bool {
	switch cs {
	case "utf8mb4", "utf8mb3", "utf8", "ucs2", "utf16", "utf16le", "utf32", "latin1", "ascii":
	default:
		return false
	}
	switch {
	case strings.Contains(coll, "_0900_") || strings.Contains(coll, "_w2"):
		return false
	case strings.HasSuffix(coll, "_bin"):
		return true
	case strings.Contains(coll, "_nopad_"):
		return !strings.HasSuffix(coll, "_ai_cs")
	}
	return strings.HasSuffix(coll, "_ci") && !strings.Contains(coll, "_as_")
}

func newOrder(ctx context.Context, db *sql.DB, key rowkey.Cols, check bool) (*Order, error) {
	if len(key) == 0 {
		return nil, errors.New("apply: no key columns")
	}
	var exprs []string
	var spaces []string // per collated column: its space's weight if PAD SPACE, else ""
	for _, c := range key {
		if !c.Collated() {
			continue
		}
		if db == nil {
			return nil, fmt.Errorf("apply: key column %s needs the server to be ordered", c.Name)
		}
		f, err := dbconn.ReadFlavor(ctx, db)
		if err != nil {
			return nil, err
		}
		pad, space, err := collationPad(ctx, db, f, c)
		if err != nil {
			return nil, fmt.Errorf("apply: collation %s of key column %s: %w", c.Collation, c.Name, err)
		}
		if check && !weighable(f, c.Charset, c.Collation, pad) {
			return nil, fmt.Errorf("apply: sluice does not reproduce the order of collation %s on %s (key column %s)", c.Collation, f, c.Name)
		}
		switch pad {
		case "PAD SPACE":
			if space == "" {
				return nil, fmt.Errorf("apply: collation %s gives a space no weight", c.Collation)
			}
		case "NO PAD":
			space = ""
		default:
			return nil, fmt.Errorf("apply: collation %s has pad attribute %q", c.Collation, pad)
		}
		exprs = append(exprs, c.WeightExpr())
		spaces = append(spaces, space)
	}
	o := &Order{cols: key}
	if len(exprs) > 0 {
		o.weigh = sqlWeigher(db, key, exprs, spaces)
		o.perQuery = max(1, maxWeights/len(exprs))
	}
	return o, nil
}

// Immediate reports whether keys are ordered without the server.
func (o *Order) Immediate() bool { return o.weigh == nil }

// sortKey orders k without the server; ok is false if a part is collated or
// cannot be encoded.
func (o *Order) sortKey(k rowkey.Key) (rowkey.SortKey, bool) {
	if o.weigh != nil || len(k) != len(o.cols) {
		return nil, false
	}
	sk := make(rowkey.SortKey, len(k))
	for i, c := range o.cols {
		p, err := c.SortPart(k[i])
		if err != nil {
			return nil, false
		}
		sk[i] = p
	}
	return sk, true
}

// sortKeys orders keys, asking the server for the weights of their collated
// parts in statements of at most maxWeights weights. A nil entry is a key
// that cannot be ordered.
func (o *Order) sortKeys(ctx context.Context, keys []rowkey.Key) ([]rowkey.SortKey, error) {
	out := make([]rowkey.SortKey, len(keys))
	if o.weigh == nil {
		for i, k := range keys {
			out[i], _ = o.sortKey(k)
		}
		return out, nil
	}
	per := o.perQuery
	if per <= 0 {
		per = max(1, len(keys))
	}
	for lo := 0; lo < len(keys); lo += per {
		part := keys[lo:min(lo+per, len(keys))]
		w, err := o.weigh(ctx, part)
		if err != nil {
			return nil, err
		}
		for i, k := range part {
			out[lo+i] = o.assemble(k, w[i])
		}
	}
	return out, nil
}

// assemble builds k's sort key from the weights of its collated parts; nil if
// a part cannot be encoded.
func (o *Order) assemble(k rowkey.Key, weights []string) rowkey.SortKey {
	if len(k) != len(o.cols) {
		return nil
	}
	sk := make(rowkey.SortKey, len(k))
	for i, c := range o.cols {
		if c.Collated() {
			if len(weights) == 0 {
				return nil
			}
			sk[i], weights = weights[0], weights[1:]
			continue
		}
		p, err := c.SortPart(k[i])
		if err != nil {
			return nil
		}
		sk[i] = p
	}
	return sk
}

// sqlWeigher returns a weigh function that selects, in one row, the weight
// of every collated part of every key.
func sqlWeigher(db *sql.DB, key rowkey.Cols, exprs, spaces []string) func(context.Context, []rowkey.Key) ([][]string, error) {
	return func(ctx context.Context, keys []rowkey.Key) ([][]string, error) {
		list := make([]string, 0, len(keys)*len(exprs))
		args := make([]any, 0, len(keys)*len(exprs))
		for _, k := range keys {
			if len(k) != len(key) {
				return nil, fmt.Errorf("apply: key %v has %d values for %d columns", k, len(k), len(key))
			}
			j := 0
			for i, c := range key {
				if c.Collated() {
					list = append(list, exprs[j])
					args = append(args, k[i])
					j++
				}
			}
		}
		raw := make([]sql.NullString, len(list))
		ptrs := make([]any, len(raw))
		for i := range raw {
			ptrs[i] = &raw[i]
		}
		if err := db.QueryRowContext(ctx, "SELECT "+strings.Join(list, ", "), args...).Scan(ptrs...); err != nil {
			return nil, fmt.Errorf("apply: key weights: %w", err)
		}
		out := make([][]string, len(keys))
		for i := range keys {
			w := make([]string, len(exprs))
			for j := range w {
				v := raw[i*len(exprs)+j]
				if !v.Valid {
					return nil, fmt.Errorf("apply: key %v has no weight", keys[i])
				}
				w[j] = v.String
				if spaces[j] != "" {
					var err error
					if w[j], err = rowkey.PadSpaceWeight(v.String, spaces[j]); err != nil {
						return nil, fmt.Errorf("apply: key %v: %w", keys[i], err)
					}
				}
			}
			out[i] = w
		}
		return out, nil
	}
}
