package prompts

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/rules/rulefmt"
)

var implement = Request{Agent: "coding-agent", Stage: "implement", ScopePath: "src/api/handler.go"}

func TestPromptLaysOutBaseRulesFilesAndTaggedRules(t *testing.T) {
	repo := openRepo(t)
	commit(t, repo, "layout", merge(files{
		"prompts/implement.md":      "You implement tasks.\r\nKeep changes small.   \n\n",
		"prompts/_rules.md":         "Write tests first.",
		"prompts/src/api/_rules.md": "Version every endpoint.",
	}, ruleFiles(t, "coding-agent",
		ruleSpec{id: "r-b", importance: rulefmt.Critical, confidence: 0.9, content: "Wrap errors with context.\n\nName the operation:\n    fmt.Errorf(\"read config: %w\", err)"},
		ruleSpec{id: "r-a", confidence: 0.5, content: "Prefer table tests."},
	)))
	a := newAssembler(t, repo, Options{})
	p := build(t, a, implement)
	want := "You implement tasks.\nKeep changes small.\n\n" +
		"## Directory Rules (prompts/_rules.md)\n\nWrite tests first.\n\n" +
		"## Directory Rules (prompts/src/api/_rules.md)\n\nVersion every endpoint.\n\n" +
		"## Learned Rules (from feedback)\n\n" +
		"- [r-b] Wrap errors with context.\n\n  Name the operation:\n      fmt.Errorf(\"read config: %w\", err)\n" +
		"- [r-a] Prefer table tests.\n"
	if p.Text != want {
		t.Fatalf("text:\n%s\nwant:\n%s", p.Text, want)
	}
	var kinds []string
	for _, s := range p.Sources {
		kinds = append(kinds, string(s.Kind)+":"+s.Ref)
		if len(s.Digest) != 40 {
			t.Errorf("source %s has digest %q, want a blob hash", s.Ref, s.Digest)
		}
	}
	wantSources := []string{"base_prompt:prompts/implement.md", "rules_md:prompts/_rules.md", "rules_md:prompts/src/api/_rules.md", "rule:r-b", "rule:r-a"}
	if !slices.Equal(kinds, wantSources) {
		t.Fatalf("sources = %q, want %q", kinds, wantSources)
	}
	if !slices.Equal(p.RuleIDs, []string{"r-b", "r-a"}) || len(p.Excluded) != 0 || p.ShadowText != "" || p.ShadowVersion != "" {
		t.Fatalf("prompt = %+v", p)
	}
	tip, _ := repo.Tip("main")
	if p.Commit != tip.String() || !strings.HasPrefix(p.Version, "v1:") || len(p.Version) != 19 {
		t.Fatalf("commit %q version %q", p.Commit, p.Version)
	}
}

func TestLearnedRulesAreOrderedByImportanceThenConfidenceThenID(t *testing.T) {
	tests := []struct {
		name  string
		specs []ruleSpec
		want  []string
	}{
		{"importance beats confidence", []ruleSpec{
			{id: "r-low", importance: rulefmt.Normal, confidence: 0.99},
			{id: "r-crit", importance: rulefmt.Critical, confidence: 0.31},
			{id: "r-imp", importance: rulefmt.Important, confidence: 0.5},
		}, []string{"r-crit", "r-imp", "r-low"}},
		{"confidence within one importance", []ruleSpec{
			{id: "r-1", importance: rulefmt.Important, confidence: 0.4},
			{id: "r-2", importance: rulefmt.Important, confidence: 0.8},
			{id: "r-3", importance: rulefmt.Important, confidence: 0.6},
		}, []string{"r-2", "r-3", "r-1"}},
		{"id breaks ties", []ruleSpec{
			{id: "r-c", confidence: 0.7}, {id: "r-a", confidence: 0.7}, {id: "r-b", confidence: 0.7},
		}, []string{"r-a", "r-b", "r-c"}},
		{"missing importance counts as normal", []ruleSpec{
			{id: "r-none", confidence: 0.9}, {id: "r-normal", importance: rulefmt.Normal, confidence: 0.8}, {id: "r-imp", importance: rulefmt.Important, confidence: 0.1},
		}, []string{"r-imp", "r-none", "r-normal"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			repo := openRepo(t)
			commit(t, repo, "rules", merge(files{"prompts/implement.md": "Base."}, ruleFiles(t, "coding-agent", tt.specs...)))
			p := build(t, newAssembler(t, repo, Options{}), implement)
			if !slices.Equal(p.RuleIDs, tt.want) {
				t.Fatalf("order = %q, want %q", p.RuleIDs, tt.want)
			}
			last := -1
			for _, id := range tt.want {
				i := strings.Index(p.Text, "- ["+id+"] ")
				if i <= last {
					t.Fatalf("%s out of order in text:\n%s", id, p.Text)
				}
				last = i
			}
		})
	}
}

