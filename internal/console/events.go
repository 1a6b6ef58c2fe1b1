package console

import (
	"fmt"
	"net/http"
	"sync"
	"time"
)

// maxListeners bounds the pages following changes at once on a replica,
// and maxPerSession those of one session; past them a page is not
// updated by itself. One identity's pages are bounded too (hub.perIdentity,
// ui.max_streams_per_identity), so that one reader signing in many times
// cannot take every slot.
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
	mu          sync.Mutex
	listeners   map[chan string]listener
	bySession   map[string]int
	byIdentity  map[string]int
	max         int
	perIdentity int
}

// listener is whose an open stream is.
type listener struct{ session, identity string }

func newHub(max, perIdentity int) *hub {
	return &hub{listeners: map[chan string]listener{}, bySession: map[string]int{}, byIdentity: map[string]int{}, max: max, perIdentity: perIdentity}
}

// subscribe adds a listener for a session of identity. It refuses one
// past the identity's share with 429, and past the session's or the
// replica's with 503.
func (h *hub) subscribe(session, identity string) (chan string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.byIdentity[identity] >= h.perIdentity {
		return nil, newPageError(http.StatusTooManyRequests, "%s already follows %d pages live, the most one identity may on this server (ui.max_streams_per_identity); close some or reload by hand", identity, h.perIdentity)
	}
	if len(h.listeners) >= h.max || h.bySession[session] >= maxPerSession {
		return nil, newPageError(http.StatusServiceUnavailable, "too many pages are following changes; reload by hand")
	}
	ch := make(chan string, 1)
	h.listeners[ch] = listener{session: session, identity: identity}
	h.bySession[session]++
	h.byIdentity[identity]++
	return ch, nil
}

func (h *hub) unsubscribe(ch chan string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	l := h.listeners[ch]
	delete(h.listeners, ch)
	if h.bySession[l.session]--; h.bySession[l.session] <= 0 {
		delete(h.bySession, l.session)
	}
	if h.byIdentity[l.identity]--; h.byIdentity[l.identity] <= 0 {
		delete(h.byIdentity, l.identity)
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
	ch, err := c.events.subscribe(q.session.Key, q.id.Name)
	if err != nil {
		return err
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
