package mcpserver

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// serveHTTP serves a server with bounds l over HTTP behind the SDK's
// bearer-token middleware, whose verifier makes each token its own
// identity. Sessions open and list tools without calling precept's API,
// so its clients point nowhere.
func serveHTTP(t *testing.T, l limits) (*Server, string) {
	t.Helper()
	s := newServer(NewClients(http.DefaultClient, "http://127.0.0.1:1"), Options{}, l)
	verify := func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		return &auth.TokenInfo{UserID: "digest-of-" + token, Expiration: time.Now().Add(time.Hour)}, nil
	}
	hs := httptest.NewServer(auth.RequireBearerToken(verify, nil)(s.HTTPHandler()))
	t.Cleanup(func() {
		s.Close()
		hs.Close()
	})
	return s, hs.URL
}

// mcpPost posts one JSON-RPC message, in a session when sid is set, and
// returns the status, the session id answered and the body.
func mcpPost(t *testing.T, url, token, sid, body string) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), string(b)
}

const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSessionsAreBoundedPerTokenAndInTotal: one token cannot take every
// session, and the sessions together are bounded; a session ended frees
// its place, and a POST that makes no session takes none.
func TestSessionsAreBoundedPerTokenAndInTotal(t *testing.T) {
	l := defaultLimits()
	l.sessions, l.sessionsPerIdentity = 3, 2
	_, url := serveHTTP(t, l)
	open := func(token string, want int) string {
		t.Helper()
		status, sid, body := mcpPost(t, url, token, "", initialize)
		if status != want {
			t.Fatalf("%s's initialize: %d %q, want %d", token, status, body, want)
		}
		return sid
	}
	for range 3 {
		// Not an initialize: the SDK keeps no session, and none is counted.
		mcpPost(t, url, "alice", "", `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	}
	first := open("alice", http.StatusOK)
	open("alice", http.StatusOK)
	if status, _, body := mcpPost(t, url, "alice", "", initialize); status != http.StatusTooManyRequests || !strings.Contains(body, "this token has 2 MCP sessions open, the bound") {
		t.Fatalf("alice's third session: %d %q", status, body)
	}
	open("bob", http.StatusOK)
	if status, _, body := mcpPost(t, url, "carol", "", initialize); status != http.StatusServiceUnavailable || !strings.Contains(body, "preceptd has 3 MCP sessions open, the bound") {
		t.Fatalf("a fourth session in all: %d %q", status, body)
	}
	req, _ := http.NewRequest(http.MethodDelete, url, nil)
	req.Header.Set("Authorization", "Bearer alice")
	req.Header.Set("Mcp-Session-Id", first)
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	eventually(t, "the ended session's place", func() bool {
		status, _, _ := mcpPost(t, url, "carol", "", initialize)
		return status == http.StatusOK
	})
}

// TestAListeningSessionOutlivesTheIdleTimeout: a client that only listens
// on its event stream (a subscriber waiting for changes) keeps its
// session; one with no request in progress loses it after the timeout.
func TestAListeningSessionOutlivesTheIdleTimeout(t *testing.T) {
	l := defaultLimits()
	l.sessionTimeout = 300 * time.Millisecond
	s, url := serveHTTP(t, l)

	c := mcp.NewClient(&mcp.Implementation{Name: "listener", Version: "1"}, nil)
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{
		Endpoint:   url,
		HTTPClient: &http.Client{Transport: bearerTransport("alice")},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	status, idle, _ := mcpPost(t, url, "bob", "", initialize)
	if status != http.StatusOK {
		t.Fatalf("bob's initialize: %d", status)
	}

	time.Sleep(4 * l.sessionTimeout)
	if _, err := cs.ListTools(t.Context(), nil); err != nil {
		t.Fatalf("the listening session, after %s: %v", 4*l.sessionTimeout, err)
	}
	eventually(t, "the idle session to end", func() bool { return s.session(idle) == nil })
	if status, _, body := mcpPost(t, url, "bob", idle, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); status != http.StatusNotFound {
		t.Fatalf("the idle session, after the timeout: %d %q", status, body)
	}
}

type bearerTransport string

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}
