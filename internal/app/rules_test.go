package app

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
	"github.com/precept-dev/precept/gen/precept/v1/preceptv1connect"
	"github.com/precept-dev/precept/lib/testenv"
)

// Tokens of the rule tests: two approvers and a reader.
const (
	aliceToken  = "alice-approver-token-0123"
	bobToken    = "bob-approver-token-012345"
	viewerToken = "viewer-reader-token-01234"
)

const ruleTokensYAML = `
auth:
  tokens:
    - {name: alice, role: approver, token: ` + aliceToken + `}
    - {name: bob, role: approver, token: ` + bobToken + `}
    - {name: viewer, role: reader, token: ` + viewerToken + `}
`

func ruleClient(base, protocol, token string) preceptv1connect.RuleServiceClient {
	var opts []connect.ClientOption
	if protocol == "grpc" {
		opts = append(opts, connect.WithGRPC())
	}
	return preceptv1connect.NewRuleServiceClient(protocols(base, token)[protocol], base, opts...)
}

// gitIn runs the git CLI in dir as a reviewer.
func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	return testenv.GitAs(t, dir, "Jane Reviewer", "jane@example.com", args...)
}

// clusterEvents are reviews of one recurring problem by three reviewers
// in two epics: a GENERALIZABLE_HIGH cluster.
func clusterEvents() []map[string]any {
	comments := []string{
		"missing unit tests for the new retry helper",
		"the new retry helper is missing unit tests",
		"unit tests are missing for the new retry helper",
	}
	var out []map[string]any
	for i, c := range comments {
		out = append(out, event(fmt.Sprintf("rule-d%d", i+1),
			"reviewer_id", []string{"rev-ann", "rev-ben", "rev-cat"}[i],
			"epic_id", []string{"EPIC-1", "EPIC-2", "EPIC-1"}[i],
			"reviewer_comment", c))
	}
	return out
}

// pendingProposal waits for the proposer to draft from the cluster.
func pendingProposal(t *testing.T, c preceptv1connect.RuleServiceClient) *preceptv1.Proposal {
	t.Helper()
	var p *preceptv1.Proposal
	eventually(t, "a drafted proposal", 30*time.Second, func() bool {
		resp, err := c.ListProposals(context.Background(), connect.NewRequest(&preceptv1.ListProposalsRequest{Status: preceptv1.ProposalStatus_PROPOSAL_STATUS_PENDING}))
		if err != nil || len(resp.Msg.GetProposals()) == 0 {
			return false
		}
		p = resp.Msg.GetProposals()[0]
		return true
	})
	return p
}

