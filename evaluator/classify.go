package evaluator

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/lesson"
	"github.com/precept-dev/precept/lib/text"
)

// Thresholds decide when a cluster is generalizable. They count distinct
// reviewers and epics, never raw totals alone (docs/thresholds.md).
type Thresholds struct {
	LowMinSize       int
	LowMinReviewers  int
	HighMinSize      int
	HighMinReviewers int
	HighMinEpics     int
	// HighMinProducers is the least number of distinct producers (API
	// tokens or streams, as precept saw them) a high cluster needs; 0 or
	// 1 means no requirement. Reviewer and epic ids are whatever a
	// recorder sends, so one pipeline token could invent diversity.
	HighMinProducers int
}

// DefaultThresholds are the defaults docs/thresholds.md gives reasons for.
func DefaultThresholds() Thresholds {
	return Thresholds{LowMinSize: 2, LowMinReviewers: 2, HighMinSize: 3, HighMinReviewers: 2, HighMinEpics: 2}
}

// ClassOf returns the class a cluster's statistics support for its clear
// negative members.
func (t Thresholds) ClassOf(s Stats) Class {
	switch {
	case s.NotAPattern:
		return EdgeCase
	case s.Size >= t.HighMinSize && s.DistinctReviewers >= t.HighMinReviewers && s.DistinctEpics >= t.HighMinEpics &&
		(t.HighMinProducers <= 1 || s.DistinctProducers >= t.HighMinProducers):
		return GeneralizableHigh
	case s.Size >= t.LowMinSize && s.DistinctReviewers >= t.LowMinReviewers:
		return GeneralizableLow
	}
	return EdgeCase
}

// polarity says whether a decision is negative feedback and why.
func polarity(d precept.Decision, r *Rubric) (negative bool, why string) {
	switch {
	case d.Rating == "negative":
		return true, "rated negative"
	case d.Decision.Negative():
		return true, "verdict " + string(d.Decision)
	case d.Rating == "positive":
		return false, "rated positive"
	}
	if ok, cue := r.AsksForChange(d.ReviewerComment); ok {
		return true, fmt.Sprintf("approved, but the comment asks for a change (%q)", cue)
	}
	return false, ""
}

// hasSignal reports whether a negative decision carries anything to learn
// from at all: a comment or a correction.
func hasSignal(d precept.Decision) bool {
	return strings.TrimSpace(d.ReviewerComment) != "" || strings.TrimSpace(d.CorrectionDiff) != "" ||
		d.CorrectionDiffPath != "" || (d.AgentOutput != "" && d.ApprovedOutput != "")
}

// judgement is what triage found about a decision.
type judgement struct {
	rubric RubricResult
	lesson lesson.Lesson
}

// triage decides what needs no cluster: an approval is positive, negative
// feedback without signal or failing the rubric is ambiguous. For clear
// negative feedback it returns clear=true with its lesson and the passing
// rubric result, and the cluster decides the rest.
func triage(d precept.Decision, rubric *Rubric, learn func(precept.Decision) lesson.Lesson) (ev Evaluation, j judgement, clear bool) {
	if neg, _ := polarity(d, rubric); !neg {
		return positiveEvaluation(d), j, false
	}
	if !hasSignal(d) {
		return ambiguousEvaluation(d, nil), j, false
	}
	j.lesson = learn(d)
	j.rubric = rubric.Score(d, j.lesson)
	if !j.rubric.Passed {
		ev = ambiguousEvaluation(d, &j.rubric)
		ev.Lesson = &j.lesson
		return ev, j, false
	}
	return Evaluation{}, j, true
}

// positiveEvaluation evaluates an approval without a negative comment.
func positiveEvaluation(d precept.Decision) Evaluation {
	conf, why := 0.95, "approved without comment"
	if c := strings.TrimSpace(d.ReviewerComment); c != "" {
		conf, why = 0.9, "approved; the comment asks for no change"
	}
	if d.Rating == "positive" {
		conf, why = 0.97, "approved and rated positive"
	}
	return Evaluation{
		DecisionID: d.DecisionID,
		Class:      Positive,
		Confidence: conf,
		Rationale:  "Positive: " + why + ". Counts toward metrics and rule validation.",
	}
}

// ambiguousEvaluation evaluates negative feedback that says too little.
func ambiguousEvaluation(d precept.Decision, rubric *RubricResult) Evaluation {
	ev := Evaluation{DecisionID: d.DecisionID, Class: Ambiguous, NeedsReview: true, Rubric: rubric}
	if rubric == nil {
		ev.Confidence = 0.95
		ev.Rationale = fmt.Sprintf("Ambiguous: %s with neither a comment nor a correction, so there is nothing to learn from yet; ask the reviewer.", d.Decision)
		return ev
	}
	short := rubric.Required - rubric.Met
	ev.Confidence = math.Min(0.95, 0.6+0.1*float64(max(short, 0)))
	ev.Rationale = fmt.Sprintf("Ambiguous: the clarity rubric found %d of %d attributes (needs %d) with confidence %.2f (needs %.2f)%s; missing: %s. Ask the reviewer.",
		rubric.Met, len(rubric.Attributes), rubric.Required, rubric.Confidence, rubric.MinConfidence,
		requiredClause(rubric), strings.Join(humanNames(rubric.Missing), ", "))
	return ev
}

