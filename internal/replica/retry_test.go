package replica

import (
	"context"
	"testing"
	"time"

	"github.com/sluicedb/sluice/internal/dbconn"
	"github.com/sluicedb/sluice/internal/dbconn/dbconntest"
	"github.com/sluicedb/sluice/internal/testdb"
)

// TestUnreachableReplicaIsTriedAgain: a replica that cannot be reached when
// the run starts counts as lagging, and is measured once it answers (a
// replica restarting, a user not yet replicated to it): the run must not
// wait for it for ever. The "replica" is the primary through a proxy that
// refuses connections at first.
func TestUnreachableReplicaIsTriedAgain(t *testing.T) {
	db := testdb.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hb := dbconn.QuoteTable(db.Name, "hb")
	if err := CreateTable(ctx, db.DB, hb); err != nil {
		t.Fatal(err)
	}
	proxy := dbconntest.New(t, db.Server)
	proxy.Refuse(true)
	via := proxy.Config(db.Server)
	r := connect(ctx, db.Server, via.Host, via.Port)
	if r.down == nil {
		t.Fatal("the refusing proxy was reached")
	}
	m := NewMonitor(MonitorConfig{Primary: db.DB, Table: hb, Replicas: []*Replica{r}, Interval: 50 * time.Millisecond})
	defer m.Close()
	go m.Run(ctx)
	time.Sleep(300 * time.Millisecond)
	if l, _ := m.Slowest(); l.Err == nil {
		t.Fatalf("a replica that cannot be reached was measured: %+v", l)
	}
	proxy.Refuse(false)
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if l, _ := m.Slowest(); l.Err == nil {
			break
		} else if time.Now().After(end) {
			t.Fatalf("the replica answers again but is still not measured: %v", l.Err)
		}
	}
}
