package mcpserver

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"

	"connectrpc.com/connect"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/precept-dev/precept/gen/precept/v1/preceptv1connect"
)

// Path is where preceptd serves MCP over streamable HTTP.
const Path = "/mcp"

// Clients are the Connect clients every tool, resource and prompt calls.
type Clients struct {
	Prompts  preceptv1connect.PromptServiceClient
	Rules    preceptv1connect.RuleServiceClient
	Feedback preceptv1connect.FeedbackServiceClient
}

// NewClients returns the clients of the API at baseURL, reached with hc.
func NewClients(hc connect.HTTPClient, baseURL string, opts ...connect.ClientOption) Clients {
	return Clients{
		Prompts:  preceptv1connect.NewPromptServiceClient(hc, baseURL, opts...),
		Rules:    preceptv1connect.NewRuleServiceClient(hc, baseURL, opts...),
		Feedback: preceptv1connect.NewFeedbackServiceClient(hc, baseURL, opts...),
	}
}

// CallerFunc returns the context the RPCs of one MCP request run under,
// from the request's context and what the transport knows of it (the
// bearer token's information over HTTP), or an error the request is
// refused with.
type CallerFunc func(ctx context.Context, extra *mcp.RequestExtra) (context.Context, error)

// Options configure a Server. Zero values mean defaults.
type Options struct {
	// Caller, when set, gives the context each request's RPCs run under:
	// in preceptd, the caller's identity for the in-process API. Unset,
	// the request's own context is used (the clients carry the token).
	Caller CallerFunc
	// Version is the version the server reports to clients.
	Version string
	// Log receives the watches' failures; nil discards them.
	Log *slog.Logger
}

// Server is precept's MCP server: one per process, shared by every
// session.
type Server struct {
	mcp     *mcp.Server
	clients Clients
	caller  CallerFunc
	log     *slog.Logger

	// ctx ends the rule watches when the server closes.
	ctx    context.Context
	cancel context.CancelFunc

	// limits are the bounds below (limits.go); tests lower them.
	limits limits

	mu sync.Mutex
	// sessions holds what each live session was given and subscribed to.
	sessions map[*mcp.ServerSession]*sessionState
	// watches follows the rules behind each subscribed resource.
	watches map[RulesInput]*watch
	// subscriptions counts the subscriptions of each token identity (the
	// token's digest; "" over stdio and without auth.tokens).
	subscriptions map[string]int

	// open counts the live HTTP sessions in total and per identity
	// (limits.go).
	open openSessions
}

// New returns a server whose tools, resources and prompts call clients.
func New(clients Clients, opts Options) *Server {
	return newServer(clients, opts, defaultLimits())
}

func newServer(clients Clients, opts Options, l limits) *Server {
	s := &Server{
		clients:       clients,
		caller:        opts.Caller,
		log:           opts.Log,
		limits:        l,
		sessions:      map[*mcp.ServerSession]*sessionState{},
		watches:       map[RulesInput]*watch{},
		subscriptions: map[string]int{},
		open:          openSessions{byIdentity: map[string]int{}},
	}
	if s.caller == nil {
		s.caller = func(ctx context.Context, _ *mcp.RequestExtra) (context.Context, error) { return ctx, nil }
	}
	if s.log == nil {
		s.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	version := opts.Version
	if version == "" {
		version = "dev"
	}
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: "precept", Title: "precept: learned rules for agents", Version: version}, &mcp.ServerOptions{
		Instructions:       instructions,
		SubscribeHandler:   s.subscribe,
		UnsubscribeHandler: s.unsubscribe,
		// No logging capability: the server sends no log messages.
		Capabilities: &mcp.ServerCapabilities{},
	})
	s.addTools()
	s.addResources()
	s.addPrompts()
	return s
}

// instructions tell a client's model what the server is for.
const instructions = `precept serves the rules human reviewers approved for each agent and stage.
Before working, call get_rules (or read precept://rules/{agent}/{stage}) and follow the rules.
After a human review, call record_decision: it records the prompt version you were given, so the rules' effects are measured.`

