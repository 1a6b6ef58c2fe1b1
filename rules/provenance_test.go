package rules

import (
	"slices"
	"strings"
	"testing"

	"github.com/precept-dev/precept/lesson"
	"github.com/precept-dev/precept/rules/rulefmt"
)

// timeoutCluster is three reviewers asking, each in their own words, for
// a timeout on outbound calls. "operation" and "number" are words the
// retry clause of the category's rule uses too, in passing.
func timeoutCluster(t *testing.T, extra ...string) rulefmt.Evidence {
	t.Helper()
	retry, ok := lesson.DefaultTaxonomy().Category("retry-timeout")
	if !ok {
		t.Fatal("no retry-timeout category")
	}
	comments := append([]string{
		"This operation calls the billing API with no timeout at all; if billing stalls the worker hangs forever. Set a timeout on outbound calls.",
		"outbound http call without a deadline, again. a number of our incidents started exactly like this",
		"pls put a timeout on the outbound requests, the default client waits forever",
	}, extra...)
	ev := cluster("c-timeout", "coding-agent", comments...)
	ev.Category, ev.CategoryRule = retry.ID, retry.Rule
	// What the evaluator takes from each lesson: the sentence that asks.
	ev.Asked = []string{"Set a timeout on outbound calls", "pls put a timeout on the outbound requests, the default client waits forever"}
	ev.AskedBy = []string{"c-timeout-d1", "c-timeout-d3"}
	for i, c := range extra {
		ev.Asked = append(ev.Asked, c)
		ev.AskedBy = append(ev.AskedBy, ev.Comments[3+i].DecisionID)
	}
	return ev
}

func guardOf(p rulefmt.Proposal, name string) (rulefmt.GuardResult, bool) {
	i := slices.IndexFunc(p.Guards, func(g rulefmt.GuardResult) bool { return g.Guard == name })
	if i < 0 {
		return rulefmt.GuardResult{}, false
	}
	return p.Guards[i], true
}

func TestTheTimeoutExampleDraftsARuleThatAsksForTimeoutsOnly(t *testing.T) {
	f := newFixture(t, Options{})
	p := f.proposeOne(timeoutCluster(t))
	if p.Status != rulefmt.Pending {
		t.Fatalf("status %s, guards %+v", p.Status, p.Guards)
	}
	lower := strings.ToLower(p.Content)
	if !strings.Contains(lower, "timeout") {
		t.Fatalf("the rule does not ask for timeouts: %q", p.Content)
	}
	for _, unasked := range []string{"retry", "retries", "backoff", "jitter", "attempts", "idempotent"} {
		if strings.Contains(lower, unasked) {
			t.Errorf("the rule asks for %q, which no reviewer did: %q", unasked, p.Content)
		}
	}
	g, ok := guardOf(p, rulefmt.GuardEvidence)
	if !ok || !g.Passed {
		t.Fatalf("evidence guard = %+v (recorded %v)", g, ok)
	}
	// Each clause says where it came from, and the file on the branch
	// keeps it.
	stored := f.get(p.ID)
	if len(stored.Clauses) != 2 {
		t.Fatalf("clauses = %+v", stored.Clauses)
	}
	if c := stored.Clauses[0]; c.Source != rulefmt.SourceGuidance || c.Category != "retry-timeout" || len(c.Decisions) != 3 || !slices.Contains(c.Words, "timeout") {
		t.Errorf("guidance clause = %+v", c)
	}
	if c := stored.Clauses[1]; c.Source != rulefmt.SourceReviewers || !strings.HasPrefix(c.Text, "here: ") || len(c.Decisions) != 1 {
		t.Errorf("reviewers' clause = %+v", c)
	}
	if !strings.Contains(p.EvidenceSummary, "Left out of the category's guidance") || !strings.Contains(p.EvidenceSummary, "exponential backoff") {
		t.Errorf("the summary does not name the guidance left out: %s", p.EvidenceSummary)
	}
}

func TestAReviewerWhoAsksForRetriesKeepsTheRetryClause(t *testing.T) {
	f := newFixture(t, Options{})
	p := f.proposeOne(timeoutCluster(t, "and when it does time out, retry it with backoff instead of failing the whole batch"))
	lower := strings.ToLower(p.Content)
	if !strings.Contains(lower, "timeout") || !strings.Contains(lower, "retry only idempotent operations") || !strings.Contains(lower, "backoff") {
		t.Fatalf("draft = %q, want timeouts and retries", p.Content)
	}
	i := slices.IndexFunc(p.Clauses, func(c rulefmt.Clause) bool { return strings.HasPrefix(strings.ToLower(c.Text), "retry only") })
	if i < 0 || !slices.Equal(p.Clauses[i].Decisions, []string{"c-timeout-d4"}) || p.Clauses[i].Source != rulefmt.SourceGuidance {
		t.Fatalf("clauses = %+v: the retry clause should name the decision that asked for it", p.Clauses)
	}
}

