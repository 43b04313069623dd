package dbconn

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// Flavor is the kind of server: MySQL or MariaDB. Where the two differ (the
// binlog's GTID events, RENAME TABLE under LOCK TABLES, a few variable
// names), sluice asks the server which it is rather than assume.
type Flavor string

const (
	MySQL   Flavor = "mysql"
	MariaDB Flavor = "mariadb"
)

// FlavorOf tells the flavour from @@version and @@version_comment.
func FlavorOf(version, comment string) Flavor {
	if strings.Contains(strings.ToLower(version+" "+comment), "mariadb") {
		return MariaDB
	}
	return MySQL
}

// ReadFlavor asks the server which flavour it is.
func ReadFlavor(ctx context.Context, db *sql.DB) (Flavor, error) {
	var version, comment string
	if err := db.QueryRowContext(ctx, "SELECT @@version, @@version_comment").Scan(&version, &comment); err != nil {
		return "", fmt.Errorf("read the server's version: %w", err)
	}
	return FlavorOf(version, comment), nil
}

// ServerIdentity names the server for a checkpoint: its server_uuid on MySQL;
// MariaDB has none, so there it is its host name, port and server_id.
func ServerIdentity(ctx context.Context, db *sql.DB) (string, error) {
	var id string
	err := db.QueryRowContext(ctx, "SELECT @@server_uuid").Scan(&id)
	if ErrorNumber(err) == ErrUnknownSystemVariable {
		err = db.QueryRowContext(ctx, "SELECT CONCAT(@@hostname, ':', @@port, '/', @@server_id)").Scan(&id)
	}
	if err != nil {
		return "", fmt.Errorf("read the server's identity: %w", err)
	}
	return id, nil
}