// RunStdio serves one session over stdin and stdout until the client
// closes it or ctx ends.
func (s *Server) RunStdio(ctx context.Context) error {
	err := s.mcp.Run(ctx, &mcp.StdioTransport{})
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// HTTPHandler returns the streamable HTTP handler. Authentication is the
// caller's: wrap it with middleware that puts the token's information in
// the request (auth.RequireBearerToken), which Options.Caller reads.
func (s *Server) HTTPHandler() http.Handler {
	// No SessionTimeout: limitSessions times sessions out, counting an
	// open event stream as activity (limits.go).
	return s.limitSessions(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.mcp }, &mcp.StreamableHTTPOptions{
		Logger: s.log,
	}))
}

// Close stops the rule watches and closes every session, so an HTTP
// client's open event stream does not hold up the server's shutdown.
func (s *Server) Close() error {
	s.cancel()
	var errs []error
	for ss := range s.mcp.Sessions() {
		errs = append(errs, ss.Close())
	}
	return errors.Join(errs...)
}

// sessionState is what one session was given and subscribed to.
type sessionState struct {
	mu sync.Mutex
	// versions are the prompt versions served, the oldest first, at most
	// MaxRememberedVersions; a decision recorded without one carries one
	// of them (lastServed).
	versions []servedVersion

	// Under Server.mu: the session's subscriptions and the identity they
	// count against.
	subs     map[RulesInput]bool
	identity string
}

// servedVersion is the prompt version a session was last given for an
// agent, stage and path.
type servedVersion struct {
	in      RulesInput
	version string
}

// MaxRememberedVersions bounds the prompt versions a session remembers
// for record_decision; beyond it the oldest is forgotten.
const MaxRememberedVersions = 256

// state returns the session's state, made on first use; it is dropped
// when the session ends.
func (s *Server) state(ss *mcp.ServerSession) *sessionState {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.sessions[ss]
	if !ok {
		st = &sessionState{subs: map[RulesInput]bool{}}
		s.sessions[ss] = st
		go func() {
			_ = ss.Wait()
			s.forget(ss)
		}()
	}
	return st
}

// forget drops a closed session's state and subscriptions.
func (s *Server) forget(ss *mcp.ServerSession) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.sessions[ss]
	if !ok {
		return
	}
	delete(s.sessions, ss)
	for in := range st.subs {
		s.dropSubscription(ss, st, in)
	}
}

// served records the prompt version a session was given for an agent,
// stage and path.
func (s *Server) served(ss *mcp.ServerSession, in RulesInput, version string) {
	if ss == nil || version == "" {
		return
	}
	st := s.state(ss)
	st.mu.Lock()
	defer st.mu.Unlock()
	st.versions = slices.DeleteFunc(st.versions, func(v servedVersion) bool { return v.in == in })
	st.versions = append(st.versions, servedVersion{in: in, version: version})
	if n := len(st.versions) - MaxRememberedVersions; n > 0 {
		st.versions = slices.Delete(st.versions, 0, n)
	}
}

// lastServed returns the version a session was given for the rules of a
// decision: the one for its agent, stage and exact path (any stage when
// stage is empty, if they agree); else, when the session was given one
// version only for the agent and stage, that one; else none, rather than
// a guess.
func (s *Server) lastServed(ss *mcp.ServerSession, agent, stage, path string) string {
	if ss == nil {
		return ""
	}
	st := s.state(ss)
	st.mu.Lock()
	defer st.mu.Unlock()
	only := func(match func(RulesInput) bool) string {
		one := ""
		for _, v := range st.versions {
			if v.in.Agent != agent || (stage != "" && v.in.Stage != stage) || !match(v.in) {
				continue
			}
			if one != "" && one != v.version {
				return ""
			}
			one = v.version
		}
		return one
	}
	if v := only(func(in RulesInput) bool { return in.Path == path }); v != "" {
		return v
	}
	return only(func(RulesInput) bool { return true })
}

// clientError turns an RPC's error into the error a tool, resource or
// prompt answers with: a Connect error as "code: message", whose message
// precept made safe to show a client.
func clientError(err error) error {
	var ce *connect.Error
	if errors.As(err, &ce) {
		msg := ce.Message()
		if msg == "" {
			msg = "request failed"
		}
		return errors.New(ce.Code().String() + ": " + strings.ReplaceAll(msg, "\n", " "))
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return errors.New("canceled: " + err.Error())
	}
	return err
}
