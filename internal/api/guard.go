package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/semaphore"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/gen/precept/v1/preceptv1connect"
	"github.com/precept-dev/precept/lib/text"
)

// rpcPrefix starts the path of every precept RPC: the procedures the
// guard authenticates. Health and reflection stay open, as /metrics and
// the probes do.
var rpcPrefix = "/" + strings.TrimSuffix(preceptv1connect.PingServiceName, "PingService")

// isRPC reports whether a path is a procedure of a Connect handler:
// precept's own, health or reflection. Refusals there take the form of
// the caller's RPC protocol.
func isRPC(path string) bool {
	return strings.HasPrefix(path, rpcPrefix) || strings.HasPrefix(path, "/grpc.")
}

// signedPrefix starts the paths Slack calls: they are authenticated by
// Slack's signature, and reach preceptd through tunnels and proxies under
// other host names.
const signedPrefix = "/slack/"

// drainGrace is how long a refused HTTP/1.x request's small body may
// take to arrive before its connection is closed anyway.
const drainGrace = 250 * time.Millisecond

// growStep is how much more of the in-flight bound a body of unknown
// length (HTTP/2, chunked) takes each time it needs more.
const growStep = 32 << 10

// GuardOptions bounds what requests may cost (docs/thresholds.md). Zero
// values mean no bound; internal/config supplies the defaults.
type GuardOptions struct {
	// BodyTimeout bounds how long a body may take to arrive once the
	// headers have.
	BodyTimeout time.Duration
	// MaxBodyBytes refuses a body declared larger before it is read.
	MaxBodyBytes int64
	// MaxInFlightBodyBytes bounds the body bytes of all requests being
	// received or answered at once.
	MaxInFlightBodyBytes int64
	// InFlightWait is how long a request waits for room before it is
	// refused.
	InFlightWait time.Duration
	// Registerer, when set, receives the guard's metrics.
	Registerer prometheus.Registerer
	// TokenPaths are paths outside the RPCs that the guard authenticates
	// as it does them, and whose bodies it bounds as theirs: any valid
	// token passes (the reader role), and the handler decides what each
	// request may do. preceptd's MCP endpoint is one (docs/mcp.md).
	TokenPaths []string
}

// Guard is the HTTP middleware in front of every handler. From the
// headers alone, before any byte of the body is read, it refuses:
// without tokens, a Host that is not a loopback name (a DNS-rebinding
// page would otherwise act as the local admin); a precept RPC without a
// valid token or with too low a role; a body declared larger than
// MaxBodyBytes; a body that finds no room under MaxInFlightBodyBytes
// within InFlightWait. It then gives the body BodyTimeout to arrive.
// Refusals take the form the caller's protocol expects (a Connect JSON
// error, a gRPC status in trailers, or plain HTTP), and a refused
// HTTP/1.x connection with a body pending is closed after the answer.
type Guard struct {
	auth     *Authenticator
	opts     GuardOptions
	errors   *connect.ErrorWriter
	inFlight *semaphore.Weighted
	// open bounds the bodies of requests the guard does not authenticate
	// (health, reflection, Slack, anything else): they cannot take room
	// from authenticated RPCs.
	open *semaphore.Weighted

	refused *prometheus.CounterVec
	held    prometheus.Gauge
}

// NewGuard returns a guard that authenticates with auth.
func NewGuard(auth *Authenticator, opts GuardOptions) *Guard {
	g := &Guard{
		auth:   auth,
		opts:   opts,
		errors: connect.NewErrorWriter(),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "precept_http_refused_total",
			Help: "Requests refused from their headers before their body was read, by reason.",
		}, []string{"reason"}),
		held: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "precept_http_body_bytes_in_flight",
			Help: "Request body bytes held by requests being received or answered.",
		}),
	}
	if opts.MaxInFlightBodyBytes > 0 {
		g.inFlight = semaphore.NewWeighted(opts.MaxInFlightBodyBytes)
		g.open = semaphore.NewWeighted(min(opts.MaxInFlightBodyBytes, openInFlightBytes))
	}
	if opts.Registerer != nil {
		opts.Registerer.MustRegister(g.refused, g.held)
	}
	return g
}

