package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
)

// RulesTemplate is the URI template of the rules resources: an agent's
// assembled stage prompt, optionally for a path.
const RulesTemplate = "precept://rules/{agent}/{stage}{?path}"

// RulesURI returns the resource URI of an agent's rules for a stage and
// path.
func RulesURI(agent, stage, path string) string {
	u := "precept://rules/" + url.PathEscape(agent) + "/" + url.PathEscape(stage)
	if path != "" {
		// RFC 6570 writes a space as %20, not as a plus.
		u += "?path=" + strings.ReplaceAll(url.QueryEscape(path), "+", "%20")
	}
	return u
}

// parseRulesURI reads the agent, stage and path of a rules resource URI.
// Only the canonical spelling is one (the one RulesURI writes), so one
// set of rules has one URI: a subscription cannot be made many times
// over with extra parameters, user info, fragments or other escapes.
func parseRulesURI(uri string) (RulesInput, error) {
	notRules := fmt.Errorf("not a rules resource: want %s", RulesTemplate)
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "precept" || u.Host != "rules" || u.User != nil || u.Fragment != "" || u.Opaque != "" {
		return RulesInput{}, notRules
	}
	parts := strings.Split(strings.TrimPrefix(u.EscapedPath(), "/"), "/")
	if len(parts) != 2 || parts[0] == "" || parts[1] == "" {
		return RulesInput{}, notRules
	}
	agent, err1 := url.PathUnescape(parts[0])
	stage, err2 := url.PathUnescape(parts[1])
	if err := errors.Join(err1, err2); err != nil {
		return RulesInput{}, fmt.Errorf("not a rules resource: %w", err)
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return RulesInput{}, fmt.Errorf("not a rules resource: %w", err)
	}
	in := RulesInput{Agent: agent, Stage: stage, Path: q.Get("path")}
	if uri != RulesURI(in.Agent, in.Stage, in.Path) {
		return RulesInput{}, fmt.Errorf("not a rules resource: want %s, spelt as %s", RulesTemplate, RulesURI(in.Agent, in.Stage, in.Path))
	}
	return in, nil
}

func (s *Server) addResources() {
	s.mcp.AddResourceTemplate(&mcp.ResourceTemplate{
		Name:        "rules",
		Title:       "Rules for an agent and stage",
		URITemplate: RulesTemplate,
		MIMEType:    "text/markdown",
		Description: "The assembled stage prompt with the approved rules for an agent and stage (path: the file worked on, selecting _rules.md files). Its _meta holds the prompt version. Subscribe to be told when the rules change.",
	}, s.readRules)
}

func (s *Server) readRules(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	in, err := parseRulesURI(req.Params.URI)
	if err != nil {
		return nil, mcp.ResourceNotFoundError(req.Params.URI)
	}
	p, err := s.build(ctx, req.Session, req.Extra, in)
	if err != nil {
		return nil, err
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{
		URI:      req.Params.URI,
		MIMEType: "text/markdown",
		Text:     p.GetPrompt(),
		Meta:     mcp.Meta{"precept/version": p.GetVersion(), "precept/rule_ids": p.GetRuleIds(), "precept/commit": p.GetCommit()},
	}}}, nil
}

func (s *Server) addPrompts() {
	s.mcp.AddPrompt(&mcp.Prompt{
		Name:        "rules",
		Title:       "Rules for an agent and stage",
		Description: "The assembled stage prompt with the approved rules for an agent and stage; the description names the prompt version, which the session remembers for record_decision.",
		Arguments: []*mcp.PromptArgument{
			{Name: "agent", Description: "the agent the rules are for", Required: true},
			{Name: "stage", Description: "the stage of the agent's work", Required: true},
			{Name: "path", Description: "repository-relative path of the file worked on"},
		},
	}, s.getPrompt)
}

func (s *Server) getPrompt(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	a := req.Params.Arguments
	p, err := s.build(ctx, req.Session, req.Extra, RulesInput{Agent: a["agent"], Stage: a["stage"], Path: a["path"]})
	if err != nil {
		return nil, err
	}
	return &mcp.GetPromptResult{
		Description: "precept prompt version " + p.GetVersion(),
		Meta:        mcp.Meta{"precept/version": p.GetVersion()},
		Messages:    []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: p.GetPrompt()}}},
	}, nil
}

// watch follows the rules of one agent, stage and path with WatchPrompt,
// for the sessions subscribed to them.
type watch struct {
	cancel   context.CancelFunc
	sessions map[*mcp.ServerSession]bool
}

// identity is what a request's subscriptions and sessions count against:
// its token's digest over HTTP, "" over stdio and without auth.tokens.
func identity(extra *mcp.RequestExtra) string {
	if extra != nil && extra.TokenInfo != nil {
		return extra.TokenInfo.UserID
	}
	return ""
}

