package rules

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/lib/gitrepo"
	"github.com/precept-dev/precept/lib/testenv"
	"github.com/precept-dev/precept/rules/rulefmt"
)

// throughNodes are two Managers, each on its own repository, writing
// through one git server (git http-backend) with WriteThrough.
func throughNodes(t *testing.T) (a, b *fixture, srv *testenv.GitServer) {
	t.Helper()
	ctx := context.Background()
	srv = testenv.StartGitServer(t)
	testenv.Git(t, srv.Root, "init", "--quiet", "--bare", "--initial-branch=main", srv.Dir("rules"))
	remote := func() *Remote { return &Remote{URL: srv.URL("rules"), WriteThrough: true} }
	a = newFixture(t, Options{RequiredApprovals: 1, Remote: remote()})
	if err := a.m.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	repoB, err := gitrepo.Open(filepath.Join(t.TempDir(), "b.git"), gitrepo.Options{NoFsync: true, Signer: testSigner})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { repoB.Close() })
	b = attach(t, repoB, Options{RequiredApprovals: 1, Remote: remote()})
	if err := b.m.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	return a, b, srv
}

// outcome is what the remote's main says about a proposal: "rule",
// "rejected", or "" for neither.
func outcome(t *testing.T, srv *testenv.GitServer, id string) string {
	t.Helper()
	files := testenv.Git(t, srv.Dir("rules"), "ls-tree", "-r", "--name-only", "main")
	rule := strings.Contains(files, rulefmt.RuleIDFor(id)+".md")
	rejected := strings.Contains(files, rulefmt.RejectedPath(id))
	switch {
	case rule && rejected:
		t.Fatalf("the remote's main holds both a rule and a rejection of %s", id)
	case rule:
		return "rule"
	case rejected:
		return "rejected"
	}
	return ""
}

// With writes through the remote, a proposal, an approval and a decision
// are on the remote when the call returns; an approval raced against a
// rejection of the same proposal on another node ends with exactly one
// outcome, the same on both nodes; and a decision read from a branch the
// other node has moved lands nothing and says so.
func TestDecisionsThroughTheRemoteLandOnceAndEveryNodeAgrees(t *testing.T) {
	ctx := context.Background()
	a, b, srv := throughNodes(t)
	remoteBranches := func() string {
		return testenv.Git(t, srv.Dir("rules"), "for-each-ref", "--format=%(refname:short)", "refs/heads/")
	}

	// A stale rejection: B has not seen A's approval.
	p := a.proposeOne(cluster("c-tests", "coding-agent", testsCluster...))
	if !strings.Contains(remoteBranches(), rulefmt.ProposalBranch(p.ID)) {
		t.Fatalf("the proposal is not on the remote when ProposeFromEvidence returns: %s", remoteBranches())
	}
	if err := b.m.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := a.approve(p.ID, "alice"); got.Status != rulefmt.Approved || got.MergedCommit == "" {
		t.Fatalf("approval = %+v", got)
	}
	if outcome(t, srv, p.ID) != "rule" {
		t.Fatal("the merged rule is not on the remote when Approve returns")
	}
	// The decision that landed is what the loser hears of.
	_, err := b.m.Reject(ctx, RejectRequest{ProposalID: p.ID, By: "bob", Reason: "too broad", Via: rulefmt.ViaAPI})
	if precept.ErrorCode(err) != precept.FailedPrecondition || !strings.Contains(err.Error(), "already approved") {
		t.Fatalf("a rejection read from a stale branch: %v", err)
	}
	if got := outcome(t, srv, p.ID); got != "rule" {
		t.Fatalf("after the stale rejection the remote says %q", got)
	}
	if _, err := b.m.Reject(ctx, RejectRequest{ProposalID: p.ID, By: "bob", Reason: "too broad", Via: rulefmt.ViaAPI}); precept.ErrorCode(err) != precept.FailedPrecondition {
		t.Fatalf("rejecting a proposal merged on another node: %v", err)
	}

	// Races: an approval on A against a rejection on B, both read from
	// the same tip.
	for _, c := range []rulefmt.Evidence{cluster("c-log", "coding-agent", logCluster...), cluster("c-errors", "coding-agent", errorsCluster...)} {
		p := a.proposeOne(c)
		if err := b.m.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if got := b.get(p.ID); got.Status != rulefmt.Pending {
			t.Fatalf("node B sees %s as %s", p.ID, got.Status)
		}
		var wg sync.WaitGroup
		var errA, errB error
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, errA = a.m.Approve(ctx, ApproveRequest{ProposalID: p.ID, By: "alice", Via: rulefmt.ViaAPI})
		}()
		go func() {
			defer wg.Done()
			_, errB = b.m.Reject(ctx, RejectRequest{ProposalID: p.ID, By: "bob", Reason: "not ours", Via: rulefmt.ViaSlack})
		}()
		wg.Wait()
		want := outcome(t, srv, p.ID)
		t.Logf("%s: approve: %v; reject: %v; the remote says %q", p.ID, errA, errB, want)
		if want == "" {
			t.Fatalf("%s: neither decision landed (approve: %v, reject: %v)", p.ID, errA, errB)
		}
		if want == "rejected" && errB != nil || want == "rule" && errB == nil {
			t.Fatalf("%s: the remote says %q, but the rejection returned %v", p.ID, want, errB)
		}
		for name, f := range map[string]*fixture{"A": a, "B": b} {
			if err := f.m.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			got := f.get(p.ID)
			switch {
			case want == "rule" && (got.Status != rulefmt.Approved || got.RuleID == ""):
				t.Errorf("%s: node %s sees %s (rule %q) after the remote merged it", p.ID, name, got.Status, got.RuleID)
			case want == "rejected" && got.Status != rulefmt.Rejected:
				t.Errorf("%s: node %s sees %s after the remote rejected it", p.ID, name, got.Status)
			}
		}
	}
	if got := remoteBranches(); strings.Contains(got, rulefmt.BranchPrefix) {
		t.Errorf("decided proposals' branches are still on the remote: %s", got)
	}
	testenv.Git(t, srv.Dir("rules"), "fsck", "--strict", "--no-dangling")
	a.fsck()
}

