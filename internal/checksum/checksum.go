// Package checksum compares the original and the shadow table chunk by chunk,
// each chunk's COUNT(*) and the BIT_XOR of a non-linear mix of its rows' CRC32
// on both sides, and the whole tables' COUNT(*) against the chunks' sum. It runs on
// connections that each hold a transaction opened WITH CONSISTENT SNAPSHOT at
// the same moment (the caller arranges that under a table lock after draining
// every change), so both tables are read as of one point in time while the
// application keeps writing.
package checksum

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/ranges"
	"github.com/sluicedb/sluice/internal/rowkey"
	"github.com/sluicedb/sluice/internal/schema"
)

// ErrMismatch means the tables differ.
var ErrMismatch = errors.New("checksum mismatch")

// Config configures a comparison.
type Config struct {
	Mapping   *schema.Mapping
	Key       rowkey.Cols
	ChunkRows int // default 20000

	// cut, if set, replaces the ranges' cutter (tests: ranges that miss rows).
	cut func(ctx context.Context, out chan<- ranges.Span) error
}

// Result summarises a comparison.
type Result struct {
	Chunks int64
	Rows   int64
	// Compared and Skipped name the new-table columns compared, and those left
	// out because their type changed in a way that alters the stored text.
	Compared []string
	Skipped  []string
}

// Comparable reports whether a column whose type changed from `from` to `to`
// keeps values that compare equal as bytes. Identical types do; so do integer
// types widened or narrowed (a lossy narrowing fails the copy itself under
// strict mode), and character types within one character set.
func Comparable(from, to schema.Column) bool {
	if strings.EqualFold(from.ColumnType, to.ColumnType) && from.Collation == to.Collation {
		return true
	}
	if schema.IntegerTypes[from.DataType] && schema.IntegerTypes[to.DataType] {
		return true
	}
	if schema.TextTypes[from.DataType] && schema.TextTypes[to.DataType] && from.Charset == to.Charset {
		return true
	}
	return false
}

// rowHash returns the per-row hash over cols: CRC32 of one string that
// spells the row unambiguously, times mix. The string is the NULL flags of
// the nullable columns, then each column's text, joined by '#'; a column
// whose text may hold a '#' (strings, binary, JSON, ENUM, SET, BIT: Framed)
// is prefixed with its length, so that 'a#','b' and 'a','#b' differ, and a
// NULL is told from any text by its flag, not by its place. A row without
// NULL is spelled by CONCAT, about a quarter cheaper than CONCAT_WS; a row
// with one, for which CONCAT is NULL, by CONCAT_WS, which skips the NULLs
// and spells a row without NULL exactly as CONCAT does. Character columns
// are read as bytes (a CAST that costs about a third of the checksum) only
// when they differ in collation, which CONCAT would refuse to join or
// convert; one character set joins as its own bytes.
//
// CONCAT and CONCAT_WS return NULL for a result longer than
// max_allowed_packet, which BIT_XOR would skip: a row that large is hashed
// by a last form, the CRC32 of its columns' own CRC32s (and NULL flags), which
// builds no long string. A converted value longer than max_allowed_packet is
// NULL there too: the column as stored stands for it, which the other side
// does not match (the run stops rather than skip the row).
func rowHash(cols []Col, castText bool) string {
	var fast, slow, per, flags []string
	for _, c := range cols {
		q := dbconn.QuoteIdent(c.Name)
		if c.Expr != "" {
			q = c.Expr
		}
		v := q
		switch {
		case c.Text && castText:
			v = "CAST(" + q + " AS BINARY)"
		case c.Float:
			v = "(" + q + " * 1e0)" // a FLOAT's own text has 6 digits; its DOUBLE is exact (and keeps -0)
		}
		if c.Framed {
			fast = append(fast, "LENGTH("+v+"), ':', "+v)
			slow = append(slow, "CONCAT(LENGTH("+v+"), ':', "+v+")")
		} else {
			fast, slow = append(fast, v), append(slow, v)
		}
		if v != q {
			// A conversion too long for max_allowed_packet is NULL: the
			// value as stored then stands for it (a mismatch, never a skip).
			per = append(per, "COALESCE(CRC32("+v+"), CRC32("+q+"))")
		} else {
			per = append(per, "CRC32("+v+")")
		}
		if c.Nullable {
			flags = append(flags, "ISNULL("+q+")")
		}
	}
	last := "CRC32(CONCAT_WS('#', 'x', " + strings.Join(per, ", ") + "))"
	if len(flags) == 0 {
		return "COALESCE(CRC32(CONCAT(" + strings.Join(fast, ", '#', ") + ")), " + last + ")" + mix
	}
	flag := "CONCAT(" + strings.Join(flags, ", ") + ")"
	last = "CRC32(CONCAT_WS('#', 'x', " + flag + ", " + strings.Join(per, ", ") + "))"
	return "COALESCE(CRC32(CONCAT('" + strings.Repeat("0", len(flags)) + "', '#', " + strings.Join(fast, ", '#', ") + ")), " +
		"CRC32(CONCAT_WS('#', " + flag + ", " + strings.Join(slow, ", ") + ")), " + last + ")" + mix
}