// requiredClause names the attributes the rubric requires whatever the
// count, and which of them are missing, so a rationale names every
// requirement it applied.
func requiredClause(r *RubricResult) string {
	if len(r.RequiredAttributes) == 0 {
		return ""
	}
	var missing []string
	for _, name := range r.RequiredAttributes {
		if slices.Contains(r.Missing, name) {
			missing = append(missing, name)
		}
	}
	clause := ", and always " + strings.Join(humanNames(r.RequiredAttributes), " and ")
	if len(missing) > 0 {
		clause += " (missing: " + strings.Join(humanNames(missing), ", ") + ")"
	}
	return clause
}

func humanNames(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = strings.ReplaceAll(n, "_", " ")
	}
	return out
}

// clusterEvaluation evaluates a clear negative decision from its
// cluster's statistics.
func (t Thresholds) clusterEvaluation(d precept.Decision, rubric *RubricResult, clusterID string, s Stats, tags []string, meanSim float64) Evaluation {
	class := t.ClassOf(s)
	ev := Evaluation{DecisionID: d.DecisionID, Class: class, ClusterID: clusterID, Rubric: rubric, Stats: &s}
	support := fmt.Sprintf("its cluster %s has %d similar negative %s from %d distinct %s in %d distinct %s",
		clusterID, s.Size, text.Plural(s.Size, "decision", "decisions"), s.DistinctReviewers, text.Plural(s.DistinctReviewers, "reviewer", "reviewers"),
		s.DistinctEpics, text.Plural(s.DistinctEpics, "epic", "epics"))
	switch class {
	case GeneralizableHigh:
		extra := float64(s.DistinctReviewers-t.HighMinReviewers)*0.04 + float64(s.DistinctEpics-t.HighMinEpics)*0.04 + float64(s.Size-t.HighMinSize)*0.02
		ev.Confidence = clamp(0.75+extra+0.1*(meanSim-0.8), 0.6, 0.98)
		ev.Rationale = fmt.Sprintf("Generalizable (high): %s, meeting the bar of at least %d decisions, %d reviewers and %d epics%s.",
			support, t.HighMinSize, t.HighMinReviewers, t.HighMinEpics, t.producerBar(s))
		ev.Action = &Action{Type: actionFor(tags, CreateRule), TargetAgent: d.Agent, Priority: "high"}
	case GeneralizableLow:
		extra := float64(s.DistinctReviewers-t.LowMinReviewers)*0.05 + float64(s.Size-t.LowMinSize)*0.03
		ev.Confidence = clamp(0.6+extra+0.1*(meanSim-0.8), 0.5, 0.85)
		ev.Rationale = fmt.Sprintf("Generalizable (low): %s, meeting the bar of at least %d decisions from %d reviewers; high needs %d decisions from %d reviewers in %d epics%s.",
			support, t.LowMinSize, t.LowMinReviewers, t.HighMinSize, t.HighMinReviewers, t.HighMinEpics, t.producerBar(s))
		ev.Action = &Action{Type: actionFor(tags, CreateRule), TargetAgent: d.Agent, Priority: "low"}
		if ev.Action.Type == CreateRule && hasAny(tags, promptTags) {
			ev.Action.Type = RefinePrompt
		}
	default:
		ev.Confidence = 0.65
		if s.Size == 1 {
			ev.Confidence = 0.8
		}
		ev.Rationale = fmt.Sprintf("Edge case: the feedback is clear, but %s; generalizing needs at least %d similar decisions from %d distinct reviewers. Documented only.",
			support, t.LowMinSize, t.LowMinReviewers)
		if s.NotAPattern {
			ev.Rationale = fmt.Sprintf("Edge case: %s, but a curator marked the cluster as not a pattern. Documented only.", support)
		}
		ev.Action = &Action{Type: DocumentOnly, TargetAgent: d.Agent}
	}
	ev.Confidence = round2(ev.Confidence)
	return ev
}

// producerBar describes the producer requirement, when there is one,
// with how many distinct producers the cluster has.
func (t Thresholds) producerBar(s Stats) string {
	if t.HighMinProducers <= 1 {
		return ""
	}
	return fmt.Sprintf(" from %d distinct producers (it has %d: %s)", t.HighMinProducers, s.DistinctProducers, strings.Join(s.Producers, ", "))
}

// typicalConfidence is a cluster's confidence while the evaluation of its
// most central member is pending: about the middle of the range
// clusterEvaluation gives its class.
func typicalConfidence(c Class) float64 {
	if c == GeneralizableHigh {
		return 0.85
	}
	return 0.7
}

// Tags that route a proposed action: tool problems are skill updates,
// wording and format problems prompt refinements.
var (
	skillTags  = []string{"tooling", "tool-use", "tools", "skill", "skills"}
	promptTags = []string{"prompt", "instructions", "format", "formatting", "tone", "style"}
)

func actionFor(tags []string, def ActionType) ActionType {
	if hasAny(tags, skillTags) {
		return UpdateSkill
	}
	return def
}

func hasAny(tags, want []string) bool {
	for _, t := range tags {
		for _, w := range want {
			if t == w {
				return true
			}
		}
	}
	return false
}

func clamp(v, lo, hi float64) float64 { return math.Max(lo, math.Min(hi, v)) }