// With the git server away, a write fails and nothing moves locally:
// nothing counts as decided that the remote did not take.
func TestAnApprovalTheRemoteDidNotTakeIsNotRecorded(t *testing.T) {
	ctx := context.Background()
	a, _, srv := throughNodes(t)
	p := a.proposeOne(cluster("c-tests", "coding-agent", testsCluster...))
	branch, err := a.repo.Tip(rulefmt.ProposalBranch(p.ID))
	if err != nil {
		t.Fatal(err)
	}
	main, err := a.repo.Tip("main")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(srv.Dir("rules"), srv.Dir("away")); err != nil {
		t.Fatal(err)
	}
	if _, err := a.m.Approve(ctx, ApproveRequest{ProposalID: p.ID, By: "alice", Via: rulefmt.ViaAPI}); err == nil {
		t.Fatal("an approval succeeded with the remote away")
	}
	if tip, _ := a.repo.Tip(rulefmt.ProposalBranch(p.ID)); tip != branch {
		t.Fatalf("the proposal branch moved to %s with the remote away", tip)
	}
	if tip, _ := a.repo.Tip("main"); tip != main {
		t.Fatalf("main moved to %s with the remote away", tip)
	}
	if got := a.get(p.ID); got.Status != rulefmt.Pending || len(got.Approvals) != 0 {
		t.Fatalf("after a refused approval the proposal is %s with %d approvals", got.Status, len(got.Approvals))
	}
	if err := os.Rename(srv.Dir("away"), srv.Dir("rules")); err != nil {
		t.Fatal(err)
	}
	if got := a.approve(p.ID, "alice"); got.Status != rulefmt.Approved {
		t.Fatalf("the approval once the remote is back = %s", got.Status)
	}
}

// Writing through the remote, a push precept did not sign on a proposal
// branch is overruled on the server itself: precept's record is pushed
// over it (a fast-forward of the forged tip it merges), the forged
// approval counts nowhere, and the proposal can still be decided.
func TestAnUnsignedPushIsOverruledOnTheServerWhenWritingThrough(t *testing.T) {
	ctx := context.Background()
	a, _, srv := throughNodes(t)
	p := a.proposeOne(cluster("c-tests", "coding-agent", testsCluster...))
	branch := rulefmt.ProposalBranch(p.ID)
	clone := filepath.Join(t.TempDir(), "mallory")
	testenv.Git(t, filepath.Dir(clone), "clone", "--quiet", srv.URL("rules"), clone)
	mallory := func(args ...string) string {
		return testenv.GitAs(t, clone, "Mallory", "mallory@example.com", args...)
	}
	mallory("checkout", "--quiet", "-B", branch, "origin/"+branch)
	file := filepath.Join(clone, rulefmt.ProposalPath(p.ID))
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	forged := regexp.MustCompile(`(?m)^status: .*$`).ReplaceAllString(string(data), "status: APPROVED")
	if err := os.WriteFile(file, []byte(forged), 0o644); err != nil {
		t.Fatal(err)
	}
	mallory("commit", "--quiet", "-am", "Approve "+p.ID)
	mallory("push", "--quiet", "origin", branch)
	forgedTip := testenv.Git(t, srv.Dir("rules"), "rev-parse", branch)

	if err := a.m.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if tip := testenv.Git(t, srv.Dir("rules"), "rev-parse", branch); tip == forgedTip {
		t.Fatal("precept's record was not pushed over the forged commit")
	}
	if msg := testenv.Git(t, srv.Dir("rules"), "log", "-1", "--format=%B", branch); !strings.Contains(msg, forgedTip) {
		t.Fatalf("the server's tip does not overrule %s:\n%s", forgedTip, msg)
	}
	if got := a.get(p.ID); got.Status != rulefmt.Pending {
		t.Fatalf("after the forged approval the proposal is %s", got.Status)
	}
	if got := a.approve(p.ID, "alice"); got.Status != rulefmt.Approved || got.MergedCommit == "" {
		t.Fatalf("the approval after the overruled push = %+v", got)
	}
}