// mix multiplies a row's CRC32 by an odd 32-bit constant (the product fits
// in 64 bits, so it never overflows). CRC32 is affine over XOR for messages of
// one length: the BIT_XOR of raw CRC32s is fooled by two rows of equal length
// that swap their non-key values, or by the same bit flipped in an even
// number of rows. The carries of an integer product are not XOR-linear, so
// the BIT_XOR of the products is not fooled by either.
const mix = " * 2654435761"

// Col is a column in a checksum.
type Col struct {
	Name      string
	Expr      string // the SQL that reads it, if not the bare column (see Convert)
	Text      bool   // a character column
	Collation string // of a character column
	Nullable  bool   // NULL on either side
	Framed    bool   // its text may hold a '#': hashed with its length
	Float     bool   // a FLOAT: hashed as its exact DOUBLE
}

// plainText are the types whose text never holds a '#' (nor a ':').
var plainText = map[string]bool{"tinyint": true, "smallint": true, "mediumint": true, "int": true, "integer": true,
	"bigint": true, "decimal": true, "float": true, "double": true, "date": true, "time": true, "datetime": true,
	"timestamp": true, "year": true, "vector": true}

func col(c schema.Column, nullable bool) Col {
	out := Col{Name: c.Name, Text: c.Charset != "", Collation: c.Collation, Nullable: nullable,
		Framed: !plainText[c.DataType], Float: c.DataType == "float"}
	if c.DataType == "vector" {
		out.Expr = "HEX(" + dbconn.QuoteIdent(c.Name) + ")" // CONCAT refuses a VECTOR
	}
	return out
}

// pairCols returns the Cols of a pair's two sides, framed alike: both
// sides must spell a row with the same bytes.
func pairCols(from, to schema.Column, nullable bool) (Col, Col) {
	a, b := col(from, nullable), col(to, nullable)
	a.Framed = a.Framed || b.Framed
	b.Framed = a.Framed
	return a, b
}

// mixedText reports whether the character columns of cols differ in
// collation.
func mixedText(cols []Col) bool {
	first := ""
	for _, c := range cols {
		if !c.Text {
			continue
		}
		if first == "" {
			first = c.Collation
		} else if !strings.EqualFold(c.Collation, first) {
			return true
		}
	}
	return false
}

