package schema

import (
	"slices"
	"testing"
)

func TestPrimaryKeyColumns(t *testing.T) {
	for _, c := range []struct {
		ddl      string
		cols     []string
		prefixed []bool
	}{
		{"CREATE TABLE `t` (\n  `id` int NOT NULL,\n  PRIMARY KEY (`id`)\n)", []string{"id"}, []bool{false}},
		{"CREATE TABLE `t` (\n  PRIMARY KEY (`a`,`b`(10),`c` DESC),\n  KEY `k` (`d`)\n)", []string{"a", "b", "c"}, []bool{false, true, false}},
		{"CREATE TABLE `t` (\n  PRIMARY KEY (`we``ird`(4)) USING BTREE,\n  UNIQUE KEY `u` (`x`)\n)", []string{"we`ird"}, []bool{true}},
		{"CREATE TABLE `t` (\n  `id` int,\n  UNIQUE KEY `PRIMARY KEY (` (`id`)\n)", nil, nil},
		{"CREATE TABLE `t` (\n  `id` int\n)", nil, nil},
	} {
		cols, prefixed := PrimaryKeyColumns(c.ddl)
		if !slices.Equal(cols, c.cols) || !slices.Equal(prefixed, c.prefixed) {
			t.Errorf("PrimaryKeyColumns(%q) = %q %v, want %q %v", c.ddl, cols, prefixed, c.cols, c.prefixed)
		}
	}
}
