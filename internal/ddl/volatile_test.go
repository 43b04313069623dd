package ddl

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// vol is a Volatile in short: "column kind cause".
func vol(v Volatile) string { return fmt.Sprintf("%s %s %s", v.Column, v.Kind, v.Cause) }

func TestNonDeterministic(t *testing.T) {
	cases := []struct {
		alter string
		want  []string
	}{
		// A new value at each call.
		{"ADD COLUMN u CHAR(36) DEFAULT (UUID())", []string{"u random UUID()"}},
		{"ADD COLUMN u CHAR(36) DEFAULT (uuid())", []string{"u random UUID()"}},
		{"ADD COLUMN u CHAR(36) DEFAULT (`uuid`())", []string{"u random UUID()"}},
		{"ADD COLUMN u BINARY(16) DEFAULT (UUID_TO_BIN(UUID()))", []string{"u random UUID()"}},
		{"ADD COLUMN u BINARY(16) DEFAULT (UUID_TO_BIN(UUID(), 1))", []string{"u random UUID()"}},
		{"ADD COLUMN u CHAR(32) DEFAULT (REPLACE(UUID(), '-', ''))", []string{"u random UUID()"}},
		{"ADD COLUMN u CHAR(36) DEFAULT (UPPER(UUID()))", []string{"u random UUID()"}},
		{"ADD COLUMN s BIGINT UNSIGNED DEFAULT (UUID_SHORT())", []string{"s random UUID_SHORT()"}},
		{"ADD COLUMN r DOUBLE DEFAULT (RAND())", []string{"r random RAND()"}},
		{"ADD COLUMN r DOUBLE DEFAULT (RAND(7))", []string{"r random RAND()"}},
		{"ADD COLUMN r INT DEFAULT (FLOOR(RAND()*10))", []string{"r random RAND()"}},
		{"ADD COLUMN r INT DEFAULT (ROUND(RAND()))", []string{"r random RAND()"}},
		{"ADD COLUMN h CHAR(32) DEFAULT (MD5(RAND()))", []string{"h random RAND()"}},
		{"ADD COLUMN b VARBINARY(8) DEFAULT (RANDOM_BYTES(8))", []string{"b random RANDOM_BYTES()"}},
		{"ADD COLUMN j JSON DEFAULT (JSON_OBJECT('id', UUID()))", []string{"j random UUID()"}},
		// A counter.
		{"ADD COLUMN n BIGINT AUTO_INCREMENT UNIQUE", []string{"n sequence AUTO_INCREMENT"}},
		{"ADD COLUMN n BIGINT NOT NULL AUTO_INCREMENT, ADD UNIQUE KEY (n)", []string{"n sequence AUTO_INCREMENT"}},
		{"ADD COLUMN n BIGINT NOT NULL AUTO_INCREMENT, ADD KEY (n)", []string{"n sequence AUTO_INCREMENT"}},
		{"ADD n BIGINT auto_increment, ADD INDEX (n)", []string{"n sequence AUTO_INCREMENT"}},
		{"ADD COLUMN n SERIAL", []string{"n sequence AUTO_INCREMENT"}},
		{"ADD COLUMN n INT SERIAL DEFAULT VALUE", []string{"n sequence AUTO_INCREMENT"}},
		{"ADD COLUMN q INT DEFAULT (NEXTVAL(s))", []string{"q sequence NEXTVAL()"}},
		{"ADD COLUMN q INT DEFAULT NEXT VALUE FOR s", []string{"q sequence NEXTVAL()"}},
		// The time of the insert.
		{"ADD COLUMN t TIMESTAMP DEFAULT CURRENT_TIMESTAMP", []string{"t time CURRENT_TIMESTAMP()"}},
		{"ADD COLUMN t TIMESTAMP NOT NULL DEFAULT current_timestamp", []string{"t time CURRENT_TIMESTAMP()"}},
		{"ADD COLUMN t TIMESTAMP(6) DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6)", []string{"t time CURRENT_TIMESTAMP()"}},
		{"ADD COLUMN t DATETIME DEFAULT (CURRENT_TIMESTAMP)", []string{"t time CURRENT_TIMESTAMP()"}},
		{"ADD COLUMN t DATETIME DEFAULT NOW()", []string{"t time CURRENT_TIMESTAMP()"}},
		{"ADD COLUMN t DATETIME(6) DEFAULT (NOW(6))", []string{"t time CURRENT_TIMESTAMP()"}},
		{"ADD COLUMN t DATETIME DEFAULT LOCALTIME", []string{"t time CURRENT_TIMESTAMP()"}},
		{"ADD COLUMN t DATETIME DEFAULT LOCALTIMESTAMP()", []string{"t time CURRENT_TIMESTAMP()"}},
		{"ADD COLUMN t DATE DEFAULT (CURDATE())", []string{"t time CURRENT_DATE()"}},
		{"ADD COLUMN t INT DEFAULT (UNIX_TIMESTAMP())", []string{"t time UNIX_TIMESTAMP()"}},
		{"ADD COLUMN t BIGINT DEFAULT (UNIX_TIMESTAMP(NOW()))", []string{"t time NOW()"}},
		{"ADD COLUMN t CHAR(4) DEFAULT (DATE_FORMAT(NOW(), '%Y'))", []string{"t time NOW()"}},
		{"ADD COLUMN t INT DEFAULT (TO_DAYS(NOW()))", []string{"t time NOW()"}},
		// The inserting connection.
		{"ADD COLUMN c BIGINT DEFAULT (CONNECTION_ID())", []string{"c session CONNECTION_ID()"}},
		{"ADD COLUMN c BIGINT DEFAULT (LAST_INSERT_ID())", []string{"c session LAST_INSERT_ID()"}},
		{"ADD COLUMN c BIGINT DEFAULT (PS_CURRENT_THREAD_ID())", []string{"c session PS_CURRENT_THREAD_ID()"}},
		{"ADD COLUMN c VARCHAR(90) DEFAULT (SESSION_USER())", []string{"c session SESSION_USER()"}},
		{"ADD COLUMN c VARCHAR(90) DEFAULT (SYSTEM_USER())", []string{"c session SYSTEM_USER()"}},
		// MariaDB's.
		{"ADD COLUMN g CHAR(36) DEFAULT (SYS_GUID())", []string{"g random SYS_GUID()"}},
		{"ADD COLUMN g CHAR(36) DEFAULT (UUID_V7())", []string{"g random UUID_V7()"}},
		// Several causes, several columns, in the order written; each cause once.
		{"ADD COLUMN x VARCHAR(90) DEFAULT (CONCAT(UUID(), CONNECTION_ID(), UUID()))",
			[]string{"x random UUID()", "x session CONNECTION_ID()"}},
		{"ADD COLUMN a CHAR(36) DEFAULT (UUID()), ADD COLUMN b INT DEFAULT 0, ADD COLUMN c TIMESTAMP DEFAULT CURRENT_TIMESTAMP",
			[]string{"a random UUID()", "c time CURRENT_TIMESTAMP()"}},
		{"ADD COLUMN (n BIGINT AUTO_INCREMENT, m INT DEFAULT (RAND()), UNIQUE KEY (n))",
			[]string{"n sequence AUTO_INCREMENT", "m random RAND()"}},
		{"ADD COLUMN MixedCase CHAR(36) DEFAULT (UUID())", []string{"MixedCase random UUID()"}},
		{"ALTER TABLE db.t ADD COLUMN u CHAR(36) DEFAULT (UUID());", []string{"u random UUID()"}},
		// A dropped column added again takes its default, not the old values.
		{"DROP COLUMN u, ADD COLUMN u CHAR(36) DEFAULT (UUID())", []string{"u random UUID()"}},
		// An added column redefined later in the clause.
		{"ADD COLUMN u CHAR(36), ALTER COLUMN u SET DEFAULT (UUID())", []string{"u random UUID()"}},
		{"ADD COLUMN u CHAR(36) DEFAULT (UUID()), ALTER COLUMN U SET DEFAULT (UUID())", []string{"u random UUID()"}},
		{"ADD COLUMN u CHAR(36), ALTER COLUMN u SET DEFAULT (CONCAT('x', RAND() * 100))", []string{"u random RAND()"}},
		{"ADD COLUMN t DATETIME, ALTER u SET DEFAULT (NOW())", nil}, // another column
		{"ADD COLUMN u CHAR(36), MODIFY u CHAR(36) DEFAULT (UUID())", []string{"u random UUID()"}},
		{"ADD COLUMN n BIGINT, MODIFY n BIGINT AUTO_INCREMENT UNIQUE", []string{"n sequence AUTO_INCREMENT"}},

		// Deterministic: constants, functions of constants or of the row.
		{"ADD COLUMN c INT", nil},
		{"ADD COLUMN c INT NOT NULL", nil},
		{"ADD COLUMN c INT DEFAULT 3", nil},
		{"ADD COLUMN c INT DEFAULT -1", nil},
		{"ADD COLUMN c INT DEFAULT (ABS(-1))", nil},
		{"ADD COLUMN c VARCHAR(8) DEFAULT 'UUID()'", nil},
		{"ADD COLUMN c TEXT DEFAULT ('abc')", nil},
		{"ADD COLUMN c JSON DEFAULT (JSON_ARRAY())", nil},
		{"ADD COLUMN c BIGINT DEFAULT (UNIX_TIMESTAMP('2020-01-01'))", nil},
		{"ADD COLUMN c BINARY(16) DEFAULT (UUID_TO_BIN('6ccd780c-baba-1026-9564-5b8c656024db'))", nil},
		{"ADD COLUMN c DATETIME DEFAULT '2020-01-01 00:00:00'", nil},
		{"ADD COLUMN c TIMESTAMP NULL", nil},
		{"ADD COLUMN c TIMESTAMP NULL ON UPDATE CURRENT_TIMESTAMP", nil}, // ON UPDATE: not on insert
		{"ADD COLUMN `uuid` INT, ADD COLUMN `now` INT DEFAULT 1", nil},
		{"ADD COLUMN g INT AS (a + 1) STORED", nil},
		{"ADD INDEX k (c), ADD UNIQUE KEY u (d)", nil},
		{"ADD COLUMN c INT, ALTER COLUMN c SET DEFAULT 5", nil},
		{"ADD COLUMN c INT, ALTER COLUMN c DROP DEFAULT", nil},
		// Existing columns keep their values: the copy carries them.
		{"MODIFY c CHAR(36) DEFAULT (UUID())", nil},
		{"CHANGE c d TIMESTAMP DEFAULT CURRENT_TIMESTAMP", nil},
		{"ALTER COLUMN c SET DEFAULT (UUID())", nil},
		{"MODIFY id BIGINT NOT NULL AUTO_INCREMENT", nil},
	}
	for _, c := range cases {
		a, err := Parse(c.alter)
		if err != nil {
			t.Errorf("Parse(%q): %v", c.alter, err)
			continue
		}
		var got []string
		for _, v := range a.NonDeterministic {
			got = append(got, vol(v))
			if v.Alternative == "" {
				t.Errorf("Parse(%q): %s has no alternative", c.alter, vol(v))
			}
		}
		if strings.Join(got, "; ") != strings.Join(c.want, "; ") {
			t.Errorf("Parse(%q).NonDeterministic = %q, want %q", c.alter, got, c.want)
		}
	}
}

