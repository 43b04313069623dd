package schema

import (
	"slices"
	"testing"
)

func TestSecondaryKeys(t *testing.T) {
	ddl := "CREATE TABLE `t` (\n  `id` int NOT NULL,\n  `k` int,\n  `c` varchar(10),\n" +
		"  PRIMARY KEY (`id`),\n  UNIQUE KEY `u` (`c`),\n  KEY `k_1` (`k`),\n  KEY `we``ird` (`c`(3),`k` DESC) COMMENT 'x',\n" +
		"  FULLTEXT KEY `ft` (`c`),\n  KEY `fn` ((lower(`c`))) /*!80000 INVISIBLE */,\n  UNIQUE KEY `fn2` (`k`,(`k` + 1)),\n" +
		"  KEY `p(` (`c`(3)),\n  UNIQUE KEY `long` (`c`) USING HASH\n) ENGINE=InnoDB"
	want := []KeyDef{
		{Name: "u", Def: "UNIQUE KEY `u` (`c`)", Unique: true},
		{Name: "k_1", Def: "KEY `k_1` (`k`)"},
		{Name: "we`ird", Def: "KEY `we``ird` (`c`(3),`k` DESC) COMMENT 'x'"},
		{Name: "fn2", Def: "UNIQUE KEY `fn2` (`k`,(`k` + 1))", Unique: true, Functional: true},
		{Name: "p(", Def: "KEY `p(` (`c`(3))"},
		{Name: "long", Def: "UNIQUE KEY `long` (`c`) USING HASH", Unique: true, Functional: true}, // MariaDB's long unique key
	}
	if got := SecondaryKeys(ddl); !slices.Equal(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
}
