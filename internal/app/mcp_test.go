package app

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
	"github.com/precept-dev/precept/gen/precept/v1/preceptv1connect"
)

// mcpSession opens an MCP session at /mcp with a bearer token.
func mcpSession(t *testing.T, base, token string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "app-test", Version: "1"}, nil)
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{
		Endpoint:   base + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}},
	}, nil)
	if err != nil {
		t.Fatalf("connect to /mcp: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// callTool calls a tool and returns its text and whether it failed.
func callTool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var text strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	return text.String(), res.IsError
}

// TestMCPDecisionsFollowTheAPIsRolesAndPolicy: /mcp authenticates as the
// API does, binds a session to its token, and its approvals go through
// ApproveRule as the caller: no self-approval, an unknown revision
// refused, a reader refused, and the approval recorded as made through MCP.
func TestMCPDecisionsFollowTheAPIsRolesAndPolicy(t *testing.T) {
	const carol, alice, bob, rita = "carol-token-0123456789", "alice-token-0123456789", "bob-token-0123456789", "rita-token-0123456789"
	r := start(t, fmt.Sprintf(`
auth:
  tokens:
    - {name: carol, role: approver, token: %s}
    - {name: alice, role: approver, token: %s}
    - {name: bob, role: approver, token: %s}
    - {name: rita, role: reader, token: %s}
`, carol, alice, bob, rita))
	base := r.app.URL()

	for _, token := range []string{"", "unknown-token-0123456789"} {
		req, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("token %q: status %d, want 401", token, resp.StatusCode)
		}
	}

	rules := preceptv1connect.NewRuleServiceClient(&http.Client{Transport: bearer{carol, http.DefaultTransport}}, base)
	prop, err := rules.ProposeRule(context.Background(), connect.NewRequest(&preceptv1.ProposeRuleRequest{
		AffectedAgents: []string{"coding-agent"}, RuleContent: "Return errors to the caller wrapped with context; never discard them in retry loops.", Rationale: "flagged by three reviewers",
	}))
	if err != nil {
		t.Fatal(err)
	}
	id := prop.Msg.GetProposal().GetProposalId()
	rev := prop.Msg.GetProposal().GetRevision()

	if text, failed := callTool(t, mcpSession(t, base, rita), "approve_proposal", map[string]any{"proposal_id": id}); !failed || !strings.Contains(text, "permission_denied") {
		t.Fatalf("a reader's approval: %q, failed %v", text, failed)
	}
	if text, failed := callTool(t, mcpSession(t, base, carol), "approve_proposal", map[string]any{"proposal_id": id}); !failed || !strings.Contains(text, "cannot approve it") {
		t.Fatalf("the proposer's own approval: %q, failed %v", text, failed)
	}
	as := mcpSession(t, base, alice)
	// A stale revision (the text changed since) is refused too:
	// TestMCPRefusesAnApprovalOfAStaleRevision.
	if text, failed := callTool(t, as, "approve_proposal", map[string]any{"proposal_id": id, "revision": rev + 5}); !failed || !strings.Contains(text, fmt.Sprintf("failed_precondition: revision %d of proposal %s is unknown", rev+5, id)) {
		t.Fatalf("an approval of an unknown revision: %q, failed %v", text, failed)
	}
	if text, failed := callTool(t, as, "approve_proposal", map[string]any{"proposal_id": id, "revision": rev}); failed || !strings.Contains(text, `"via":"mcp"`) || !strings.Contains(text, `"approver":"alice"`) {
		t.Fatalf("alice's approval: %q, failed %v", text, failed)
	}
	if text, failed := callTool(t, mcpSession(t, base, rita), "reject_proposal", map[string]any{"proposal_id": id, "reason": "no"}); !failed || !strings.Contains(text, "permission_denied") {
		t.Fatalf("a reader's rejection: %q, failed %v", text, failed)
	}
	if text, failed := callTool(t, mcpSession(t, base, bob), "approve_proposal", map[string]any{"proposal_id": id}); failed || !strings.Contains(text, "rule_id") {
		t.Fatalf("bob's approval: %q, failed %v", text, failed)
	}
	got, err := rules.GetProposal(context.Background(), connect.NewRequest(&preceptv1.GetProposalRequest{ProposalId: id}))
	if err != nil {
		t.Fatal(err)
	}
	if as := got.Msg.GetProposal().GetApprovals(); len(as) != 2 || as[0].GetVia() != "mcp" || as[1].GetVia() != "mcp" {
		t.Fatalf("approvals = %v", as)
	}
	ruleID := got.Msg.GetProposal().GetRuleId()
	text, failed := callTool(t, as, "explain_rules", map[string]any{"agent": "coding-agent", "stage": "implement", "rule_id": ruleID})
	if failed || !strings.Contains(text, ruleID) || !strings.Contains(text, `"included":true`) {
		t.Fatalf("explain_rules: %q, failed %v", text, failed)
	}
}

