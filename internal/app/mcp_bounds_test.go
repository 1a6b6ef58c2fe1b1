package app

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
	"github.com/precept-dev/precept/gen/precept/v1/preceptv1connect"
	"github.com/precept-dev/precept/internal/mcpserver"
	"github.com/precept-dev/precept/rules/rulefmt"
)

// withStagePrompt commits the implement stage prompt (and more files) to
// the rules repository and waits until prompts are built from it.
func withStagePrompt(t *testing.T, r *running, files map[string]string) {
	t.Helper()
	all := map[string]string{"prompts/implement.md": "You implement Go services.\n"}
	for p, c := range files {
		all[p] = c
	}
	commitRulesRepo(t, r.app.RulesRepo, "stage prompt", all)
	r.app.Prompts.Notify()
	c := promptServiceClient(r.app.URL(), "connect")
	eventually(t, "the stage prompt", 10*time.Second, func() bool {
		_, err := c.BuildPrompt(t.Context(), connect.NewRequest(&preceptv1.BuildPromptRequest{Agent: "coding-agent", Stage: "implement"}))
		return err == nil
	})
}

// TestMCPSubscriptionsAreBoundedPerSessionAndPerToken: one token cannot
// take every followed rules resource, with many paths or many spellings
// of one URI.
func TestMCPSubscriptionsAreBoundedPerSessionAndPerToken(t *testing.T) {
	r := start(t, "")
	withStagePrompt(t, r, nil)
	base := r.app.URL()
	uri := func(i int) string {
		return mcpserver.RulesURI("coding-agent", "implement", fmt.Sprintf("src/p%d/f.go", i))
	}

	first := mcpSession(t, base, "")
	for _, other := range []string{uri(0) + "&x=1", uri(0) + "&path=other.go", uri(0) + "#f", strings.Replace(uri(0), "rules/", "u@rules/", 1)} {
		if err := first.Subscribe(t.Context(), &mcp.SubscribeParams{URI: other}); err == nil {
			t.Fatalf("subscribed to %s", other)
		}
	}
	if n := r.app.MCP.Following(); n != 0 {
		t.Fatalf("following %d resources after refused subscriptions", n)
	}

	var sessions []*mcp.ClientSession
	for s := range mcpserver.MaxSubscriptionsPerToken / mcpserver.MaxSubscriptionsPerSession {
		cs := first
		if s > 0 {
			cs = mcpSession(t, base, "")
		}
		sessions = append(sessions, cs)
		for i := range mcpserver.MaxSubscriptionsPerSession {
			if err := cs.Subscribe(t.Context(), &mcp.SubscribeParams{URI: uri(s*100 + i)}); err != nil {
				t.Fatalf("session %d, subscription %d: %v", s, i, err)
			}
		}
	}
	// Again: already subscribed, not counted twice.
	if err := first.Subscribe(t.Context(), &mcp.SubscribeParams{URI: uri(0)}); err != nil {
		t.Fatal(err)
	}
	if err := first.Subscribe(t.Context(), &mcp.SubscribeParams{URI: uri(99)}); err == nil || !strings.Contains(err.Error(), "this session has 16 subscriptions, the bound") {
		t.Fatalf("a 17th subscription of one session: %v", err)
	}
	last := mcpSession(t, base, "")
	if err := last.Subscribe(t.Context(), &mcp.SubscribeParams{URI: uri(999)}); err == nil || !strings.Contains(err.Error(), "this token's sessions have 64 subscriptions, the bound") {
		t.Fatalf("a 65th subscription of one token: %v", err)
	}
	if n := r.app.MCP.Following(); n != mcpserver.MaxSubscriptionsPerToken {
		t.Fatalf("following %d resources, want %d", n, mcpserver.MaxSubscriptionsPerToken)
	}
	if err := first.Unsubscribe(t.Context(), &mcp.UnsubscribeParams{URI: uri(0)}); err != nil {
		t.Fatal(err)
	}
	if err := last.Subscribe(t.Context(), &mcp.SubscribeParams{URI: uri(999)}); err != nil {
		t.Fatalf("a subscription after an unsubscription: %v", err)
	}
	sessions[1].Close()
	eventually(t, "the closed session's subscriptions to end", 5*time.Second, func() bool {
		return r.app.MCP.Following() == mcpserver.MaxSubscriptionsPerToken-mcpserver.MaxSubscriptionsPerSession
	})
}