// The TiDB parser takes a narrower DEFAULT grammar than MySQL: these volatile
// defaults are refused today. Should a newer parser accept one, it must be
// reported.
func TestNonDeterministicRefusedOrReported(t *testing.T) {
	cases := []struct{ alter, want string }{
		{"ADD COLUMN t DATETIME DEFAULT (SYSDATE())", "t time SYSDATE()"},
		{"ADD COLUMN t DATETIME DEFAULT (UTC_TIMESTAMP())", "t time UTC_TIMESTAMP()"},
		{"ADD COLUMN t DATE DEFAULT (UTC_DATE())", "t time UTC_DATE()"},
		{"ADD COLUMN t TIME DEFAULT (CURTIME())", "t time CURTIME()"},
		{"ADD COLUMN t DATE DEFAULT (CURRENT_DATE + INTERVAL 1 YEAR)", "t time CURRENT_DATE()"},
		{"ADD COLUMN t DATETIME DEFAULT (DATE_ADD(NOW(), INTERVAL 1 DAY))", "t time NOW()"},
		{"ADD COLUMN r DOUBLE DEFAULT (RAND() * RAND())", "r random RAND()"},
		{"ADD COLUMN r INT DEFAULT (CAST(RAND() AS SIGNED))", "r random RAND()"},
		{"ADD COLUMN r INT DEFAULT (IF(RAND() > 0.5, 1, 0))", "r random RAND()"},
		{"ADD COLUMN s BIGINT DEFAULT (UUID_SHORT() + 1)", "s random UUID_SHORT()"},
		{"ADD COLUMN c BIGINT DEFAULT (ROW_COUNT())", "c session ROW_COUNT()"},
		{"ADD COLUMN m VARCHAR(300) DEFAULT (@@sql_mode)", "m session @@sql_mode"},
		{"ADD COLUMN m VARCHAR(30) DEFAULT (CONCAT(@@session.time_zone, 'x'))", "m session @@time_zone"},
		{"ADD COLUMN m VARCHAR(30) DEFAULT (@@tx_isolation)", "m session @@tx_isolation"},
		{"ADD COLUMN m INT DEFAULT (@x + 1)", "m session @x"},
	}
	for _, c := range cases {
		a, err := Parse(c.alter)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("Parse(%q) err = %v, want ErrInvalid", c.alter, err)
			}
			continue
		}
		found := false
		for _, v := range a.NonDeterministic {
			found = found || vol(v) == c.want
		}
		if !found {
			t.Errorf("Parse(%q) accepted, NonDeterministic = %v, want %q", c.alter, a.NonDeterministic, c.want)
		}
	}
}

