package main

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
)

// The rows of the CSV and Parquet exports, one type per kind of record
// (docs/formats.md, "Exports"). Each field's parquet tag names its column
// in both formats. Times are microseconds since the epoch, UTC (RFC 3339
// in CSV); a pointer is a value that may be absent (null, an empty cell).

// decisionRow is one stored decision.
type decisionRow struct {
	DecisionID            string           `parquet:"decision_id"`
	Timestamp             int64            `parquet:"timestamp,timestamp(microsecond)"`
	GateID                string           `parquet:"gate_id"`
	EpicID                string           `parquet:"epic_id"`
	TaskID                string           `parquet:"task_id"`
	Agent                 string           `parquet:"agent"`
	Decision              string           `parquet:"decision"`
	ReviewerID            string           `parquet:"reviewer_id"`
	ReviewDurationSeconds *int64           `parquet:"review_duration_seconds,optional"`
	Rating                string           `parquet:"rating"`
	ErrorCategories       []string         `parquet:"error_categories,list"`
	Tags                  []string         `parquet:"tags,list"`
	QualityScores         map[string]int32 `parquet:"quality_scores"`
	EditDistancePercent   *int32           `parquet:"edit_distance_percent,optional"`
	ScopePath             string           `parquet:"scope_path"`
	PromptVersion         string           `parquet:"prompt_version"`
	AgentOutputSHA        string           `parquet:"agent_output_sha"`
	ApprovedOutputSHA     string           `parquet:"approved_output_sha"`
	ReviewerComment       string           `parquet:"reviewer_comment"`
	CorrectionDiffPath    string           `parquet:"correction_diff_path"`
	CorrectionDiff        string           `parquet:"correction_diff"`
	AgentOutput           string           `parquet:"agent_output"`
	ApprovedOutput        string           `parquet:"approved_output"`
	ReceivedAt            int64            `parquet:"received_at,timestamp(microsecond)"`
	Source                string           `parquet:"source"`
	Producer              string           `parquet:"producer"`
	Commit                string           `parquet:"commit"`
}

// evaluationRow is the evaluator's decision about one decision.
type evaluationRow struct {
	DecisionID               string   `parquet:"decision_id"`
	Classification           string   `parquet:"classification"`
	Confidence               float64  `parquet:"confidence"`
	NeedsReview              bool     `parquet:"needs_review"`
	ClusterID                string   `parquet:"cluster_id"`
	SimilarFeedbackIDs       []string `parquet:"similar_feedback_ids,list"`
	ActionType               string   `parquet:"action_type"`
	ActionTargetAgent        string   `parquet:"action_target_agent"`
	ActionProposalID         string   `parquet:"action_proposal_id"`
	ActionPriority           string   `parquet:"action_priority"`
	ClusterSize              *int32   `parquet:"cluster_size,optional"`
	ClusterDistinctReviewers *int32   `parquet:"cluster_distinct_reviewers,optional"`
	ClusterDistinctEpics     *int32   `parquet:"cluster_distinct_epics,optional"`
	ClusterDistinctProducers *int32   `parquet:"cluster_distinct_producers,optional"`
	RubricMet                *int32   `parquet:"rubric_met,optional"`
	RubricRequired           *int32   `parquet:"rubric_required,optional"`
	RubricConfidence         *float64 `parquet:"rubric_confidence,optional"`
	RubricPassed             *bool    `parquet:"rubric_passed,optional"`
	RubricMissing            []string `parquet:"rubric_missing,list"`
	// RubricEvidence is a JSON object: attribute name to the words that
	// showed it.
	RubricEvidence   string   `parquet:"rubric_evidence"`
	LessonCategory   string   `parquet:"lesson_category"`
	LessonConfidence *float64 `parquet:"lesson_confidence,optional"`
	LessonSaid       string   `parquet:"lesson_said"`
	LessonAsked      string   `parquet:"lesson_asked"`
	// LessonEvidence is a JSON array of {"kind", "text"} objects.
	LessonEvidence  string `parquet:"lesson_evidence"`
	LessonTaxonomy  string `parquet:"lesson_taxonomy"`
	LessonBy        string `parquet:"lesson_by"`
	LessonProtected bool   `parquet:"lesson_protected"`
	Rationale       string `parquet:"rationale"`
	Evaluator       string `parquet:"evaluator"`
	EvaluatedAt     *int64 `parquet:"evaluated_at,optional,timestamp(microsecond)"`
	Revision        int32  `parquet:"revision"`
}

