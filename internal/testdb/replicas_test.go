package testdb_test

import (
	"context"
	"database/sql"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/testdb"
)

// TestReplicas: every sandbox replica is listed by SHOW REPLICAS on the
// primary with its own port and server id, replicates as sluice needs
// (row-based binlog of its own, log_replica_updates), and ends up with the
// rows written on the primary in a fresh test database.
func TestReplicas(t *testing.T) {
	reps := testdb.Replicas(t)
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(40) NOT NULL, n BIGINT NULL)")
	db.Fill(t, "t", 2500, "n, CONCAT('row ', n), IF(n % 7 = 0, NULL, n * n)")
	db.MustExec(t, "UPDATE t SET v = CONCAT(v, ' updated') WHERE id % 3 = 0", "DELETE FROM t WHERE id % 5 = 0")
	want := db.Dump(t, "t", "*", "id")
	if len(want) != 2000 {
		t.Fatalf("the primary has %d rows, want 2000", len(want))
	}

	var primaryID int64
	if err := db.QueryRow("SELECT @@server_id").Scan(&primaryID); err != nil {
		t.Fatal(err)
	}
	listed := showReplicas(t, db.DB)
	ids := map[int64]string{primaryID: "the primary"}
	for _, c := range reps {
		t.Run(strconv.Itoa(c.Port), func(t *testing.T) {
			if !slices.Contains(listed, c.Port) {
				t.Fatalf("SHOW REPLICAS on the primary lists ports %v, not the replica's %d", listed, c.Port)
			}
			rep, err := dbconn.Open(context.Background(), c, "", 4)
			if err != nil {
				t.Fatal(err)
			}
			defer rep.Close()
			var id int64
			var logBin, replicaUpdates int
			var format, gtidMode string
			q := "SELECT @@server_id, @@log_bin, @@log_replica_updates, @@binlog_format, @@gtid_mode"
			if db.Flavor == dbconn.MariaDB {
				// MariaDB always logs GTIDs, and names the setting log_slave_updates.
				q = "SELECT @@server_id, @@log_bin, @@log_slave_updates, @@binlog_format, 'ON'"
			}
			if err := rep.QueryRow(q).Scan(&id, &logBin, &replicaUpdates, &format, &gtidMode); err != nil {
				t.Fatal(err)
			}
			if other, dup := ids[id]; dup {
				t.Errorf("server_id %d is also %s's", id, other)
			}
			ids[id] = c.String()
			if logBin != 1 || replicaUpdates != 1 || format != "ROW" || gtidMode != "ON" {
				t.Errorf("log_bin=%d log_replica_updates=%d binlog_format=%s gtid_mode=%s, want 1, 1, ROW, ON",
					logBin, replicaUpdates, format, gtidMode)
			}

			testdb.WaitReplicated(t, db.DB, rep, 2*time.Minute)
			onRep, err := dbconn.Open(context.Background(), c, db.Name, 1)
			if err != nil {
				t.Fatal(err)
			}
			defer onRep.Close()
			got := (&testdb.DB{DB: onRep, Name: db.Name, Server: c}).Dump(t, "t", "*", "id")
			if len(got) != len(want) {
				t.Fatalf("the replica has %d rows, the primary %d", len(got), len(want))
			}
			for i := range want {
				if !slices.Equal(got[i], want[i]) {
					t.Fatalf("row %d: the replica has %v, the primary %v", i, got[i], want[i])
				}
			}
		})
	}
}

// showReplicas returns the ports SHOW REPLICAS lists.
func showReplicas(t *testing.T, db *sql.DB) []int {
	t.Helper()
	rows, err := db.Query("SHOW REPLICAS")
	if dbconn.ErrorNumber(err) == 1064 { // MariaDB
		rows, err = db.Query("SHOW SLAVE HOSTS")
	}
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	port := slices.Index(cols, "Port")
	if port < 0 {
		t.Fatalf("SHOW REPLICAS has no Port column: %v", cols)
	}
	var out []int
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		p, err := strconv.Atoi(vals[port].String)
		if err != nil {
			t.Fatalf("SHOW REPLICAS port %q: %v", vals[port].String, err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