func TestDecisionsBecomeARuleOnMainThroughTwoApprovals(t *testing.T) {
	r := start(t, ruleTokensYAML+"rules: {propose_interval: 200ms}\n")
	ctx := context.Background()
	xaddAll(t, r.rdb, clusterEvents())

	viewer := ruleClient(r.app.URL(), "connect", viewerToken)
	p := pendingProposal(t, viewer)
	if p.GetClusterId() == "" || len(p.GetCreatedFromFeedbackIds()) != 3 || p.GetProposedBy() != "precept" || p.GetPriority() != "high" {
		t.Fatalf("drafted proposal = %v", p)
	}
	if !strings.Contains(p.GetEvidenceSummary(), "3 distinct reviewers") || !strings.Contains(p.GetEvidenceSummary(), "2 distinct epics") {
		t.Fatalf("evidence summary = %q", p.GetEvidenceSummary())
	}
	repo := r.app.RulesRepo.Path()
	if got := gitIn(t, repo, "branch", "--list", "proposal/*"); strings.TrimSpace(strings.TrimPrefix(got, "*")) != "proposal/"+p.GetProposalId() {
		t.Fatalf("branches = %q", got)
	}
	// The cluster's evaluations link to the proposal.
	evaluations := preceptv1connect.NewEvaluatorServiceClient(protocols(r.app.URL(), viewerToken)["connect"], r.app.URL())
	eventually(t, "the evaluation to name the proposal", 10*time.Second, func() bool {
		ev, err := evaluations.GetEvaluation(ctx, connect.NewRequest(&preceptv1.GetEvaluationRequest{DecisionId: "rule-d1"}))
		return err == nil && ev.Msg.GetEvaluation().GetProposedAction().GetProposalId() == p.GetProposalId()
	})
	cluster, err := evaluations.GetCluster(ctx, connect.NewRequest(&preceptv1.GetClusterRequest{Id: p.GetClusterId()}))
	if err != nil || cluster.Msg.GetCluster().GetProposalId() != p.GetProposalId() {
		t.Fatalf("cluster = %v, %v; want it linked to %s", cluster, err, p.GetProposalId())
	}

	if _, err := ruleClient(r.app.URL(), "grpc", aliceToken).ApproveRule(ctx, connect.NewRequest(&preceptv1.ApproveRuleRequest{ProposalId: p.GetProposalId(), Note: "yes", Revision: p.GetRevision()})); err != nil {
		t.Fatal(err)
	}
	resp, err := ruleClient(r.app.URL(), "connect", bobToken).ApproveRule(ctx, connect.NewRequest(&preceptv1.ApproveRuleRequest{ProposalId: p.GetProposalId()}))
	if err != nil {
		t.Fatal(err)
	}
	rule := resp.Msg.GetRule()
	if rule.GetStatus() != preceptv1.RuleStatus_RULE_STATUS_ACTIVE || len(rule.GetApprovals()) != 2 {
		t.Fatalf("rule = %v", rule)
	}
	active, err := viewer.ListActiveRules(ctx, connect.NewRequest(&preceptv1.ListActiveRulesRequest{Agent: "coding-agent"}))
	if err != nil || len(active.Msg.GetRules()) != 1 || active.Msg.GetRules()[0].GetRuleId() != rule.GetRuleId() {
		t.Fatalf("active rules = %v, %v", active, err)
	}
	// The git CLI shows the rule on main, the merge of the rule PR and the
	// trailers saying who approved which feedback.
	path := "rules/active/coding-agent/" + rule.GetRuleId() + ".md"
	if got := gitIn(t, repo, "show", "main:"+path); !strings.Contains(got, "proposal_id: "+p.GetProposalId()) {
		t.Fatalf("%s on main:\n%s", path, got)
	}
	if got := gitIn(t, repo, "log", "--merges", "--format=%P", "main"); !strings.HasSuffix(got, gitIn(t, repo, "rev-parse", "proposal/"+p.GetProposalId())) {
		t.Fatalf("merge parents = %q", got)
	}
	trailers := gitIn(t, repo, "log", "-1", "--format=%(trailers)", "main")
	for _, want := range []string{"Approved-by: alice", "Approved-by: bob", "Proposal-Id: " + p.GetProposalId(), "Feedback-Ids: rule-d1 rule-d2 rule-d3"} {
		if !strings.Contains(trailers, want) {
			t.Errorf("trailers lack %q:\n%s", want, trailers)
		}
	}
	gitIn(t, repo, "fsck", "--strict", "--no-dangling")
}

func TestRulesRemoteIsConfiguredAndReceivesProposalBranches(t *testing.T) {
	remote := filepath.Join(t.TempDir(), "remote.git")
	gitIn(t, filepath.Dir(remote), "init", "-q", "--bare", "-b", "main", remote)
	r := start(t, ruleTokensYAML+fmt.Sprintf("rules: {propose_interval: 200ms, git: {remote_url: %q, fetch_interval: 200ms}}\n", remote))
	xaddAll(t, r.rdb, clusterEvents())
	p := pendingProposal(t, ruleClient(r.app.URL(), "connect", viewerToken))
	eventually(t, "the proposal branch on the remote", 20*time.Second, func() bool {
		out, err := exec.Command("git", "-C", remote, "rev-parse", "--verify", "-q", "proposal/"+p.GetProposalId()).Output()
		return err == nil && len(out) > 0
	})
	if got := gitIn(t, remote, "rev-parse", "main"); got != gitIn(t, r.app.RulesRepo.Path(), "rev-parse", "main") {
		t.Fatalf("remote main at %s", got)
	}
}

func TestRuleFeatureFlagsComeFromTheConfiguration(t *testing.T) {
	r := start(t, ruleTokensYAML+"rules: {propose_interval: 100ms}\nfeatures: {proposing: false, auto_merge: false}\n")
	if f := r.app.Rules.Features(); f.Proposing || f.AutoMerge {
		t.Fatalf("features = %+v", f)
	}
	xaddAll(t, r.rdb, clusterEvents())
	eventually(t, "the cluster to be evaluated", 20*time.Second, func() bool {
		ev, _, err := r.app.Evaluator.Evaluation(context.Background(), "rule-d3")
		return err == nil && ev.Class == "GENERALIZABLE_HIGH"
	})
	time.Sleep(500 * time.Millisecond) // several proposer rounds
	resp, err := ruleClient(r.app.URL(), "connect", viewerToken).ListProposals(context.Background(), connect.NewRequest(&preceptv1.ListProposalsRequest{}))
	if err != nil || len(resp.Msg.GetProposals()) != 0 {
		t.Fatalf("proposals with proposing off = %v, %v", resp, err)
	}
}