// TestMCPRecordsTheVersionServedForTheDecisionsPath: a session given the
// root's rules and then a directory's (with a _rules.md) records, for work
// at the root, the root's version, not the last one served.
func TestMCPRecordsTheVersionServedForTheDecisionsPath(t *testing.T) {
	r := start(t, "")
	withStagePrompt(t, r, map[string]string{"prompts/services/billing/_rules.md": "Amounts are integers in cents.\n"})
	cs := mcpSession(t, r.app.URL(), "")

	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "get_rules", Arguments: map[string]any{"agent": "coding-agent", "stage": "implement"}})
	if err != nil || res.IsError {
		t.Fatalf("get_rules: %v %+v", err, res)
	}
	root, _ := res.StructuredContent.(map[string]any)["version"].(string)
	read, err := cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: mcpserver.RulesURI("coding-agent", "implement", "services/billing/api.go")})
	if err != nil {
		t.Fatal(err)
	}
	billing, _ := read.Contents[0].Meta["precept/version"].(string)
	if root == "" || billing == "" || root == billing || !strings.Contains(read.Contents[0].Text, "Amounts are integers in cents.") {
		t.Fatalf("versions: root %q, billing %q\n%s", root, billing, read.Contents[0].Text)
	}

	for i, c := range []struct{ scope, version, source string }{
		{"", root, "session"},
		{"services/billing/api.go", billing, "session"},
		// Given two versions for the stage, and none for this path: none
		// rather than a guess.
		{"cmd/main.go", "", "none"},
	} {
		text, failed := callTool(t, cs, "record_decision", map[string]any{
			"decision_id": fmt.Sprintf("mcp-scope-%d", i), "agent": "coding-agent", "stage": "implement", "gate_id": "HITL-2", "epic_id": "E-1",
			"verdict": "APPROVED", "reviewer_id": "dana", "scope_path": c.scope,
		})
		if failed || !strings.Contains(text, fmt.Sprintf(`"prompt_version":%q`, c.version)) || !strings.Contains(text, fmt.Sprintf(`"prompt_version_source":%q`, c.source)) {
			t.Errorf("a decision at %q: %s; want version %q from %s", c.scope, text, c.version, c.source)
		}
	}
}

// TestMCPInProcessCallsSurviveAHandlerPanic: a handler called in process by
// the MCP server that panics answers 500 (or breaks off its body) and is
// logged; it does not end the process.
func TestMCPInProcessCallsSurviveAHandlerPanic(t *testing.T) {
	var logged bytes.Buffer
	for _, c := range []struct {
		name   string
		status int
		h      http.HandlerFunc
	}{
		{"before the header", http.StatusInternalServerError, func(http.ResponseWriter, *http.Request) { panic("boom before") }},
		{"after the header", http.StatusOK, func(w http.ResponseWriter, _ *http.Request) {
			w.Write([]byte("partial"))
			panic("boom after")
		}},
	} {
		rt := streamingInProcess{h: c.h, log: slog.New(slog.NewTextHandler(&logged, nil))}
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, inProcessURL+"/x", nil)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || err == nil || !strings.Contains(err.Error(), "the handler failed") {
			t.Errorf("%s: status %d, body error %v", c.name, resp.StatusCode, err)
		}
	}
	if !strings.Contains(logged.String(), "boom before") || !strings.Contains(logged.String(), "boom after") {
		t.Fatalf("log:\n%s", logged.String())
	}
}

