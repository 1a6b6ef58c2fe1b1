package rules

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/rules/rulefmt"
)

func TestDraftedProposalBecomesARulePRAndTwoApprovalsMergeIt(t *testing.T) {
	f := newFixture(t, Options{})
	ctx := context.Background()
	p := f.proposeOne(cluster("c-tests", "coding-agent", testsCluster...))
	if p.Status != rulefmt.Pending || p.Branch != "proposal/"+p.ID || p.ID != draftID("c-tests", 0) {
		t.Fatalf("drafted = %+v", p)
	}
	if !strings.HasPrefix(p.Content, "Include unit tests for the new retry helper.") {
		t.Fatalf("drafted rule text = %q", p.Content)
	}
	for _, want := range []string{"3 negative reviews", "3 distinct reviewers", "2 distinct epics", "“missing unit tests for the new retry helper” — reviewer-1"} {
		if !strings.Contains(p.EvidenceSummary, want) {
			t.Errorf("evidence summary lacks %q: %s", want, p.EvidenceSummary)
		}
	}
	// The git CLI sees the rule PR: a branch with the proposal file.
	if got := f.git("show", "proposal/"+p.ID+":rules/proposals/"+p.ID+".md"); !strings.Contains(got, "status: PENDING") {
		t.Fatalf("proposal file on the branch:\n%s", got)
	}
	if again := f.propose(cluster("c-tests", "coding-agent", testsCluster...)); len(again) != 0 {
		t.Fatalf("a cluster with a live proposal was drafted again: %+v", again)
	}

	one := f.approve(p.ID, "alice")
	if one.Status != rulefmt.Pending || len(one.Approvals) != 1 || one.Revision != 2 {
		t.Fatalf("after one approval = %+v", one)
	}
	if again := f.approve(p.ID, "alice"); again.Revision != 2 || len(again.Approvals) != 1 {
		t.Fatalf("approving twice changed the proposal: %+v", again)
	}
	two, err := f.m.Approve(ctx, ApproveRequest{ProposalID: p.ID, By: "bob", Note: "good catch, we keep forgetting these", Revision: 2, Via: rulefmt.ViaSlack})
	if err != nil {
		t.Fatal(err)
	}
	if two.Status != rulefmt.Approved || two.RuleID != "r-"+strings.TrimPrefix(p.ID, "p-") || two.MergedCommit == "" {
		t.Fatalf("after two approvals = %+v", two)
	}
	rules, err := f.m.ActiveRules(ctx, "coding-agent")
	if err != nil || len(rules) != 1 || rules[0].ID != two.RuleID || rules[0].Status != rulefmt.Active || rules[0].Content != p.Content {
		t.Fatalf("active rules = %+v, %v", rules, err)
	}
	// The merge and its trailers, as git shows them.
	if got := f.git("log", "--merges", "--format=%s", "main"); got != "Approve "+p.ID+" as rule "+two.RuleID+" for coding-agent" {
		t.Fatalf("merges on main = %q", got)
	}
	trailers := f.git("log", "-1", "--format=%(trailers)", "main")
	for _, want := range []string{"Proposal-Id: " + p.ID, "Rule-Id: " + two.RuleID, "Approved-by: alice", "Approved-by: bob", "Feedback-Ids: c-tests-d1 c-tests-d2 c-tests-d3"} {
		if !strings.Contains(trailers, want) {
			t.Errorf("merge trailers lack %q:\n%s", want, trailers)
		}
	}
	if parents := strings.Fields(f.git("log", "-1", "--format=%P", "main")); len(parents) != 2 || parents[1] != f.git("rev-parse", "proposal/"+p.ID) {
		t.Fatalf("merge parents = %v", parents)
	}
	if got := f.git("show", "main:rules/active/coding-agent/"+two.RuleID+".md"); !strings.Contains(got, "proposal_id: "+p.ID) || !strings.Contains(got, "status: ACTIVE") {
		t.Fatalf("rule file:\n%s", got)
	}
	if ex := f.readMain("tuning/examples/coding-agent/good/" + p.ID + "-bob.md"); !strings.Contains(ex, "good catch") || !strings.Contains(ex, "ground_truth: true") || !strings.Contains(ex, "via: slack") {
		t.Fatalf("tuning example:\n%s", ex)
	}
	if want := []rulefmt.ChangeKind{rulefmt.ProposalCreated, rulefmt.ApprovalRecorded, rulefmt.ApprovalRecorded, rulefmt.ProposalApproved, rulefmt.RuleMerged}; !slices.Equal(f.kinds(), want) {
		t.Fatalf("changes = %v, want %v", f.kinds(), want)
	}
	f.fsck()
}

