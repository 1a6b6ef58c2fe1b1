package effect

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/evaluator"
	"github.com/precept-dev/precept/feedbackstore"
	"github.com/precept-dev/precept/lesson"
	"github.com/precept-dev/precept/prompts"
	"github.com/precept-dev/precept/rules/rulefmt"
)

// Reference values: Wilson intervals from published tables, and the
// worked example of Newcombe (1998), method 10: 56/70 vs 48/80 gives
// 0.0524 to 0.3339.
func TestIntervalsMatchPublishedValues(t *testing.T) {
	near := func(name string, got, want Interval) {
		t.Helper()
		if math.Abs(got.Low-want.Low) > 6e-4 || math.Abs(got.High-want.High) > 6e-4 {
			t.Errorf("%s = [%.4f, %.4f], want [%.4f, %.4f]", name, got.Low, got.High, want.Low, want.High)
		}
	}
	near("wilson(1, 12)", wilson(1, 12), Interval{0.0149, 0.3539})
	near("wilson(0, 10)", wilson(0, 10), Interval{0, 0.2775})
	near("wilson(5, 12)", wilson(5, 12), Interval{0.1933, 0.6805})
	near("newcombe(56/70, 48/80)", newcombe(56, 70, 48, 80), Interval{0.0524, 0.3339})
	near("wilson(0, 0)", wilson(0, 0), Interval{0, 1})
	near("newcombe with no trials", newcombe(1, 0, 1, 2), Interval{-1, 1})
}

// world is a feedback store, an evaluator, recorded versions and a rule
// manager in memory.
type world struct {
	recs     []feedbackstore.Record
	evals    map[string]evaluator.Evaluation
	clusters map[string]string
	versions map[string]prompts.VersionRecord
	rules    *fakeRules
}

func newWorld() *world {
	return &world{evals: map[string]evaluator.Evaluation{}, clusters: map[string]string{}, versions: map[string]prompts.VersionRecord{}, rules: &fakeRules{byID: map[string]rulefmt.Rule{}}}
}

func (w *world) Since(seq uint64, limit int) ([]feedbackstore.Record, error) {
	var out []feedbackstore.Record
	for _, r := range w.recs {
		if r.Seq > seq && len(out) < limit {
			out = append(out, r)
		}
	}
	return out, nil
}

func (w *world) Changed() <-chan struct{} { return make(chan struct{}) }

func (w *world) Placement(ctx context.Context, id string) (cluster, category string, ok bool, err error) {
	ev, ok := w.evals[id]
	if !ok {
		return "", "", false, nil
	}
	if ev.Lesson != nil {
		category = ev.Lesson.Category
	}
	return ev.ClusterID, category, true, nil
}

func (w *world) Cluster(ctx context.Context, id string) (evaluator.ClusterView, error) {
	cat, ok := w.clusters[id]
	if !ok {
		return evaluator.ClusterView{}, precept.Errorf(precept.NotFound, "no cluster")
	}
	return evaluator.ClusterView{Cluster: evaluator.Cluster{ID: id, Category: cat}}, nil
}

func (w *world) Lookup(ctx context.Context, v string) (prompts.VersionRecord, bool, error) {
	r, ok := w.versions[v]
	return r, ok, nil
}

// decide adds a decision; cluster and category place a negative one.
func (w *world) decide(agent string, at time.Time, verdict precept.Verdict, gate, version, cluster, category string) {
	id := "d-" + at.Format("20060102150405") + "-" + agent + "-" + string(rune('a'+len(w.recs)%26)) + string(rune('a'+len(w.recs)/26%26))
	// Reviewers and epics rotate, so the evidence comes from distinct
	// people (diversity.go); TestSockPuppets… varies them itself.
	n := len(w.recs)
	w.recs = append(w.recs, feedbackstore.Record{Seq: uint64(n + 1), Feedback: precept.Feedback{Decision: precept.Decision{
		DecisionID: id, Agent: agent, Timestamp: at, Decision: verdict, GateID: gate, PromptVersion: version,
		ReviewerID: fmt.Sprintf("reviewer-%d", n%3), EpicID: fmt.Sprintf("EPIC-%d", n/2%2),
	}}})
	ev := evaluator.Evaluation{DecisionID: id, ClusterID: cluster}
	if category != "" {
		ev.Lesson = &lesson.Lesson{Category: category}
	}
	w.evals[id] = ev
}

