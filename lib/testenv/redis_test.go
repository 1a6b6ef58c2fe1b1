package testenv

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestRedisServesStreamsOnLoopback(t *testing.T) {
	addr := Redis(t)
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("split %q: %v", addr, err)
	}
	if host != "127.0.0.1" {
		t.Errorf("host = %q, want 127.0.0.1", host)
	}
	rdb := RedisClient(t, addr)
	ctx := context.Background()
	if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: "s", Values: []any{"f", "v"}}).Err(); err != nil {
		t.Fatalf("XADD: %v", err)
	}
	n, err := rdb.XLen(ctx, "s").Result()
	if err != nil || n != 1 {
		t.Fatalf("XLEN = %d, %v; want 1", n, err)
	}
	// Persistence is off, so nothing survives in the working directory.
	if save, err := rdb.ConfigGet(ctx, "save").Result(); err != nil || save["save"] != "" {
		t.Errorf("CONFIG GET save = %v, %v; want empty", save, err)
	}
}

func TestRedisStartsIsolatedServersPerCall(t *testing.T) {
	a, b := Redis(t), Redis(t)
	if a == b {
		t.Fatalf("both servers on %s", a)
	}
	ctx := context.Background()
	if err := RedisClient(t, a).Set(ctx, "k", "a", 0).Err(); err != nil {
		t.Fatalf("SET on first server: %v", err)
	}
	if n, err := RedisClient(t, b).Exists(ctx, "k").Result(); err != nil || n != 0 {
		t.Errorf("EXISTS k on second server = %d, %v; want 0", n, err)
	}
}

func TestRedisIsStoppedWhenTheTestEnds(t *testing.T) {
	var addr string
	t.Run("inner", func(t *testing.T) {
		addr = Redis(t)
	})
	deadline := time.Now().Add(5 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			return
		}
		conn.Close()
		if time.Now().After(deadline) {
			t.Fatalf("redis-server on %s still accepts connections after its test ended", addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