// Wrap returns next behind the guard.
func (g *Guard) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g.auth.Open() && !strings.HasPrefix(r.URL.Path, signedPrefix) && !LoopbackHost(r.Host) {
			g.refuse(w, r, connect.CodePermissionDenied, "host", fmt.Sprintf(
				"Host %q is not a loopback name: without API tokens preceptd answers only requests addressed to localhost, 127.0.0.1 or [::1] (a guard against DNS rebinding); configure auth.tokens to serve other names",
				text.Truncate(r.Host, 64)))
			return
		}
		authenticated := strings.HasPrefix(r.URL.Path, rpcPrefix) || slices.Contains(g.opts.TokenPaths, r.URL.Path)
		if authenticated {
			if err := g.authorize(r); err != nil {
				g.refuse(w, r, connect.CodeOf(err), connect.CodeOf(err).String(), err.Message())
				return
			}
		}
		if r.ContentLength == 0 {
			next.ServeHTTP(w, r)
			return
		}
		if limit := g.opts.MaxBodyBytes; limit > 0 && r.ContentLength > limit {
			g.refuse(w, r, connect.CodeResourceExhausted, "too_large",
				fmt.Sprintf("the request body of %d bytes is larger than the limit of %d (server.max_body_bytes)", r.ContentLength, limit))
			return
		}
		if !authenticated && r.ContentLength > openMaxBodyBytes {
			g.refuse(w, r, connect.CodeResourceExhausted, "too_large",
				fmt.Sprintf("the request body of %d bytes is larger than the limit of %d for %s", r.ContentLength, openMaxBodyBytes, text.Truncate(r.URL.Path, 64)))
			return
		}
		pool := g.inFlight
		if !authenticated {
			pool = g.open
		}
		body := &guardedBody{src: r.Body, g: g, pool: pool, ctx: r.Context(), declared: r.ContentLength > 0}
		if body.declared && !body.take(r.ContentLength) {
			g.refuse(w, r, connect.CodeResourceExhausted, "busy", g.busyMessage())
			return
		}
		defer body.release()
		if g.opts.BodyTimeout > 0 {
			// On HTTP/1.1 net/http clears the deadline when the body
			// ends, and on HTTP/2 it only closes the body: a streamed
			// answer outlives it.
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(g.opts.BodyTimeout))
		}
		// A copy of the request, so net/http still sees its own body.
		guarded := *r
		guarded.Body = body
		next.ServeHTTP(w, &guarded)
	})
}

// authorize checks a precept RPC's token and role from its headers.
func (g *Guard) authorize(r *http.Request) *connect.Error {
	id, err := g.auth.Identify(r.Header)
	if err != nil {
		return unauthenticated(err)
	}
	need := RequiredRole(r.URL.Path)
	if slices.Contains(g.opts.TokenPaths, r.URL.Path) {
		need = precept.RoleReader
	}
	if !id.Allows(need) {
		return permissionDenied(id, r.URL.Path, need)
	}
	return nil
}

func (g *Guard) busyMessage() string {
	return fmt.Sprintf("the server is receiving %d bytes of request bodies, its bound (server.max_in_flight_body_bytes); retry shortly", g.opts.MaxInFlightBodyBytes)
}

// refuse answers a request the guard will not serve, counting it by
// reason. The guard reads none of the body: an HTTP/1.x connection that
// still has one to send is closed after the answer.
func (g *Guard) refuse(w http.ResponseWriter, r *http.Request, code connect.Code, reason, msg string) {
	g.refused.WithLabelValues(reason).Inc()
	if r.ProtoMajor == 1 && r.ContentLength != 0 {
		w.Header().Set("Connection", "close")
		// net/http reads up to 256 KiB of a small body after the answer
		// (a larger one it leaves unread); what has arrived is read at
		// once, so the connection closes cleanly, and a client that
		// stalls is not waited for beyond drainGrace.
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(drainGrace))
	}
	switch code {
	case connect.CodeUnauthenticated:
		w.Header().Set("WWW-Authenticate", `Bearer realm="precept"`)
	case connect.CodeResourceExhausted:
		w.Header().Set("Retry-After", "1")
	}
	if isRPC(r.URL.Path) && g.errors.IsSupported(r) {
		_ = g.errors.Write(w, r, connect.NewError(code, errors.New(msg)))
		return
	}
	status := map[connect.Code]int{
		connect.CodeUnauthenticated:   http.StatusUnauthorized,
		connect.CodePermissionDenied:  http.StatusForbidden,
		connect.CodeResourceExhausted: http.StatusServiceUnavailable,
	}[code]
	if reason == "too_large" {
		status = http.StatusRequestEntityTooLarge
	}
	http.Error(w, msg, status)
}

