package evaluator

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/lesson"
)

func stats(size, reviewers, epics int) Stats {
	return Stats{Size: size, DistinctReviewers: reviewers, DistinctEpics: epics}
}

func TestClassBoundariesCountDistinctReviewersAndEpics(t *testing.T) {
	def := DefaultThresholds()
	tests := []struct {
		name string
		th   Thresholds
		s    Stats
		want Class
	}{
		{"a single decision", def, stats(1, 1, 1), EdgeCase},
		{"2 similar from 1 reviewer", def, stats(2, 1, 2), EdgeCase},
		{"2 similar from 2 reviewers", def, stats(2, 2, 1), GeneralizableLow},
		{"3 similar from 1 reviewer is not generalizable", def, stats(3, 1, 3), EdgeCase},
		{"10 similar from 1 reviewer is still not generalizable", def, stats(10, 1, 5), EdgeCase},
		{"3 from 2 reviewers in 1 epic is LOW, not HIGH", def, stats(3, 2, 1), GeneralizableLow},
		{"3 from 2 reviewers in 2 epics is HIGH", def, stats(3, 2, 2), GeneralizableHigh},
		{"2 from 2 reviewers in 2 epics is LOW (too few for HIGH)", def, stats(2, 2, 2), GeneralizableLow},
		{"many from many", def, stats(12, 6, 4), GeneralizableHigh},
		{"custom: HIGH needs 3 reviewers", Thresholds{2, 2, 3, 3, 2, 0}, stats(5, 2, 3), GeneralizableLow},
		{"custom: LOW needs 3 decisions", Thresholds{3, 2, 4, 2, 2, 0}, stats(2, 2, 2), EdgeCase},
		{"HIGH needing 2 producers, from one token, is LOW", Thresholds{2, 2, 3, 2, 2, 2}, withProducers(stats(9, 5, 4), "api:ci"), GeneralizableLow},
		{"HIGH needing 2 producers, from two, is HIGH", Thresholds{2, 2, 3, 2, 2, 2}, withProducers(stats(9, 5, 4), "api:ci", "stream:hitl"), GeneralizableHigh},
		{"no producer requirement ignores unknown producers", def, stats(3, 2, 2), GeneralizableHigh},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.th.ClassOf(tt.s); got != tt.want {
				t.Fatalf("ClassOf(%+v) = %s, want %s", tt.s, got, tt.want)
			}
		})
	}
}

func withProducers(s Stats, producers ...string) Stats {
	s.Producers, s.DistinctProducers = producers, len(producers)
	return s
}

func TestClusterEvaluationsExplainThemselvesAndProposeActions(t *testing.T) {
	th := DefaultThresholds()
	d := precept.Decision{DecisionID: "d", Agent: "coding-agent"}
	high := th.clusterEvaluation(d, nil, "c-1", stats(4, 3, 2), nil, 0.85)
	if high.Class != GeneralizableHigh || high.Action.Type != CreateRule || high.Action.Priority != "high" ||
		!strings.Contains(high.Rationale, "4 similar negative decisions from 3 distinct reviewers in 2 distinct epics") {
		t.Fatalf("high = %+v", high)
	}
	low := th.clusterEvaluation(d, nil, "c-1", stats(3, 2, 1), []string{"formatting"}, 0.85)
	if low.Class != GeneralizableLow || low.Action.Type != RefinePrompt || low.Action.Priority != "low" {
		t.Fatalf("low with a formatting tag = %+v", low.Action)
	}
	skill := th.clusterEvaluation(d, nil, "c-1", stats(3, 2, 2), []string{"tool-use"}, 0.85)
	if skill.Action.Type != UpdateSkill {
		t.Fatalf("tool problems = %+v", skill.Action)
	}
	edge := th.clusterEvaluation(d, nil, "c-1", stats(1, 1, 1), nil, 1)
	if edge.Class != EdgeCase || edge.Action.Type != DocumentOnly || !strings.Contains(edge.Rationale, "Documented only") {
		t.Fatalf("edge = %+v", edge)
	}
	for _, ev := range []Evaluation{high, low, skill, edge} {
		if ev.Confidence <= 0 || ev.Confidence > 1 {
			t.Errorf("%s confidence %v outside (0, 1]", ev.Class, ev.Confidence)
		}
	}
	if more := th.clusterEvaluation(d, nil, "c", stats(9, 6, 5), nil, 0.9); more.Confidence <= high.Confidence {
		t.Errorf("more support did not raise confidence: %v <= %v", more.Confidence, high.Confidence)
	}
}