func TestApprovalPolicy(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, Options{Approvers: []string{"alice", "bob", "carol", "dave"}})
	manual, err := f.m.Propose(ctx, ManualProposal{Agents: []string{"docs-agent"}, Content: "Keep headings in sentence case in every generated document.", Rationale: "House style."}, precept.Identity{Name: "carol", Role: precept.RoleApprover})
	if err != nil {
		t.Fatal(err)
	}
	protected, err := f.m.Propose(ctx, ManualProposal{Agents: []string{"coding-agent"}, Content: "Validate every user-supplied path against the workspace root before opening it.", Tags: []string{"Security"}}, alice)
	if err != nil {
		t.Fatal(err)
	}
	if !protected.Protected || protected.Required != 3 {
		t.Fatalf("protected proposal = %+v", protected)
	}

	tests := []struct {
		name     string
		id       string
		who      string
		revision int
		code     precept.Code
	}{
		{"proposer approves own proposal", manual.ID, "carol", 0, precept.PermissionDenied},
		{"not on the approver list", manual.ID, "mallory", 0, precept.PermissionDenied},
		{"unknown revision", manual.ID, "alice", 9, precept.FailedPrecondition},
		{"malformed id", "../../etc", "alice", 0, precept.Invalid},
		{"unknown proposal", "p-0000000000", "alice", 0, precept.NotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := f.m.Approve(ctx, ApproveRequest{ProposalID: tt.id, By: tt.who, Revision: tt.revision, Via: rulefmt.ViaAPI})
			if got := precept.ErrorCode(err); got != tt.code {
				t.Fatalf("Approve = %v (code %s), want code %s", err, got, tt.code)
			}
		})
	}

	// A protected proposal needs one approval more than the default.
	f.approve(protected.ID, "carol")
	if p := f.approve(protected.ID, "bob"); p.Status != rulefmt.Pending {
		t.Fatalf("protected proposal after 2 approvals = %s", p.Status)
	}
	if p := f.approve(protected.ID, "dave"); p.Status != rulefmt.Approved || p.MergedCommit == "" {
		t.Fatalf("protected proposal after 3 approvals = %+v", p)
	}
	if _, err := f.m.Approve(ctx, ApproveRequest{ProposalID: protected.ID, By: "alice", Via: rulefmt.ViaAPI}); precept.ErrorCode(err) != precept.FailedPrecondition {
		t.Fatalf("approving a merged proposal: %v", err)
	}

	// One rejection with a reason rejects; a reason is required.
	if _, err := f.m.Reject(ctx, RejectRequest{ProposalID: manual.ID, By: "alice", Reason: "  ", Via: rulefmt.ViaAPI}); precept.ErrorCode(err) != precept.Invalid {
		t.Fatalf("reject without reason: %v", err)
	}
	f.approve(manual.ID, "bob")
	rejected, err := f.m.Reject(ctx, RejectRequest{ProposalID: manual.ID, By: "alice", Reason: "Sentence case is already enforced by the linter.", Via: rulefmt.ViaAPI})
	if err != nil {
		t.Fatal(err)
	}
	if rejected.Status != rulefmt.Rejected || rejected.Rejection.Rejector != "alice" || len(rejected.Approvals) != 1 {
		t.Fatalf("rejected = %+v", rejected)
	}
	if again, err := f.m.Reject(ctx, RejectRequest{ProposalID: manual.ID, By: "alice", Reason: "again", Via: rulefmt.ViaAPI}); err != nil || again.Rejection.Reason != "Sentence case is already enforced by the linter." {
		t.Fatalf("rejecting twice = %+v, %v", again, err)
	}
	if _, err := f.m.Approve(ctx, ApproveRequest{ProposalID: manual.ID, By: "dave", Via: rulefmt.ViaAPI}); precept.ErrorCode(err) != precept.FailedPrecondition || !strings.Contains(err.Error(), "rejected by alice") {
		t.Fatalf("approving a rejected proposal: %v", err)
	}
	if got := f.git("log", "-1", "--format=%(trailers:key=Rejected-by,valueonly)%(trailers:key=Reason,valueonly)", "main"); !strings.Contains(got, "alice") || !strings.Contains(got, "linter") {
		t.Fatalf("rejection trailers = %q", got)
	}
	if ex := f.readMain("tuning/examples/docs-agent/bad/" + manual.ID + "-alice.md"); !strings.Contains(ex, "enforced by the linter") || !strings.Contains(ex, "label: bad") {
		t.Fatalf("bad tuning example:\n%s", ex)
	}
	if f.readMain("rules/rejected/"+manual.ID+".md") == "" {
		t.Fatal("the rejected proposal is not archived on main")
	}
	f.fsck()
}

