package schema

import (
	"slices"
	"testing"
)

func TestSecondaryKeys(t *testing.T) {
	ddl := "CREATE TABLE `t` (\n  `id` int NOT NULL,\n  `k` int,\n  `c` varchar(10),\n" +
		"  PRIMARY KEY (`id`),\n  UNIQUE KEY `u` (`c`),\n  KEY `k_1` (`k`),\n  KEY `we``ird` (`c`(3),`k` DESC) COMMENT 'x',\n" +
		"  FULLTEXT KEY `ft` (`c`),\n  KEY `fn` ((lower(`c`))) /*!80000 INVISIBLE */\n) ENGINE=InnoDB"
	defs, names := SecondaryKeys(ddl)
	if !slices.Equal(names, []string{"k_1", "we`ird", "fn"}) {
		t.Errorf("names = %q", names)
	}
	want := []string{"KEY `k_1` (`k`)", "KEY `we``ird` (`c`(3),`k` DESC) COMMENT 'x'", "KEY `fn` ((lower(`c`))) /*!80000 INVISIBLE */"}
	if !slices.Equal(defs, want) {
		t.Errorf("defs = %q", defs)
	}
}