// ruleEffectRow is what the evidence says about one rule.
type ruleEffectRow struct {
	RuleID                   string   `parquet:"rule_id"`
	Agents                   []string `parquet:"agents,list"`
	Status                   string   `parquet:"status"`
	Importance               string   `parquet:"importance"`
	Confidence               float64  `parquet:"confidence"`
	Category                 string   `parquet:"category"`
	ClusterID                string   `parquet:"cluster_id"`
	ActivatedAt              *int64   `parquet:"activated_at,optional,timestamp(microsecond)"`
	Attribution              string   `parquet:"attribution"`
	Exposures                int64    `parquet:"exposures"`
	ExposuresByPromptVersion int64    `parquet:"exposures_by_prompt_version"`
	ExposuresByAgentTime     int64    `parquet:"exposures_by_agent_time"`
	Recurrences              int64    `parquet:"recurrences"`
	RateAfter                float64  `parquet:"rate_after"`
	RateAfterLow             *float64 `parquet:"rate_after_low,optional"`
	RateAfterHigh            *float64 `parquet:"rate_after_high,optional"`
	BeforeDecisions          int64    `parquet:"before_decisions"`
	BeforeRecurrences        int64    `parquet:"before_recurrences"`
	RateBefore               float64  `parquet:"rate_before"`
	RateBeforeLow            *float64 `parquet:"rate_before_low,optional"`
	RateBeforeHigh           *float64 `parquet:"rate_before_high,optional"`
	Change                   float64  `parquet:"change"`
	ChangeLow                *float64 `parquet:"change_low,optional"`
	ChangeHigh               *float64 `parquet:"change_high,optional"`
	Validations              int64    `parquet:"validations"`
	Method                   string   `parquet:"method"`
	Verdict                  string   `parquet:"verdict"`
	Summary                  string   `parquet:"summary"`
	LastExposure             *int64   `parquet:"last_exposure,optional,timestamp(microsecond)"`
	LastValidation           *int64   `parquet:"last_validation,optional,timestamp(microsecond)"`
	ShadowDecisions          *int64   `parquet:"shadow_decisions,optional"`
	ShadowRecurrences        *int64   `parquet:"shadow_recurrences,optional"`
	ShadowRate               *float64 `parquet:"shadow_rate,optional"`
	ShadowMainDecisions      *int64   `parquet:"shadow_main_decisions,optional"`
	ShadowMainRecurrences    *int64   `parquet:"shadow_main_recurrences,optional"`
	ShadowMainRate           *float64 `parquet:"shadow_main_rate,optional"`
	ShadowChange             *float64 `parquet:"shadow_change,optional"`
	ShadowChangeLow          *float64 `parquet:"shadow_change_low,optional"`
	ShadowChangeHigh         *float64 `parquet:"shadow_change_high,optional"`
	ComputedAt               *int64   `parquet:"computed_at,optional,timestamp(microsecond)"`
}

// micros returns a timestamp in microseconds since the epoch, 0 when
// unset.
func micros(t *timestamppb.Timestamp) int64 {
	if t == nil {
		return 0
	}
	return t.AsTime().UnixMicro()
}

// optMicros returns a timestamp in microseconds, nil when unset.
func optMicros(t *timestamppb.Timestamp) *int64 {
	if t == nil {
		return nil
	}
	v := micros(t)
	return &v
}

// enumName is an enum value's plain name, as -o json prints it:
// "REJECTED", not "VERDICT_REJECTED"; "" for the unspecified value.
func enumName(v fmt.Stringer, prefix string) string {
	s := strings.TrimPrefix(v.String(), prefix)
	if s == "UNSPECIFIED" {
		return ""
	}
	return s
}

func ptr[T any](v T) *T { return &v }

