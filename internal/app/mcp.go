package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/internal/api"
	"github.com/precept-dev/precept/internal/mcpserver"
	"github.com/precept-dev/precept/rules/rulefmt"
)

// inProcessURL is the base URL of the MCP server's in-process calls;
// nothing resolves it.
const inProcessURL = "http://precept.in-process"

// identityKey is where the token verifier leaves the caller's identity
// in the MCP request's token information.
const identityKey = "precept/identity"

// serveMCP mounts MCP over streamable HTTP at /mcp (docs/mcp.md). Its
// tools call the API's handlers in process as the caller, whose bearer
// token is checked as the API checks it, so roles and policies are the
// API's. It must come after every service is registered on the mux.
func (a *App) serveMCP() error {
	creds, err := a.Config.Auth.Credentials()
	if err != nil {
		return err
	}
	authn, err := api.NewAuthenticator(creds)
	if err != nil {
		return err
	}
	hc := &http.Client{Transport: streamingInProcess{h: a.mux, log: a.Log.With("component", "mcp")}}
	s := mcpserver.New(mcpserver.NewClients(hc, inProcessURL), mcpserver.Options{
		Caller:  mcpCaller(authn),
		Version: "preceptd",
		Log:     a.Log.With("component", "mcp"),
	})
	a.MCP = s
	a.closers = append(a.closers, s.Close)
	// Event streams last as long as their sessions: end them when the
	// server begins to shut down, not after its grace period.
	a.server.RegisterOnShutdown(func() { _ = s.Close() })
	h := s.HTTPHandler()
	if !authn.Open() {
		// Without tokens every caller is the local admin, as on the API.
		h = auth.RequireBearerToken(mcpVerifier(authn), &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(h)
	}
	a.Handle(mcpserver.Path, h)
	return nil
}

// mcpVerifier checks a bearer token as the API does. The session is
// bound to the token's digest, so another token cannot use it.
func mcpVerifier(authn *api.Authenticator) auth.TokenVerifier {
	return func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		id, digest, err := authn.IdentifyToken(token)
		if err != nil {
			return nil, fmt.Errorf("%w: %s", auth.ErrInvalidToken, precept.ErrorMessage(err))
		}
		return &auth.TokenInfo{UserID: digest, Extra: map[string]any{identityKey: id}}, nil
	}
}

// mcpCaller gives each MCP request's RPCs the caller's identity.
func mcpCaller(authn *api.Authenticator) mcpserver.CallerFunc {
	return func(ctx context.Context, extra *mcp.RequestExtra) (context.Context, error) {
		if extra != nil && extra.TokenInfo != nil {
			if id, ok := extra.TokenInfo.Extra[identityKey].(precept.Identity); ok {
				return api.InProcessVia(ctx, id, rulefmt.ViaMCP), nil
			}
		}
		if authn.Open() {
			return api.InProcessVia(ctx, api.LocalIdentity, rulefmt.ViaMCP), nil
		}
		return nil, errors.New("unauthenticated: missing bearer token (Authorization: Bearer <token>)")
	}
}

// streamingInProcess is an http.RoundTripper that serves a request with
// a handler in the same process, streaming the answer as the handler
// writes it, so server-streaming RPCs (WatchPrompt) work.
type streamingInProcess struct {
	h   http.Handler
	log *slog.Logger
}

// errHandlerPanicked ends the body of an in-process answer whose handler
// panicked.
var errHandlerPanicked = errors.New("internal: the handler failed")

func (t streamingInProcess) RoundTrip(r *http.Request) (*http.Response, error) {
	pr, pw := io.Pipe()
	w := &pipeWriter{header: http.Header{}, body: pw, ready: make(chan struct{})}
	go func() {
		defer func() {
			// The handler runs outside net/http, which would recover a
			// panic: a panic here would end preceptd. The caller gets a
			// 500, or, the header sent already, a body that breaks off.
			if v := recover(); v != nil {
				t.log.Error("mcp: an in-process handler panicked", "path", r.URL.Path, "panic", v, "stack", string(debug.Stack()))
				w.WriteHeader(http.StatusInternalServerError)
				pw.CloseWithError(errHandlerPanicked)
				return
			}
			w.WriteHeader(http.StatusOK)
			pw.Close()
		}()
		t.h.ServeHTTP(w, r)
	}()
	select {
	case <-w.ready:
	case <-r.Context().Done():
		pr.CloseWithError(r.Context().Err())
		return nil, r.Context().Err()
	}
	return &http.Response{
		Status:     strconv.Itoa(w.status) + " " + http.StatusText(w.status),
		StatusCode: w.status,
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     w.sent,
		Body:       pr,
		// Unknown: the handler may still be writing.
		ContentLength: -1,
		Request:       r,
	}, nil
}

// pipeWriter is the ResponseWriter of an in-process request: the header
// once written, then the body through a pipe.
type pipeWriter struct {
	header http.Header
	body   *io.PipeWriter

	once   sync.Once
	ready  chan struct{}
	status int
	sent   http.Header
}

func (w *pipeWriter) Header() http.Header { return w.header }

func (w *pipeWriter) WriteHeader(status int) {
	w.once.Do(func() {
		w.status = status
		w.sent = w.header.Clone()
		close(w.ready)
	})
}

func (w *pipeWriter) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(b)
}

// Flush implements http.Flusher: every write already reaches the reader.
func (w *pipeWriter) Flush() { w.WriteHeader(http.StatusOK) }
