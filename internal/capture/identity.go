package capture

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/sluicedb/sluice/internal/dbconn"
)

// A TRUNCATE empties a table without firing its DELETE triggers, so the
// queue never hears of it: a run that went on would swap in a table holding
// every row the application had truncated. InnoDB gives the table a new id
// for it (as for a DROP and CREATE under the same name), which Identity
// reads, so that the cut-over can compare it under its lock with the id the
// triggers were made on.

// ErrIdentityNone is returned by Identity when InnoDB lists no single table
// of the name (a partitioned table, one of another engine).
var ErrIdentityNone = errors.New("capture: no single InnoDB id")

// ErrIdentityName is returned by Identity for a name InnoDB stores encoded.
var ErrIdentityName = errors.New("capture: the table's InnoDB id is found only for names of ASCII letters, digits and _")

// Identity returns the InnoDB table id of database.table, both as the server
// stores them (lower case under lower_case_table_names=1). It reads
// information_schema's InnoDB table list (MariaDB's needs the PROCESS
// privilege), which names a table "database/table" in MySQL's file-name
// encoding: a name outside [A-Za-z0-9_] is refused (ErrIdentityName), as is
// a table InnoDB does not list under its name (a partitioned one).
func Identity(ctx context.Context, q dbconn.Querier, f dbconn.Flavor, database, table string) (uint64, error) {
	if !PlainName(database) || !PlainName(table) {
		return 0, fmt.Errorf("%w: %s.%s", ErrIdentityName, database, table)
	}
	list := "information_schema.INNODB_TABLES"
	if f == dbconn.MariaDB {
		list = "information_schema.INNODB_SYS_TABLES"
	}
	rows, err := q.QueryContext(ctx, "SELECT TABLE_ID FROM "+list+" WHERE NAME = ?", database+"/"+table)
	if err != nil {
		return 0, fmt.Errorf("capture: read the InnoDB id of %s.%s: %w", database, table, err)
	}
	defer rows.Close()
	var ids []uint64
	for rows.Next() {
		var id uint64
		if err := rows.Scan(&id); err != nil {
			return 0, fmt.Errorf("capture: read the InnoDB id of %s.%s: %w", database, table, err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("capture: read the InnoDB id of %s.%s: %w", database, table, err)
	}
	if len(ids) != 1 {
		return 0, fmt.Errorf("%w: InnoDB lists %d tables named %s/%s (a partitioned table, or one of another engine, has no single id)", ErrIdentityNone, len(ids), database, table)
	}
	return ids[0], nil
}

// PlainName reports whether InnoDB stores name as it is (ASCII letters,
// digits and _), so that Identity can find it.
func PlainName(name string) bool {
	if name == "" {
		return false
	}
	for _, c := range []byte(name) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

var _ dbconn.Querier = (*sql.DB)(nil)