// TestMCPRefusesAnUnauthenticatedBodyBeforeReadingIt: /mcp is one of the
// guard's token paths: without a token, a body declared larger than
// server.max_body_bytes is answered 401 from the headers, without waiting
// for a byte of it.
func TestMCPRefusesAnUnauthenticatedBodyBeforeReadingIt(t *testing.T) {
	r := start(t, guarded("{max_body_bytes: 1048576, body_timeout: 30s}"))
	conn, err := net.Dial("tcp", r.app.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n", r.app.Addr(), 2<<20)
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer before the body: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("status %d, want 401", resp.StatusCode)
	}
}

// TestMCPRefusesAnApprovalOfAStaleRevision: the rule text is edited on
// the rules remote after alice read the proposal; her approval of the
// revision she read is refused as stale, and one of the current revision
// is taken.
func TestMCPRefusesAnApprovalOfAStaleRevision(t *testing.T) {
	const carol, alice = "carol-token-0123456789", "alice-token-0123456789"
	remote := filepath.Join(t.TempDir(), "remote.git")
	promptGit(t, t.TempDir(), "init", "-q", "--bare", "-b", "main", remote)
	r := start(t, fmt.Sprintf(`
rules: {git: {remote_url: %q, fetch_interval: 200ms}}
auth:
  tokens:
    - {name: carol, role: approver, token: %s}
    - {name: alice, role: approver, token: %s}
`, remote, carol, alice))
	rules := preceptv1connect.NewRuleServiceClient(&http.Client{Transport: bearer{carol, http.DefaultTransport}}, r.app.URL())
	const text = "Return errors to the caller wrapped with context; never discard them in retry loops."
	prop, err := rules.ProposeRule(t.Context(), connect.NewRequest(&preceptv1.ProposeRuleRequest{
		AffectedAgents: []string{"coding-agent"}, RuleContent: text, Rationale: "flagged by three reviewers",
	}))
	if err != nil {
		t.Fatal(err)
	}
	id, read := prop.Msg.GetProposal().GetProposalId(), prop.Msg.GetProposal().GetRevision()

	branch := rulefmt.ProposalBranch(id)
	eventually(t, "the proposal on the remote", 20*time.Second, func() bool {
		_, err := gitOut(remote, "rev-parse", "--verify", "-q", branch)
		return err == nil
	})
	clone := filepath.Join(t.TempDir(), "curator")
	promptGit(t, t.TempDir(), "clone", "-q", "-b", branch, remote, clone)
	file := filepath.Join(clone, filepath.FromSlash(rulefmt.ProposalPath(id)))
	old, err := os.ReadFile(file)
	if err != nil || !bytes.Contains(old, []byte(text)) {
		t.Fatalf("the proposal file: %v\n%s", err, old)
	}
	edited := strings.Replace(text, "retry loops", "retry loops or deferred closes", 1)
	if err := os.WriteFile(file, bytes.Replace(old, []byte(text), []byte(edited), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	promptGit(t, clone, "commit", "-q", "-am", "Say deferred closes too")
	promptGit(t, clone, "push", "-q", "origin", "HEAD:"+branch)
	var now int32
	eventually(t, "the edit taken", 20*time.Second, func() bool {
		got, err := rules.GetProposal(t.Context(), connect.NewRequest(&preceptv1.GetProposalRequest{ProposalId: id}))
		if err != nil {
			return false
		}
		now = got.Msg.GetProposal().GetRevision()
		return strings.Contains(got.Msg.GetProposal().GetRuleContent(), "deferred closes")
	})

	as := mcpSession(t, r.app.URL(), alice)
	want := fmt.Sprintf("failed_precondition: stale revision %d: proposal %s changed at revision %d", read, id, now)
	if text, failed := callTool(t, as, "approve_proposal", map[string]any{"proposal_id": id, "revision": read}); !failed || !strings.HasPrefix(text, want) {
		t.Fatalf("an approval of the revision read before the edit: %q, failed %v; want %q…", text, failed, want)
	}
	if text, failed := callTool(t, as, "approve_proposal", map[string]any{"proposal_id": id, "revision": now}); failed || !strings.Contains(text, `"approver":"alice"`) {
		t.Fatalf("an approval of the current revision: %q, failed %v", text, failed)
	}
}