func TestAutoIncrementRedefined(t *testing.T) {
	cases := []struct {
		alter string
		want  []string
	}{
		{"MODIFY id BIGINT NOT NULL AUTO_INCREMENT", []string{"id"}},
		{"MODIFY COLUMN Id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT", []string{"id"}},
		{"CHANGE Id ident BIGINT NOT NULL AUTO_INCREMENT", []string{"id"}},
		{"CHANGE COLUMN n n BIGINT AUTO_INCREMENT, ADD UNIQUE KEY (n)", []string{"n"}},
		{"MODIFY a INT, CHANGE b c INT", nil},
		{"MODIFY a INT DEFAULT 0", nil},
		{"ADD COLUMN n BIGINT AUTO_INCREMENT UNIQUE", nil},
		{"ADD COLUMN n BIGINT, MODIFY n BIGINT AUTO_INCREMENT UNIQUE", nil}, // added: NonDeterministic
	}
	for _, c := range cases {
		a, err := Parse(c.alter)
		if err != nil {
			t.Errorf("Parse(%q): %v", c.alter, err)
			continue
		}
		if len(a.AutoIncrementRedefined) != len(c.want) {
			t.Errorf("Parse(%q).AutoIncrementRedefined = %v, want %v", c.alter, a.AutoIncrementRedefined, c.want)
			continue
		}
		for _, n := range c.want {
			if !a.AutoIncrementRedefined[n] {
				t.Errorf("Parse(%q).AutoIncrementRedefined = %v, want %v", c.alter, a.AutoIncrementRedefined, c.want)
			}
		}
	}
}

