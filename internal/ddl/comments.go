package ddl

import (
	"fmt"
	"strings"
)

// A comment in the ALTER text is where sluice and the server can part ways.
// On its native paths sluice appends ", ALGORITHM=..." to the user's clause,
// and a trailing "-- ..." or "# ..." would swallow it. Executable and hint
// comments (/*! ... */, /*!NNNNN ... */, /*+ ... */, /*T! ... */) are code to
// one reader and a comment to another: the TiDB parser sluice reasons with
// runs /*!99999 ... */ and /*T! ... */, MySQL 9 skips both. So Parse refuses
// any comment outside quoted strings and identifiers, rather than guess which
// reading the server will take.

// quoting is one way of reading quoted text: whether a backslash escapes the
// next character inside '...' and inside "..." (it never does in `...`).
type quoting struct {
	single, double bool
}

var (
	// defaultQuoting is how sluice's sessions (sql_mode without
	// NO_BACKSLASH_ESCAPES or ANSI_QUOTES) and the TiDB parser read quotes.
	defaultQuoting = quoting{single: true, double: true}
	// otherQuotings are the readings under sql_mode NO_BACKSLASH_ESCAPES and
	// ANSI_QUOTES ("..." is then an identifier, where backslash is plain).
	// A connection parameter can set either, and a backslash before a quote
	// then ends a string that sluice reads as going on.
	otherQuotings = []quoting{{single: false, double: false}, {single: true, double: false}}
)

// comment is a comment found outside quotes.
type comment struct {
	pos  int    // byte offset of its first character
	kind string // its opening: "--", "#", "/*", "/*!", "/*+", "/*T!", "/*M!"
}

// findComment returns the first comment in s that lies outside quoted strings
// and identifiers when s is read with q. Text after an unterminated quote is
// not searched: no reader accepts the statement then.
func findComment(s string, q quoting) (comment, bool) {
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\'' || c == '"' || c == '`':
			escapes := (c == '\'' && q.single) || (c == '"' && q.double)
			end, closed := skipQuoted(s, i, escapes)
			if !closed {
				return comment{}, false
			}
			i = end
		case c == '#':
			return comment{pos: i, kind: "#"}, true
		case c == '/' && i+1 < len(s) && s[i+1] == '*':
			return comment{pos: i, kind: blockKind(s[i:])}, true
		case c == '-' && i+1 < len(s) && s[i+1] == '-' && (i+2 == len(s) || dashCommentFollower(s[i+2])):
			return comment{pos: i, kind: "--"}, true
		default:
			i++
		}
	}
	return comment{}, false
}

// skipQuoted returns the offset just past the quoted string or identifier
// that opens at s[start], and false when it is not closed. A doubled quote
// stands for one quote; with escapes, a backslash takes the next byte with it.
func skipQuoted(s string, start int, escapes bool) (int, bool) {
	quote := s[start]
	for i := start + 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			if escapes {
				i++ // the escaped byte, whatever it is
			}
		case quote:
			if i+1 < len(s) && s[i+1] == quote {
				i++
				continue
			}
			return i + 1, true
		}
	}
	return len(s), false
}

// dashCommentFollower reports whether "--" followed by b starts a comment.
// MySQL needs a space or a control character there ("1--1" is arithmetic).
// DEL and any byte of a non-ASCII character count too: refusing a strange
// text is better than missing a comment.
func dashCommentFollower(b byte) bool {
	return b <= ' ' || b >= 0x7f
}

// blockKind names the opening of the block comment at the start of s.
func blockKind(s string) string {
	rest := s[2:]
	switch {
	case strings.HasPrefix(rest, "!"):
		return "/*!"
	case strings.HasPrefix(rest, "+"):
		return "/*+"
	case len(rest) >= 2 && rest[1] == '!' && (rest[0] == 'T' || rest[0] == 'M'):
		return "/*" + rest[:2]
	}
	return "/*"
}

// describe names the kind of comment and says why it is refused.
func (c comment) describe() (name, why string) {
	switch c.kind {
	case "--", "#":
		return "a " + c.kind + " comment", "it hides the rest of its line, and with it the \", ALGORITHM=...\" sluice appends"
	case "/*!":
		return "an executable comment", "MySQL runs or skips it by version, and sluice's parser may not do the same"
	case "/*+":
		return "an optimizer hint", "sluice's parser and MySQL may not read it alike"
	case "/*T!":
		return "a /*T! comment", "TiDB's parser, which sluice uses, runs it, and MySQL skips it"
	case "/*M!":
		return "a /*M! comment", "MariaDB runs it, and MySQL skips it"
	}
	return "a comment", "sluice's parser and MySQL may not read it alike"
}

// excerpt is the comment's text, cut short: a line comment to the end of its
// line, a block comment to its closing */.
func (c comment) excerpt(s string) string {
	const max = 40
	t := s[c.pos:]
	end := len(t)
	if c.kind == "--" || c.kind == "#" {
		if i := strings.IndexAny(t, "\r\n"); i >= 0 {
			end = i
		}
	} else if i := strings.Index(t[2:], "*/"); i >= 0 {
		end = i + 4
	}
	if end > max {
		return t[:max] + "..."
	}
	return t[:end]
}

// checkComments refuses text that holds a comment outside quotes, read as
// sluice's sessions read it or with either sql_mode that changes quoting.
func checkComments(s string) error {
	if c, ok := findComment(s, defaultQuoting); ok {
		name, why := c.describe()
		return fmt.Errorf("%w: the ALTER contains %s at byte %d (%q): %s; remove comments from --alter: sluice runs and reasons about the same text as the server",
			ErrInvalid, name, c.pos, c.excerpt(s), why)
	}
	if !strings.Contains(s, `\`) {
		return nil // the other readings differ only at backslashes
	}
	for _, q := range otherQuotings {
		if c, ok := findComment(s, q); ok {
			return fmt.Errorf("%w: the ALTER would contain a comment at byte %d (%q) for a server that does not take a backslash as an escape in strings (sql_mode NO_BACKSLASH_ESCAPES or ANSI_QUOTES); write a quote inside a string by doubling it ('it''s') and leave comments out of --alter",
				ErrInvalid, c.pos, c.excerpt(s))
		}
	}
	return nil
}
