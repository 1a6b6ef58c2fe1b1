package convert

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

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
		if got, err := DecisionFromProto(DecisionToProto(d)); err != nil || !reflect.DeepEqual(got, d) {
			t.Errorf("%s: round trip gave\n%+v, %v\nwant\n%+v", v, got, err, d)
		}
	}
}

func TestAnUnknownVerdictStaysVisibleToTheValidator(t *testing.T) {
	if d, _ := DecisionFromProto(&preceptv1.HITLDecision{Decision: preceptv1.Verdict(99)}); d.Decision != "99" {
		t.Fatalf("verdict = %q, want the raw value", d.Decision)
	}
	if d, _ := DecisionFromProto(&preceptv1.HITLDecision{}); d.Decision != "" {
		t.Fatalf("unspecified verdict = %q, want empty (missing)", d.Decision)
	}
	if d, err := DecisionFromProto(nil); err != nil || !reflect.DeepEqual(d, precept.Decision{}) {
		t.Fatalf("nil = %+v, %v", d, err)
	}
}

// TestAGivenZeroTimestampIsNamedNotCalledMissing: the zero time and a
// timestamp outside the protobuf range are refused as such; an absent
// one is left for Validate to call required.
func TestAGivenZeroTimestampIsNamedNotCalledMissing(t *testing.T) {
	tests := []struct {
		name string
		ts   *timestamppb.Timestamp
		want string
	}{
		{"zero time", timestamppb.New(time.Time{}), "timestamp: 0001-01-01T00:00:00Z is the zero time"},
		{"beyond year 9999", &timestamppb.Timestamp{Seconds: 1 << 40}, "timestamp: out of range"},
		{"nanos out of range", &timestamppb.Timestamp{Seconds: 1e9, Nanos: -1}, "timestamp: out of range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecisionFromProto(&preceptv1.HITLDecision{Timestamp: tt.ts})
			if err == nil || !strings.Contains(err.Error(), tt.want) || precept.ErrorCode(err) != precept.Invalid {
				t.Fatalf("err = %v, want invalid %q", err, tt.want)
			}
		})
	}
	d, err := DecisionFromProto(&preceptv1.HITLDecision{})
	if err != nil || !d.Timestamp.IsZero() {
		t.Fatalf("absent timestamp: %+v, %v", d.Timestamp, err)
	}
	if err := d.Validate(precept.Limits{}, time.Now()); err == nil || !strings.Contains(err.Error(), "timestamp: required") {
		t.Fatalf("absent timestamp validates as %v, want required", err)
	}
}