func TestOnlyMaxRulesRulesEnterThePromptAndTheRestAreExcludedForBudget(t *testing.T) {
	tests := []struct {
		name     string
		rules    int
		maxRules int
		in       int
	}{
		{"under the default budget", 19, 0, 19},
		{"exactly the default budget", 20, 0, 20},
		{"over the default budget", 25, 0, 20},
		{"configured budget", 8, 5, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var specs []ruleSpec
			for i := range tt.rules {
				// Confidence falls with i, so r-00 ranks first.
				specs = append(specs, ruleSpec{id: fmt.Sprintf("r-%02d", i), confidence: 0.99 - float64(i)/100})
			}
			repo := openRepo(t)
			commit(t, repo, "rules", merge(files{"prompts/implement.md": "Base."}, ruleFiles(t, "coding-agent", specs...)))
			p := build(t, newAssembler(t, repo, Options{MaxRules: tt.maxRules}), implement)
			if len(p.RuleIDs) != tt.in || strings.Count(p.Text, "\n- [r-") != tt.in {
				t.Fatalf("%d rules in the prompt, want %d", len(p.RuleIDs), tt.in)
			}
			if len(p.Excluded) != tt.rules-tt.in {
				t.Fatalf("excluded = %+v", p.Excluded)
			}
			for i, x := range p.Excluded {
				wantID := fmt.Sprintf("r-%02d", tt.in+i)
				if x.RuleID != wantID || x.Reason != ReasonBudget || !strings.Contains(x.Detail, fmt.Sprintf("ranked %d of %d", tt.in+i+1, tt.rules)) {
					t.Fatalf("excluded[%d] = %+v, want %s for budget", i, x, wantID)
				}
				if strings.Contains(p.Text, "["+x.RuleID+"]") {
					t.Fatalf("%s is in the text", x.RuleID)
				}
			}
		})
	}
}

func TestShadowRulesOnlyEnterTheShadowPrompt(t *testing.T) {
	repo := openRepo(t)
	active := []ruleSpec{{id: "r-act1", confidence: 0.9}, {id: "r-act2", confidence: 0.5}}
	commit(t, repo, "rules", merge(files{"prompts/implement.md": "Base."},
		ruleFiles(t, "coding-agent", append(active,
			ruleSpec{id: "r-shadow", status: rulefmt.Shadow, importance: rulefmt.Important, confidence: 0.7},
			ruleSpec{id: "r-gone", status: rulefmt.RolledBack, importance: rulefmt.Critical, confidence: 1},
			ruleSpec{id: "r-old", status: rulefmt.Sunset, confidence: 1},
		)...),
		ruleFiles(t, "test-agent", ruleSpec{id: "r-act1", confidence: 0.9}),
	))
	a := newAssembler(t, repo, Options{})
	p := build(t, a, implement)

	if !slices.Equal(p.RuleIDs, []string{"r-act1", "r-act2"}) || strings.Contains(p.Text, "r-shadow") {
		t.Fatalf("main prompt has %q:\n%s", p.RuleIDs, p.Text)
	}
	if !slices.Equal(p.ShadowRuleIDs, []string{"r-shadow"}) {
		t.Fatalf("shadow rule ids = %q", p.ShadowRuleIDs)
	}
	wantShadow := strings.Replace(p.Text, "- [r-act1]", "- [r-shadow] Follow rule r-shadow.\n- [r-act1]", 1)
	if p.ShadowText != wantShadow {
		t.Fatalf("shadow text:\n%s\nwant:\n%s", p.ShadowText, wantShadow)
	}
	if p.ShadowVersion != shadowVersion(p.ShadowText) || p.ShadowVersion == p.Version || p.ShadowVersion == version(p.ShadowText) {
		t.Fatalf("shadow version %q, version %q", p.ShadowVersion, p.Version)
	}
	if len(p.Excluded) != 1 || p.Excluded[0].RuleID != "r-shadow" || p.Excluded[0].Reason != ReasonShadow ||
		p.Excluded[0].Detail != "in its shadow period until 2026-12-01T00:00:00Z; only in the shadow prompt" {
		t.Fatalf("excluded = %+v", p.Excluded)
	}
	for _, gone := range []string{"r-gone", "r-old"} {
		if strings.Contains(p.Text+p.ShadowText, gone) {
			t.Fatalf("inactive rule %s is in a prompt", gone)
		}
	}

	// The other agent has no shadow rules: no shadow variant.
	other := build(t, a, Request{Agent: "test-agent", Stage: "implement"})
	if other.ShadowText != "" || other.ShadowVersion != "" || other.ShadowRuleIDs != nil || !slices.Equal(other.RuleIDs, []string{"r-act1"}) {
		t.Fatalf("test-agent prompt = %+v", other)
	}
}

