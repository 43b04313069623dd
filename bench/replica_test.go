package bench

import (
	"testing"
	"time"
)

func TestReplicaDSN(t *testing.T) {
	out := "export SLUICE_TEST_REPLICA_DSNS='root@tcp(127.0.0.1:13317)/,root@tcp(127.0.0.1:13318)/'\n"
	if got, err := replicaDSN(out); err != nil || got != "root@tcp(127.0.0.1:13317)/" {
		t.Errorf("got %q, %v", got, err)
	}
	if _, err := replicaDSN("export SLUICE_TEST_REPLICA_DSNS=''\n"); err == nil {
		t.Error("no replica: no error")
	}
}

func TestRunningLine(t *testing.T) {
	out := "replica1 running on 127.0.0.1:13317: IO Yes, SQL Yes, 0s behind\nreplica2 stopped\n"
	if n := len(runningLine.FindAllString(out, -1)); n != 1 {
		t.Errorf("%d running, want 1", n)
	}
}

func TestDurStats(t *testing.T) {
	if got := durStats([]time.Duration{3 * time.Second, time.Second, 2 * time.Second}); got != "2.00 s (1.00-3.00)" {
		t.Errorf("got %q", got)
	}
	if got := durStats(nil); got != "-" {
		t.Errorf("got %q", got)
	}
}

func TestPtOscReplicas(t *testing.T) {
	out := "No replicas found.  See --recursion-method if host vm has replicas.\nWill check replica lag on:\nvm -> 127.0.0.1:13317\n" +
		"2026-11-23T23:21:53 Copying approximately 50000 rows...\nReplica lag is 2 seconds on 127.0.0.1:13317.  Waiting.\n"
	if got := ptOscReplicas(out); got != `127.0.0.1:13317: 1 "Replica lag is ..." reports` {
		t.Errorf("got %q", got)
	}
	if got := ptOscReplicas("Successfully altered"); got != "" {
		t.Errorf("got %q", got)
	}
}