func TestStaleRevisionIsRefusedButApprovalsByOthersAreNot(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, Options{RequiredApprovals: 3})
	p := f.proposeOne(cluster("c-tests", "coding-agent", testsCluster...))
	f.approve(p.ID, "alice")
	// bob saw revision 1; alice's approval since does not make it stale.
	if got, err := f.m.Approve(ctx, ApproveRequest{ProposalID: p.ID, By: "bob", Revision: 1, Via: rulefmt.ViaSlack}); err != nil || len(got.Approvals) != 2 {
		t.Fatalf("approve at revision 1 after another approval = %+v, %v", got, err)
	}
	// New evidence from a duplicate cluster changes the proposal: a
	// decision made before it is stale.
	dup := cluster("c-tests-2", "coding-agent", "missing unit tests for the new retry helper", "add unit tests for the new retry helper please")
	if out := f.proposeOne(dup); out.Status != rulefmt.Merged || out.MergedInto != p.ID {
		t.Fatalf("duplicate draft = %+v", out)
	}
	cur := f.get(p.ID)
	if cur.Revision != 4 || len(cur.FeedbackIDs) != 5 {
		t.Fatalf("after the evidence was added = rev %d, feedback %v", cur.Revision, cur.FeedbackIDs)
	}
	_, err := f.m.Approve(ctx, ApproveRequest{ProposalID: p.ID, By: "carol", Revision: 3, Via: rulefmt.ViaSlack})
	if precept.ErrorCode(err) != precept.FailedPrecondition || !strings.Contains(err.Error(), "stale revision 3") {
		t.Fatalf("approve at a stale revision: %v", err)
	}
	if _, err := f.m.Reject(ctx, RejectRequest{ProposalID: p.ID, By: "carol", Reason: "no", Revision: 2, Via: rulefmt.ViaSlack}); precept.ErrorCode(err) != precept.FailedPrecondition {
		t.Fatalf("reject at a stale revision: %v", err)
	}
	if got, err := f.m.Approve(ctx, ApproveRequest{ProposalID: p.ID, By: "carol", Revision: cur.Revision, Via: rulefmt.ViaSlack}); err != nil || got.Status != rulefmt.Approved {
		t.Fatalf("approve at the current revision = %+v, %v", got, err)
	}
}

func TestSelfApprovalIsAllowedOnlyForDraftedProposals(t *testing.T) {
	f := newFixture(t, Options{})
	p := f.proposeOne(cluster("c-tests", "coding-agent", testsCluster...))
	// Drafted proposals have no human proposer; "precept" is no approver.
	if _, err := f.m.Approve(context.Background(), ApproveRequest{ProposalID: p.ID, By: rulefmt.SystemProposer, Via: rulefmt.ViaAPI}); err != nil {
		t.Fatalf("approving a drafted proposal: %v", err)
	}
}