type fakeRules struct {
	byID     map[string]rulefmt.Rule
	open     map[string]rulefmt.Proposal
	decided  []rulefmt.Proposal
	proposed []rulefmt.LifecycleRequest
	shadowed []string
	recorded []rulefmt.EffectUpdate
}

func (f *fakeRules) ActiveRules(ctx context.Context, agent string) ([]rulefmt.Rule, error) {
	var out []rulefmt.Rule
	for _, r := range f.byID {
		if r.Status == rulefmt.Active || r.Status == rulefmt.Shadow {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b rulefmt.Rule) int { return a.ActivatedAt.Compare(b.ActivatedAt) })
	return out, nil
}

func (f *fakeRules) Rule(ctx context.Context, id string) (rulefmt.Rule, []rulefmt.HistoryEntry, error) {
	r, ok := f.byID[id]
	if !ok {
		return r, nil, precept.Errorf(precept.NotFound, "rule %s not found", id)
	}
	return r, nil, nil
}

func (f *fakeRules) Propose(ctx context.Context, req rulefmt.LifecycleRequest) (rulefmt.Proposal, bool, error) {
	if f.open == nil {
		f.open = map[string]rulefmt.Proposal{}
	}
	p := rulefmt.Proposal{ID: "p-" + string(req.Kind) + req.RuleID, Kind: req.Kind, RuleID: req.RuleID, Status: rulefmt.Pending, EvidenceSummary: req.Evidence, CreatedAt: time.Now()}
	f.open[req.RuleID] = p
	f.proposed = append(f.proposed, req)
	return p, true, nil
}

func (f *fakeRules) OpenProposal(ctx context.Context, ruleID string) (rulefmt.Proposal, bool, error) {
	p, ok := f.open[ruleID]
	return p, ok, nil
}

func (f *fakeRules) DecidedProposals(ctx context.Context, ruleID string, kind rulefmt.Kind) ([]rulefmt.Proposal, error) {
	var out []rulefmt.Proposal
	for _, p := range f.decided {
		if p.RuleID == ruleID && p.Kind == kind {
			out = append(out, p)
		}
	}
	return out, nil
}

func (f *fakeRules) ShadowIdle(ctx context.Context, ruleID, proposalID, why string) error {
	f.shadowed = append(f.shadowed, ruleID)
	r := f.byID[ruleID]
	r.Status, r.ShadowReason = rulefmt.Shadow, why
	f.byID[ruleID] = r
	delete(f.open, ruleID)
	return nil
}

func (f *fakeRules) Withdraw(ctx context.Context, proposalID, reason string) error {
	for id, p := range f.open {
		if p.ID == proposalID {
			p.Status, p.Rejection = rulefmt.Rejected, &rulefmt.Rejection{Reason: reason}
			f.decided = append(f.decided, p)
			delete(f.open, id)
		}
	}
	return nil
}

func (f *fakeRules) RecordEffects(ctx context.Context, updates []rulefmt.EffectUpdate) (int, error) {
	f.recorded = append(f.recorded, updates...)
	return len(updates), nil
}

func (w *world) tracker(t *testing.T, now time.Time, lifecycle bool) *Tracker {
	t.Helper()
	tr := New(w, w, w, w.rules, Options{MinExposures: 10, Lifecycle: lifecycle, Now: func() time.Time { return now }})
	if _, err := tr.CatchUp(context.Background()); err != nil {
		t.Fatal(err)
	}
	return tr
}

var t0 = time.Date(2026, 10, 1, 12, 0, 0, 0, time.UTC)

