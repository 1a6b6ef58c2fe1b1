package rules

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/precept-dev/precept/rules/rulefmt"
)

// activeFromCluster approves a drafted rule and returns its id.
func activeFromCluster(t *testing.T, f *fixture) string {
	t.Helper()
	p := f.proposeOne(cluster("c-tests", "coding-agent", testsCluster...))
	f.approve(p.ID, "alice")
	f.approve(p.ID, "bob")
	return rulefmt.RuleIDFor(p.ID)
}

func TestAReapprovalStampsTheRuleAndAnUnansweredOneShadowsIt(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, Options{})
	up := f.m.Upkeep()
	ruleID := activeFromCluster(t, f)

	p, created, err := up.Propose(ctx, rulefmt.LifecycleRequest{Kind: rulefmt.KindReapprove, RuleID: ruleID, Evidence: "idle since 2026-01-01"})
	if err != nil || !created || p.Status != rulefmt.Pending || p.RuleID != ruleID || p.Branch != rulefmt.ProposalBranch(p.ID) {
		t.Fatalf("re-approval = %+v, %v, %v", p, created, err)
	}
	// Asking again while it is open returns the open one.
	again, created, err := up.Propose(ctx, rulefmt.LifecycleRequest{Kind: rulefmt.KindSunset, RuleID: ruleID})
	if err != nil || created || again.ID != p.ID {
		t.Fatalf("second lifecycle proposal = %+v, %v, %v", again, created, err)
	}
	f.clock.Advance(time.Hour)
	f.approve(p.ID, "carol")
	f.approve(p.ID, "dave")
	r, _, err := f.m.Rule(ctx, ruleID)
	if err != nil || r.Status != rulefmt.Active || r.ReapprovedAt == nil || !r.ReapprovedAt.Equal(f.clock.Now().UTC().Truncate(time.Second)) {
		t.Fatalf("re-approved rule = %+v, %v", r, err)
	}
	if got := f.git("log", "-1", "--format=%s%n%(trailers)", "main"); !strings.Contains(got, "Re-approve rule "+ruleID) || !strings.Contains(got, "Approved-by: dave") {
		t.Errorf("re-approval commit:\n%s", got)
	}

	// The next one goes unanswered: the rule moves to SHADOW, the request
	// is closed by precept, and no bad tuning example is written.
	p2, created, err := up.Propose(ctx, rulefmt.LifecycleRequest{Kind: rulefmt.KindReapprove, RuleID: ruleID, Evidence: "idle again"})
	if err != nil || !created || p2.ID == p.ID {
		t.Fatalf("second re-approval = %+v, %v, %v", p2, created, err)
	}
	if err := up.ShadowIdle(ctx, ruleID, p2.ID, "idle for 90 days; re-approval unanswered"); err != nil {
		t.Fatal(err)
	}
	r, _, err = f.m.Rule(ctx, ruleID)
	if err != nil || r.Status != rulefmt.Shadow || r.ShadowUntil != nil || !strings.Contains(r.ShadowReason, "unanswered") {
		t.Fatalf("shadowed rule = %+v, %v", r, err)
	}
	if got := f.get(p2.ID); got.Status != rulefmt.Rejected || got.Rejection.Rejector != rulefmt.SystemProposer {
		t.Fatalf("closed request = %+v", got)
	}
	if ex := f.git("ls-tree", "-r", "--name-only", "main", "tuning/examples/coding-agent/bad"); ex != "" {
		t.Errorf("a closed lifecycle proposal wrote bad examples: %s", ex)
	}
	// A maintenance round does not activate it: only a proposal does.
	f.clock.Advance(48 * time.Hour)
	if err := f.m.Maintain(ctx); err != nil {
		t.Fatal(err)
	}
	if r, _, _ := f.m.Rule(ctx, ruleID); r.Status != rulefmt.Shadow {
		t.Fatalf("maintenance activated an idle rule: %+v", r)
	}
	act, _, err := up.Propose(ctx, rulefmt.LifecycleRequest{Kind: rulefmt.KindActivate, RuleID: ruleID, Evidence: "Shadow prompt: 1 of 60"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := up.Propose(ctx, rulefmt.LifecycleRequest{Kind: rulefmt.KindSunset, RuleID: "r-nosuchrule"}); err == nil {
		t.Error("a lifecycle proposal for an unknown rule was accepted")
	}
	f.approve(act.ID, "alice")
	f.approve(act.ID, "bob")
	r, _, err = f.m.Rule(ctx, ruleID)
	if err != nil || r.Status != rulefmt.Active || r.ShadowReason != "" {
		t.Fatalf("activated rule = %+v, %v", r, err)
	}
	f.fsck()
}

// A sunset decided by merging its branch in git retires the rule as the
// API would; a rejected sunset leaves it and teaches no guard anything.
func TestASunsetMergedInGitRetiresTheRule(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, Options{})
	up := f.m.Upkeep()
	ruleID := activeFromCluster(t, f)

	rej, _, err := up.Propose(ctx, rulefmt.LifecycleRequest{Kind: rulefmt.KindSunset, RuleID: ruleID, Evidence: "After: 12 of 20"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.m.Reject(ctx, RejectRequest{ProposalID: rej.ID, By: "alice", Reason: "it is too early to tell", Via: rulefmt.ViaAPI}); err != nil {
		t.Fatal(err)
	}
	if r, _, err := f.m.Rule(ctx, ruleID); err != nil || r.Status != rulefmt.Active {
		t.Fatalf("rule after a rejected sunset = %+v, %v", r, err)
	}
	hist, err := up.DecidedProposals(ctx, ruleID, rulefmt.KindSunset)
	if err != nil || len(hist) != 1 || hist[0].Status != rulefmt.Rejected {
		t.Fatalf("history = %+v, %v", hist, err)
	}

	p, created, err := up.Propose(ctx, rulefmt.LifecycleRequest{Kind: rulefmt.KindSunset, RuleID: ruleID, Evidence: "After: 30 of 50"})
	if err != nil || !created || p.ID == rej.ID {
		t.Fatalf("second sunset = %+v, %v, %v", p, created, err)
	}
	work := filepath.Join(t.TempDir(), "w")
	gitCLI(t, filepath.Dir(work), "clone", "-q", f.repo.Path(), work)
	gitCLI(t, work, "merge", "--no-ff", "-q", "-m", "Merge sunset", "origin/"+rulefmt.ProposalBranch(p.ID))
	gitCLI(t, work, "push", "-q", "origin", "HEAD:main")
	if err := f.m.Maintain(ctx); err != nil {
		t.Fatal(err)
	}
	r, _, err := f.m.Rule(ctx, ruleID)
	if err != nil || r.Status != rulefmt.Sunset || !strings.Contains(r.SunsetReason, "ineffective") {
		t.Fatalf("rule after the merge = %+v, %v", r, err)
	}
	if f.readMain(rulefmt.ActiveRulePath("coding-agent", ruleID)) != "" || f.readMain(rulefmt.ProposalPath(p.ID)) != "" {
		t.Error("the rule file or the merged proposal file is still on main")
	}
	retired, err := up.RetiredRules(ctx, "coding-agent")
	if err != nil || len(retired) != 1 || retired[0] != ruleID {
		t.Fatalf("retired = %v, %v", retired, err)
	}
	if other, err := up.RetiredRules(ctx, "docs-agent"); err != nil || len(other) != 0 {
		t.Fatalf("another agent's retired rules = %v, %v", other, err)
	}
	// As they were when they left, from one reading of the repository,
	// twice (the second from the cache of what a commit's parent held).
	for range 2 {
		all, err := up.Retired(ctx, "")
		if err != nil || len(all) != 1 || all[0].ID != ruleID || all[0].Status != rulefmt.Sunset || !slices.Contains(all[0].Agents, "coding-agent") {
			t.Fatalf("retired rules = %+v, %v", all, err)
		}
		all[0].Agents[0] = "changed by a caller"
	}
	f.fsck()
}

// Regressions found in review.
func TestLifecycleProposalsKeepHistoryIdsAndGuards(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, Options{})
	up := f.m.Upkeep()
	ruleID := activeFromCluster(t, f)
	r, _, err := f.m.Rule(ctx, ruleID)
	if err != nil {
		t.Fatal(err)
	}
	orig := f.get(r.ProposalID)

	// A re-approval: the rule's history still holds its own proposal's
	// commits as well as the re-approval's.
	p, _, err := up.Propose(ctx, rulefmt.LifecycleRequest{Kind: rulefmt.KindReapprove, RuleID: ruleID, Evidence: "idle"})
	if err != nil {
		t.Fatal(err)
	}
	f.approve(p.ID, "alice")
	f.approve(p.ID, "bob")
	hist, err := f.m.History(ctx, ruleID)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, e := range hist {
		seen[e.Trailers[rulefmt.TrailerProposalID]]++
	}
	// Its own: proposed, approved twice, merged.
	if seen[orig.ID] < 4 || seen[p.ID] == 0 {
		t.Fatalf("history of %s names %v, want %s and %s", ruleID, seen, orig.ID, p.ID)
	}

	// The host deletes the merged branch: the next re-approval still gets
	// a new id (history remembers the first).
	f.git("branch", "-D", rulefmt.ProposalBranch(p.ID))
	p2, created, err := up.Propose(ctx, rulefmt.LifecycleRequest{Kind: rulefmt.KindReapprove, RuleID: ruleID, Evidence: "idle again"})
	if err != nil || !created || p2.ID == p.ID {
		t.Fatalf("after the branch was deleted: %+v, %v, %v", p2, created, err)
	}

	// The rule is rolled back while the request waits: approving it then
	// closes it with nothing to do, instead of leaving it APPROVED.
	if _, err := f.m.Rollback(ctx, RollbackRequest{RuleID: ruleID, By: "carol", Reason: "replaced by a lint rule"}); err != nil {
		t.Fatal(err)
	}
	f.approve(p2.ID, "alice")
	f.approve(p2.ID, "bob")
	st, err := f.m.store.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Open(p2.ID) {
		t.Fatalf("%s is still open after its rule left main", p2.ID)
	}
	f.fsck()
}

// After a sunset, the rule's cluster is not drafted straight back.
func TestASunsetRulesClusterIsNotDraftedAgain(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, Options{})
	ruleID := activeFromCluster(t, f)
	p, _, err := f.m.Upkeep().Propose(ctx, rulefmt.LifecycleRequest{Kind: rulefmt.KindSunset, RuleID: ruleID, Evidence: "After: 30 of 50"})
	if err != nil {
		t.Fatal(err)
	}
	f.approve(p.ID, "alice")
	f.approve(p.ID, "bob")
	if r, _, err := f.m.Rule(ctx, ruleID); err != nil || r.Status != rulefmt.Sunset {
		t.Fatalf("rule = %+v, %v", r, err)
	}
	out := f.propose(cluster("c-tests", "coding-agent", testsCluster...))
	for _, q := range out {
		if q.Status == rulefmt.Pending {
			t.Fatalf("the sunset rule's cluster was drafted again: %+v", q)
		}
	}
}