func TestShadowPromptKeepsTheBudget(t *testing.T) {
	repo := openRepo(t)
	commit(t, repo, "rules", merge(files{"prompts/implement.md": "Base."}, ruleFiles(t, "coding-agent",
		ruleSpec{id: "r-1", confidence: 0.9}, ruleSpec{id: "r-2", confidence: 0.8},
		ruleSpec{id: "r-s-high", status: rulefmt.Shadow, confidence: 0.85},
		ruleSpec{id: "r-s-low", status: rulefmt.Shadow, confidence: 0.1},
	)))
	p := build(t, newAssembler(t, repo, Options{MaxRules: 2}), implement)
	if !slices.Equal(p.RuleIDs, []string{"r-1", "r-2"}) || !slices.Equal(p.ShadowRuleIDs, []string{"r-s-high"}) {
		t.Fatalf("rules %q, shadow rules %q", p.RuleIDs, p.ShadowRuleIDs)
	}
	if strings.Contains(p.ShadowText, "r-2") || strings.Contains(p.ShadowText, "r-s-low") || !strings.Contains(p.ShadowText, "- [r-1]") {
		t.Fatalf("shadow text:\n%s", p.ShadowText)
	}
	if x := p.Excluded[len(p.Excluded)-1]; x.RuleID != "r-s-low" || !strings.Contains(x.Detail, "ranked below the 2 rules the shadow prompt holds") {
		t.Fatalf("excluded = %+v", p.Excluded)
	}
}

func TestVersionIsStableForTheSameTextAndChangesWithIt(t *testing.T) {
	baseFiles := func(t *testing.T) files {
		return merge(files{
			"prompts/implement.md": "Base.",
			"prompts/_rules.md":    "Root rules.",
		}, ruleFiles(t, "coding-agent", ruleSpec{id: "r-1", confidence: 0.9}, ruleSpec{id: "r-2", confidence: 0.5}))
	}
	tests := []struct {
		name   string
		change func(t *testing.T) files
		req    Request
		same   bool
	}{
		{"unrelated file", func(t *testing.T) files { return files{"tuning/examples/x.md": "note"} }, implement, true},
		{"another agent's rule", func(t *testing.T) files { return ruleFiles(t, "docs-agent", ruleSpec{id: "r-9"}) }, implement, true},
		{"a sibling directory's _rules.md", func(t *testing.T) files { return files{"prompts/web/_rules.md": "Web."} }, implement, true},
		{"trailing whitespace only", func(t *testing.T) files { return files{"prompts/_rules.md": "Root rules.  \n\n"} }, implement, true},
		{"rule metadata that keeps the order", func(t *testing.T) files {
			return ruleFiles(t, "coding-agent", ruleSpec{id: "r-1", confidence: 0.95})
		}, implement, true},
		{"a rule's text", func(t *testing.T) files {
			return ruleFiles(t, "coding-agent", ruleSpec{id: "r-1", confidence: 0.9, content: "Different."})
		}, implement, false},
		{"rule order", func(t *testing.T) files {
			return ruleFiles(t, "coding-agent", ruleSpec{id: "r-1", confidence: 0.1})
		}, implement, false},
		{"a new rule", func(t *testing.T) files { return ruleFiles(t, "coding-agent", ruleSpec{id: "r-3"}) }, implement, false},
		{"a rule rolled back", func(t *testing.T) files {
			return ruleFiles(t, "coding-agent", ruleSpec{id: "r-2", status: rulefmt.RolledBack})
		}, implement, false},
		{"the root _rules.md", func(t *testing.T) files { return files{"prompts/_rules.md": "Root rules, edited."} }, implement, false},
		{"a _rules.md on the path", func(t *testing.T) files { return files{"prompts/src/_rules.md": "Src."} }, implement, false},
		{"the stage prompt", func(t *testing.T) files { return files{"prompts/implement.md": "Base, edited."} }, implement, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			repo := openRepo(t)
			commit(t, repo, "base", baseFiles(t))
			a := newAssembler(t, repo, Options{})
			before := build(t, a, tt.req)
			again := build(t, newAssembler(t, repo, Options{}), tt.req)
			if again.Version != before.Version {
				t.Fatalf("same inputs gave versions %s and %s", before.Version, again.Version)
			}
			commit(t, repo, "change", tt.change(t))
			refresh(t, a)
			after := build(t, a, tt.req)
			if after.Commit == before.Commit {
				t.Fatal("the assembler did not follow the commit")
			}
			if (after.Version == before.Version) != tt.same {
				t.Fatalf("version %s -> %s, want same=%v\nbefore:\n%s\nafter:\n%s", before.Version, after.Version, tt.same, before.Text, after.Text)
			}
		})
	}
}

