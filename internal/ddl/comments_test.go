package ddl

import (
	"errors"
	"strings"
	"testing"
)

func TestFindComment(t *testing.T) {
	cases := []struct {
		in   string
		q    quoting
		pos  int // -1: none
		kind string
	}{
		{"ADD COLUMN c INT", defaultQuoting, -1, ""},
		{"ADD COLUMN c INT -- x", defaultQuoting, 17, "--"},
		{"ADD COLUMN c INT --", defaultQuoting, 17, "--"},
		{"ADD COLUMN c INT --\tx", defaultQuoting, 17, "--"},
		{"ADD COLUMN c INT --\nDROP b", defaultQuoting, 17, "--"},
		{"ADD COLUMN c INT --\x7f", defaultQuoting, 17, "--"},
		{"ADD COLUMN c INT --é", defaultQuoting, 17, "--"},
		{"a--1", defaultQuoting, -1, ""},
		{"a - -1 --1", defaultQuoting, -1, ""},
		{"a---", defaultQuoting, 2, "--"},
		{"# x", defaultQuoting, 0, "#"},
		{"a#b", defaultQuoting, 1, "#"},
		{"x /* y */", defaultQuoting, 2, "/*"},
		{"x /**/", defaultQuoting, 2, "/*"},
		{"x /*", defaultQuoting, 2, "/*"},
		{"x /*!99999 y */", defaultQuoting, 2, "/*!"},
		{"x /*!80000 y*/", defaultQuoting, 2, "/*!"},
		{"x /*! y */", defaultQuoting, 2, "/*!"},
		{"x /*+ BKA(t) */", defaultQuoting, 2, "/*+"},
		{"x /*T! y */", defaultQuoting, 2, "/*T!"},
		{"x /*T![feature] y */", defaultQuoting, 2, "/*T!"},
		{"x /*M! y */", defaultQuoting, 2, "/*M!"},
		{"x / * y", defaultQuoting, -1, ""},
		{"x */ y", defaultQuoting, -1, ""},
		{"'-- a' '# b' '/* c */'", defaultQuoting, -1, ""},
		{`"-- a" "# b" "/* c */"`, defaultQuoting, -1, ""},
		{"`-- a` `# b` `/* c */`", defaultQuoting, -1, ""},
		{"'it''s -- x' # y", defaultQuoting, 13, "#"},
		{`'it\'s -- x' # y`, defaultQuoting, 13, "#"},
		{`"a\"b -- x" # y`, defaultQuoting, 12, "#"},
		{"`a``b -- x` # y", defaultQuoting, 12, "#"},
		{"`a\\` # y", defaultQuoting, 5, "#"}, // no escapes in identifiers
		{`'a\\' # y`, defaultQuoting, 6, "#"},
		{`'x\' # y'`, defaultQuoting, -1, ""},
		{`'x\' # y'`, quoting{}, 5, "#"},
		{`"x\" # y"`, quoting{single: true}, 5, "#"},
		{`'x\' # y'`, quoting{single: true}, -1, ""},
		{"'unterminated # x", defaultQuoting, -1, ""},
		{"`unterminated # x", defaultQuoting, -1, ""},
		{"_utf8mb4'#' N'--' x'2D2D' b'1' 0x2F2A", defaultQuoting, -1, ""},
	}
	for _, c := range cases {
		got, ok := findComment(c.in, c.q)
		if c.pos < 0 {
			if ok {
				t.Errorf("findComment(%q, %+v) = %+v, want none", c.in, c.q, got)
			}
			continue
		}
		if !ok || got.pos != c.pos || got.kind != c.kind {
			t.Errorf("findComment(%q, %+v) = %+v,%v, want pos %d kind %q", c.in, c.q, got, ok, c.pos, c.kind)
		}
	}
}