// A rule with mixed attribution, computed by hand:
//
//	before activation, 20 decisions at t0-1min … t0-20min; pattern
//	  negatives at minutes 1,2,3,5,8 (cluster c-1 or category tests-missing)
//	  and 13,15,18; a negative of another category at 4; approvals at g1.
//	after, with prompt_version v1:a (holds r-1): 10 decisions — 1 pattern
//	  negative, 6 approvals at g1, 1 approval at g2, 2 negatives of
//	  another category;
//	with v1:b (does not hold r-1): 3 decisions — not exposures;
//	without a version: 2 decisions (by agent and time) — 1 approval at g1,
//	  1 negative of another category.
//
// Exposures 10 + 2 = 12; recurrences 1 (rate 1/12). The baseline is the
// 12 newest decisions before t0 (minutes 1…12): pattern negatives at
// 1,2,3,5,8 → 5/12. Validations: approvals at g1 (where the pattern was
// flagged) with the rule in the prompt: 6 + 1 = 7 → IMPORTANT; the g2
// approval does not count. Newcombe's interval of 1/12 − 5/12 is about
// −0.66 … +0.018: it includes 0, so the verdict is inconclusive.
func TestEffectAsComputedByHand(t *testing.T) {
	w := newWorld()
	w.clusters["c-1"] = "tests-missing"
	w.versions["v1:a"] = prompts.VersionRecord{Version: "v1:a", RuleIDs: []string{"r-1"}}
	w.versions["v1:b"] = prompts.VersionRecord{Version: "v1:b", RuleIDs: []string{}}
	w.rules.byID["r-1"] = rulefmt.Rule{ID: "r-1", Agents: []string{"coder"}, Status: rulefmt.Active, ClusterID: "c-1", ActivatedAt: t0, Confidence: 0.8, Importance: rulefmt.Normal}
	for i := 1; i <= 20; i++ {
		at := t0.Add(-time.Duration(i) * time.Minute)
		switch i {
		case 1, 3, 8, 15:
			w.decide("coder", at, precept.Rejected, "g1", "", "c-1", "tests-missing")
		case 2, 5, 13, 18:
			w.decide("coder", at, precept.ApprovedWithChanges, "g1", "", "c-9", "tests-missing")
		case 4:
			w.decide("coder", at, precept.Rejected, "g1", "", "c-7", "naming")
		default:
			w.decide("coder", at, precept.Approved, "g1", "", "", "")
		}
	}
	after := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Minute) }
	w.decide("coder", after(1), precept.Rejected, "g1", "v1:a", "c-9", "tests-missing")
	for i := 2; i <= 7; i++ {
		w.decide("coder", after(i), precept.Approved, "g1", "v1:a", "", "")
	}
	w.decide("coder", after(8), precept.Approved, "g2", "v1:a", "", "")
	w.decide("coder", after(9), precept.Rejected, "g1", "v1:a", "c-7", "naming")
	w.decide("coder", after(10), precept.Rejected, "g2", "v1:a", "c-7", "naming")
	for i := 11; i <= 13; i++ {
		w.decide("coder", after(i), precept.Rejected, "g1", "v1:b", "c-1", "tests-missing")
	}
	w.decide("coder", after(14), precept.Approved, "g1", "", "", "")
	w.decide("coder", after(15), precept.Rejected, "g1", "", "c-7", "naming")
	// Another agent's decisions never count.
	w.decide("planner", after(3), precept.Rejected, "g1", "v1:a", "c-1", "tests-missing")

	e, err := w.tracker(t, after(60), false).Effect(context.Background(), "r-1")
	if err != nil {
		t.Fatal(err)
	}
	check := func(name string, got, want any) {
		t.Helper()
		if got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	check("exposures", e.Exposures, int64(12))
	check("by version", e.ExposuresByVersion, int64(10))
	check("by time", e.ExposuresByTime, int64(2))
	check("attribution", e.Attribution, Mixed)
	check("recurrences", e.Recurrences, int64(1))
	check("before decisions", e.BeforeDecisions, int64(12))
	check("before recurrences", e.BeforeRecurrences, int64(5))
	check("validations", e.Validations, int64(7))
	check("importance", e.Importance, rulefmt.Important)
	check("category", e.Category, "tests-missing")
	check("verdict", e.Verdict, Inconclusive)
	if math.Abs(e.RateAfter-1.0/12) > 1e-9 || math.Abs(e.RateBefore-5.0/12) > 1e-9 {
		t.Errorf("rates = %v, %v", e.RateAfter, e.RateBefore)
	}
	if e.ChangeInterval.High < 0.01 || e.ChangeInterval.High > 0.03 || e.ChangeInterval.Low > -0.6 {
		t.Errorf("change interval = %+v, want about [-0.66, +0.018]", e.ChangeInterval)
	}
	// One recurrence is one reviewer in one epic: too few people to move
	// confidence (diversity.go), which stays 0.8, not 0.8 × 0.95 = 0.76.
	check("confidence", e.Confidence, 0.8)
	if !e.LastValidation.Equal(after(14)) || !e.LastExposure.Equal(after(15)) {
		t.Errorf("last validation %v, last exposure %v", e.LastValidation, e.LastExposure)
	}
}

