package mcpserver_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
	"github.com/precept-dev/precept/gen/precept/v1/preceptv1connect"
	"github.com/precept-dev/precept/lib/testenv"
)

// Tokens of the interop test's preceptd.
const (
	carol = "carol-token-0123456789" // approver, proposes
	alice = "alice-token-0123456789" // approver
	bob   = "bob-token-0123456789"   // approver
	rex   = "rex-token-0123456789"   // recorder: the agent
	rita  = "rita-token-0123456789"  // reader
)

const agent, stage = "coding-agent", "implement"

// TestTheTypeScriptSDKDrivesPreceptOverStdioAndHTTP runs the TypeScript
// MCP SDK (tools/mcpclient) against a real preceptd, over stdio through
// `precept mcp` and over streamable HTTP at /mcp: it lists the tools,
// gets the rules (equal to BuildPrompt's), records a decision (stored
// with the version it was given), is refused an approval with a reader
// token, and is told of the change when a proposal is approved through
// the API.
func TestTheTypeScriptSDKDrivesPreceptOverStdioAndHTTP(t *testing.T) {
	if testing.Short() {
		t.Skip("process-level test: builds and runs preceptd and node")
	}
	node, script := nodeClient(t)
	preceptd, precept := testenv.PreceptBinaries(t)
	redisAddr := testenv.Redis(t)
	dir := t.TempDir()
	addr := testenv.FreeAddr(t)
	cfg := filepath.Join(dir, "precept.yaml")
	writeFile(t, cfg, fmt.Sprintf(`
listen: %s
data_dir: %s
redis: {addr: %q}
auth:
  tokens:
    - {name: carol, role: approver, token: %s}
    - {name: alice, role: approver, token: %s}
    - {name: bob, role: approver, token: %s}
    - {name: rex, role: recorder, token: %s}
    - {name: rita, role: reader, token: %s}
`, addr, filepath.Join(dir, "data"), redisAddr, carol, alice, bob, rex, rita))
	url := startDaemon(t, preceptd, cfg, addr)

	ctx := context.Background()
	pushStagePrompt(t, filepath.Join(dir, "data", "rules.git"), filepath.Join(dir, "rules-work"))
	const first = "Return errors to the caller wrapped with context; never discard them in retry loops."
	approve(t, url, propose(t, url, first))
	prompt := buildPrompt(t, url)
	if !strings.Contains(prompt.Prompt, "never discard them in retry loops") {
		t.Fatalf("the approved rule is not in the prompt:\n%s", prompt.Prompt)
	}

	later := map[string]string{
		"stdio": "Close every file handle you open in a deferred call right after the open succeeds.",
		"http":  "Name each test after the behaviour it pins, not after the function it calls.",
	}
	for _, transport := range []string{"stdio", "http"} {
		t.Run(transport, func(t *testing.T) {
			pending := propose(t, url, later[transport])
			decisionID := "mcp-" + transport + "-1"
			plan, _ := json.Marshal(map[string]any{
				"transport": transport, "url": url, "precept": precept, "agent": agent, "stage": stage, "path": "services/billing/api.go",
				"pendingProposal": pending,
				"decision": map[string]any{
					"decision_id": decisionID, "agent": agent, "stage": stage, "gate_id": "HITL-2", "epic_id": "E-1",
					"verdict": "REJECTED", "reviewer_id": "dana", "reviewer_comment": "the retry loop drops the error",
				},
			})
			run := startNode(t, node, script, string(plan))
			steps := map[string]map[string]any{}
			for _, want := range []string{"tools", "get_rules", "record_decision", "resource", "resource_path", "prompt", "list_proposals", "reader_approve", "subscribed"} {
				steps[want] = run.step(t, want)
			}

			names := steps["tools"]["names"]
			wantTools := []any{"approve_proposal", "explain_rules", "get_proposal", "get_rules", "list_proposals", "record_decision", "reject_proposal"}
			if !slices.Equal(names.([]any), wantTools) {
				t.Fatalf("tools = %v, want %v", names, wantTools)
			}

			// get_rules answers what BuildPrompt answers.
			want := buildPrompt(t, url)
			got := steps["get_rules"]["structured"].(map[string]any)
			if steps["get_rules"]["isError"] == true || got["prompt"] != want.Prompt || got["version"] != want.Version {
				t.Fatalf("get_rules = %v\nBuildPrompt: version %s\n%s", steps["get_rules"], want.Version, want.Prompt)
			}
			if !strings.Contains(want.Prompt, "never discard them in retry loops") {
				t.Fatalf("BuildPrompt lacks the approved rule:\n%s", want.Prompt)
			}

			// The decision carries the version the session was given.
			rec := steps["record_decision"]["structured"].(map[string]any)
			if rec["prompt_version"] != want.Version || rec["prompt_version_source"] != "session" || rec["created"] != true {
				t.Fatalf("record_decision = %v, want version %s from the session", steps["record_decision"], want.Version)
			}
			stored, err := preceptv1connect.NewFeedbackServiceClient(client(rita), url).GetFeedback(ctx, connect.NewRequest(&preceptv1.GetFeedbackRequest{DecisionId: decisionID}))
			if err != nil {
				t.Fatal(err)
			}
			if v := stored.Msg.GetFeedback().GetDecision().GetPromptVersion(); v != want.Version {
				t.Fatalf("stored prompt_version = %q, want %q", v, want.Version)
			}

			res := steps["resource"]
			if res["text"] != want.Prompt || res["meta"].(map[string]any)["precept/version"] != want.Version {
				t.Fatalf("resource = %v", res)
			}
			scoped := buildPrompt(t, url, "services/billing/api.go")
			if !strings.Contains(scoped.Prompt, "integer cents") || strings.Contains(want.Prompt, "integer cents") {
				t.Fatalf("the billing _rules.md is not scoped to its path:\n%s", scoped.Prompt)
			}
			if res := steps["resource_path"]; res["text"] != scoped.Prompt || res["meta"].(map[string]any)["precept/version"] != scoped.Version {
				t.Fatalf("resource with a path = %v, want version %s", res, scoped.Version)
			}
			if steps["prompt"]["text"] != want.Prompt {
				t.Fatalf("prompt = %v", steps["prompt"])
			}
			if !strings.Contains(fmt.Sprint(steps["list_proposals"]["structured"]), pending) {
				t.Fatalf("list_proposals lacks %s: %v", pending, steps["list_proposals"])
			}

			// A reader may not approve: the API's policy, not the MCP server's.
			refused := steps["reader_approve"]
			if refused["isError"] != true || !strings.Contains(fmt.Sprint(refused["text"]), "permission_denied") {
				t.Fatalf("a reader's approve_proposal = %v, want a permission_denied tool error", refused)
			}
			if p := getProposal(t, url, pending); p.GetStatus() != preceptv1.ProposalStatus_PROPOSAL_STATUS_PENDING || len(p.GetApprovals()) != 0 {
				t.Fatalf("after the reader's attempt the proposal is %v with approvals %v", p.GetStatus(), p.GetApprovals())
			}

			// An approval made through the API reaches the subscriber.
			approve(t, url, pending)
			run.proceed(t)
			upd := run.step(t, "updated")
			if upd["uri"] != "precept://rules/"+agent+"/"+stage {
				t.Fatalf("updated = %v", upd)
			}
			if after := buildPrompt(t, url); !strings.Contains(after.Prompt, later[transport]) {
				t.Fatalf("the approved rule is not in the prompt:\n%s", after.Prompt)
			}
			run.wait(t)
		})
	}
}