// Compare checksums the tables on conns, which must each be inside a
// consistent-snapshot transaction of the same moment. conns[0] cuts the
// chunks (package ranges); the others compare them. It returns ErrMismatch (wrapped, naming the
// first differing range) when the tables differ. The key columns are always
// part of every row's hash, so two rows can never swap values unnoticed.
func Compare(ctx context.Context, conns []*sql.Conn, cfg Config) (Result, error) {
	if len(conns) < 2 {
		return Result{}, errors.New("checksum: needs at least two connections")
	}
	if cfg.ChunkRows <= 0 {
		cfg.ChunkRows = 20000
	}
	h := hashes(cfg)
	res := Result{Compared: h.compared, Skipped: h.skipped}
	srcQ := "SELECT COUNT(*), COALESCE(BIT_XOR(" + h.src + "), 0) FROM " +
		cfg.Mapping.Source.Quoted() + cfg.Mapping.Source.KeyHint() + " WHERE "
	dstQ := "SELECT COUNT(*), COALESCE(BIT_XOR(" + h.dst + "), 0) FROM " +
		cfg.Mapping.Target.Quoted() + cfg.Mapping.Target.KeyHint() + " WHERE "

	var chunks, rows atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	spans := make(chan ranges.Span, len(conns))
	cutter := &ranges.Cutter{
		DB: conns[0], Table: cfg.Mapping.Source.Quoted(), Hint: cfg.Mapping.Source.KeyHint(), Key: cfg.Key,
		Size: func() int { return cfg.ChunkRows }, EstimatedRows: cfg.Mapping.Source.EstimatedRows,
	}
	cut := cutter.Run
	if cfg.cut != nil {
		cut = cfg.cut
	}
	// The whole tables' row counts, read in the same snapshot by the
	// cutter's connection once it is done: the sum of the chunks' counts must
	// equal both, so that ranges which missed some rows cannot pass. The
	// original is counted on its smallest index, the shadow on its primary
	// key: an index the build adds after the snapshot cannot be read in it.
	var srcTotal, dstTotal int64
	g.Go(func() error {
		err := cut(gctx, spans)
		close(spans)
		if err != nil {
			return fmt.Errorf("checksum: %w", err)
		}
		for _, c := range []struct {
			table *schema.Table
			hint  string
			n     *int64
		}{{cfg.Mapping.Source, "", &srcTotal}, {cfg.Mapping.Target, cfg.Mapping.Target.KeyHint(), &dstTotal}} {
			if err := conns[0].QueryRowContext(gctx, "SELECT COUNT(*) FROM "+c.table.Quoted()+c.hint).Scan(c.n); err != nil {
				return fmt.Errorf("checksum: count the rows of %s: %w", c.table.Name, err)
			}
		}
		return nil
	})
	for _, conn := range conns[1:] {
		g.Go(func() error {
			for sp := range spans {
				where, args := sp.Where(cfg.Key)
				var n1, x1, n2, x2 string
				if err := conn.QueryRowContext(gctx, srcQ+where, args...).Scan(&n1, &x1); err != nil {
					return fmt.Errorf("checksum original (%v, %v]: %w", sp.Lo, sp.Hi, err)
				}
				if err := conn.QueryRowContext(gctx, dstQ+where, args...).Scan(&n2, &x2); err != nil {
					return fmt.Errorf("checksum shadow (%v, %v]: %w", sp.Lo, sp.Hi, err)
				}
				if n1 != n2 || x1 != x2 {
					return fmt.Errorf("%w in key range (%v, %v]: original has %s rows, shadow %s", ErrMismatch, sp.Lo, sp.Hi, n1, n2)
				}
				var n int64
				fmt.Sscan(n1, &n)
				cutter.Observe(sp.Width, n)
				rows.Add(n)
				chunks.Add(1)
			}
			return nil
		})
	}
	err := g.Wait()
	res.Chunks, res.Rows = chunks.Load(), rows.Load()
	if err == nil && (srcTotal != res.Rows || dstTotal != res.Rows) {
		err = fmt.Errorf("%w: the original has %d rows and the shadow %d, but the compared ranges held %d", ErrMismatch, srcTotal, dstTotal, res.Rows)
	}
	return res, err
}

// bothSides returns, for a pair compared by one reading of each side
// rather than by converting the original's value, that reading: a TIMESTAMP
// kept a TIMESTAMP of at least its precision as its instant (seconds since
// the epoch, to the microsecond), not as text in the session's zone, where
// the hour a clock goes back reads twice; a BIT as its number, whatever its
// width.
func bothSides(from, to schema.Column) (func(name string) string, bool) {
	switch {
	case from.DataType == "timestamp" && to.DataType == "timestamp" && fsp(to) >= fsp(from):
		return func(name string) string {
			return "CAST(UNIX_TIMESTAMP(" + dbconn.QuoteIdent(name) + ") AS DECIMAL(20,6))"
		}, true
	case from.DataType == "bit" && to.DataType == "bit":
		return func(name string) string { return "(" + dbconn.QuoteIdent(name) + " + 0)" }, true
	}
	return nil, false
}