func TestParseRefusesComments(t *testing.T) {
	cases := []struct{ in, want string }{
		{"ADD COLUMN c INT -- note", `a -- comment at byte 17 ("-- note")`},
		{"ADD COLUMN c INT --", "a -- comment"},
		{"ADD COLUMN c INT, DROP COLUMN b--", "a -- comment"},
		{"ADD COLUMN c INT --\t, DROP COLUMN b", "a -- comment"},
		{"ADD COLUMN c INT -- x\n, DROP COLUMN b", `("-- x")`},
		{"ADD COLUMN c INT -- x;", "a -- comment"},
		{"ADD COLUMN c INT; -- x", "a -- comment"},
		{"ADD COLUMN c INT # note", "a # comment"},
		{"ADD COLUMN c INT #\n, DROP COLUMN b", "a # comment"},
		{"ADD COLUMN a#b INT", "a # comment"},
		{"ADD COLUMN c INT DEFAULT 3 /*!99999 , DROP COLUMN b */", `an executable comment at byte 27 ("/*!99999 , DROP COLUMN b */")`},
		{"ADD COLUMN c INT DEFAULT 3 /*!80000 , DROP COLUMN b */", "an executable comment"},
		{"ADD COLUMN c INT DEFAULT 3 /*! , DROP COLUMN b */", "an executable comment"},
		{"ADD COLUMN c INT DEFAULT 3 /*T! , DROP COLUMN b */", "a /*T! comment"},
		{"ADD COLUMN c INT DEFAULT 3 /*M! , DROP COLUMN b */", "a /*M! comment"},
		{"ALTER /*+ SET_VAR(sort_buffer_size = 16M) */ TABLE t ADD COLUMN c INT", "an optimizer hint"},
		{"ADD COLUMN c INT /* why */, DROP COLUMN b", `a comment at byte 17 ("/* why */")`},
		{"ADD COLUMN c INT /**/", "a comment"},
		{"ADD COLUMN c INT /* never closed", "a comment"},
		{"ALTER TABLE /*x*/ t ADD COLUMN c INT", "a comment"},
		{"ALTER TABLE t /*x*/ ADD COLUMN c INT", "a comment"},
		{"ADD COLUMN c VARCHAR(3) DEFAULT 'a' -- x", "a -- comment"},
		{"ADD COLUMN c VARCHAR(3) DEFAULT 'it''s' # x", "a # comment"},
		{`ADD COLUMN c VARCHAR(3) DEFAULT 'it\'s' # x`, "a # comment"},
		{`ADD COLUMN c VARCHAR(3) DEFAULT "a\"b" /* x */`, "a comment"},
		{"ADD COLUMN `a``b` INT # x", "a # comment"},
		{"ADD COLUMN c INT /* " + strings.Repeat("long ", 20) + "*/", `"/* long long long long long long long lo..."`},
		// Read with NO_BACKSLASH_ESCAPES or ANSI_QUOTES, these hold a comment.
		{`ADD COLUMN c VARCHAR(20) DEFAULT 'x\' # y'`, "NO_BACKSLASH_ESCAPES"},
		{`ADD COLUMN c VARCHAR(20) COMMENT 'it\'s # 1'`, "NO_BACKSLASH_ESCAPES"},
		{`ADD COLUMN c VARCHAR(20) DEFAULT "x\" -- y"`, "ANSI_QUOTES"},
	}
	for _, c := range cases {
		_, err := Parse(c.in)
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("Parse(%q) err = %v, want ErrInvalid", c.in, err)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, c.want) || strings.ContainsAny(msg, "\n\r") {
			t.Errorf("Parse(%q) err = %q, want one line with %q", c.in, msg, c.want)
		}
		if !strings.Contains(msg, "--alter") {
			t.Errorf("Parse(%q) err = %q does not say what to do", c.in, msg)
		}
	}
}

func TestParseAcceptsCommentLookalikes(t *testing.T) {
	cases := []struct{ in, added, dropped string }{
		{"ADD COLUMN c INT DEFAULT 1 COMMENT '-- not a comment'", "c", ""},
		{"ADD COLUMN c VARCHAR(9) DEFAULT '/* x */'", "c", ""},
		{"ADD COLUMN c VARCHAR(9) DEFAULT '#1', DROP COLUMN b", "c", "b"},
		{`ADD COLUMN c VARCHAR(9) DEFAULT "a#b"`, "c", ""},
		{"ADD COLUMN `a#b` INT", "a#b", ""},
		{"ADD COLUMN `a--b` INT, DROP COLUMN `x/*y*/`", "a--b", "x/*y*/"},
		{"ADD COLUMN `a``#b` INT", "a`#b", ""},
		{"ADD COLUMN c VARCHAR(20) COMMENT 'it''s # 1'", "c", ""},
		{`ADD COLUMN c VARCHAR(20) COMMENT 'C:\\dir # 1'`, "c", ""},
		{`ADD COLUMN c VARCHAR(20) COMMENT 'a\nb', DROP COLUMN b`, "c", "b"},
		{"ADD COLUMN c VARCHAR(9) DEFAULT _utf8mb4'#x' COMMENT '--'", "c", ""},
		{"ADD COLUMN c VARCHAR(9) DEFAULT N'-- y'", "c", ""},
		{"ADD COLUMN g INT AS (a--1)", "g", ""},
		{"ADD CONSTRAINT ck CHECK (a--1 > 0), DROP COLUMN y", "", "y"},
		{"ADD COLUMN g INT AS (a/2), DROP COLUMN y", "g", "y"},
		{"ALTER TABLE `t#1` ADD COLUMN c INT", "c", ""},
	}
	for _, c := range cases {
		a, err := Parse(c.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", c.in, err)
			continue
		}
		if c.added != "" && !a.Added[c.added] {
			t.Errorf("Parse(%q) added = %v, want %q", c.in, a.Added, c.added)
		}
		if c.dropped != "" && !a.Dropped[c.dropped] {
			t.Errorf("Parse(%q) dropped = %v, want %q", c.in, a.Dropped, c.dropped)
		}
	}
}

func TestParseTrimsTrailingSemicolons(t *testing.T) {
	for _, in := range []string{"ADD COLUMN c INT;", " ADD COLUMN c INT ;\r\n;\t", "ADD COLUMN c INT;;\u00a0"} {
		a, err := Parse(in)
		if err != nil {
			t.Errorf("Parse(%q): %v", in, err)
			continue
		}
		if a.Clause != "ADD COLUMN c INT" {
			t.Errorf("Parse(%q).Clause = %q", in, a.Clause)
		}
	}
}
