package testdb_test

import (
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/testdb"
)

// TestProcessesWhileAStatementHoldsAFourByteCharacter: the process list is
// read while another session runs a statement with an emoji in it, which
// MySQL's utf8mb3 information_schema.PROCESSLIST cannot hold.
func TestProcessesWhileAStatementHoldsAFourByteCharacter(t *testing.T) {
	db := testdb.New(t)
	done := make(chan error, 1)
	go func() {
		_, err := db.Exec("SELECT SLEEP(3), '\U0001F363 sleeper'")
		done <- err
	}()
	deadline := time.Now().Add(2 * time.Second)
	for db.Processes(t, "INFO LIKE '%sleeper%' AND INFO NOT LIKE '%INFO LIKE%'") != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the sleeping statement was never counted")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := db.Processes(t, "INFO LIKE '%sleeper%' AND INFO NOT LIKE '%INFO LIKE%'"); n != 0 {
		t.Fatalf("%d sleepers counted after the statement ended", n)
	}
}
