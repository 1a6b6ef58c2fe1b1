package instructions

import (
	"context"
	"time"
)

// Retry bounds of Follow (docs/instructions.md, "After every merge"): a
// failed sync is tried again after DefaultRetry, doubling up to
// DefaultMaxRetry, or at once when a newer prompt arrives. An attempt
// still running after DefaultSyncTimeout is abandoned and counts as
// failed (docs/thresholds.md).
const (
	DefaultRetry       = 30 * time.Second
	DefaultMaxRetry    = 10 * time.Minute
	DefaultSyncTimeout = 5 * time.Minute
)

// FollowOptions configure Follow. The zero value means the defaults.
type FollowOptions struct {
	Retry, MaxRetry time.Duration
	// Timeout bounds each attempt; default DefaultSyncTimeout.
	Timeout time.Duration
	// Report sees the outcome of every attempt.
	Report func(Block, Result, error)
}

// SyncFunc syncs one block to one target.
type SyncFunc func(context.Context, Block) (Result, error)

// Follow syncs each block that arrives on blocks, always the latest: a
// block that arrives while a sync runs waits, and replaces any older one
// waiting. A failed sync (the remote down, a hand edit refused) is tried
// again after a backoff, or with the newer block as soon as one arrives.
// Follow returns when ctx ends or blocks is closed.
func Follow(ctx context.Context, blocks <-chan Block, sync SyncFunc, opts FollowOptions) {
	if opts.Retry <= 0 {
		opts.Retry = DefaultRetry
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultSyncTimeout
	}
	if opts.MaxRetry < opts.Retry {
		opts.MaxRetry = max(DefaultMaxRetry, opts.Retry)
	}
	var (
		pending Block
		have    bool
		wait    = opts.Retry
		retry   <-chan time.Time
	)
	for {
		if !have {
			select {
			case <-ctx.Done():
				return
			case b, ok := <-blocks:
				if !ok {
					return
				}
				pending, have, wait, retry = b, true, opts.Retry, nil
			}
		}
		if retry != nil {
			select {
			case <-ctx.Done():
				return
			case b, ok := <-blocks:
				if !ok {
					return
				}
				pending, wait = b, opts.Retry
			case <-retry:
			}
			retry = nil
		}
		attempt, cancel := context.WithTimeout(ctx, opts.Timeout)
		res, err := sync(attempt, pending)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if opts.Report != nil {
			opts.Report(pending, res, err)
		}
		if err == nil {
			have = false
			continue
		}
		retry = time.After(wait)
		wait = min(2*wait, opts.MaxRetry)
	}
}
