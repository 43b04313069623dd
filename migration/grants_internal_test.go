package migration

import (
	"slices"
	"strings"
	"testing"

	"github.com/sluicedb/sluice/internal/dbconn"
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
			"GRANT SELECT, INSERT, DELETE, CREATE, DROP, ALTER, LOCK TABLES, TRIGGER ON `shop`.* TO `sl_u`@`127.0.0.1`",
			"GRANT `sl_r`@`%` TO `sl_u`@`127.0.0.1`",
		}, "shop", false, ""},
		{"mysql root", []string{
			"GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, RELOAD, SHUTDOWN, PROCESS, FILE, REFERENCES, INDEX, ALTER, SHOW DATABASES, SUPER, CREATE TEMPORARY TABLES, LOCK TABLES, EXECUTE, REPLICATION SLAVE, REPLICATION CLIENT, TRIGGER ON *.* TO `root`@`localhost` WITH GRANT OPTION",
			"GRANT APPLICATION_PASSWORD_ADMIN,AUDIT_ABORT_EXEMPT,BACKUP_ADMIN ON *.* TO `root`@`localhost` WITH GRANT OPTION",
		}, "shop", false, ""},
		{"mariadb all", []string{"GRANT ALL PRIVILEGES ON *.* TO `root`@`localhost` IDENTIFIED BY PASSWORD '*ABC' WITH GRANT OPTION"}, "shop", false, ""},
		{"mariadb binlog monitor", []string{
			"GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO `u`@`%` IDENTIFIED BY PASSWORD '*ABC'",
			"GRANT SELECT, INSERT, DELETE, CREATE, DROP, ALTER, LOCK TABLES, TRIGGER ON `shop`.* TO `u`@`%`",
		}, "shop", false, ""},
		{"other database", []string{
			"GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO `u`@`%`",
			"GRANT ALL PRIVILEGES ON `shop2`.* TO `u`@`%`",
		}, "shop", false, "ALTER,CREATE,DELETE,DROP,INSERT,LOCK TABLES,SELECT,TRIGGER on orders"},
		{"wildcard database", []string{
			"GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO `u`@`%`",
			"GRANT ALL PRIVILEGES ON `shop_%`.* TO `u`@`%`",
		}, "shop_eu", false, ""},
		{"escaped underscore", []string{
			"GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO `u`@`%`",
			"GRANT ALL PRIVILEGES ON `shop\\_eu`.* TO `u`@`%`",
		}, "shopxeu", false, "ALTER,CREATE,DELETE,DROP,INSERT,LOCK TABLES,SELECT,TRIGGER on orders"},
		{"the original's grants only", []string{
			"GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO `u`@`%`",
			"GRANT SELECT, INSERT, DELETE, CREATE, DROP, ALTER ON `shop`.`orders` TO `u`@`%`",
			"GRANT LOCK TABLES ON `shop`.* TO `u`@`%`",
		}, "shop", false, lackOnArtifacts("ALTER", "CREATE", "DELETE", "DROP", "INSERT", "SELECT") + ",TRIGGER on orders"},
		{"every table granted", append([]string{
			"GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO `u`@`%`",
			"GRANT LOCK TABLES ON `shop`.* TO `u`@`%`",
		}, grantEach("SELECT, INSERT, DELETE, CREATE, DROP, ALTER, TRIGGER", "shop", ordersTables)...), "shop", false, ""},
		{"every table, ALL", append([]string{
			"GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO `u`@`%`",
			"GRANT LOCK TABLES ON `shop`.* TO `u`@`%`",
		}, grantEach("ALL PRIVILEGES", "shop", ordersTables)...), "shop", false, ""},
		{"every table but one privilege on one", append([]string{
			"GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO `u`@`%`",
			"GRANT LOCK TABLES ON `shop`.* TO `u`@`%`",
			"GRANT SELECT, INSERT, DELETE, CREATE, ALTER ON `shop`.`_orders_old` TO `u`@`%`",
		}, grantEach("SELECT, INSERT, DELETE, CREATE, DROP, ALTER, TRIGGER", "shop", slices.DeleteFunc(slices.Clone(ordersTables), func(t string) bool { return t == "_orders_old" }))...),
			"shop", false, "DROP on _orders_old"},
		{"table grants need LOCK TABLES on the database", grantEach("ALL PRIVILEGES", "shop", ordersTables),
			"shop", false, "LOCK TABLES,REPLICATION CLIENT,REPLICATION SLAVE"},
		{"a column privilege is not the table's", append([]string{
			"GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO `u`@`%`",
			"GRANT LOCK TABLES ON `shop`.* TO `u`@`%`",
			"GRANT SELECT (`id`, `v`), INSERT, DELETE, CREATE, DROP, ALTER, TRIGGER ON `shop`.`orders` TO `u`@`%`",
		}, grantEach("SELECT, INSERT, DELETE, CREATE, DROP, ALTER", "shop", ordersTables[1:])...), "shop", false, "SELECT on orders"},
		{"table grants in another database", append([]string{
			"GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO `u`@`%`",
			"GRANT LOCK TABLES ON `shop`.* TO `u`@`%`",
		}, grantEach("ALL PRIVILEGES", "shop2", ordersTables)...), "shop", false, "ALTER,CREATE,DELETE,DROP,INSERT,SELECT,TRIGGER on orders"},
		{"table grants, names folded", append([]string{
			"GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO `u`@`%`",
			"GRANT LOCK TABLES ON `Shop`.* TO `u`@`%`",
			"GRANT ALL PRIVILEGES ON `Shop`.`ORDERS` TO `u`@`%`",
		}, grantEach("ALL PRIVILEGES", "shop", ordersTables[1:])...), "shop", true, ""},
		{"column privilege", []string{
			"GRANT SELECT (`a`, `b`), INSERT ON `shop`.* TO `u`@`%`",
		}, "shop", false, "ALTER,CREATE,DELETE,DROP,LOCK TABLES,REPLICATION CLIENT,REPLICATION SLAVE,SELECT,TRIGGER on orders"},
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
			false, "ALTER,CREATE,DELETE,DROP,INSERT,LOCK TABLES,REPLICATION CLIENT,REPLICATION SLAVE,SELECT,TRIGGER on orders"},
	} {
		g := ParseGrants(c.lines, c.db, c.fold)
		m := MissingPrivileges(g, ordersTables)
		slices.Sort(m)
		if got := strings.Join(m, ","); got != c.missing {
			t.Errorf("%s: missing %q, want %q (grants %+v)", c.name, got, c.missing, g)
		}
	}
}