// Two design reviews ask why a document invents a format instead of
// weighing the standards that exist; their lesson landed in the
// category about reusing the codebase's helpers. The rule must not tell
// the agent to search the codebase for a helper.
func TestADesignReviewAboutAnInventedFormatIsNotAskedToSearchTheCodebase(t *testing.T) {
	reuse, ok := lesson.DefaultTaxonomy().Category("context-ignored")
	if !ok {
		t.Fatal("no context-ignored category")
	}
	ev := cluster("c-format", "planner-agent",
		"Why does this doc define a brand new wire format? I'd expect a comparison with the existing standards before we commit to our own.",
		"Section 3 invents its own encoding. What about the existing standards - were they considered, and why were they rejected?",
		"Yet another home-grown format. Compare the existing standards first and say why none of them fits.",
	)
	ev.Category, ev.CategoryRule = reuse.ID, reuse.Rule
	ev.Asked = []string{"Compare the existing standards first and say why none of them fits"}
	ev.AskedBy = []string{"c-format-d3"}
	f := newFixture(t, Options{})
	p := f.proposeOne(ev)
	for _, unasked := range []string{"codebase", "helper", "utility", "neighbouring code"} {
		if strings.Contains(strings.ToLower(p.Content), unasked) {
			t.Errorf("the rule speaks of %q, which no reviewer did: %q", unasked, p.Content)
		}
	}
	if !strings.Contains(p.Content, "existing standards") {
		t.Errorf("the rule does not say what the reviewers asked: %q", p.Content)
	}
	if len(p.Clauses) == 0 || p.Clauses[0].Source != rulefmt.SourceReviewers {
		t.Errorf("clauses = %+v, want the reviewers' words", p.Clauses)
	}
	if g, _ := guardOf(p, rulefmt.GuardEvidence); !g.Passed {
		t.Errorf("evidence guard = %+v", g)
	}
}

// A model's draft that adds advice no reviewer gave is proposed, and the
// evidence guard shows the curator the added clause.
func TestAClauseTheEvidenceDoesNotAskForIsShownToTheCurator(t *testing.T) {
	llm := &fakeLLM{answer: `{"rule_type": "GUIDELINE", "rule_content": "Give every outbound network call a timeout, and retry failed calls with exponential backoff."}`}
	f := newFixture(t, Options{LLM: llm})
	p := f.proposeOne(timeoutCluster(t))
	if p.Status != rulefmt.Pending {
		t.Fatalf("status %s: the evidence guard must not hold a draft; guards %+v", p.Status, p.Guards)
	}
	g, ok := guardOf(p, rulefmt.GuardEvidence)
	if !ok || g.Passed || !strings.Contains(g.Reason, "“retry failed calls with exponential backoff”") {
		t.Fatalf("evidence guard = %+v, want it to name the retry clause", g)
	}
	if strings.Contains(g.Reason, "Give every outbound") {
		t.Errorf("the guard names a clause the reviewers asked for: %s", g.Reason)
	}
	stored := f.get(p.ID)
	i := slices.IndexFunc(stored.Clauses, func(c rulefmt.Clause) bool { return c.Beyond() })
	if i < 0 || stored.Clauses[i].Source != rulefmt.SourceModel || !strings.Contains(stored.Clauses[i].Text, "retry failed calls") {
		t.Fatalf("clauses = %+v", stored.Clauses)
	}
	if _, held := stored.FailedGuard(); held {
		t.Fatalf("FailedGuard reports the evidence guard as holding the proposal")
	}
}

// A curator edits the drafted text on the remote and adds retries no
// reviewer asked for: the edit is taken, and the evidence guard names
// the added clause.
func TestACuratorsEditThatAddsAClauseIsShownToTheCurator(t *testing.T) {
	f := newTrustFixture(t)
	p := f.proposeOne(timeoutCluster(t))
	f.syncAll()
	advice := rulefmt.Advice(p.Content)
	edited := strings.TrimSuffix(advice, ".") + ", and retry with backoff."
	got := f.editOnRemote(t, p, edited)
	g, ok := guardOf(got, rulefmt.GuardEvidence)
	if !ok || g.Passed || !strings.Contains(g.Reason, "“retry with backoff”") {
		t.Fatalf("evidence guard = %+v, want it to name the added clause", g)
	}
	if n := len(slices.DeleteFunc(slices.Clone(got.Guards), func(g rulefmt.GuardResult) bool { return g.Guard != rulefmt.GuardEvidence })); n != 1 {
		t.Errorf("%d evidence guard results, want the edit's only: %+v", n, got.Guards)
	}
	i := slices.IndexFunc(got.Clauses, func(c rulefmt.Clause) bool { return c.Beyond() })
	if i < 0 || got.Clauses[i].Source != rulefmt.SourceEdit || got.Clauses[i].Text != "retry with backoff" {
		t.Fatalf("clauses = %+v", got.Clauses)
	}
	if got.Clauses[0].Source != rulefmt.SourceGuidance {
		t.Errorf("the guidance the draft kept lost its source: %+v", got.Clauses[0])
	}
}
