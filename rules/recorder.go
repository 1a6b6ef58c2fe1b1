package rules

import (
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/precept-dev/precept/rules/gitstore"
	"github.com/precept-dev/precept/rules/rulefmt"
)

// notifier tells the OnChange listeners about every committed transition,
// and with a remote asks the Manager's Run to push soon after.
type notifier struct {
	mu    sync.RWMutex
	hooks []func(rulefmt.Change)
	// kick is nil without a remote.
	kick chan struct{}
}

func (n *notifier) add(fn func(rulefmt.Change)) {
	n.mu.Lock()
	n.hooks = append(n.hooks, fn)
	n.mu.Unlock()
}

func (n *notifier) emit(c rulefmt.Change) {
	n.mu.RLock()
	hooks := slices.Clone(n.hooks)
	n.mu.RUnlock()
	for _, fn := range hooks {
		fn(c)
	}
	if n.kick != nil {
		select {
		case n.kick <- struct{}{}:
		default:
		}
	}
}

// recorder is what the Manager and Upkeep share to read proposals and
// rules and to record decisions: the store, the remote's settings (for
// the links a proposal carries), the clock, the log and the listeners.
type recorder struct {
	store      *gitstore.Store
	remoteOpts *Remote
	clock      func() time.Time
	log        *slog.Logger
	notify     *notifier
}

func (rc *recorder) now() time.Time { return rc.clock().UTC().Truncate(time.Second) }

func (rc *recorder) emit(c rulefmt.Change) { rc.notify.emit(c) }
