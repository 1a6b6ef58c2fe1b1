package rules

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/rules/rulefmt"
)

func TestRollbackRestoresThePreviousMainContentExactly(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, Options{})
	commitRules(t, f.repo, "coding-agent", "Include unit tests for every new helper function.", "Keep functions shorter than 60 lines.")
	p := f.proposeOne(cluster("c-tests", "coding-agent", testsCluster...))
	if len(p.Supersedes) != 1 {
		t.Fatalf("supersedes = %v", p.Supersedes)
	}
	f.approve(p.ID, "alice")
	if _, err := f.m.Approve(ctx, ApproveRequest{ProposalID: p.ID, By: "bob", Note: "we keep forgetting these", Via: rulefmt.ViaAPI}); err != nil {
		t.Fatal(err)
	}
	approval := f.git("rev-parse", "main")
	changed := strings.Fields(f.git("diff", "--name-only", approval+"^1", approval))
	if len(changed) != 4 { // the rule, the superseded rule, two tuning examples
		t.Fatalf("the approval changed %v", changed)
	}
	ruleID := rulefmt.RuleIDFor(p.ID)

	// Later commits: the rule gains evidence, a curator edits _rules.md.
	dup := f.proposeOne(cluster("c-tests-2", "coding-agent", "Include unit tests for the new retry helper", "add unit tests for the new retry helper please"))
	if dup.Status != rulefmt.Merged || dup.MergedInto != ruleID {
		t.Fatalf("duplicate = %+v", dup)
	}
	work := filepath.Join(t.TempDir(), "w")
	gitCLI(t, filepath.Dir(work), "clone", "-q", f.repo.Path(), work)
	os.WriteFile(filepath.Join(work, "prompts", "_rules.md"), []byte("Prefer small pull requests.\n"), 0o644)
	gitCLI(t, work, "add", ".")
	gitCLI(t, work, "commit", "-q", "-m", "Add directory rules")
	gitCLI(t, work, "push", "-q", "origin", "main")

	rb, err := f.m.Rollback(ctx, RollbackRequest{RuleID: ruleID, By: "carol", Reason: "It made the agent write tests for generated code."})
	if err != nil {
		t.Fatal(err)
	}
	rolled, commit := rb.Rule, rb.Commit
	if rolled.Status != rulefmt.RolledBack || rolled.RollbackReason != "It made the agent write tests for generated code." || commit != f.git("rev-parse", "main") {
		t.Fatalf("Rollback = %+v, %s", rolled, commit)
	}
	// Every path the approval changed has its pre-approval content again.
	for _, path := range changed {
		if diff := f.git("diff", approval+"^1", "main", "--", path); diff != "" {
			t.Errorf("%s differs from before the approval:\n%s", path, diff)
		}
	}
	if f.readMain("prompts/_rules.md") != "Prefer small pull requests.\n" {
		t.Fatal("the rollback lost a later, unrelated commit")
	}
	trailers := f.git("log", "-1", "--format=%(trailers)", "main")
	for _, want := range []string{"Rolled-back-by: carol", "Reason: It made the agent write tests for generated code.", "Rule-Id: " + ruleID, "Reverts: " + approval} {
		if !strings.Contains(trailers, want) {
			t.Errorf("rollback trailers lack %q:\n%s", want, trailers)
		}
	}
	// GetRule answers from history; the superseded rule is active again.
	r, hist, err := f.m.Rule(ctx, ruleID)
	if err != nil || r.Status != rulefmt.RolledBack || r.Content != p.Content || len(hist) < 4 || hist[0].Commit != commit {
		t.Fatalf("Rule after rollback = %+v, %d history entries, %v", r, len(hist), err)
	}
	if old, _, err := f.m.Rule(ctx, "r-seed00"); err != nil || old.Status != rulefmt.Active {
		t.Fatalf("superseded rule after rollback = %+v, %v", old, err)
	}
	if !slices.Contains(f.kinds(), rulefmt.RuleRolledBack) {
		t.Fatalf("changes = %v", f.kinds())
	}

	// Nothing merges the proposal again, and the cluster is not proposed
	// again until its support doubles.
	tip := f.git("rev-parse", "main")
	if err := f.m.Maintain(ctx); err != nil || f.git("rev-parse", "main") != tip {
		t.Fatalf("maintenance after rollback moved main: %v", err)
	}
	again := f.proposeOne(cluster("c-tests", "coding-agent", testsCluster...))
	if again.Status != rulefmt.Blocked || failed(again).Guard != rulefmt.GuardRejectedBefore || !strings.Contains(failed(again).Reason, "rolled back: It made the agent") {
		t.Fatalf("re-draft after rollback = %s, %+v", again.Status, failed(again))
	}

	tests := []struct {
		name, id, reason string
		code             precept.Code
	}{
		{"twice", ruleID, "again", precept.FailedPrecondition},
		{"unknown", "r-0000000000", "why", precept.NotFound},
		{"no reason", "r-seed01", " ", precept.Invalid},
		{"malformed id", "../r", "why", precept.Invalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := f.m.Rollback(ctx, RollbackRequest{RuleID: tt.id, By: "carol", Reason: tt.reason}); precept.ErrorCode(err) != tt.code {
				t.Fatalf("Rollback = %v, want %s", err, tt.code)
			}
		})
	}
	f.fsck()
}

func TestHistoryOfARuleListsItsTransitionsWithTrailers(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, Options{})
	p := f.proposeOne(cluster("c-tests", "coding-agent", testsCluster...))
	f.approve(p.ID, "alice")
	f.approve(p.ID, "bob")
	ruleID := rulefmt.RuleIDFor(p.ID)
	for _, id := range []string{p.ID, ruleID} {
		hist, err := f.m.History(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		var subjects []string
		for _, h := range hist {
			subjects = append(subjects, h.Subject)
		}
		want := []string{"Approve " + p.ID + " as rule " + ruleID + " for coding-agent", "Approve " + p.ID + " (2 of 2) by bob", "Approve " + p.ID + " (1 of 2) by alice"}
		if len(subjects) != 4 || !slices.Equal(subjects[:3], want) || !strings.HasPrefix(subjects[3], "Propose "+p.ID) {
			t.Fatalf("History(%s) = %q", id, subjects)
		}
		if hist[0].Trailers[rulefmt.TrailerApprovedBy] != "alice, bob" {
			t.Fatalf("trailers = %v", hist[0].Trailers)
		}
	}
	got := f.get(p.ID)
	if len(got.Commits) != 4 || got.MergedCommit != f.git("rev-parse", "main") {
		t.Fatalf("proposal commits = %v, merged %s", got.Commits, got.MergedCommit)
	}
	if _, err := f.m.History(ctx, "x/y"); precept.ErrorCode(err) != precept.Invalid {
		t.Fatalf("History of a malformed id: %v", err)
	}
}
