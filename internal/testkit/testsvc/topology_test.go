package testsvc_test

import (
	"context"
	"testing"

	"github.com/tunefleet/tunefleet/internal/testkit/testsvc"
	"github.com/tunefleet/tunefleet/runstate"
)

// The topologies answer through the URLs --redis takes, and their faults
// move the master: a manual cluster failover of a key's slot, a killed
// Sentinel master.
func TestRedisTopologies(t *testing.T) {
	ctx := context.Background()
	t.Run("cluster", func(t *testing.T) {
		c := testsvc.OwnRedisCluster(t)
		rdb, err := runstate.ConnectRedis(ctx, c.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer rdb.Close()
		if err := rdb.Set(ctx, "{k}a", "1", 0).Err(); err != nil {
			t.Fatal(err)
		}
		before := c.Failover(t, "{k}a")
		after, err := c.ShardOf(ctx, "{k}a")
		if err != nil || after.Master != before.Replica || after.Replica != before.Master {
			t.Fatalf("after the failover the shard is %+v (%v), want master %s and replica %s", after, err, before.Replica, before.Master)
		}
		if v, err := rdb.Get(ctx, "{k}a").Result(); err != nil || v != "1" {
			t.Fatalf("GET after the failover: %q, %v", v, err)
		}
	})
	t.Run("sentinel", func(t *testing.T) {
		s := testsvc.OwnRedisSentinel(t)
		rdb, err := runstate.ConnectRedis(ctx, s.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer rdb.Close()
		if err := rdb.Set(ctx, "k", "1", 0).Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Master.Do(ctx, "WAIT", "1", "5000"); err != nil {
			t.Fatal(err)
		}
		s.KillMaster(t)
		if m, err := s.MasterAddr(ctx); err != nil || m != s.Replica.Addr {
			t.Fatalf("master after the kill: %s (%v), want %s", m, err, s.Replica.Addr)
		}
		if v, err := rdb.Get(ctx, "k").Result(); err != nil || v != "1" {
			t.Fatalf("GET after the failover: %q, %v", v, err)
		}
	})
}