// nodeClient returns node and the interop script, failing with what to
// install when they are missing.
func nodeClient(t *testing.T) (node, script string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node not found: run .ci/install-deps (it installs node, npm and tools/mcpclient's packages)")
	}
	dir, err := filepath.Abs("../../tools/mcpclient")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk", "package.json")); err != nil {
		t.Fatal("tools/mcpclient/node_modules lacks @modelcontextprotocol/sdk: run .ci/install-deps")
	}
	return node, filepath.Join(dir, "run.mjs")
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

// startDaemon runs preceptd until the test ends and returns its URL once
// it is ready.
func startDaemon(t *testing.T, bin, cfg, addr string) string {
	t.Helper()
	logs := &testenv.SyncBuffer{}
	cmd := exec.Command(bin, "--config", cfg)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("preceptd:\n%s", logs)
		}
	})
	url := "http://" + addr
	deadline := time.Now().Add(30 * time.Second)
	for {
		if resp, err := http.Get(url + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return url
			}
		}
		select {
		case <-exited:
			t.Fatalf("preceptd exited at start:\n%s", logs)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("preceptd not ready:\n%s", logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type tokenTransport struct{ token string }

func (tt tokenTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+tt.token)
	return http.DefaultTransport.RoundTrip(r)
}

func client(token string) *http.Client { return &http.Client{Transport: tokenTransport{token}} }

// propose makes a manual proposal as carol and returns its id.
func propose(t *testing.T, url, text string) string {
	t.Helper()
	resp, err := preceptv1connect.NewRuleServiceClient(client(carol), url).ProposeRule(context.Background(), connect.NewRequest(&preceptv1.ProposeRuleRequest{
		AffectedAgents: []string{agent}, RuleContent: text, Rationale: "flagged by three reviewers",
	}))
	if err != nil {
		t.Fatalf("ProposeRule: %v", err)
	}
	return resp.Msg.GetProposal().GetProposalId()
}

// approve approves a proposal as alice and bob, which merges it, and
// waits until its rule is active.
func approve(t *testing.T, url, id string) {
	t.Helper()
	for _, token := range []string{alice, bob} {
		if _, err := preceptv1connect.NewRuleServiceClient(client(token), url).ApproveRule(context.Background(), connect.NewRequest(&preceptv1.ApproveRuleRequest{ProposalId: id})); err != nil {
			t.Fatalf("ApproveRule: %v", err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for getProposal(t, url, id).GetRuleId() == "" {
		if time.Now().After(deadline) {
			t.Fatalf("proposal %s was not merged", id)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func getProposal(t *testing.T, url, id string) *preceptv1.Proposal {
	t.Helper()
	resp, err := preceptv1connect.NewRuleServiceClient(client(rita), url).GetProposal(context.Background(), connect.NewRequest(&preceptv1.GetProposalRequest{ProposalId: id}))
	if err != nil {
		t.Fatalf("GetProposal: %v", err)
	}
	return resp.Msg.GetProposal()
}

// pushStagePrompt pushes prompts/implement.md and a _rules.md for
// services/billing to the rules repository's main, as the README does.
func pushStagePrompt(t *testing.T, repo, work string) {
	t.Helper()
	git := func(args ...string) {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("clone", "-q", repo, work)
	writeFile(t, filepath.Join(work, "prompts", "implement.md"), "You implement Go services.\n")
	writeFile(t, filepath.Join(work, "prompts", "services", "billing", "_rules.md"), "- Amounts are integer cents; never use float64 for money.\n")
	git("-C", work, "add", "prompts")
	git("-C", work, "-c", "user.name=Carol", "-c", "user.email=carol@example.com", "commit", "-q", "-m", "Stage prompt")
	git("-C", work, "push", "-q", "origin", "HEAD:main")
}

func buildPrompt(t *testing.T, url string, path ...string) *preceptv1.BuildPromptResponse {
	t.Helper()
	req := &preceptv1.BuildPromptRequest{Agent: agent, Stage: stage}
	if len(path) > 0 {
		req.ScopePath = path[0]
	}
	resp, err := preceptv1connect.NewPromptServiceClient(client(rita), url).BuildPrompt(context.Background(), connect.NewRequest(req))
	if err != nil {
		t.Fatalf("BuildPrompt: %v", err)
	}
	return resp.Msg
}

// nodeRun is the interop script running.
type nodeRun struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string
	stderr *testenv.SyncBuffer
	exited chan error
}

func startNode(t *testing.T, node, script, plan string) *nodeRun {
	t.Helper()
	cmd := exec.Command(node, script, plan)
	cmd.Dir = filepath.Dir(script)
	cmd.Env = append(os.Environ(), "MCP_TOKEN="+rex, "MCP_READER_TOKEN="+rita)
	r := &nodeRun{cmd: cmd, lines: make(chan string, 16), stderr: &testenv.SyncBuffer{}, exited: make(chan error, 1)}
	cmd.Stderr = r.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if r.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 4<<20)
		for sc.Scan() {
			r.lines <- sc.Text()
		}
		close(r.lines)
		r.exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		if t.Failed() {
			t.Logf("node stderr:\n%s", r.stderr)
		}
	})
	return r
}

// step waits for the script's next line and checks it is the named step.
func (r *nodeRun) step(t *testing.T, name string) map[string]any {
	t.Helper()
	select {
	case line, ok := <-r.lines:
		if !ok {
			t.Fatalf("the script ended before step %s: %v\n%s", name, <-r.exited, r.stderr)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil || m["step"] != name {
			t.Fatalf("want step %s, got %s (%v)", name, line, err)
		}
		return m
	case <-time.After(90 * time.Second):
		t.Fatalf("no step %s within 90s\n%s", name, r.stderr)
	}
	return nil
}

// proceed lets the script go on to its next step.
func (r *nodeRun) proceed(t *testing.T) {
	t.Helper()
	if _, err := io.WriteString(r.stdin, "go\n"); err != nil {
		t.Fatal(err)
	}
}

// wait checks that the script ends well.
func (r *nodeRun) wait(t *testing.T) {
	t.Helper()
	r.stdin.Close()
	for range r.lines {
	}
	select {
	case err := <-r.exited:
		if err != nil {
			t.Fatalf("node: %v\n%s", err, r.stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("node did not exit\n%s", r.stderr)
	}
}