func decisionRowOf(f *preceptv1.Feedback) decisionRow {
	d := f.GetDecision()
	return decisionRow{
		DecisionID: d.GetDecisionId(), Timestamp: micros(d.GetTimestamp()),
		GateID: d.GetGateId(), EpicID: d.GetEpicId(), TaskID: d.GetTaskId(), Agent: d.GetAgent(),
		Decision: enumName(d.GetDecision(), "VERDICT_"), ReviewerID: d.GetReviewerId(), ReviewDurationSeconds: d.ReviewDurationSeconds,
		Rating: d.GetRating(), ErrorCategories: d.GetErrorCategories(), Tags: d.GetTags(), QualityScores: d.GetQualityScores(),
		EditDistancePercent: f.EditDistancePercent, ScopePath: d.GetScopePath(), PromptVersion: d.GetPromptVersion(),
		AgentOutputSHA: d.GetAgentOutputSha(), ApprovedOutputSHA: d.GetApprovedOutputSha(),
		ReviewerComment: d.GetReviewerComment(), CorrectionDiffPath: d.GetCorrectionDiffPath(), CorrectionDiff: d.GetCorrectionDiff(),
		AgentOutput: d.GetAgentOutput(), ApprovedOutput: d.GetApprovedOutput(),
		ReceivedAt: micros(f.GetReceivedAt()), Source: f.GetSource(), Producer: f.GetProducer(), Commit: f.GetCommit(),
	}
}

func evaluationRowOf(ev *preceptv1.Evaluation) (evaluationRow, error) {
	r := evaluationRow{
		DecisionID: ev.GetDecisionId(), Classification: enumName(ev.GetClassification(), "CLASSIFICATION_"),
		Confidence: ev.GetConfidence(), NeedsReview: ev.GetNeedsReview(), ClusterID: ev.GetClusterId(),
		SimilarFeedbackIDs: ev.GetSimilarFeedbackIds(), Rationale: ev.GetRationale(), Evaluator: ev.GetEvaluator(),
		EvaluatedAt: optMicros(ev.GetEvaluatedAt()), Revision: ev.GetRevision(),
	}
	if a := ev.GetProposedAction(); a != nil {
		r.ActionType = enumName(a.GetType(), "ACTION_TYPE_")
		r.ActionTargetAgent, r.ActionProposalID, r.ActionPriority = a.GetTargetAgent(), a.GetProposalId(), a.GetPriority()
	}
	if st := ev.GetClusterStats(); st != nil {
		r.ClusterSize, r.ClusterDistinctReviewers = ptr(st.GetSize()), ptr(st.GetDistinctReviewers())
		r.ClusterDistinctEpics, r.ClusterDistinctProducers = ptr(st.GetDistinctEpics()), ptr(st.GetDistinctProducers())
	}
	if rb := ev.GetRubric(); rb != nil {
		r.RubricMet, r.RubricRequired = ptr(rb.GetMet()), ptr(rb.GetRequired())
		r.RubricConfidence, r.RubricPassed, r.RubricMissing = ptr(rb.GetConfidence()), ptr(rb.GetPassed()), rb.GetMissing()
		evidence := map[string]string{}
		for _, a := range rb.GetAttributes() {
			if a.GetEvidence() != "" {
				evidence[a.GetName()] = a.GetEvidence()
			}
		}
		if len(evidence) > 0 {
			b, err := json.Marshal(evidence)
			if err != nil {
				return r, err
			}
			r.RubricEvidence = string(b)
		}
	}
	if l := ev.GetLesson(); l != nil {
		r.LessonCategory, r.LessonConfidence = l.GetCategory(), ptr(l.GetConfidence())
		r.LessonSaid, r.LessonAsked = l.GetSaid(), l.GetAsked()
		r.LessonTaxonomy, r.LessonBy, r.LessonProtected = l.GetTaxonomy(), l.GetBy(), l.GetProtected()
		type evidence struct {
			Kind string `json:"kind"`
			Text string `json:"text,omitempty"`
		}
		var es []evidence
		for _, e := range l.GetEvidence() {
			es = append(es, evidence{e.GetKind(), e.GetText()})
		}
		if len(es) > 0 {
			b, err := json.Marshal(es)
			if err != nil {
				return r, err
			}
			r.LessonEvidence = string(b)
		}
	}
	return r, nil
}

// bounds returns an interval's ends, nil for an absent interval.
func bounds(i *preceptv1.Interval) (low, high *float64) {
	if i == nil {
		return nil, nil
	}
	return ptr(i.GetLow()), ptr(i.GetHigh())
}