func TestVolatileText(t *testing.T) {
	a, err := Parse("ADD COLUMN u CHAR(36) DEFAULT (UUID()), ADD COLUMN n BIGINT AUTO_INCREMENT UNIQUE, " +
		"ADD COLUMN t TIMESTAMP DEFAULT CURRENT_TIMESTAMP, ADD COLUMN c BIGINT DEFAULT (CONNECTION_ID()), ADD COLUMN q INT DEFAULT (NEXTVAL(s))")
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ says, alt string }{
		{"column u: UUID() gives the row a new value each time sluice copies it", "constant default"},
		{"column n: AUTO_INCREMENT numbers the rows in the order sluice copies them", "MODIFY"},
		{"column t: CURRENT_TIMESTAMP() is the time sluice copies the row, not the time of the ALTER", "one time"},
		{"column c: CONNECTION_ID() depends on which of sluice's connections copies the row", "constant default"},
		{"column q: NEXTVAL() gives the row a new number each time", "constant default"},
	}
	if len(a.NonDeterministic) != len(want) {
		t.Fatalf("NonDeterministic = %v", a.NonDeterministic)
	}
	for i, w := range want {
		v := a.NonDeterministic[i]
		if s := v.String(); !strings.HasPrefix(s, w.says) || strings.Contains(s, "%!") {
			t.Errorf("String() = %q, want it to start %q", s, w.says)
		}
		if !strings.Contains(v.Alternative, w.alt) {
			t.Errorf("%s: Alternative = %q, want it to mention %q", vol(v), v.Alternative, w.alt)
		}
	}
	for k, s := range map[VolatileKind]string{VolatileRandom: "random", VolatileSequence: "sequence", VolatileTime: "time",
		VolatileSession: "session", 0: "VolatileKind(0)"} {
		if k.String() != s {
			t.Errorf("VolatileKind(%d).String() = %q, want %q", int(k), k.String(), s)
		}
	}
}
