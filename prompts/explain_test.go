package prompts

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/precept-dev/precept/rules/rulefmt"
)

func TestExplainSaysWhyEachRuleAndRulesFileIsInOrOut(t *testing.T) {
	repo := openRepo(t)
	commit(t, repo, "rules", merge(files{
		"prompts/implement.md":      "Base.",
		"prompts/_rules.md":         "Root.",
		"prompts/src/api/_rules.md": "API.",
		"prompts/src/web/_rules.md": "Web.",
		"prompts/src/_rules.md":     "\n",
	}, ruleFiles(t, "coding-agent",
		ruleSpec{id: "r-top", importance: rulefmt.Critical, confidence: 0.9},
		ruleSpec{id: "r-second", confidence: 0.8},
		ruleSpec{id: "r-over", confidence: 0.1},
		ruleSpec{id: "r-shadow", status: rulefmt.Shadow, confidence: 0.5},
		ruleSpec{id: "r-rolled", status: rulefmt.RolledBack, confidence: 0.5},
		ruleSpec{id: "r-shared", confidence: 0.2},
	), ruleFiles(t, "test-agent", ruleSpec{id: "r-tests"}, ruleSpec{id: "r-shared"}),
		ruleFiles(t, "docs-agent", ruleSpec{id: "r-tests"}),
	))
	a := newAssembler(t, repo, Options{MaxRules: 3})
	e, err := a.Explain(context.Background(), implement)
	if err != nil {
		t.Fatal(err)
	}
	p := build(t, a, implement)
	if e.Version != p.Version || e.Commit != p.Commit || e.BasePromptRef != "prompts/implement.md" || e.Problem != "" {
		t.Fatalf("explanation header = %+v", e)
	}

	wantFiles := []string{
		"prompts/_rules.md exists=true applies=true: applies: on the path to src/api/",
		"prompts/src/_rules.md exists=true applies=false: empty: nothing to add",
		"prompts/src/api/_rules.md exists=true applies=true: applies: on the path to src/api/",
		"prompts/src/web/_rules.md exists=true applies=false: not on the path: applies to prompts/src/web/ and below, the scope is src/api/",
	}
	if len(e.RulesFiles) != len(wantFiles) {
		t.Fatalf("rules files = %+v", e.RulesFiles)
	}
	for i, f := range e.RulesFiles {
		if got := fmt.Sprintf("%s exists=%v applies=%v: %s", f.Path, f.Exists, f.Applies, f.Reason); got != wantFiles[i] {
			t.Errorf("rules file %d = %q\nwant %q", i, got, wantFiles[i])
		}
	}

	want := []struct {
		id       string
		included bool
		position int
		reason   Reason
		detail   string
		agents   string
	}{
		{"r-top", true, 1, "", "included at position 1: importance CRITICAL, confidence 0.90", "coding-agent"},
		{"r-second", true, 2, "", "included at position 2: importance NORMAL, confidence 0.80", "coding-agent"},
		{"r-shared", true, 3, "", "included at position 3: importance NORMAL, confidence 0.20", "coding-agent"},
		{"r-over", false, 0, ReasonBudget, "ranked 4 of 4 active rules; a prompt holds at most 3 (prompts.max_rules)", "coding-agent"},
		{"r-shadow", false, 0, ReasonShadow, "in its shadow period until 2026-12-01T00:00:00Z; only in the shadow prompt", "coding-agent"},
		{"r-rolled", false, 0, ReasonInactive, "status ROLLED_BACK: only ACTIVE rules enter the prompt (SHADOW ones the shadow prompt)", "coding-agent"},
		{"r-tests", false, 0, ReasonOtherAgent, "belongs to docs-agent, test-agent, not coding-agent: a rule applies to the agents whose directory under rules/active holds it", "docs-agent,test-agent"},
	}
	if len(e.Rules) != len(want) {
		for _, r := range e.Rules {
			t.Logf("%s %v %s", r.ID, r.Included, r.Reason)
		}
		t.Fatalf("%d rules explained, want %d", len(e.Rules), len(want))
	}
	for i, w := range want {
		r := e.Rules[i]
		if r.ID != w.id || r.Included != w.included || r.Position != w.position || r.Reason != w.reason || r.Detail != w.detail || strings.Join(r.Agents, ",") != w.agents {
			t.Errorf("rule %d = %s included=%v pos=%d %s %q agents %q\nwant %+v", i, r.ID, r.Included, r.Position, r.Reason, r.Detail, r.Agents, w)
		}
		if r.Content == "" || len(r.Approvals) != 2 || len(r.FeedbackIDs) != 1 {
			t.Errorf("rule %s lacks its text or provenance: %+v", r.ID, r.Rule)
		}
	}
	wantSummary := "agent coding-agent, stage implement, scope src/api/: base prompt prompts/implement.md, 2 _rules.md files, 3 learned rules; left out: 1 budget, 1 shadow, 1 inactive, 1 other_agent."
	if e.Summary != wantSummary {
		t.Fatalf("summary = %q\nwant %q", e.Summary, wantSummary)
	}
}

func TestExplainDescribesARequestBuildPromptWouldRefuse(t *testing.T) {
	repo := openRepo(t)
	commit(t, repo, "rules", ruleFiles(t, "coding-agent", ruleSpec{id: "r-1"}, ruleSpec{id: "r-s", status: rulefmt.Shadow, confidence: 0.5}))
	a := newAssembler(t, repo, Options{})
	e, err := a.Explain(context.Background(), Request{Agent: "coding-agent", Stage: "review"})
	if err != nil {
		t.Fatal(err)
	}
	if e.Version != "" || !strings.Contains(e.Problem, "prompts/review.md does not exist") ||
		!strings.HasPrefix(e.Summary, "agent coding-agent, stage review, scope the repository root: base prompt prompts/review.md, 0 _rules.md files, 1 learned rule; left out: 1 shadow. BuildPrompt fails: no base prompt") {
		t.Fatalf("explanation = %+v", e)
	}
	if len(e.Rules) != 2 || e.Rules[0].ID != "r-1" || !e.Rules[0].Included || e.Rules[1].Detail != "in its shadow period until 2026-12-01T00:00:00Z; only in the shadow prompt" {
		t.Fatalf("rules = %+v", e.Rules)
	}
	if len(e.RulesFiles) != 1 || e.RulesFiles[0].Exists || e.RulesFiles[0].Reason != "no _rules.md here (optional)" {
		t.Fatalf("rules files = %+v", e.RulesFiles)
	}
}