func ruleEffectRowOf(e *preceptv1.RuleEffect) ruleEffectRow {
	r := ruleEffectRow{
		RuleID: e.GetRuleId(), Agents: e.GetAgents(), Status: enumName(e.GetStatus(), "RULE_STATUS_"),
		Importance: enumName(e.GetImportance(), "IMPORTANCE_"), Confidence: e.GetConfidence(),
		Category: e.GetCategory(), ClusterID: e.GetClusterId(), ActivatedAt: optMicros(e.GetActivatedAt()),
		Attribution: enumName(e.GetAttribution(), "ATTRIBUTION_"), Exposures: e.GetExposures(),
		ExposuresByPromptVersion: e.GetExposuresByPromptVersion(), ExposuresByAgentTime: e.GetExposuresByAgentTime(),
		Recurrences: e.GetRecurrences(), RateAfter: e.GetRateAfter(),
		BeforeDecisions: e.GetBeforeDecisions(), BeforeRecurrences: e.GetBeforeRecurrences(), RateBefore: e.GetRateBefore(),
		Change: e.GetChange(), Validations: e.GetValidations(), Method: e.GetMethod(), Verdict: e.GetVerdict(), Summary: e.GetSummary(),
		LastExposure: optMicros(e.GetLastExposure()), LastValidation: optMicros(e.GetLastValidation()), ComputedAt: optMicros(e.GetComputedAt()),
	}
	r.RateAfterLow, r.RateAfterHigh = bounds(e.GetRateAfterInterval())
	r.RateBeforeLow, r.RateBeforeHigh = bounds(e.GetRateBeforeInterval())
	r.ChangeLow, r.ChangeHigh = bounds(e.GetChangeInterval())
	if s := e.GetShadow(); s != nil {
		r.ShadowDecisions, r.ShadowRecurrences, r.ShadowRate = ptr(s.GetShadowDecisions()), ptr(s.GetShadowRecurrences()), ptr(s.GetShadowRate())
		r.ShadowMainDecisions, r.ShadowMainRecurrences, r.ShadowMainRate = ptr(s.GetMainDecisions()), ptr(s.GetMainRecurrences()), ptr(s.GetMainRate())
		r.ShadowChange = ptr(s.GetChange())
		r.ShadowChangeLow, r.ShadowChangeHigh = bounds(s.GetChangeInterval())
	}
	return r
}

// column is one column of a row type: its name and how a CSV cell shows
// the field.
type column struct {
	name      string
	index     int
	timestamp bool
}

// columnsOf lists a row type's columns in field order.
func columnsOf(t reflect.Type) []column {
	cols := make([]column, t.NumField())
	for i := range cols {
		tag := t.Field(i).Tag.Get("parquet")
		name, opts, _ := strings.Cut(tag, ",")
		cols[i] = column{name: name, index: i, timestamp: strings.Contains(opts, "timestamp(")}
	}
	return cols
}

// formulaStarts are the characters that make a spreadsheet read a cell as
// a formula (or, tab and carriage return, hide one).
const formulaStarts = "=+-@\t\r"

// csvCell renders a field for CSV. Text that a spreadsheet would take for
// a formula gets a leading apostrophe; numbers are written as they are,
// a negative one included, since precept writes them itself. Lists and
// maps are JSON.
func csvCell(v reflect.Value, c column) (string, error) {
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return "", nil
		}
		v = v.Elem()
	}
	switch v.Kind() {
	case reflect.String:
		s := v.String()
		if s != "" && strings.ContainsRune(formulaStarts, rune(s[0])) {
			s = "'" + s
		}
		return s, nil
	case reflect.Int32, reflect.Int64:
		if c.timestamp {
			if v.Int() == 0 {
				return "", nil
			}
			return time.UnixMicro(v.Int()).UTC().Format(time.RFC3339Nano), nil
		}
		return strconv.FormatInt(v.Int(), 10), nil
	case reflect.Float64:
		return strconv.FormatFloat(v.Float(), 'g', -1, 64), nil
	case reflect.Bool:
		return strconv.FormatBool(v.Bool()), nil
	case reflect.Slice, reflect.Map:
		if v.Len() == 0 {
			return "", nil
		}
		b, err := json.Marshal(v.Interface())
		return string(b), err
	}
	return "", fmt.Errorf("column %s: no CSV form for %s", c.name, v.Kind())
}