// worsening builds a rule whose pattern recurs far more after it than
// before: 2 of the 20 decisions before, 12 of 20 exposures after.
func worsening(w *world) {
	w.clusters["c-2"] = "error-handling"
	w.versions["v1:c"] = prompts.VersionRecord{Version: "v1:c", RuleIDs: []string{"r-2"}}
	w.rules.byID["r-2"] = rulefmt.Rule{ID: "r-2", Agents: []string{"coder"}, Status: rulefmt.Active, ClusterID: "c-2", ActivatedAt: t0, Confidence: 0.9}
	for i := 1; i <= 20; i++ {
		v := precept.Approved
		if i%10 == 0 {
			v = precept.Rejected
		}
		cl, cat := "", ""
		if v == precept.Rejected {
			cl, cat = "c-2", "error-handling"
		}
		w.decide("coder", t0.Add(-time.Duration(i)*time.Minute), v, "g1", "", cl, cat)
		v, cl, cat = precept.Approved, "", ""
		if i <= 12 {
			v, cl, cat = precept.Rejected, "c-2", "error-handling"
		}
		w.decide("coder", t0.Add(time.Duration(i)*time.Minute), v, "g1", "v1:c", cl, cat)
	}
}

func TestASunsetIsProposedOnceWhenThePatternKeepsRecurring(t *testing.T) {
	w := newWorld()
	worsening(w)
	tr := w.tracker(t, t0.Add(time.Hour), true)
	rep, err := tr.Pass(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Effects) != 1 || rep.Effects[0].Verdict != NotImproving {
		t.Fatalf("effects = %+v", rep.Effects)
	}
	if e := rep.Effects[0]; e.ChangeInterval.Low <= 0 || e.Recurrences != 12 || e.BeforeRecurrences != 2 {
		t.Errorf("effect = %+v", e)
	}
	if len(w.rules.proposed) != 1 || w.rules.proposed[0].Kind != rulefmt.KindSunset || w.rules.proposed[0].RuleID != "r-2" {
		t.Fatalf("proposed = %+v", w.rules.proposed)
	}
	if len(w.rules.recorded) != 1 || w.rules.recorded[0].Effect.Verdict != NotImproving || w.rules.recorded[0].Recurrences != 12 {
		t.Errorf("recorded = %+v", w.rules.recorded)
	}
	// Confidence 0.9 × 0.95^12 = 0.486; never below the floor.
	if got := w.rules.recorded[0].Confidence; got != 0.486 {
		t.Errorf("confidence = %v, want 0.486", got)
	}
	// The open proposal is not made again.
	if _, err := tr.Pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(w.rules.proposed) != 1 {
		t.Errorf("proposed again: %+v", w.rules.proposed)
	}
	// Rejected, it needs MinExposures new exposures before the next.
	rejected := w.rules.open["r-2"]
	rejected.Status, rejected.Rejection = rulefmt.Rejected, &rulefmt.Rejection{At: t0.Add(30 * time.Minute)}
	w.rules.decided = append(w.rules.decided, rejected)
	delete(w.rules.open, "r-2")
	if _, err := tr.Pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(w.rules.proposed) != 1 {
		t.Errorf("proposed again on the same evidence: %+v", w.rules.proposed)
	}
}

