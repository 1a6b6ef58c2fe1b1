package instructions

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

func TestFollowSyncsTheLatestBlockAndRetriesFailures(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	blocks := make(chan Block, 1)
	var mu sync.Mutex
	var synced []string
	fail := true
	attempts := make(chan string, 16)
	syncFn := func(ctx context.Context, b Block) (Result, error) {
		mu.Lock()
		defer mu.Unlock()
		attempts <- b.Version
		if fail {
			return Result{}, errors.New("remote down")
		}
		synced = append(synced, b.Version)
		return Result{}, nil
	}
	done := make(chan struct{})
	go func() {
		Follow(ctx, blocks, syncFn, FollowOptions{Retry: 20 * time.Millisecond, MaxRetry: 40 * time.Millisecond})
		close(done)
	}()

	blocks <- Block{Version: "v1"}
	if v := <-attempts; v != "v1" {
		t.Fatalf("first attempt %s", v)
	}
	if v := <-attempts; v != "v1" {
		t.Fatalf("retry %s", v)
	}
	// A newer block replaces the failing one at once.
	mu.Lock()
	fail = false
	mu.Unlock()
	blocks <- Block{Version: "v2"}
	deadline := time.After(5 * time.Second)
	for {
		mu.Lock()
		n := len(synced)
		last := ""
		if n > 0 {
			last = synced[n-1]
		}
		mu.Unlock()
		if last == "v2" {
			break
		}
		select {
		case <-deadline:
			t.Fatalf("v2 never synced: %v", synced)
		case <-time.After(5 * time.Millisecond):
		}
	}
	// Once synced, nothing more is tried until a new block arrives.
	for len(attempts) > 0 {
		<-attempts
	}
	time.Sleep(100 * time.Millisecond)
	if len(attempts) != 0 {
		t.Fatal("a successful sync was tried again")
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Follow did not return when its context ended")
	}
}