func TestBasePromptFromTheRequestReplacesTheStagePrompt(t *testing.T) {
	repo := openRepo(t)
	commit(t, repo, "base", merge(files{"prompts/implement.md": "Repository base."}, ruleFiles(t, "coding-agent", ruleSpec{id: "r-1"})))
	a := newAssembler(t, repo, Options{})

	fromRepo := build(t, a, implement)
	req := implement
	req.BasePrompt = str("Repository base.")
	sameText := build(t, a, req)
	if sameText.Version != fromRepo.Version || sameText.Sources[0].Ref != RequestRef || !strings.HasPrefix(sameText.Sources[0].Digest, "sha256:") {
		t.Fatalf("request base with the same text: version %s vs %s, source %+v", sameText.Version, fromRepo.Version, sameText.Sources[0])
	}

	req.BasePrompt = str("Caller's own base.")
	own := build(t, a, req)
	if !strings.HasPrefix(own.Text, "Caller's own base.\n\n## Learned Rules") || own.Version == fromRepo.Version {
		t.Fatalf("text:\n%s", own.Text)
	}

	req.Stage, req.BasePrompt = "no-such-stage", str("")
	empty := build(t, a, req)
	if !strings.HasPrefix(empty.Text, "## Learned Rules") {
		t.Fatalf("an explicitly empty base gave:\n%s", empty.Text)
	}
}

func TestMissingStagePromptFailsWithFailedPreconditionNamingThePath(t *testing.T) {
	repo := openRepo(t)
	commit(t, repo, "base", files{"prompts/implement.md": "Base."})
	a := newAssembler(t, repo, Options{})
	for _, stage := range []string{"review", "implement"} {
		_, err := a.Build(context.Background(), Request{Agent: "coding-agent", Stage: stage})
		if stage == "implement" {
			if err != nil {
				t.Fatal(err)
			}
			continue
		}
		if precept.ErrorCode(err) != precept.FailedPrecondition || !strings.Contains(precept.ErrorMessage(err), "prompts/review.md does not exist") {
			t.Fatalf("error = %v", err)
		}
	}
	// An empty repository (no main yet) works with a base prompt.
	p := build(t, newAssembler(t, openRepo(t), Options{}), Request{Agent: "a", Stage: "s", BasePrompt: str("Only this.")})
	if p.Text != "Only this.\n" || p.Commit != "" {
		t.Fatalf("prompt on an empty repository = %+v", p)
	}
}

func TestUnusableFilesAreLeftOutWithoutBreakingThePrompt(t *testing.T) {
	repo := openRepo(t)
	commit(t, repo, "rules", merge(files{
		"prompts/implement.md":                 "Base.",
		"rules/active/coding-agent/r-bad.md":   "no front matter here",
		"rules/active/coding-agent/r-named.md": ruleFile(t, ruleSpec{id: "r-other-name"}),
		"rules/active/coding-agent/notes.txt":  "not a rule file",
		"rules/active/coding-agent/sub/r-x.md": ruleFile(t, ruleSpec{id: "r-x"}),
		"rules/active/bad agent/r-y.md":        ruleFile(t, ruleSpec{id: "r-y"}),
	}, ruleFiles(t, "coding-agent", ruleSpec{id: "r-good"})))
	a := newAssembler(t, repo, Options{})
	p := build(t, a, implement)
	if !slices.Equal(p.RuleIDs, []string{"r-good"}) {
		t.Fatalf("rules = %q", p.RuleIDs)
	}
	e, err := a.Explain(context.Background(), implement)
	if err != nil {
		t.Fatal(err)
	}
	invalid := map[string]string{}
	for _, r := range e.Rules {
		if r.Reason == ReasonInvalid {
			invalid[r.ID] = r.Detail
		}
	}
	if len(invalid) != 2 || !strings.Contains(invalid["r-bad"], "no front matter") || !strings.Contains(invalid["r-named"], `rule_id "r-other-name" does not match the file name r-named.md`) {
		t.Fatalf("invalid rules = %q", invalid)
	}
}
