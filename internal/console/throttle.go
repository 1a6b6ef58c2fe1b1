package console

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// Failed sign-ins are throttled per client address: maxFailures within
// failureWindow, then refusals until the window has passed. Tokens are
// long random strings, so this is about log noise and load more than
// guessing; it also bounds what a script can make preceptd hash.
const (
	maxFailures   = 10
	failureWindow = 5 * time.Minute
	// maxTracked bounds the addresses remembered; past it the oldest
	// records are dropped all at once.
	maxTracked = 10000
)

// throttle counts failed sign-ins per client address.
type throttle struct {
	mu   sync.Mutex
	now  func() time.Time
	seen map[string]*failures
}

type failures struct {
	count int
	since time.Time
}

func newThrottle(now func() time.Time) *throttle {
	return &throttle{now: now, seen: map[string]*failures{}}
}

// client is the address failures are counted by: the connection's IP.
// Proxies' forwarding headers are not trusted here.
func client(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// allowed reports whether addr may try to sign in now.
func (t *throttle) allowed(addr string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	f := t.seen[addr]
	if f == nil {
		return true
	}
	if t.now().Sub(f.since) >= failureWindow {
		delete(t.seen, addr)
		return true
	}
	return f.count < maxFailures
}

// failed records a failed sign-in from addr.
func (t *throttle) failed(addr string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	f := t.seen[addr]
	if f == nil || now.Sub(f.since) >= failureWindow {
		if len(t.seen) >= maxTracked {
			for k, v := range t.seen {
				if now.Sub(v.since) >= failureWindow {
					delete(t.seen, k)
				}
			}
			if len(t.seen) >= maxTracked {
				clear(t.seen)
			}
		}
		f = &failures{since: now}
		t.seen[addr] = f
	}
	f.count++
}
