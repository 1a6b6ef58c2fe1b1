package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
	"github.com/precept-dev/precept/gen/precept/v1/preceptv1connect"
	"github.com/precept-dev/precept/lib/testenv"
)

var (
	faultOnce sync.Once
	faultBin  string
	faultErr  error
)

// faultBinary builds preceptd with the faultinject tag: PRECEPT_FAULT
// then stops it at a named point so a test can kill it there.
func faultBinary(t *testing.T) string {
	t.Helper()
	binaries(t) // skips under -short, like every process-level test
	faultOnce.Do(func() {
		dir, err := os.MkdirTemp("", "precept-fault-")
		if err != nil {
			faultErr = err
			return
		}
		faultBin = filepath.Join(dir, "preceptd")
		out, err := exec.Command("go", "build", "-tags", "faultinject", "-o", faultBin, "github.com/precept-dev/precept/cmd/preceptd").CombinedOutput()
		if err != nil {
			faultErr = fmt.Errorf("go build -tags faultinject: %v\n%s", err, out)
		}
	})
	if faultErr != nil {
		t.Fatal(faultErr)
	}
	return faultBin
}

type tokenTransport struct{ token string }

func (tt tokenTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+tt.token)
	return http.DefaultTransport.RoundTrip(r)
}

func rulesAs(addr, token string) preceptv1connect.RuleServiceClient {
	return preceptv1connect.NewRuleServiceClient(&http.Client{Transport: tokenTransport{token}}, "http://"+addr)
}

func TestKilledBetweenApprovalCommitAndMergeMergesAfterRestart(t *testing.T) {
	faulty := faultBinary(t)
	preceptd, _ := binaries(t)
	redisAddr := testenv.Redis(t)
	dir := t.TempDir()
	addr := testenv.FreeAddr(t)
	cfg := writeConfig(t, dir, fmt.Sprintf(`
listen: %s
data_dir: %s
redis: {addr: %q}
auth:
  tokens:
    - {name: carol, role: approver, token: carol-token-0123456789}
    - {name: alice, role: approver, token: alice-token-0123456789}
    - {name: bob, role: approver, token: bob-token-0123456789}
`, addr, filepath.Join(dir, "data"), redisAddr))

	os.Setenv("PRECEPT_FAULT", "approval-committed")
	d := startDaemon(t, faulty, cfg, addr)
	os.Unsetenv("PRECEPT_FAULT")
	ctx := context.Background()
	const text = "Return errors to the caller wrapped with context; never discard them in retry loops."
	prop, err := rulesAs(addr, "carol-token-0123456789").ProposeRule(ctx, connect.NewRequest(&preceptv1.ProposeRuleRequest{
		AffectedAgents: []string{"coding-agent"}, RuleContent: text, Rationale: "flagged by three reviewers",
	}))
	if err != nil {
		t.Fatal(err)
	}
	id := prop.Msg.Proposal.ProposalId
	if _, err := rulesAs(addr, "alice-token-0123456789").ApproveRule(ctx, connect.NewRequest(&preceptv1.ApproveRuleRequest{ProposalId: id})); err != nil {
		t.Fatal(err)
	}
	// The second approval completes the proposal: preceptd commits it and
	// stops before merging.
	go rulesAs(addr, "bob-token-0123456789").ApproveRule(ctx, connect.NewRequest(&preceptv1.ApproveRuleRequest{ProposalId: id}))
	waitFor(t, "the fault point", 30*time.Second, func() bool { return strings.Contains(d.output(), "FAULT POINT REACHED: approval-committed") }, d.output)
	d.kill()
	rulesGit := filepath.Join(dir, "data", "rules.git")
	if out, _ := exec.Command("git", "-C", rulesGit, "ls-tree", "-r", "--name-only", "main", "rules/active").Output(); len(out) != 0 {
		t.Fatalf("the rule was merged before the kill:\n%s", out)
	}

	d = startDaemon(t, preceptd, cfg, addr)
	reader := rulesAs(addr, "carol-token-0123456789")
	var rules []*preceptv1.Rule
	waitFor(t, "the approved rule to be merged after the restart", 60*time.Second, func() bool {
		res, err := reader.ListActiveRules(ctx, connect.NewRequest(&preceptv1.ListActiveRulesRequest{Agent: "coding-agent"}))
		if err != nil {
			return false
		}
		rules = res.Msg.Rules
		return len(rules) > 0
	}, d.output)
	if len(rules) != 1 || rules[0].ProposalId != id || len(rules[0].Approvals) != 2 {
		t.Fatalf("active rules = %v", rules)
	}
	prompt, err := preceptv1connect.NewPromptServiceClient(&http.Client{Transport: tokenTransport{"carol-token-0123456789"}}, "http://"+addr).
		BuildPrompt(ctx, connect.NewRequest(&preceptv1.BuildPromptRequest{Agent: "coding-agent", Stage: "implement", BasePrompt: ptr("You implement the change.")}))
	if err != nil || !strings.Contains(prompt.Msg.Prompt, "never discard them in retry loops") {
		t.Fatalf("BuildPrompt = %v, %v", prompt, err)
	}
	d.stop(t)
	out, err := exec.Command("git", "-C", rulesGit, "ls-tree", "-r", "--name-only", "main", "rules/active").Output()
	if err != nil || strings.Count(strings.TrimSpace(string(out)), "\n") != 0 {
		t.Fatalf("rules/active on main = %q, %v: want exactly one rule file", out, err)
	}
	if out, err := exec.Command("git", "-C", rulesGit, "fsck", "--strict", "--no-dangling").CombinedOutput(); err != nil {
		t.Fatalf("git fsck: %v\n%s", err, out)
	}
}

func ptr[T any](v T) *T { return &v }