func TestAutoMergeOffLeavesAnApprovedProposalUnmergedUntilTurnedOn(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, Options{Features: &Features{Proposing: true, AutoMerge: false}})
	p := f.proposeOne(cluster("c-tests", "coding-agent", testsCluster...))
	f.approve(p.ID, "alice")
	got := f.approve(p.ID, "bob")
	if got.Status != rulefmt.Approved || got.MergedCommit != "" || got.Branch == "" {
		t.Fatalf("approved with auto-merge off = %+v", got)
	}
	if err := f.m.Maintain(ctx); err != nil {
		t.Fatal(err)
	}
	if rules, _ := f.m.ActiveRules(ctx, ""); len(rules) != 0 {
		t.Fatalf("merged with auto-merge off: %+v", rules)
	}
	if list, _ := f.m.List(ctx, ListFilter{Status: rulefmt.Approved}); len(list) != 1 {
		t.Fatalf("approved proposals = %+v", list)
	}
	// Turned on: the manager restarts with the flag.
	f.m = attach(t, f.repo, Options{Now: f.clock.Now}).m
	if err := f.m.Maintain(ctx); err != nil {
		t.Fatal(err)
	}
	if rules, _ := f.m.ActiveRules(ctx, "coding-agent"); len(rules) != 1 {
		t.Fatalf("not merged after turning auto-merge on: %+v", rules)
	}
	// Maintenance again changes nothing.
	tip := f.git("rev-parse", "main")
	if err := f.m.Maintain(ctx); err != nil || f.git("rev-parse", "main") != tip {
		t.Fatalf("second maintenance moved main: %v", err)
	}
}

func TestProposingOffDraftsNothingUntilTurnedOn(t *testing.T) {
	f := newFixture(t, Options{Features: &Features{Proposing: false, AutoMerge: true}})
	if out := f.propose(cluster("c-tests", "coding-agent", testsCluster...)); len(out) != 0 {
		t.Fatalf("drafted with proposing off: %+v", out)
	}
	if list, _ := f.m.List(context.Background(), ListFilter{}); len(list) != 0 {
		t.Fatalf("proposals with proposing off: %+v", list)
	}
	// Turned on: the manager restarts with the flag.
	f.m = attach(t, f.repo, Options{Now: f.clock.Now, Evidence: f.src}).m
	if out := f.propose(cluster("c-tests", "coding-agent", testsCluster...)); len(out) != 1 || out[0].Status != rulefmt.Pending {
		t.Fatalf("after turning proposing on: %+v", out)
	}
}

func TestShadowPeriodKeepsTheRuleInShadowUntilItEnds(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, Options{ShadowPeriod: 72 * 60 * 60 * 1e9})
	p := f.proposeOne(cluster("c-tests", "coding-agent", testsCluster...))
	f.approve(p.ID, "alice")
	got := f.approve(p.ID, "bob")
	r, _, err := f.m.Rule(ctx, got.RuleID)
	if err != nil || r.Status != rulefmt.Shadow || r.ShadowUntil == nil || !r.ShadowUntil.Equal(f.clock.Now().Add(72*60*60*1e9)) {
		t.Fatalf("rule after approval = %+v, %v", r, err)
	}
	f.clock.Advance(71 * 60 * 60 * 1e9)
	f.m.Maintain(ctx)
	if r, _, _ := f.m.Rule(ctx, got.RuleID); r.Status != rulefmt.Shadow {
		t.Fatalf("activated early: %s", r.Status)
	}
	f.clock.Advance(2 * 60 * 60 * 1e9)
	if err := f.m.Maintain(ctx); err != nil {
		t.Fatal(err)
	}
	if r, _, _ := f.m.Rule(ctx, got.RuleID); r.Status != rulefmt.Active {
		t.Fatalf("not activated after the period: %s", r.Status)
	}
	if got := f.git("log", "-1", "--format=%s%n%(trailers:key=Rule-Id,valueonly)", "main"); !strings.Contains(got, "Activate rule "+r.ID) {
		t.Fatalf("activation commit = %q", got)
	}
	if !slices.Contains(f.kinds(), rulefmt.RuleActivated) {
		t.Fatalf("changes = %v", f.kinds())
	}
}

