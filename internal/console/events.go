package console

import (
	"fmt"
	"net/http"
	"sync"
	"time"
)

// maxListeners bounds the pages following changes at once, and
// maxPerSession those of one session; past them a page is not updated
// by itself.
const (
	maxListeners  = 256
	maxPerSession = 8
)

// heartbeat keeps idle event streams open through proxies.
const heartbeat = 25 * time.Second

// hub fans change notices out to the open pages. A slow page misses
// notices rather than holding the publisher: each notice only says
// "reload", so one is as good as many.
type hub struct {
	mu        sync.Mutex
	listeners map[chan string]string
	bySession map[string]int
	max       int
}

func newHub(max int) *hub {
	return &hub{listeners: map[chan string]string{}, bySession: map[string]int{}, max: max}
}

// subscribe adds a listener for session key.
func (h *hub) subscribe(key string) (chan string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.listeners) >= h.max || h.bySession[key] >= maxPerSession {
		return nil, false
	}
	ch := make(chan string, 1)
	h.listeners[ch] = key
	h.bySession[key]++
	return ch, true
}

func (h *hub) unsubscribe(ch chan string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	key := h.listeners[ch]
	delete(h.listeners, ch)
	if h.bySession[key]--; h.bySession[key] <= 0 {
		delete(h.bySession, key)
	}
}

func (h *hub) publish(topic string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.listeners {
		select {
		case ch <- topic:
		default:
		}
	}
}

// eventStream serves /ui/events: server-sent events naming what changed,
// which console.js turns into a reload of the page's content.
func (c *Console) eventStream(w http.ResponseWriter, r *http.Request, q *request) error {
	flusher, ok := w.(http.Flusher)
	if !ok {
		return newPageError(http.StatusNotImplemented, "this connection cannot stream events")
	}
	ch, ok := c.events.subscribe(q.session.Key)
	if !ok {
		return newPageError(http.StatusServiceUnavailable, "too many pages are following changes; reload by hand")
	}
	defer c.events.unsubscribe(ch)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, "retry: 5000\n\n")
	flusher.Flush()
	tick := time.NewTicker(heartbeat)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return nil
		case topic := <-ch:
			if c.acc.revoked(r, q) {
				return nil
			}
			fmt.Fprintf(w, "event: change\ndata: %s\n\n", topic)
		case <-tick.C:
			if c.acc.revoked(r, q) {
				return nil
			}
			fmt.Fprint(w, ": still here\n\n")
		}
		flusher.Flush()
	}
}

// revoked reports whether the session of an open event stream was
// revoked or expired since it opened: the stream then ends, and the
// browser's reconnection is refused.
func (a *accounts) revoked(r *http.Request, q *request) bool {
	if q.session.local {
		return false
	}
	ok, err := a.sessions.exists(r.Context(), q.session.Key)
	return err == nil && !ok
}
