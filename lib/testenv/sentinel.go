package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SentinelMaster is the master name RedisWithSentinel's sentinels watch.
const SentinelMaster = "precept"

// SentinelSet is a Redis primary, one replica and three sentinels on
// loopback, as a production deployment with failover runs them.
type SentinelSet struct {
	Primary, Replica *RedisServer
	Sentinels        []*RedisServer
}

// SentinelAddrs returns the sentinels' addresses.
func (s *SentinelSet) SentinelAddrs() []string {
	var out []string
	for _, x := range s.Sentinels {
		out = append(out, x.Addr)
	}
	return out
}

// Client returns a failover client, closed when the test ends: what a
// producer that survives a failover uses.
func (s *SentinelSet) Client(t testing.TB) *redis.Client {
	t.Helper()
	rdb := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: SentinelMaster, SentinelAddrs: s.SentinelAddrs(), MaxRetries: 20, MinRetryBackoff: 50 * time.Millisecond, MaxRetryBackoff: 500 * time.Millisecond})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// Master asks a sentinel for the primary's address.
func (s *SentinelSet) Master(ctx context.Context) (string, error) {
	for _, x := range s.Sentinels {
		sc := redis.NewSentinelClient(&redis.Options{Addr: x.Addr})
		addr, err := sc.GetMasterAddrByName(ctx, SentinelMaster).Result()
		sc.Close()
		if err == nil && len(addr) == 2 {
			return addr[0] + ":" + addr[1], nil
		}
	}
	return "", fmt.Errorf("no sentinel names a primary for %s", SentinelMaster)
}

// RedisWithSentinel starts Debian's redis-server as a primary (with an
// append-only file synced on every write), a replica of it, and three
// sentinels (redis-server --sentinel) that agree on a failover with two
// votes after the primary has not answered for half a second. It returns
// once the replica is in sync and every sentinel sees the replica and
// the other sentinels. Everything is killed when the test ends.
func RedisWithSentinel(t testing.TB) *SentinelSet {
	t.Helper()
	set := &SentinelSet{Primary: startServer(t, true)}
	set.Replica = startConfigured(t, true, func(s *RedisServer) {
		s.args = []string{"--replicaof", "127.0.0.1", strings.Split(set.Primary.Addr, ":")[1]}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	replica := redis.NewClient(&redis.Options{Addr: set.Replica.Addr})
	waitFor(t, ctx, "the replica in sync", func() bool {
		info, err := replica.Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, "master_link_status:up")
	})
	replica.Close()
	port := strings.Split(set.Primary.Addr, ":")[1]
	for range 3 {
		set.Sentinels = append(set.Sentinels, startConfigured(t, false, func(s *RedisServer) {
			s.conf = filepath.Join(s.dir, fmt.Sprintf("sentinel-%d.conf", s.port))
			conf := fmt.Sprintf("sentinel monitor %[1]s 127.0.0.1 %[2]s 2\nsentinel down-after-milliseconds %[1]s 500\nsentinel failover-timeout %[1]s 3000\nsentinel parallel-syncs %[1]s 1\n", SentinelMaster, port)
			if err := os.WriteFile(s.conf, []byte(conf), 0o644); err != nil {
				t.Fatal(err)
			}
		}))
	}
	for _, x := range set.Sentinels {
		sc := redis.NewSentinelClient(&redis.Options{Addr: x.Addr})
		waitFor(t, ctx, "sentinel "+x.Addr+" to see the replica and two sentinels", func() bool {
			replicas, err := sc.Replicas(ctx, SentinelMaster).Result()
			if err != nil || len(replicas) == 0 {
				return false
			}
			others, err := sc.Sentinels(ctx, SentinelMaster).Result()
			return err == nil && len(others) == 2
		})
		sc.Close()
	}
	return set
}

func waitFor(t testing.TB, ctx context.Context, what string, ok func() bool) {
	t.Helper()
	for !ok() {
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
