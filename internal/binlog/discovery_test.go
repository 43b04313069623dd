package binlog_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/dbconn/dbconntest"
	"github.com/sluicedb/sluice/internal/replica"
	"github.com/sluicedb/sluice/internal/testdb"
)

// TestDiscoverySkipsSluiceReaders: a sluice binlog reader is listed by
// SHOW REPLICAS under dbconn.ReaderHost, and discovery never takes it for a
// replica, even when the address it registered cannot be reached (a reader
// on another host, or through a proxy that is gone): another run, or a
// sibling of a group, would otherwise wait for it for ever.
func TestDiscoverySkipsSluiceReaders(t *testing.T) {
	db := testdb.New(t)
	db.MustExec(t, "CREATE TABLE t (id INT PRIMARY KEY)")
	proxy := dbconntest.New(t, db.Server)
	via := proxy.Config(db.Server)
	startWith(t, db, via, "t", &collector{}, time.Minute, &testdb.SyncBuffer{})
	port := strconv.Itoa(via.Port)
	listed := false
	for end := time.Now().Add(10 * time.Second); !listed && time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		rows, err := db.Query("SHOW REPLICAS")
		if dbconn.ErrorNumber(err) == 1064 { // MariaDB before 11.x spells it so
			rows, err = db.Query("SHOW SLAVE HOSTS")
		}
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			rows.Scan(ptrs...)
			host, p := "", ""
			for i, c := range cols {
				v := fmt.Sprint(vals[i])
				if b, ok := vals[i].([]byte); ok {
					v = string(b)
				}
				switch c {
				case "Host":
					host = v
				case "Port":
					p = v
				}
			}
			listed = listed || host == dbconn.ReaderHost && p == port
		}
		rows.Close()
	}
	if !listed {
		t.Fatalf("the reader is not listed by SHOW REPLICAS as %s:%s", dbconn.ReaderHost, port)
	}
	proxy.Refuse(true) // its registered address no longer answers
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	found, err := replica.Discover(ctx, replica.Discovery{Primary: db.DB, Conn: db.Server, Auto: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range found {
		if r.Name == dbconn.ReaderHost+":"+port {
			t.Errorf("discovery took sluice's binlog reader %s for a replica", r.Name)
		}
		r.Close()
	}
}