// ordersTables are the tables a migration of orders touches (tablesTouched
// on MySQL).
var ordersTables = []string{"orders", "_orders_new", "_orders_old", "_orders_cutover", "_orders_ckpt", "_orders_hb"}

func grantEach(privs, db string, tables []string) []string {
	var out []string
	for _, t := range tables {
		out = append(out, "GRANT "+privs+" ON `"+db+"`.`"+t+"` TO `u`@`%`")
	}
	return out
}

// lackOnArtifacts is the missing list when privs are granted on orders only.
func lackOnArtifacts(privs ...string) string {
	return strings.Join(privs, ", ") + " on " + strings.Join(ordersTables[1:], ", ")
}

// TestTablesTouched: the tables the privilege check asks grants for are the
// names the run uses.
func TestTablesTouched(t *testing.T) {
	r := &Runner{cfg: Config{Table: "orders"}}
	if got := r.tablesTouched(); !slices.Equal(got, ordersTables) {
		t.Errorf("MySQL: %v, want %v", got, ordersTables)
	}
	r.vars.Flavor = dbconn.MariaDB
	if got := r.tablesTouched(); !slices.Equal(got, append(slices.Clone(ordersTables), sentryName("orders"))) {
		t.Errorf("MariaDB: %v", got)
	}
}
