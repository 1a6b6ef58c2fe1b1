package slackapp

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/precept-dev/precept/lib/testenv"
)

// storeContract is what every Store must do; wait lets time pass for
// expiries (a fake clock, or real time for Redis).
func storeContract(t *testing.T, s Store, wait func(time.Duration)) {
	ctx := context.Background()
	t.Run("a claim is held once until released", func(t *testing.T) {
		if ok, err := s.Claim(ctx, "c1", time.Minute); err != nil || !ok {
			t.Fatalf("first claim = %v, %v", ok, err)
		}
		if ok, err := s.Claim(ctx, "c1", time.Minute); err != nil || ok {
			t.Fatalf("second claim = %v, %v", ok, err)
		}
		if err := s.Release(ctx, "c1"); err != nil {
			t.Fatal(err)
		}
		if ok, err := s.Claim(ctx, "c1", time.Minute); err != nil || !ok {
			t.Fatalf("claim after release = %v, %v", ok, err)
		}
	})
	t.Run("concurrent claims have one winner", func(t *testing.T) {
		var wins atomic.Int32
		var wg sync.WaitGroup
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if ok, err := s.Claim(ctx, "race", time.Minute); err == nil && ok {
					wins.Add(1)
				}
			}()
		}
		wg.Wait()
		if wins.Load() != 1 {
			t.Fatalf("%d winners", wins.Load())
		}
	})
	t.Run("claims and values expire", func(t *testing.T) {
		if ok, _ := s.Claim(ctx, "short", 200*time.Millisecond); !ok {
			t.Fatal("not claimed")
		}
		if err := s.Set(ctx, "v-short", "x", 200*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		wait(300 * time.Millisecond)
		if ok, err := s.Claim(ctx, "short", time.Minute); err != nil || !ok {
			t.Fatalf("claim after expiry = %v, %v", ok, err)
		}
		if _, ok, err := s.Get(ctx, "v-short"); err != nil || ok {
			t.Fatalf("value after expiry: ok=%v err=%v", ok, err)
		}
	})
	t.Run("values are set and read", func(t *testing.T) {
		if _, ok, err := s.Get(ctx, "missing"); err != nil || ok {
			t.Fatalf("missing key: ok=%v err=%v", ok, err)
		}
		if err := s.Set(ctx, "k", "v1", time.Minute); err != nil {
			t.Fatal(err)
		}
		if err := s.Set(ctx, "k", "v2", time.Minute); err != nil {
			t.Fatal(err)
		}
		if v, ok, err := s.Get(ctx, "k"); err != nil || !ok || v != "v2" {
			t.Fatalf("Get = %q %v %v", v, ok, err)
		}
	})
}

func TestMemoryStoreKeepsTheStoreContract(t *testing.T) {
	c := newClock()
	storeContract(t, NewMemoryStore(c.Now), c.Advance)
}

func TestRedisStoreKeepsTheStoreContract(t *testing.T) {
	addr := testenv.Redis(t)
	rdb := testenv.RedisClient(t, addr)
	s := NewRedisStore(rdb, "precept:slack:")
	storeContract(t, s, time.Sleep)
	// Keys live under the prefix.
	keys, err := rdb.Keys(context.Background(), "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if len(k) < 14 || k[:14] != "precept:slack:" {
			t.Errorf("key %q outside the prefix", k)
		}
	}
}