func TestPolarity(t *testing.T) {
	r := DefaultRubric()
	tests := []struct {
		verdict precept.Verdict
		comment string
		rating  string
		want    bool
	}{
		{precept.Approved, "", "", false},
		{precept.Approved, "LGTM, ship it", "", false},
		{precept.Approved, "Useful review, caught the race condition. Thanks.", "", false},
		{precept.Approved, "LGTM, but please add tests next time", "", true},
		{precept.Approved, "fine. nit: rename the helper", "", true},
		{precept.Approved, "ok", "negative", true},
		{precept.Rejected, "great work", "", true},
		{precept.ApprovedWithChanges, "", "", true},
		{precept.Approved, "should have split this, but fine", "positive", false},
		// Hedges and acceptances: the reviewer's musing, not a request.
		{precept.Approved, "I guess the docs should probably mention it as well. Approving.", "", false},
		{precept.Approved, "Solves the crash, but no idea how we would cover it with a test; fine as is for now.", "", false},
		{precept.Approved, "Green build. We should add an integration test someday, but it makes sense to wait for the new API.", "", false},
		{precept.Approved, "Thanks for the context, that makes sense.", "", false},
		// A request stays one, whatever sign-off surrounds it.
		{precept.Approved, "LGTM, but you should rename the helper.", "", true},
		{precept.Approved, "You should rename the helper; otherwise LGTM", "", true},
		{precept.Approved, "Approving. Could you add a changelog entry before merging?", "", true},
	}
	for _, tt := range tests {
		d := precept.Decision{Decision: tt.verdict, ReviewerComment: tt.comment, Rating: tt.rating}
		if got, _ := polarity(d, r); got != tt.want {
			t.Errorf("%s %q rating %q: negative = %v, want %v", tt.verdict, tt.comment, tt.rating, got, tt.want)
		}
	}
}

func TestRubricSeparatesClearFromVagueFeedback(t *testing.T) {
	r := DefaultRubric()
	tests := []struct {
		comment string
		diff    string
		pass    bool
		missing string
	}{
		{"fix this", "", false, "what_was_wrong"},
		{"wrong", "", false, "desired_behaviour"},
		{"nope, try again", "", false, "what_was_wrong"},
		{"??", "", false, "what_was_wrong"},
		{"not good", "", false, "what_was_wrong"},
		// A placed lesson says why its problem matters.
		{"missing tests again", "", true, ""},
		{"task granularity too coarse", "", true, ""},
		{"requests.get without timeout= can block indefinitely", "", true, ""},
		{"add a definition of done to each task", "", true, ""},
		{"Typo in the heading.", "-# Intro\n+# Introduction\n", true, ""},
		{"", "-x := f()\n+x, err := f()\n", true, "why"},
	}
	for _, tt := range tests {
		d := precept.Decision{Agent: "coding-agent", ReviewerComment: tt.comment, CorrectionDiff: tt.diff}
		res := r.Score(d, learn(d))
		if res.Passed != tt.pass {
			t.Errorf("%q: passed = %v (met %d, confidence %.2f, missing %v), want %v", tt.comment, res.Passed, res.Met, res.Confidence, res.Missing, tt.pass)
			continue
		}
		if tt.missing != "" && !slices.Contains(res.Missing, tt.missing) {
			t.Errorf("%q: missing = %v, want it to include %s", tt.comment, res.Missing, tt.missing)
		}
		for _, a := range res.Attributes {
			if a.Present && a.Evidence == "" {
				t.Errorf("%q: attribute %s present without evidence", tt.comment, a.Name)
			}
		}
	}
}