// fsp is a temporal column's fractional-second precision.
func fsp(c schema.Column) int {
	p, _, ok := precision(c.ColumnType)
	if !ok {
		return 0
	}
	n, _ := strconv.Atoi(p)
	return n
}

// enums reports whether both columns are ENUMs.
func enums(from, to schema.Column) bool { return from.DataType == "enum" && to.DataType == "enum" }

// enumText reads an ENUM (or its converted text) behind a mark of whether
// it is the error value, index 0 (a NULL stays NULL).
func enumText(q string) string { return "CONCAT(IF(" + q + " = 0, '!', '='), " + q + ")" }

// rowHashes are the per-row hash expressions of both tables.
type rowHashes struct {
	src, dst          string
	compared, skipped []string // new-table columns in and out of the hash
}

// hashes builds the per-row hash of each table over the compared columns
// (converted on the original's side where their type changed, see Convert)
// and the key.
func hashes(cfg Config) rowHashes {
	var h rowHashes
	var srcCols, dstCols []Col
	converted := false
	for _, p := range cfg.Mapping.Pairs {
		if read, ok := bothSides(p.From, p.To); ok {
			src, dst := pairCols(p.From, p.To, p.From.Nullable || p.To.Nullable)
			src.Expr, dst.Expr = read(p.From.Name), read(p.To.Name)
			srcCols, dstCols = append(srcCols, src), append(dstCols, dst)
			h.compared = append(h.compared, p.To.Name)
			continue
		}
		expr, ok := Convert(p.From, p.To)
		if !ok {
			// Its value cannot be compared; that it is NULL or not can.
			h.skipped = append(h.skipped, p.To.Name)
			// (Unnamed: a key column among them is still hashed whole.)
			srcCols = append(srcCols, Col{Expr: "ISNULL(" + dbconn.QuoteIdent(p.From.Name) + ")"})
			dstCols = append(dstCols, Col{Expr: "ISNULL(" + dbconn.QuoteIdent(p.To.Name) + ")"})
			continue
		}
		null := p.From.Nullable || p.To.Nullable
		src, dst := pairCols(p.From, p.To, null)
		if enums(p.From, p.To) {
			// An ENUM's error value (index 0, which a non-strict session
			// stores) reads as '', like a member spelt ''.
			src.Expr, dst.Expr = enumText(expr), enumText(dbconn.QuoteIdent(p.To.Name))
			srcCols, dstCols = append(srcCols, src), append(dstCols, dst)
			h.compared = append(h.compared, p.To.Name)
			continue
		}
		if expr != dbconn.QuoteIdent(p.From.Name) {
			// A converted value: read as bytes on both sides, like the
			// mixed collations below.
			src.Expr, converted = expr, true
			src.Text = src.Text || p.To.Charset != ""
			if expr == toDouble(p.From.Name) {
				// MySQL prints a DOUBLE column with up to 17 digits and
				// an expression's DOUBLE with 16: read the new column
				// through the same expression. (It is text now: not
				// read again as a FLOAT's DOUBLE.)
				dst.Expr, src.Float = toDouble(p.To.Name), false
			}
		}
		srcCols, dstCols = append(srcCols, src), append(dstCols, dst)
		h.compared = append(h.compared, p.To.Name)
	}
	for _, k := range cfg.Key {
		if !slices.ContainsFunc(srcCols, func(c Col) bool { return dbconn.SameName(c.Name, k.Name) }) {
			srcCols, dstCols = append(srcCols, col(k.Column, false)), append(dstCols, col(k.Column, false))
		}
	}
	// Both sides must hash the same bytes: cast on both or on neither.
	cast := converted || mixedText(srcCols) || mixedText(dstCols)
	h.src, h.dst = rowHash(srcCols, cast), rowHash(dstCols, cast)
	return h
}
