package convert

import (
	"reflect"
	"testing"
	"time"

	"github.com/precept-dev/precept"
	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
)

func TestADecisionSurvivesTheRoundTripThroughItsAPIForm(t *testing.T) {
	secs := int64(42)
	for _, v := range []precept.Verdict{precept.Approved, precept.Rejected, precept.ApprovedWithChanges} {
		d := precept.Decision{
			DecisionID: "d-1", GateID: "HITL-2", EpicID: "E-1", TaskID: "T-1", Agent: "coding-agent", Decision: v,
			ReviewerID: "alice", Timestamp: time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC), ReviewDurationSeconds: &secs,
			AgentOutputSHA: "a1", ApprovedOutputSHA: "b2", CorrectionDiffPath: "diffs/1.patch", CorrectionDiff: "-a\n+b",
			AgentOutput: "a", ApprovedOutput: "b", ReviewerComment: "use b", Tags: []string{"style"}, ScopePath: "svc/api",
			PromptVersion: "v1", Rating: "negative", ErrorCategories: []string{"naming"}, QualityScores: map[string]int32{"clarity": 3},
		}
		if got := DecisionFromProto(DecisionToProto(d)); !reflect.DeepEqual(got, d) {
			t.Errorf("%s: round trip gave\n%+v\nwant\n%+v", v, got, d)
		}
	}
}

func TestAnUnknownVerdictStaysVisibleToTheValidator(t *testing.T) {
	if d := DecisionFromProto(&preceptv1.HITLDecision{Decision: preceptv1.Verdict(99)}); d.Decision != "99" {
		t.Fatalf("verdict = %q, want the raw value", d.Decision)
	}
	if d := DecisionFromProto(&preceptv1.HITLDecision{}); d.Decision != "" {
		t.Fatalf("unspecified verdict = %q, want empty (missing)", d.Decision)
	}
	if d := DecisionFromProto(nil); !reflect.DeepEqual(d, precept.Decision{}) {
		t.Fatalf("nil = %+v", d)
	}
}