// TestAnMCPSessionAnswersOnlyTheTokenThatOpenedIt: another token, even a
// valid one, cannot use a session it did not open.
func TestAnMCPSessionAnswersOnlyTheTokenThatOpenedIt(t *testing.T) {
	const alice, bob = "alice-token-0123456789", "bob-token-0123456789"
	r := start(t, fmt.Sprintf(`
auth:
  tokens:
    - {name: alice, role: reader, token: %s}
    - {name: bob, role: approver, token: %s}
`, alice, bob))
	post := func(token, session, body string) (*http.Response, string) {
		req, _ := http.NewRequest(http.MethodPost, r.app.URL()+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+token)
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	init, _ := post(alice, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	session := init.Header.Get("Mcp-Session-Id")
	if init.StatusCode != http.StatusOK || session == "" {
		t.Fatalf("initialize: %d, session %q", init.StatusCode, session)
	}
	if resp, body := post(alice, session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("alice's own session: %d %q", resp.StatusCode, body)
	}
	// The SDK's answer when the token's digest is not the session's.
	if resp, body := post(bob, session, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); resp.StatusCode != http.StatusForbidden || strings.TrimSpace(body) != "session user mismatch" {
		t.Fatalf("bob used alice's session: %d %q", resp.StatusCode, body)
	}
	if resp, body := post(alice, session, `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`); resp.StatusCode != http.StatusOK || !strings.Contains(body, "get_rules") {
		t.Fatalf("alice's tools/list: %d %q", resp.StatusCode, body)
	}
}

// TestOpenMCPSessionsDoNotHoldUpShutdown: a client's open event stream
// ends when preceptd stops, instead of keeping it waiting for the grace
// period.
func TestOpenMCPSessionsDoNotHoldUpShutdown(t *testing.T) {
	r := start(t, "")
	cs := mcpSession(t, r.app.URL(), "")
	if _, err := cs.ListTools(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	// Let the client open its event stream.
	time.Sleep(200 * time.Millisecond)
	began := time.Now()
	r.stop()
	if took := time.Since(began); took > 5*time.Second {
		t.Fatalf("stopping took %s with an MCP session open", took)
	}
}

// TestMCPTakesDecisionsAsLargeAsTheAPIDoes: /mcp bodies are bounded as
// the API's (server.max_body_bytes), not as the unauthenticated paths'.
func TestMCPTakesDecisionsAsLargeAsTheAPIDoes(t *testing.T) {
	r := start(t, "ingest: {max_event_bytes: 4194304, max_text_bytes: 1048576}\n")
	cs := mcpSession(t, r.app.URL(), "")
	big := strings.Repeat("all work and no tests makes a flaky build; ", 1<<20/44)
	text, failed := callTool(t, cs, "record_decision", map[string]any{
		"decision_id": "mcp-big-1", "agent": "coding-agent", "gate_id": "HITL-2", "epic_id": "E-1",
		"verdict": "APPROVED_WITH_CHANGES", "reviewer_id": "dana", "agent_output": big, "approved_output": big + "fixed",
	})
	if failed || !strings.Contains(text, `"created":true`) {
		t.Fatalf("a decision of %d bytes: %.300s", 2*len(big), text)
	}
}

// TestMCPSubscriptionsShareAWatchThatEndsWithTheLastSession: subscribers
// of one rules URI share one WatchPrompt stream, which ends when the last
// of their sessions closes.
func TestMCPSubscriptionsShareAWatchThatEndsWithTheLastSession(t *testing.T) {
	r := start(t, "")
	work := filepath.Join(t.TempDir(), "rules-work")
	git := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("clone", "-q", r.app.RulesRepo.Path(), work)
	if err := os.MkdirAll(filepath.Join(work, "prompts"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "prompts", "implement.md"), []byte("You implement Go services.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("-C", work, "add", "prompts")
	git("-C", work, "-c", "user.name=Carol", "-c", "user.email=carol@example.com", "commit", "-q", "-m", "Stage prompt")
	git("-C", work, "push", "-q", "origin", "HEAD:main")
	const uri = "precept://rules/coding-agent/implement"
	first, second := mcpSession(t, r.app.URL(), ""), mcpSession(t, r.app.URL(), "")
	eventually(t, "the pushed stage prompt", 10*time.Second, func() bool {
		return first.Subscribe(t.Context(), &mcp.SubscribeParams{URI: uri}) == nil
	})
	if err := second.Subscribe(t.Context(), &mcp.SubscribeParams{URI: uri}); err != nil {
		t.Fatal(err)
	}
	if n := r.app.MCP.Following(); n != 1 {
		t.Fatalf("following %d URIs for two subscribers of one, want 1", n)
	}
	first.Close()
	time.Sleep(100 * time.Millisecond)
	if n := r.app.MCP.Following(); n != 1 {
		t.Fatalf("following %d URIs with one subscriber left, want 1", n)
	}
	second.Close()
	eventually(t, "the watch to end with the last session", 5*time.Second, func() bool { return r.app.MCP.Following() == 0 })
}