// subscribe checks that the caller may read the rules (the same
// BuildPrompt a read makes), then follows them until the last subscriber
// leaves. The watch runs as the first subscriber: it only learns that the
// rules changed, and every read is made as its reader.
func (s *Server) subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	in, err := parseRulesURI(req.Params.URI)
	if err != nil {
		return mcp.ResourceNotFoundError(req.Params.URI)
	}
	callCtx, err := s.caller(ctx, req.Extra)
	if err != nil {
		return err
	}
	resp, err := s.clients.Prompts.BuildPrompt(callCtx, connect.NewRequest(&preceptv1.BuildPromptRequest{Agent: in.Agent, Stage: in.Stage, ScopePath: in.Path}))
	if err != nil {
		return clientError(err)
	}
	st := s.state(req.Session) // so the subscription ends with the session
	id := identity(req.Extra)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.ctx.Err() != nil:
		return errors.New("unavailable: the server is stopping")
	case st.subs[in]:
		return nil
	case len(st.subs) >= s.limits.subscriptionsPerSession:
		return fmt.Errorf("resource_exhausted: this session has %d subscriptions, the bound; unsubscribe from one first", s.limits.subscriptionsPerSession)
	case s.subscriptions[id] >= s.limits.subscriptionsPerIdentity:
		return fmt.Errorf("resource_exhausted: this token's sessions have %d subscriptions, the bound; unsubscribe from one first", s.limits.subscriptionsPerIdentity)
	}
	if w, ok := s.watches[in]; ok {
		w.sessions[req.Session] = true
	} else {
		if len(s.watches) >= s.limits.watches {
			return fmt.Errorf("resource_exhausted: %d rules resources are followed already, the bound; subscribe to one of them or try later", s.limits.watches)
		}
		// The watch outlives the subscribe request but keeps the caller's
		// values (the in-process identity).
		wctx, cancel := context.WithCancel(context.WithoutCancel(callCtx))
		stop := context.AfterFunc(s.ctx, cancel)
		s.watches[in] = &watch{cancel: func() { stop(); cancel() }, sessions: map[*mcp.ServerSession]bool{req.Session: true}}
		go s.follow(wctx, req.Params.URI, in, resp.Msg.GetVersion())
	}
	st.subs[in], st.identity = true, id
	s.subscriptions[id]++
	return nil
}

// Following returns how many rules resources the server follows for
// their subscribers.
func (s *Server) Following() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.watches)
}

func (s *Server) unsubscribe(ctx context.Context, req *mcp.UnsubscribeRequest) error {
	in, err := parseRulesURI(req.Params.URI)
	if err != nil {
		return nil // never subscribed
	}
	st := s.state(req.Session)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropSubscription(req.Session, st, in)
	return nil
}

// dropSubscription ends a session's subscription to the rules in, and
// their watch with its last subscriber. s.mu is held.
func (s *Server) dropSubscription(ss *mcp.ServerSession, st *sessionState, in RulesInput) {
	if !st.subs[in] {
		return
	}
	delete(st.subs, in)
	if s.subscriptions[st.identity]--; s.subscriptions[st.identity] <= 0 {
		delete(s.subscriptions, st.identity)
	}
	if w, ok := s.watches[in]; ok {
		delete(w.sessions, ss)
		if len(w.sessions) == 0 {
			w.cancel()
			delete(s.watches, in)
		}
	}
}

// Bounds on the wait before a broken watch is opened again.
const (
	minRewatch = 500 * time.Millisecond
	maxRewatch = 30 * time.Second
)

// follow streams WatchPrompt for uri and tells the subscribers each time
// the version changes from last, opening the stream again (from the last
// version seen, so a change in between is not missed) when it breaks.
func (s *Server) follow(ctx context.Context, uri string, in RulesInput, last string) {
	wait := minRewatch
	for ctx.Err() == nil {
		stream, err := s.clients.Prompts.WatchPrompt(ctx, connect.NewRequest(&preceptv1.WatchPromptRequest{
			Agent: in.Agent, Stage: in.Stage, ScopePath: in.Path, LastVersion: last,
		}))
		if err == nil {
			for stream.Receive() {
				wait = minRewatch
				v := stream.Msg().GetPrompt().GetVersion()
				if v == last {
					continue
				}
				last = v
				if err := s.mcp.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: uri}); err != nil {
					s.log.Warn("mcp: notify subscribers", "uri", uri, "err", err)
				}
			}
			err = stream.Err()
			_ = stream.Close()
		}
		if ctx.Err() != nil {
			return
		}
		s.log.Warn("mcp: the rules watch broke; opening it again", "uri", uri, "err", clientError(err), "in", wait)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, maxRewatch)
	}
}