// Bounds on the requests the guard does not authenticate (health,
// reflection, Slack): Slack's own cap is 1 MiB, health and reflection
// take 64 KiB, and together they hold at most 8 MiB at once.
const (
	openMaxBodyBytes  = 1 << 20
	openInFlightBytes = 8 << 20
)

// acquire takes n bytes of a pool, waiting up to InFlightWait; without a
// bound it always succeeds.
func (g *Guard) acquire(ctx context.Context, pool *semaphore.Weighted, n int64) bool {
	if pool == nil || n <= 0 {
		return true
	}
	if pool.TryAcquire(n) {
		g.held.Add(float64(n))
		return true
	}
	ctx, cancel := context.WithTimeout(ctx, g.opts.InFlightWait)
	defer cancel()
	if pool.Acquire(ctx, n) != nil {
		return false
	}
	g.held.Add(float64(n))
	return true
}

func (g *Guard) releaseBytes(pool *semaphore.Weighted, n int64) {
	if pool == nil || n <= 0 {
		return
	}
	pool.Release(n)
	g.held.Sub(float64(n))
}

// guardedBody reads a request body within the in-flight bound: it holds
// what was declared (or, without a Content-Length, takes more in steps as
// it reads), gives back what it did not use when the body ends, and keeps
// the rest until the handler returns. A read past the body deadline
// fails with deadline_exceeded.
type guardedBody struct {
	src  io.ReadCloser
	g    *Guard
	pool *semaphore.Weighted
	ctx  context.Context

	// declared is set when the request gave a Content-Length: the body
	// holds all of it from the start.
	declared bool

	mu         sync.Mutex
	held, read int64
	// ended is set once the body has been read to its end.
	ended bool
}

func (b *guardedBody) take(n int64) bool {
	if !b.g.acquire(b.ctx, b.pool, n) {
		return false
	}
	b.held += n
	return true
}

func (b *guardedBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ended || len(p) == 0 {
		return b.src.Read(p)
	}
	if b.pool != nil && !b.declared {
		if b.read >= b.held && !b.take(growStep) {
			return 0, connect.NewError(connect.CodeResourceExhausted, errors.New(b.g.busyMessage()))
		}
		p = p[:min(int64(len(p)), b.held-b.read)]
	}
	n, err := b.src.Read(p)
	b.read += int64(n)
	switch {
	case errors.Is(err, io.EOF):
		b.ended = true
		b.g.releaseBytes(b.pool, b.held-b.read)
		b.held = b.read
	case errors.Is(err, os.ErrDeadlineExceeded):
		err = connect.NewError(connect.CodeDeadlineExceeded,
			fmt.Errorf("the request body did not arrive within %s (server.body_timeout)", b.g.opts.BodyTimeout))
	}
	return n, err
}

func (b *guardedBody) Close() error { return b.src.Close() }

// release gives back what the body holds; the handler has returned.
func (b *guardedBody) release() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.g.releaseBytes(b.pool, b.held)
	b.held = 0
}

// LoopbackHost reports whether a Host header (with or without a port)
// names this machine: localhost, 127.0.0.0/8 or ::1.
func LoopbackHost(hostport string) bool {
	host := hostport
	if h, port, err := net.SplitHostPort(hostport); err == nil {
		if _, err := strconv.ParseUint(port, 10, 16); err != nil {
			return false
		}
		host = h
	} else if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1]
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
