package testdb

import (
	"fmt"
	"strings"
	"sync"

	"github.com/sluicedb/sluice/internal/dbconn"
)

// MariaDBCollations maps MySQL's UCA 9.0.0 collations to MariaDB's NO PAD
// counterparts. They are aliases from MariaDB 11.4 on; 10.11 has none.
var MariaDBCollations = map[string]string{
	"utf8mb4_0900_ai_ci": "utf8mb4_uca1400_nopad_ai_ci",
	"utf8mb4_0900_as_cs": "utf8mb4_uca1400_nopad_as_cs",
	"utf8mb4_0900_bin":   "utf8mb4_nopad_bin",
}

// dialect is what a server lacks of MySQL 9.7's names.
type dialect struct {
	colls       map[string]string // missing collation -> stand-in
	txIsolation bool              // no transaction_isolation: tx_isolation
}

var dialects sync.Map // host:port -> *dialect

// Dialect rewrites a test's statement, written for MySQL, for the server:
// on a MariaDB that lacks them, a UCA 9.0.0 collation becomes its
// MariaDB NO PAD counterpart and transaction_isolation becomes tx_isolation
// (MariaDB before 11.1). Elsewhere the statement is returned as it is.
func (d *DB) Dialect(q string) string {
	if d.Flavor != dbconn.MariaDB {
		return q
	}
	key := fmt.Sprintf("%s:%d", d.Server.Host, d.Server.Port)
	v, ok := dialects.Load(key)
	if !ok {
		dl := &dialect{colls: map[string]string{}}
		for from, to := range MariaDBCollations {
			var n int
			if err := d.QueryRow("SELECT COUNT(*) FROM information_schema.COLLATIONS WHERE COLLATION_NAME = ?", from).Scan(&n); err == nil && n == 0 {
				dl.colls[from] = to
			}
		}
		var s string
		err := d.QueryRow("SELECT @@SESSION.transaction_isolation").Scan(&s)
		dl.txIsolation = dbconn.ErrorNumber(err) == dbconn.ErrUnknownSystemVariable
		v, _ = dialects.LoadOrStore(key, dl)
	}
	dl := v.(*dialect)
	for from, to := range dl.colls {
		q = strings.ReplaceAll(q, from, to)
	}
	if dl.txIsolation {
		q = strings.ReplaceAll(q, "transaction_isolation", "tx_isolation")
	}
	return q
}
