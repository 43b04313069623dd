package migration

import (
	"slices"
	"strings"
	"testing"
)

func TestParseGrants(t *testing.T) {
	for _, c := range []struct {
		name    string
		lines   []string
		db      string
		fold    bool
		missing string // MissingPrivileges of what was read, joined
	}{
		{"mysql role expanded", []string{
			"GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO `sl_u`@`127.0.0.1`",
			"GRANT SELECT, INSERT, DELETE, CREATE, DROP, ALTER, LOCK TABLES ON `shop`.* TO `sl_u`@`127.0.0.1`",
			"GRANT `sl_r`@`%` TO `sl_u`@`127.0.0.1`",
		}, "shop", false, ""},
		{"mysql root", []string{
			"GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, RELOAD, SHUTDOWN, PROCESS, FILE, REFERENCES, INDEX, ALTER, SHOW DATABASES, SUPER, CREATE TEMPORARY TABLES, LOCK TABLES, EXECUTE, REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO `root`@`localhost` WITH GRANT OPTION",
			"GRANT APPLICATION_PASSWORD_ADMIN,AUDIT_ABORT_EXEMPT,BACKUP_ADMIN ON *.* TO `root`@`localhost` WITH GRANT OPTION",
		}, "shop", false, ""},
		{"mariadb all", []string{"GRANT ALL PRIVILEGES ON *.* TO `root`@`localhost` IDENTIFIED BY PASSWORD '*ABC' WITH GRANT OPTION"}, "shop", false, ""},
		{"mariadb binlog monitor", []string{
			"GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO `u`@`%` IDENTIFIED BY PASSWORD '*ABC'",
			"GRANT SELECT, INSERT, DELETE, CREATE, DROP, ALTER, LOCK TABLES ON `shop`.* TO `u`@`%`",
		}, "shop", false, ""},
		{"other database", []string{
			"GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO `u`@`%`",
			"GRANT ALL PRIVILEGES ON `shop2`.* TO `u`@`%`",
		}, "shop", false, "ALTER,CREATE,DELETE,DROP,INSERT,LOCK TABLES,SELECT"},
		{"wildcard database", []string{
			"GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO `u`@`%`",
			"GRANT ALL PRIVILEGES ON `shop_%`.* TO `u`@`%`",
		}, "shop_eu", false, ""},
		{"escaped underscore", []string{
			"GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO `u`@`%`",
			"GRANT ALL PRIVILEGES ON `shop\\_eu`.* TO `u`@`%`",
		}, "shopxeu", false, "ALTER,CREATE,DELETE,DROP,INSERT,LOCK TABLES,SELECT"},
		{"table grants only", []string{
			"GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO `u`@`%`",
			"GRANT SELECT, INSERT, DELETE, CREATE, DROP, ALTER ON `shop`.`orders` TO `u`@`%`",
			"GRANT LOCK TABLES ON `shop`.* TO `u`@`%`",
		}, "shop", false, "ALTER,CREATE,DELETE,DROP,INSERT,SELECT"},
		{"column privilege", []string{
			"GRANT SELECT (`a`, `b`), INSERT ON `shop`.* TO `u`@`%`",
		}, "shop", false, "ALTER,CREATE,DELETE,DROP,LOCK TABLES,REPLICATION CLIENT,REPLICATION SLAVE"},
		{"partial revoke", []string{
			"GRANT ALL PRIVILEGES ON *.* TO `u`@`%`",
			"REVOKE INSERT, DROP ON `shop`.* FROM `u`@`%`",
		}, "shop", false, "DROP,INSERT"},
		{"case folded", []string{
			"GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO `u`@`%`",
			"GRANT ALL PRIVILEGES ON `Shop`.* TO `u`@`%`",
		}, "shop", true, ""},
		{"backtick in the name", []string{
			"GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO `u`@`%`",
			"GRANT ALL PRIVILEGES ON `we``ird ON x`.* TO `u`@`%`",
		}, "we`ird ON x", false, ""},
		{"routine", []string{"GRANT EXECUTE ON PROCEDURE `shop`.`p` TO `u`@`%`"}, "shop",
			false, "ALTER,CREATE,DELETE,DROP,INSERT,LOCK TABLES,REPLICATION CLIENT,REPLICATION SLAVE,SELECT"},
	} {
		global, onDB := ParseGrants(c.lines, c.db, c.fold)
		m := MissingPrivileges(global, onDB)
		slices.Sort(m)
		if got := strings.Join(m, ","); got != c.missing {
			t.Errorf("%s: missing %q, want %q (global %v, on the database %v)", c.name, got, c.missing, global, onDB)
		}
	}
}