func TestRubricFileIsReReadWhenItChangesAndABrokenFileKeepsTheLastGoodOne(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rubric.yaml")
	strict := strings.Replace(string(defaultRubricYAML), "min_met: 3", "min_met: 4", 1)
	if err := os.WriteFile(path, []byte(strict), 0o644); err != nil {
		t.Fatal(err)
	}
	src, err := NewRubricSource(path)
	if err != nil {
		t.Fatal(err)
	}
	// A correction alone shows what was wrong, where and what was wanted,
	// but not why.
	d := precept.Decision{Agent: "a", CorrectionDiff: "-x := f()\n+x, err := f()\n"}
	if src.Rubric().Score(d, learn(d)).Passed {
		t.Fatal("a 4-of-4 rubric passed a decision without a why")
	}
	// Same size, new modification time: the file is read again.
	lenient := strings.Replace(string(defaultRubricYAML), "min_met: 3", "min_met: 2", 1)
	os.WriteFile(path, []byte(lenient), 0o644)
	later := time.Now().Add(2 * time.Second)
	os.Chtimes(path, later, later)
	if !src.Rubric().Score(d, learn(d)).Passed {
		t.Fatal("the changed rubric file was not re-read")
	}
	os.WriteFile(path, []byte("min_met: [broken"), 0o644)
	os.Chtimes(path, later.Add(time.Second), later.Add(time.Second))
	if !src.Rubric().Score(d, learn(d)).Passed || src.LastError() == nil {
		t.Fatalf("a broken rubric replaced the good one (err %v)", src.LastError())
	}
	if _, err := NewRubricSource(filepath.Join(t.TempDir(), "missing.yaml")); err == nil {
		t.Fatal("a missing rubric file was accepted at start")
	}
}

func TestInvalidRubricsAreRefused(t *testing.T) {
	for name, mut := range map[string]func(string) string{
		"min_met too high": func(s string) string { return strings.Replace(s, "min_met: 3", "min_met: 9", 1) },
		"bad regexp":       func(s string) string { return strings.Replace(s, `'\bline\s+\d+'`, `'(unclosed'`, 1) },
		"unknown field": func(s string) string {
			return strings.Replace(s, "fields: [scope_path", "fields: [colour, scope_path", 1)
		},
		"unknown key": func(s string) string { return s + "\nsurprise: true\n" },
		"bad implied_by": func(s string) string {
			return strings.Replace(s, "implied_by: [what_was_wrong]", "implied_by: [nothing]", 1)
		},
		"bad lesson":       func(s string) string { return strings.Replace(s, "lesson: why", "lesson: how", 1) },
		"unknown required": func(s string) string { return strings.Replace(s, "required: [what_was_wrong]", "required: [who]", 1) },
	} {
		if _, err := ParseRubric([]byte(mut(string(defaultRubricYAML)))); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// learn is the lesson the embedded taxonomy draws from d.
func learn(d precept.Decision) lesson.Lesson { return lesson.DefaultSource().Classifier().Learn(d) }

func TestAnAmbiguousRationaleNamesEveryRequirement(t *testing.T) {
	// Three of four attributes meet the count, but the rubric also
	// requires what was wrong, whatever the count.
	d := precept.Decision{Agent: "coding-agent", Decision: precept.Rejected, ReviewerComment: "Please use the retry helper in client.go because it should back off"}
	res := DefaultRubric().Score(d, learn(d))
	if res.Passed || res.Met < res.Required {
		t.Fatalf("fixture: met %d of %d needed, passed %v", res.Met, res.Required, res.Passed)
	}
	ev := ambiguousEvaluation(d, &res)
	for _, want := range []string{"found 3 of 4 attributes (needs 3)", "always what was wrong (missing: what was wrong)"} {
		if !strings.Contains(ev.Rationale, want) {
			t.Errorf("rationale %q does not say %q", ev.Rationale, want)
		}
	}
}