func TestAnIdleRuleIsAskedForThenShadowed(t *testing.T) {
	w := newWorld()
	w.rules.byID["r-3"] = rulefmt.Rule{ID: "r-3", Agents: []string{"writer"}, Status: rulefmt.Active, ActivatedAt: t0, Confidence: 0.7}
	now := t0.Add(DefaultIdlePeriod - time.Hour)
	if _, err := w.tracker(t, now, true).Pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(w.rules.proposed) != 0 {
		t.Fatalf("asked before the idle period ended: %+v", w.rules.proposed)
	}
	now = t0.Add(DefaultIdlePeriod + time.Hour)
	if _, err := w.tracker(t, now, true).Pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(w.rules.proposed) != 1 || w.rules.proposed[0].Kind != rulefmt.KindReapprove {
		t.Fatalf("proposed = %+v", w.rules.proposed)
	}
	p := w.rules.open["r-3"]
	p.CreatedAt = now
	w.rules.open["r-3"] = p
	// Within the grace period nothing happens; after it, SHADOW.
	if _, err := w.tracker(t, now.Add(DefaultGracePeriod-time.Hour), true).Pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(w.rules.shadowed) != 0 {
		t.Fatalf("shadowed within the grace period")
	}
	rep, err := w.tracker(t, now.Add(DefaultGracePeriod+time.Hour), true).Pass(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.Shadowed, []string{"r-3"}) || w.rules.byID["r-3"].Status != rulefmt.Shadow {
		t.Errorf("shadowed = %v, rule = %+v", rep.Shadowed, w.rules.byID["r-3"])
	}
}

