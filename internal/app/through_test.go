package app

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
	"github.com/precept-dev/precept/lib/testenv"
	"github.com/precept-dev/precept/rules/rulefmt"
)

const carolToken = "carol-approver-token-0123"

// Two preceptd nodes with their own data directories write the rules
// repository through one git server (git http-backend) with
// rules.git.write_through. A proposal is on the server when ProposeRule
// returns; an approval on node a raced against a rejection on node b
// ends with one outcome on the server and the same one on both nodes;
// and a rule approved on one node reaches the other's BuildPrompt.
func TestTwoNodesWritingRulesThroughOneGitServerDecideEachProposalOnce(t *testing.T) {
	ctx := context.Background()
	srv := testenv.StartGitServer(t)
	testenv.Git(t, srv.Root, "init", "--quiet", "--bare", "--initial-branch=main", srv.Dir("rules"))
	yaml := fmt.Sprintf(`
auth:
  tokens:
    - {name: alice, role: approver, token: %s}
    - {name: bob, role: approver, token: %s}
    - {name: carol, role: approver, token: %s}
rules:
  required_approvals: 1
  git: {remote_url: %q, fetch_interval: 200ms, write_through: true, signing_key: %q}
prompts: {watch_poll: 1h}
`, aliceToken, bobToken, carolToken, srv.URL("rules"), "one deployment's key, shared by its nodes")
	a, b := start(t, yaml), start(t, yaml)
	onServer := func(args ...string) string { return testenv.Git(t, srv.Dir("rules"), args...) }

	propose := func(content string) string {
		t.Helper()
		resp, err := ruleClient(a.app.URL(), "connect", carolToken).ProposeRule(ctx, connect.NewRequest(&preceptv1.ProposeRuleRequest{
			AffectedAgents: []string{"coding-agent"}, RuleContent: content, Rationale: "Reviewers keep asking for it.",
		}))
		if err != nil {
			t.Fatal(err)
		}
		id := resp.Msg.GetProposal().GetProposalId()
		if !strings.Contains(onServer("for-each-ref", "refs/heads/"), rulefmt.ProposalBranch(id)) {
			t.Fatalf("%s is not on the git server when ProposeRule returns", id)
		}
		eventually(t, "node b follows "+id, 20*time.Second, func() bool {
			_, err := ruleClient(b.app.URL(), "connect", carolToken).GetProposal(ctx, connect.NewRequest(&preceptv1.GetProposalRequest{ProposalId: id}))
			return err == nil
		})
		return id
	}

	id := propose("Write a unit test for every retry path, including the give-up case.")
	var wg sync.WaitGroup
	var errA, errB error
	wg.Add(2)
	go func() {
		defer wg.Done()
		_, errA = ruleClient(a.app.URL(), "connect", aliceToken).ApproveRule(ctx, connect.NewRequest(&preceptv1.ApproveRuleRequest{ProposalId: id}))
	}()
	go func() {
		defer wg.Done()
		_, errB = ruleClient(b.app.URL(), "connect", bobToken).RejectRule(ctx, connect.NewRequest(&preceptv1.RejectRuleRequest{ProposalId: id, Reason: "too broad for us"}))
	}()
	wg.Wait()
	files := onServer("ls-tree", "-r", "--name-only", "main")
	rule, rejected := strings.Contains(files, rulefmt.RuleIDFor(id)+".md"), strings.Contains(files, rulefmt.RejectedPath(id))
	t.Logf("approve on a: %v; reject on b: %v; rule on the server %v, rejection %v", errA, errB, rule, rejected)
	if rule == rejected {
		t.Fatalf("the server holds rule=%v rejection=%v for %s", rule, rejected, id)
	}
	if rejected != (errB == nil) {
		t.Fatalf("the rejection returned %v, but the server holds rejection=%v", errB, rejected)
	}
	want := preceptv1.ProposalStatus_PROPOSAL_STATUS_APPROVED
	if rejected {
		want = preceptv1.ProposalStatus_PROPOSAL_STATUS_REJECTED
	}
	for name, n := range map[string]*running{"a": a, "b": b} {
		eventually(t, fmt.Sprintf("node %s sees %s", name, want), 20*time.Second, func() bool {
			got, err := ruleClient(n.app.URL(), "connect", carolToken).GetProposal(ctx, connect.NewRequest(&preceptv1.GetProposalRequest{ProposalId: id}))
			return err == nil && got.Msg.GetProposal().GetStatus() == want
		})
	}

	// A rule approved on node a is in node b's prompt soon after.
	commitRulesRepo(t, a.app.RulesRepo, "stage prompt", map[string]string{"prompts/implement.md": "You implement tasks."})
	a.app.Prompts.Notify()
	id2 := propose("Log every retried request with its attempt number and the error that caused it.")
	if _, err := ruleClient(a.app.URL(), "connect", aliceToken).ApproveRule(ctx, connect.NewRequest(&preceptv1.ApproveRuleRequest{ProposalId: id2})); err != nil {
		t.Fatal(err)
	}
	req := connect.NewRequest(&preceptv1.BuildPromptRequest{Agent: "coding-agent", Stage: "implement"})
	var version string
	eventually(t, "node a serves the rule", 10*time.Second, func() bool {
		resp, err := promptServiceClientAs(a.app.URL(), "connect", carolToken).BuildPrompt(ctx, req)
		if err != nil || !strings.Contains(resp.Msg.GetPrompt(), "attempt number") {
			return false
		}
		version = resp.Msg.GetVersion()
		return true
	})
	eventually(t, "node b serves node a's version", 10*time.Second, func() bool {
		resp, err := promptServiceClientAs(b.app.URL(), "connect", carolToken).BuildPrompt(ctx, req)
		return err == nil && resp.Msg.GetVersion() == version
	})
	if got := onServer("for-each-ref", "refs/heads/"+rulefmt.BranchPrefix); got != "" {
		t.Errorf("decided proposals' branches are still on the server (%s then %s): %s\n%s", id, id2, got, onServer("log", "--format=%H %s", "--all", "-n", "12"))
	}
	onServer("fsck", "--strict", "--no-dangling")
}
