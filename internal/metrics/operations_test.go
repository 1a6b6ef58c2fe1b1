package metrics_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/effect"
	"github.com/precept-dev/precept/evaluator"
	"github.com/precept-dev/precept/internal/metrics"
	"github.com/precept-dev/precept/lib/gitrepo"
	"github.com/precept-dev/precept/lib/testenv"
	"github.com/precept-dev/precept/rules"
)

func TestProposalsPastTheApprovalDeadlineAreCounted(t *testing.T) {
	clock := testenv.NewClock(time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC))
	m, reg := newManager(t, rules.Options{Now: clock.Now})
	if err := metrics.ApprovalDeadline(reg, m, 48*time.Hour, clock.Now, nil); err != nil {
		t.Fatal(err)
	}
	propose := func(content string) {
		t.Helper()
		if _, err := m.Propose(context.Background(), rules.ManualProposal{Agents: []string{"coding-agent"}, Content: content, Rationale: "Seen in three reviews."},
			precept.Identity{Name: "erin", Role: precept.RoleApprover}); err != nil {
			t.Fatal(err)
		}
	}
	propose("Cite the ticket in every commit message.")
	if got := gather(t, reg)["precept_rules_proposals_overdue"]; got != "0" {
		t.Fatalf("overdue at once = %s, want 0", got)
	}
	clock.Advance(30 * time.Hour)
	propose("Run the linter before asking for a review.")
	clock.Advance(20 * time.Hour)
	if got := gather(t, reg)["precept_rules_proposals_overdue"]; got != "1" {
		t.Fatalf("overdue after 50h and 20h = %s, want 1", got)
	}
	clock.Advance(30 * time.Hour)
	if got := gather(t, reg)["precept_rules_proposals_overdue"]; got != "2" {
		t.Fatalf("overdue after 80h and 50h = %s, want 2", got)
	}

	off := prometheus.NewRegistry()
	if err := metrics.ApprovalDeadline(off, m, 0, clock.Now, nil); err != nil {
		t.Fatal(err)
	}
	if got := gather(t, off)["precept_rules_proposals_overdue"]; got != "0" {
		t.Fatalf("overdue with deadlines off = %s, want 0", got)
	}
}

func TestRuleVerdictsAreCountedAndPresentBeforeTheFirstPass(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := metrics.NewEffects(reg)
	if err != nil {
		t.Fatal(err)
	}
	want := `{verdict="improving"} 0; {verdict="inconclusive"} 0; {verdict="no_evidence"} 0; {verdict="no_pattern"} 0; {verdict="not_improving"} 0`
	if got := gather(t, reg)["precept_rules_verdicts"]; got != want {
		t.Fatalf("before a pass: %s, want %s", got, want)
	}
	m.RuleEffects([]effect.Effect{
		{RuleID: "r-1", Verdict: effect.NotImproving},
		{RuleID: "r-2", Verdict: effect.Improving},
		{RuleID: "r-3", Verdict: effect.NotImproving},
	})
	want = `{verdict="improving"} 1; {verdict="inconclusive"} 0; {verdict="no_evidence"} 0; {verdict="no_pattern"} 0; {verdict="not_improving"} 2`
	if got := gather(t, reg)["precept_rules_verdicts"]; got != want {
		t.Fatalf("after a pass: %s, want %s", got, want)
	}
}

type reviewQueue struct {
	total int
	err   error
}

func (q *reviewQueue) NeedsReview(context.Context, evaluator.ReviewQuery) ([]evaluator.NeedsReview, int, error) {
	return nil, q.total, q.err
}

func TestTheNeedsReviewBacklogIsReadAtScrapeTimeAndKeptOnAFailedRead(t *testing.T) {
	reg := prometheus.NewRegistry()
	q := &reviewQueue{total: 7}
	if err := metrics.NeedsReview(reg, q); err != nil {
		t.Fatal(err)
	}
	if got := gather(t, reg)["precept_needs_review"]; got != "7" {
		t.Fatalf("precept_needs_review = %s, want 7", got)
	}
	q.total, q.err = 0, errors.New("state closed")
	if got := gather(t, reg)["precept_needs_review"]; got != "7" {
		t.Fatalf("after a failed read = %s, want the last count 7", got)
	}
}

func TestCommitsAndPushesAreExportedByRepositoryAndResult(t *testing.T) {
	repo, err := gitrepo.Open(filepath.Join(t.TempDir(), "rules.git"), gitrepo.Options{NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { repo.Close() })
	reg := prometheus.NewRegistry()
	if _, err := metrics.NewGitRepos(reg, map[string]*gitrepo.Repo{"rules": repo}); err != nil {
		t.Fatal(err)
	}
	if _, err := repo.Update(context.Background(), "main", func(*gitrepo.Snapshot) (*gitrepo.CommitSpec, error) {
		return &gitrepo.CommitSpec{Message: "one", Changes: []gitrepo.Change{{Path: "f", Data: []byte("1")}}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	got := gather(t, reg)
	if want := `{repo="rules",result="failed"} 0; {repo="rules",result="ok"} 1; {repo="rules",result="raced"} 0`; got["precept_git_commits_total"] != want {
		t.Errorf("precept_git_commits_total = %s, want %s", got["precept_git_commits_total"], want)
	}
	if want := `{repo="rules",result="failed"} 0; {repo="rules",result="ok"} 0; {repo="rules",result="rejected"} 0`; got["precept_git_pushes_total"] != want {
		t.Errorf("precept_git_pushes_total = %s, want %s", got["precept_git_pushes_total"], want)
	}

	// A push to a bare repository on disk, and one to a remote that is
	// not there: each is counted by result, and both by how long they
	// took.
	bare := filepath.Join(t.TempDir(), "remote.git")
	testenv.Git(t, t.TempDir(), "init", "-q", "--bare", "-b", "main", bare)
	if err := repo.AddRemote("origin", bare); err != nil {
		t.Fatal(err)
	}
	if err := repo.AddRemote("gone", filepath.Join(t.TempDir(), "missing.git")); err != nil {
		t.Fatal(err)
	}
	if err := repo.Push(context.Background(), "origin", gitrepo.Auth{}, gitrepo.PushSpec{Branch: "main"}); err != nil {
		t.Fatal(err)
	}
	if err := repo.Push(context.Background(), "gone", gitrepo.Auth{}, gitrepo.PushSpec{Branch: "main"}); err == nil {
		t.Fatal("a push to a missing remote succeeded")
	}
	got = gather(t, reg)
	if want := `{repo="rules",result="failed"} 1; {repo="rules",result="ok"} 1; {repo="rules",result="rejected"} 0`; got["precept_git_pushes_total"] != want {
		t.Errorf("precept_git_pushes_total = %s, want %s", got["precept_git_pushes_total"], want)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, mf := range mfs {
		if mf.GetName() != "precept_git_push_seconds" {
			continue
		}
		found = true
		h := mf.GetMetric()[0].GetHistogram()
		last := h.GetBucket()[len(h.GetBucket())-1]
		if h.GetSampleCount() != 2 || h.GetSampleSum() <= 0 || last.GetCumulativeCount() != 2 || len(h.GetBucket()) != len(gitrepo.PushBuckets) {
			t.Errorf("precept_git_push_seconds: count %d, sum %v, %d buckets, last %d", h.GetSampleCount(), h.GetSampleSum(), len(h.GetBucket()), last.GetCumulativeCount())
		}
	}
	if !found {
		t.Error("precept_git_push_seconds is not exported")
	}
}
