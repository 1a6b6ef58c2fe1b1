package instructions

import (
	"context"
	"errors"
	"testing"
	"time"
)

// follow runs Follow until the test ends and returns its attempts, each
// answered by the error the test sends on answers.
func follow(t *testing.T, opts FollowOptions) (blocks chan Block, attempts chan string, answers chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	blocks = make(chan Block, 1)
	attempts = make(chan string, 16)
	answers = make(chan error, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		Follow(ctx, blocks, func(ctx context.Context, b Block) (Result, error) {
			attempts <- b.Version
			select {
			case err := <-answers:
				return Result{}, err
			case <-ctx.Done():
				return Result{}, ctx.Err()
			}
		}, opts)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Error("Follow did not return when its context ended")
		}
	})
	return blocks, attempts, answers
}

func next(t *testing.T, attempts chan string, within time.Duration) string {
	t.Helper()
	select {
	case v := <-attempts:
		return v
	case <-time.After(within):
		t.Fatalf("no attempt within %v", within)
		return ""
	}
}

func quiet(t *testing.T, attempts chan string, d time.Duration) {
	t.Helper()
	select {
	case v := <-attempts:
		t.Fatalf("unexpected attempt with %s", v)
	case <-time.After(d):
	}
}

func TestFollowRetriesAFailedSyncThenStops(t *testing.T) {
	blocks, attempts, answers := follow(t, FollowOptions{Retry: 20 * time.Millisecond, MaxRetry: 40 * time.Millisecond})
	answers <- errors.New("remote down")
	answers <- errors.New("remote down")
	answers <- nil
	blocks <- Block{Version: "v1"}
	for i := 0; i < 3; i++ {
		if v := next(t, attempts, 5*time.Second); v != "v1" {
			t.Fatalf("attempt %d with %s", i, v)
		}
	}
	// Once synced, nothing more is tried until a new block arrives.
	quiet(t, attempts, 200*time.Millisecond)
}

func TestFollowSyncsANewerBlockAtOnceInsteadOfRetryingTheOld(t *testing.T) {
	blocks, attempts, answers := follow(t, FollowOptions{Retry: time.Hour})
	answers <- errors.New("remote down")
	blocks <- Block{Version: "v1"}
	if v := next(t, attempts, 5*time.Second); v != "v1" {
		t.Fatalf("first attempt with %s", v)
	}
	// The retry is an hour away: v2 must not wait for it.
	answers <- nil
	blocks <- Block{Version: "v2"}
	if v := next(t, attempts, time.Second); v != "v2" {
		t.Fatalf("after v2 arrived, an attempt with %s", v)
	}
	quiet(t, attempts, 200*time.Millisecond)
}

func TestFollowAbandonsAnAttemptPastItsTimeout(t *testing.T) {
	reports := make(chan error, 4)
	blocks, attempts, answers := follow(t, FollowOptions{Retry: 20 * time.Millisecond, Timeout: 50 * time.Millisecond,
		Report: func(_ Block, _ Result, err error) { reports <- err }})
	blocks <- Block{Version: "v1"} // never answered: it hangs until the timeout
	next(t, attempts, 5*time.Second)
	select {
	case err := <-reports:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("report %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a hung attempt was never abandoned")
	}
	answers <- nil
	if v := next(t, attempts, 5*time.Second); v != "v1" {
		t.Fatalf("retry with %s", v)
	}
}