func TestListFiltersByStatusAndAgentNewestFirst(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, Options{})
	a := f.proposeOne(cluster("c-tests", "coding-agent", testsCluster...))
	f.clock.Advance(60e9)
	b := f.proposeOne(cluster("c-docs", "docs-agent", "docstrings are missing on exported functions", "no doc comments on the public API", "exported functions lack documentation comments"))
	all, err := f.m.List(ctx, ListFilter{})
	if err != nil || len(all) != 2 || all[0].ID != b.ID || all[1].ID != a.ID {
		t.Fatalf("List = %+v, %v", all, err)
	}
	if docs, _ := f.m.List(ctx, ListFilter{Agent: "docs-agent"}); len(docs) != 1 || docs[0].ID != b.ID {
		t.Fatalf("List docs-agent = %+v", docs)
	}
	if none, _ := f.m.List(ctx, ListFilter{Status: rulefmt.Rejected}); len(none) != 0 {
		t.Fatalf("List rejected = %+v", none)
	}
	if _, err := f.m.List(ctx, ListFilter{Status: "MAYBE"}); precept.ErrorCode(err) != precept.Invalid {
		t.Fatalf("List with a bad status: %v", err)
	}
	if id, ok := f.m.ProposalForCluster(ctx, "c-docs"); !ok || id != b.ID {
		t.Fatalf("ProposalForCluster = %s, %v", id, ok)
	}
	if _, ok := f.m.ProposalForCluster(ctx, "c-none"); ok {
		t.Fatal("ProposalForCluster found a proposal for an unknown cluster")
	}
	if got := f.m.ProposalsForClusters(ctx, []string{"c-docs", "c-none"}); len(got) != 1 || got["c-docs"] != b.ID {
		t.Fatalf("ProposalsForClusters = %v", got)
	}
}

func TestGetOfAnUnknownProposalIsNotFound(t *testing.T) {
	f := newFixture(t, Options{})
	_, err := f.m.Get(context.Background(), "p-0123456789")
	if !errors.Is(err, precept.ErrNotFound) {
		t.Fatalf("Get = %v", err)
	}
}

func TestARuleForSeveralAgentsHasOneFileInEachAgentsDirectory(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, Options{})
	p, err := f.m.Propose(ctx, ManualProposal{Agents: []string{"docs-agent", "coding-agent"}, Content: "Spell product names exactly as the glossary does."}, alice)
	if err != nil {
		t.Fatal(err)
	}
	f.approve(p.ID, "bob")
	if _, err := f.m.Approve(ctx, ApproveRequest{ProposalID: p.ID, By: "carol", Via: rulefmt.ViaSlack}); err != nil {
		t.Fatal(err)
	}
	a, b := f.readMain(rulefmt.ActiveRulePath("coding-agent", p.RuleID)), f.readMain(rulefmt.ActiveRulePath("docs-agent", p.RuleID))
	if a == "" || a != b {
		t.Fatalf("rule files differ or are missing:\n%s\n---\n%s", a, b)
	}
	r, _, err := f.m.Rule(ctx, p.RuleID)
	if err != nil || strings.Join(r.Agents, ",") != "coding-agent,docs-agent" {
		t.Fatalf("rule = %+v, %v", r, err)
	}
	for _, agent := range []string{"coding-agent", "docs-agent"} {
		if f.readMain(rulefmt.TuningPath(agent, "good", p.ID, "carol")) == "" {
			t.Errorf("no tuning example for %s", agent)
		}
	}
}
