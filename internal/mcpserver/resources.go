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
func parseRulesURI(uri string) (RulesInput, error) {
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "precept" || u.Host != "rules" {
		return RulesInput{}, fmt.Errorf("not a rules resource: want %s", RulesTemplate)
	}
	parts := strings.Split(strings.TrimPrefix(u.EscapedPath(), "/"), "/")
	if len(parts) != 2 || parts[0] == "" || parts[1] == "" {
		return RulesInput{}, fmt.Errorf("not a rules resource: want %s", RulesTemplate)
	}
	agent, err1 := url.PathUnescape(parts[0])
	stage, err2 := url.PathUnescape(parts[1])
	if err := errors.Join(err1, err2); err != nil {
		return RulesInput{}, fmt.Errorf("not a rules resource: %w", err)
	}
	return RulesInput{Agent: agent, Stage: stage, Path: u.Query().Get("path")}, nil
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

// MaxWatches bounds the rules URIs followed at once, each with a
// WatchPrompt stream and a goroutine; a subscription to one more URI is
// refused (subscribers of a URI already followed share its stream).
const MaxWatches = 256

// watch follows the rules behind one subscribed URI with WatchPrompt, for
// the sessions subscribed to it.
type watch struct {
	cancel   context.CancelFunc
	sessions map[*mcp.ServerSession]bool
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
	s.state(req.Session) // so the subscription ends with the session
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx.Err() != nil {
		return errors.New("unavailable: the server is stopping")
	}
	if w, ok := s.watches[req.Params.URI]; ok {
		w.sessions[req.Session] = true
		return nil
	}
	if len(s.watches) >= MaxWatches {
		return fmt.Errorf("resource_exhausted: %d rules resources are followed already, the bound; subscribe to one of them or try later", MaxWatches)
	}
	// The watch outlives the subscribe request but keeps the caller's
	// values (the in-process identity).
	wctx, cancel := context.WithCancel(context.WithoutCancel(callCtx))
	stop := context.AfterFunc(s.ctx, cancel)
	s.watches[req.Params.URI] = &watch{cancel: func() { stop(); cancel() }, sessions: map[*mcp.ServerSession]bool{req.Session: true}}
	go s.follow(wctx, req.Params.URI, in, resp.Msg.GetVersion())
	return nil
}

// Following returns how many rules URIs the server follows for their
// subscribers.
func (s *Server) Following() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.watches)
}

func (s *Server) unsubscribe(ctx context.Context, req *mcp.UnsubscribeRequest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w, ok := s.watches[req.Params.URI]; ok {
		delete(w.sessions, req.Session)
		if len(w.sessions) == 0 {
			w.cancel()
			delete(s.watches, req.Params.URI)
		}
	}
	return nil
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
