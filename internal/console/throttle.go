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
	// maxTracked bounds the addresses remembered; past it expired records
	// are dropped, and new addresses share one record.
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

// client is the address failures are counted by: the connection's IP,
// or its /64 for IPv6, where one client holds a whole prefix. Proxies'
// forwarding headers are not trusted here.
func client(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip := net.ParseIP(host)
	if ip == nil || ip.To4() != nil {
		return host
	}
	return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
}

// overflow counts the failures of addresses that find the table full.
const overflow = "(overflow)"

// key is the record addr's failures are counted in.
func (t *throttle) key(addr string) string {
	if _, ok := t.seen[addr]; ok || len(t.seen) < maxTracked {
		return addr
	}
	return overflow
}

// allowed reports whether addr may try to sign in now.
func (t *throttle) allowed(addr string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	f := t.seen[t.key(addr)]
	if f == nil {
		return true
	}
	if t.now().Sub(f.since) >= failureWindow {
		delete(t.seen, t.key(addr))
		return true
	}
	return f.count < maxFailures
}

// failed records a failed sign-in from addr.
func (t *throttle) failed(addr string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	if _, ok := t.seen[addr]; !ok && len(t.seen) >= maxTracked {
		for k, v := range t.seen {
			if now.Sub(v.since) >= failureWindow {
				delete(t.seen, k)
			}
		}
	}
	// A full table keeps its records: new addresses share one, so filling
	// the table frees no one.
	k := t.key(addr)
	f := t.seen[k]
	if f == nil || now.Sub(f.since) >= failureWindow {
		f = &failures{since: now}
		t.seen[k] = f
	}
	f.count++
}
