package mcpserver

import (
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The server's bounds (docs/thresholds.md). A token's identity is its
// digest (auth.TokenInfo.UserID); over stdio, and without auth.tokens,
// every caller has the same identity, "".
const (
	// DefaultSessionTimeout is how long an HTTP session may go without a
	// request in progress (a POST, or a GET event stream open) before
	// preceptd closes it.
	DefaultSessionTimeout = 30 * time.Minute
	// MaxSessions bounds the live HTTP sessions; an initialize beyond it
	// is refused with 503.
	MaxSessions = 256
	// MaxSessionsPerToken bounds the live HTTP sessions of one token; an
	// initialize beyond it is refused with 429.
	MaxSessionsPerToken = 32
	// MaxWatches bounds the rules resources followed at once, each with a
	// WatchPrompt stream and a goroutine; a subscription to one more is
	// refused (subscribers of one resource share its stream).
	MaxWatches = 256
	// MaxSubscriptionsPerSession bounds one session's subscriptions.
	MaxSubscriptionsPerSession = 16
	// MaxSubscriptionsPerToken bounds the subscriptions of one token's
	// sessions together.
	MaxSubscriptionsPerToken = 64
)

// limits are a server's bounds: the constants above, lowered in tests.
type limits struct {
	sessionTimeout           time.Duration
	sessions                 int
	sessionsPerIdentity      int
	watches                  int
	subscriptionsPerSession  int
	subscriptionsPerIdentity int
}

func defaultLimits() limits {
	return limits{
		sessionTimeout:           DefaultSessionTimeout,
		sessions:                 MaxSessions,
		sessionsPerIdentity:      MaxSessionsPerToken,
		watches:                  MaxWatches,
		subscriptionsPerSession:  MaxSubscriptionsPerSession,
		subscriptionsPerIdentity: MaxSubscriptionsPerToken,
	}
}

// sessionIDHeader names an HTTP request's session (the MCP spec's).
const sessionIDHeader = "Mcp-Session-Id"

// openSessions counts the live HTTP sessions, in total and per identity,
// and closes each after sessionTimeout without a request in progress.
// The SDK's own idle timer is off: it runs between POSTs only, so it
// would close the session of a subscriber that only listens on its
// event stream.
type openSessions struct {
	mu sync.Mutex
	// total and byIdentity count the live sessions and the initializes
	// under way, which may become sessions.
	total      int
	byIdentity map[string]int
	byID       map[string]*liveSession
}

// liveSession is a live HTTP session: its requests in progress, and the
// timer that closes it when it has none for long enough.
type liveSession struct {
	identity string
	timeout  time.Duration
	active   int
	timer    *time.Timer
}

// limitSessions refuses an initialize beyond the bounds, counts the
// sessions made, and keeps each open while a request of it is in
// progress. It runs behind authentication, which puts the token's
// information in the request.
func (s *Server) limitSessions(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := ""
		if ti := auth.TokenInfoFromContext(r.Context()); ti != nil {
			id = ti.UserID
		}
		if sid := r.Header.Get(sessionIDHeader); sid != "" {
			defer s.open.busy(sid, id)()
			h.ServeHTTP(w, r)
			return
		}
		if r.Method != http.MethodPost {
			h.ServeHTTP(w, r) // the SDK answers: no session
			return
		}
		if status, msg := s.open.reserve(id, s.limits); status != 0 {
			w.Header().Set("Retry-After", "60")
			http.Error(w, msg, status)
			return
		}
		// The session is counted as its id is answered, before the client
		// can use it (its event stream may open before this returns).
		var ss *mcp.ServerSession
		h.ServeHTTP(&answer{ResponseWriter: w, header: func() {
			if ss = s.session(w.Header().Get(sessionIDHeader)); ss != nil {
				s.open.opened(ss, id, s.limits.sessionTimeout)
			}
		}}, r)
		if ss == nil {
			s.open.release(id, "")
			return
		}
		if ss.InitializeParams() == nil {
			// Not an initialize: the SDK closed the session it made.
			s.open.release(id, ss.ID())
			return
		}
		go func() {
			_ = ss.Wait()
			s.open.release(id, ss.ID())
		}()
	})
}

// answer is a ResponseWriter that calls header once, before the header is
// sent.
type answer struct {
	http.ResponseWriter
	header func()
	once   sync.Once
}

func (a *answer) WriteHeader(status int) {
	a.once.Do(a.header)
	a.ResponseWriter.WriteHeader(status)
}

func (a *answer) Write(b []byte) (int, error) {
	a.once.Do(a.header)
	return a.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer (the
// SDK flushes event streams through it).
func (a *answer) Unwrap() http.ResponseWriter { return a.ResponseWriter }

// session returns the live session with the id, or nil.
func (s *Server) session(id string) *mcp.ServerSession {
	if id == "" {
		return nil
	}
	for ss := range s.mcp.Sessions() {
		if ss.ID() == id {
			return ss
		}
	}
	return nil
}

// reserve counts an initialize of identity id, or says why it is
// refused: a status and a message.
func (o *openSessions) reserve(id string, l limits) (int, string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.byIdentity[id] >= l.sessionsPerIdentity {
		return http.StatusTooManyRequests, fmt.Sprintf("this token has %d MCP sessions open, the bound: end one (DELETE /mcp with its Mcp-Session-Id) or wait for one to time out", l.sessionsPerIdentity)
	}
	if o.total >= l.sessions {
		return http.StatusServiceUnavailable, fmt.Sprintf("preceptd has %d MCP sessions open, the bound: try again later", l.sessions)
	}
	o.total++
	o.byIdentity[id]++
	return 0, ""
}

// opened starts the idle timer of a session made.
func (o *openSessions) opened(ss *mcp.ServerSession, id string, timeout time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.byID == nil {
		o.byID = map[string]*liveSession{}
	}
	o.byID[ss.ID()] = &liveSession{identity: id, timeout: timeout, timer: time.AfterFunc(timeout, func() { _ = ss.Close() })}
}

// release uncounts an initialize of identity id, and the session sid it
// made if any.
func (o *openSessions) release(id, sid string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.total--
	if o.byIdentity[id]--; o.byIdentity[id] <= 0 {
		delete(o.byIdentity, id)
	}
	if ls, ok := o.byID[sid]; ok {
		ls.timer.Stop()
		delete(o.byID, sid)
	}
}

// busy pauses a session's idle timer for a request of the identity that
// opened it (the SDK refuses another's), and returns the function that
// resumes it when the request ends.
func (o *openSessions) busy(sid, id string) func() {
	o.mu.Lock()
	defer o.mu.Unlock()
	ls, ok := o.byID[sid]
	if !ok || ls.identity != id {
		return func() {}
	}
	if ls.active++; ls.active == 1 {
		ls.timer.Stop()
	}
	return func() {
		o.mu.Lock()
		defer o.mu.Unlock()
		if ls.active--; ls.active == 0 && o.byID[sid] == ls {
			ls.timer.Reset(ls.timeout)
		}
	}
}
