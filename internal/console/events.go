package console

import (
	"fmt"
	"net/http"
	"sync"
	"time"
)

// maxListeners bounds the pages following changes at once; past it a
// page falls back to its own reload button.
const maxListeners = 256

// heartbeat keeps idle event streams open through proxies.
const heartbeat = 25 * time.Second

// hub fans change notices out to the open pages. A slow page misses
// notices rather than holding the publisher: each notice only says
// "reload", so one is as good as many.
type hub struct {
	mu        sync.Mutex
	listeners map[chan string]struct{}
	max       int
}

func newHub(max int) *hub { return &hub{listeners: map[chan string]struct{}{}, max: max} }

func (h *hub) subscribe() (chan string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.listeners) >= h.max {
		return nil, false
	}
	ch := make(chan string, 1)
	h.listeners[ch] = struct{}{}
	return ch, true
}

func (h *hub) unsubscribe(ch chan string) {
	h.mu.Lock()
	delete(h.listeners, ch)
	h.mu.Unlock()
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
	ch, ok := c.events.subscribe()
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
			fmt.Fprintf(w, "event: change\ndata: %s\n\n", topic)
		case <-tick.C:
			fmt.Fprint(w, ": still here\n\n")
		}
		flusher.Flush()
	}
}