// Decisions made with the shadow prompt (v1:s, which holds the rule) are
// compared with those made with the main prompt (v1:m).
func TestShadowVariantIsComparedWithTheMainPrompt(t *testing.T) {
	w := newWorld()
	w.clusters["c-4"] = "naming"
	w.versions["v1:s"] = prompts.VersionRecord{Version: "v1:s", Shadow: true, RuleIDs: []string{"r-4"}}
	w.versions["v1:m"] = prompts.VersionRecord{Version: "v1:m", RuleIDs: []string{}}
	w.rules.byID["r-4"] = rulefmt.Rule{ID: "r-4", Agents: []string{"coder"}, Status: rulefmt.Shadow, ShadowReason: "idle", ClusterID: "c-4", ActivatedAt: t0, Confidence: 0.7}
	for i := 1; i <= 12; i++ {
		at := t0.Add(time.Duration(i) * time.Minute)
		if i <= 2 {
			w.decide("coder", at, precept.Rejected, "g1", "v1:s", "c-4", "naming")
		} else {
			w.decide("coder", at, precept.Approved, "g1", "v1:s", "", "")
		}
		if i <= 6 {
			w.decide("coder", at, precept.Rejected, "g1", "v1:m", "c-4", "naming")
		} else {
			w.decide("coder", at, precept.Approved, "g1", "v1:m", "", "")
		}
	}
	rep, err := w.tracker(t, t0.Add(time.Hour), true).Pass(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	s := rep.Effects[0].Shadow
	if s == nil || s.ShadowDecisions != 12 || s.ShadowRecurrences != 2 || s.MainDecisions != 12 || s.MainRecurrences != 6 {
		t.Fatalf("shadow = %+v", s)
	}
	if rep.Effects[0].Exposures != 0 {
		t.Errorf("a shadow rule has main-prompt exposures: %+v", rep.Effects[0])
	}
	if len(w.rules.proposed) != 1 || w.rules.proposed[0].Kind != rulefmt.KindActivate {
		t.Fatalf("proposed = %+v", w.rules.proposed)
	}
	if ev := w.rules.proposed[0].Evidence; !contains(ev, "Shadow prompt: 2 of 12") || !contains(ev, "main prompt: 6 of 12") {
		t.Errorf("evidence lacks the comparison: %s", ev)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// Regressions found in review.

// No recurrence before or after is no evidence of failure, however many
// decisions there are.
func TestAnAbsentPatternIsNeverJudgedNotImproving(t *testing.T) {
	w := newWorld()
	w.clusters["c-5"] = "naming"
	w.versions["v1:n"] = prompts.VersionRecord{Version: "v1:n", RuleIDs: []string{"r-5"}}
	w.rules.byID["r-5"] = rulefmt.Rule{ID: "r-5", Agents: []string{"coder"}, Status: rulefmt.Active, ClusterID: "c-5", ActivatedAt: t0, Confidence: 0.8}
	for i := 1; i <= 100; i++ {
		w.decide("coder", t0.Add(-time.Duration(i)*time.Minute), precept.Approved, "g1", "", "", "")
		w.decide("coder", t0.Add(time.Duration(i)*time.Minute), precept.Approved, "g1", "v1:n", "", "")
	}
	rep, err := w.tracker(t, t0.Add(3*time.Hour), true).Pass(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if e := rep.Effects[0]; e.Exposures != 100 || e.Verdict == NotImproving || len(w.rules.proposed) != 0 {
		t.Fatalf("effect %+v, proposed %+v", e, w.rules.proposed)
	}
}

// An ACTIVE rule is in the shadow prompt too: decisions made with it are
// exposures, not a shadow variant.
func TestAnActiveRuleInAShadowPromptIsExposed(t *testing.T) {
	w := newWorld()
	w.versions["v1:sh"] = prompts.VersionRecord{Version: "v1:sh", Shadow: true, RuleIDs: []string{"r-6", "r-new"}}
	w.rules.byID["r-6"] = rulefmt.Rule{ID: "r-6", Agents: []string{"coder"}, Status: rulefmt.Active, ActivatedAt: t0}
	for i := 1; i <= 4; i++ {
		w.decide("coder", t0.Add(time.Duration(i)*time.Minute), precept.Approved, "g1", "v1:sh", "", "")
	}
	e, err := w.tracker(t, t0.Add(time.Hour), false).Effect(context.Background(), "r-6")
	if err != nil {
		t.Fatal(err)
	}
	if e.Exposures != 4 || e.Shadow != nil {
		t.Fatalf("effect = %+v", e)
	}
}

// A rule moved to SHADOW for being idle stops collecting exposures by
// time at the move; one activated again takes its baseline from before
// its first activation.
func TestWindowsFollowTheRulesHistory(t *testing.T) {
	w := newWorld()
	moved := t0.Add(time.Hour)
	w.rules.byID["r-7"] = rulefmt.Rule{ID: "r-7", Agents: []string{"coder"}, Status: rulefmt.Shadow, ShadowReason: "idle", ShadowedAt: &moved, ActivatedAt: t0}
	for i := 1; i <= 10; i++ {
		w.decide("coder", t0.Add(time.Duration(i)*10*time.Minute), precept.Approved, "g1", "", "", "")
	}
	e, err := w.tracker(t, t0.Add(3*time.Hour), false).Effect(context.Background(), "r-7")
	if err != nil {
		t.Fatal(err)
	}
	if e.Exposures != 5 { // minutes 10…50: before the move at 60
		t.Fatalf("exposures of an idle-shadowed rule = %d, want 5", e.Exposures)
	}

	w = newWorld()
	w.clusters["c-8"] = "naming"
	again := t0.Add(2 * time.Hour)
	w.rules.byID["r-8"] = rulefmt.Rule{ID: "r-8", Agents: []string{"coder"}, Status: rulefmt.Active, ClusterID: "c-8", ActivatedAt: again,
		Effect: &rulefmt.EffectSummary{FirstActivatedAt: t0}}
	// Before t0: 4 decisions, 2 recurrences. During the first active
	// period (t0…again): 4 decisions without any. After: 4, 1 recurrence.
	for i := 1; i <= 4; i++ {
		v, cl, cat := precept.Approved, "", ""
		if i <= 2 {
			v, cl, cat = precept.Rejected, "c-8", "naming"
		}
		w.decide("coder", t0.Add(-time.Duration(i)*time.Minute), v, "g1", "", cl, cat)
		w.decide("coder", t0.Add(time.Duration(i)*time.Minute), precept.Approved, "g1", "", "", "")
		v, cl, cat = precept.Approved, "", ""
		if i == 1 {
			v, cl, cat = precept.Rejected, "c-8", "naming"
		}
		w.decide("coder", again.Add(time.Duration(i)*time.Minute), v, "g1", "", cl, cat)
	}
	e, err = w.tracker(t, again.Add(time.Hour), false).Effect(context.Background(), "r-8")
	if err != nil {
		t.Fatal(err)
	}
	if e.Exposures != 4 || e.Recurrences != 1 || e.BeforeDecisions != 4 || e.BeforeRecurrences != 2 {
		t.Fatalf("re-activated rule: %+v", e)
	}
}

// Importance rises when validations cross a threshold; a curator who
// lowered it afterwards is not overruled until the next one.
func TestImportanceRisesOnlyAtAThreshold(t *testing.T) {
	w := newWorld()
	w.versions["v1:i"] = prompts.VersionRecord{Version: "v1:i", RuleIDs: []string{"r-9"}}
	w.rules.byID["r-9"] = rulefmt.Rule{ID: "r-9", Agents: []string{"coder"}, Status: rulefmt.Active, ActivatedAt: t0, Importance: rulefmt.Normal, PositiveValidations: 6}
	for i := 1; i <= 7; i++ {
		w.decide("coder", t0.Add(time.Duration(i)*time.Minute), precept.Approved, "g1", "v1:i", "", "")
	}
	rep, err := w.tracker(t, t0.Add(time.Hour), true).Pass(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if e := rep.Effects[0]; e.Importance != rulefmt.Normal || w.rules.recorded[0].Importance != "" {
		t.Fatalf("lowered by a curator after 6 validations, raised again at 7: %+v / %+v", e, w.rules.recorded[0])
	}
	r := w.rules.byID["r-9"]
	r.PositiveValidations = 4
	w.rules.byID["r-9"] = r
	rep, err = w.tracker(t, t0.Add(time.Hour), true).Pass(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if e := rep.Effects[0]; e.Importance != rulefmt.Important || w.rules.recorded[1].Importance != rulefmt.Important {
		t.Fatalf("crossing 5 did not promote: %+v", e)
	}
}

// A re-approval request for a rule that was used again is closed as moot,
// not acted on after the grace period.
func TestAReapprovalOfARuleUsedAgainIsClosed(t *testing.T) {
	w := newWorld()
	w.rules.byID["r-10"] = rulefmt.Rule{ID: "r-10", Agents: []string{"coder"}, Status: rulefmt.Active, ActivatedAt: t0}
	asked := t0.Add(DefaultIdlePeriod + time.Hour)
	w.rules.open = map[string]rulefmt.Proposal{"r-10": {ID: "p-reapprove10", Kind: rulefmt.KindReapprove, RuleID: "r-10", Status: rulefmt.Pending, CreatedAt: asked}}
	w.decide("coder", asked.Add(time.Hour), precept.Approved, "g1", "", "", "")
	rep, err := w.tracker(t, asked.Add(DefaultGracePeriod+time.Hour), true).Pass(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Shadowed) != 0 || len(w.rules.decided) != 1 || !strings.HasPrefix(w.rules.decided[0].Rejection.Reason, "moot") {
		t.Fatalf("shadowed %v, decided %+v", rep.Shadowed, w.rules.decided)
	}
}

// countingVersions counts lookups.
type countingVersions struct {
	*world
	n int
}

func (c *countingVersions) Lookup(ctx context.Context, v string) (prompts.VersionRecord, bool, error) {
	c.n++
	return c.world.Lookup(ctx, v)
}

// A failed lookup for one rule leaves the others' effects; a version
// nobody recorded is looked up once per report, not once per decision.
func TestOneRulesFailureDoesNotHideTheOthers(t *testing.T) {
	w := newWorld()
	worsening(w)
	w.rules.byID["r-broken"] = rulefmt.Rule{ID: "r-broken", Agents: []string{"other"}, Status: rulefmt.Active, ClusterID: "c-gone", ActivatedAt: t0}
	w.decide("other", t0.Add(time.Minute), precept.Rejected, "g1", "", "", "")
	w.evals["d-broken"] = evaluator.Evaluation{}
	for i := range 50 {
		w.decide("coder", t0.Add(time.Duration(100+i)*time.Minute), precept.Approved, "g1", "v1:unknown", "", "")
	}
	cv := &countingVersions{world: w}
	tr := New(w, failing{w, "other"}, cv, w.rules, Options{MinExposures: 10, Lifecycle: true, Now: func() time.Time { return t0.Add(5 * time.Hour) }})
	if _, err := tr.CatchUp(context.Background()); err != nil {
		t.Fatal(err)
	}
	rep, err := tr.Pass(context.Background())
	if err == nil || !strings.Contains(err.Error(), "r-broken") {
		t.Fatalf("err = %v", err)
	}
	if len(rep.Effects) != 1 || rep.Effects[0].RuleID != "r-2" || rep.Effects[0].Exposures != 70 || len(w.rules.recorded) != 1 {
		t.Fatalf("pass = %+v, recorded %+v", rep, w.rules.recorded)
	}
	if cv.n > 3 {
		t.Errorf("%d version lookups for 2 distinct versions", cv.n)
	}
}

// failing fails the evaluation lookups of one agent's decisions.
type failing struct {
	*world
	agent string
}

func (f failing) Placement(ctx context.Context, id string) (cluster, category string, ok bool, err error) {
	if strings.Contains(id, "-"+f.agent+"-") {
		return "", "", false, errors.New("evaluator state unreadable")
	}
	return f.world.Placement(ctx, id)
}

// Reports read an agent's facts while new ones arrive out of order.
func TestReportsRaceNothingWithArrivingDecisions(t *testing.T) {
	w := newWorld()
	worsening(w)
	tr := w.tracker(t, t0.Add(time.Hour), false)
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			tr.mu.Lock()
			tr.byAgent["coder"] = append(tr.byAgent["coder"], factAt(fmt.Sprint("late-", i), t0.Add(-time.Duration(i)*time.Second)))
			tr.mu.Unlock()
			time.Sleep(50 * time.Microsecond)
		}
	}()
	var readers sync.WaitGroup
	for range 2 {
		readers.Go(func() {
			for range 20 {
				if _, err := tr.Effects(context.Background(), ""); err != nil {
					t.Error(err)
				}
			}
		})
	}
	readers.Wait()
	close(stop)
	<-done
}

// An agent's facts come back in time order however they arrive, and a
// slice handed out earlier never changes.
func TestFactsStayInTimeOrderAndHandedOutSlicesStayPut(t *testing.T) {
	tr := New(newWorld(), nil, nil, nil, Options{})
	rng := rand.New(rand.NewPCG(3, 5))
	var all []fact
	type handed struct{ got, want []fact }
	var earlier []handed
	for round := range 30 {
		n := rng.IntN(40)
		for i := range n {
			// Mostly later than everything so far, sometimes earlier, and
			// equal timestamps with ids out of order.
			at := t0.Add(time.Duration(round*100+rng.IntN(120)-10) * time.Second)
			f := factAt(fmt.Sprintf("d-%03d-%02d", rng.IntN(50), i), at)
			all = append(all, f)
			tr.mu.Lock()
			tr.byAgent["coder"] = append(tr.byAgent["coder"], f)
			tr.mu.Unlock()
		}
		got, _ := tr.facts("coder")
		want := slices.Clone(all)
		slices.SortStableFunc(want, compareFacts)
		if !slices.Equal(got, want) {
			t.Fatalf("round %d: facts out of order:\n got %v\nwant %v", round, got, want)
		}
		earlier = append(earlier, handed{got, slices.Clone(got)})
		for i, h := range earlier {
			if !slices.Equal(h.got, h.want) {
				t.Fatalf("round %d: the slice handed out in round %d changed", round, i)
			}
		}
	}
}

// factAt is a fact of nothing but an id and a time.
func factAt(id string, at time.Time) fact {
	return fact{id: id, sec: at.Unix(), nsec: int32(at.Nanosecond())}
}

// A million decisions are a million facts: a fact stays small and holds
// one pointer.
func TestAFactIsSmall(t *testing.T) {
	if n := unsafe.Sizeof(fact{}); n > 56 {
		t.Fatalf("a fact is %d bytes, more than 56", n)
	}
}
