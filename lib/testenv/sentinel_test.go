package testenv

import (
	"context"
	"testing"
	"time"
)

func TestSentinelsPromoteTheReplicaWhenThePrimaryDies(t *testing.T) {
	set := RedisWithSentinel(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rdb := set.Client(t)
	if err := rdb.Set(ctx, "k", "before", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Do(ctx, "WAIT", 1, 1000).Err(); err != nil {
		t.Fatal(err)
	}
	if m, err := set.Master(ctx); err != nil || m != set.Primary.Addr {
		t.Fatalf("master = %s, %v; want %s", m, err, set.Primary.Addr)
	}
	set.Primary.Kill()
	waitFor(t, ctx, "the replica promoted", func() bool {
		m, err := set.Master(ctx)
		return err == nil && m == set.Replica.Addr
	})
	if v, err := rdb.Get(ctx, "k").Result(); err != nil || v != "before" {
		t.Fatalf("after the failover k = %q, %v", v, err)
	}
	if err := rdb.Set(ctx, "k", "after", 0).Err(); err != nil {
		t.Fatalf("write after the failover: %v", err)
	}
}
