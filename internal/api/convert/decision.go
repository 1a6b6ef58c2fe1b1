// Package convert converts the domain's decision to and from its API
// form. It imports only the root package and the generated code, so the
// precept CLI can use it without linking the server.
package convert

import (
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/precept-dev/precept"
	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
)

var verdictToProto = map[precept.Verdict]preceptv1.Verdict{
	precept.Approved:            preceptv1.Verdict_VERDICT_APPROVED,
	precept.Rejected:            preceptv1.Verdict_VERDICT_REJECTED,
	precept.ApprovedWithChanges: preceptv1.Verdict_VERDICT_APPROVED_WITH_CHANGES,
}

// DecisionFromProto converts an API decision to the domain event; the
// result still needs Validate. A timestamp that is given but is the zero
// time or outside the protobuf range is an error here, where it can still
// be told from a missing one (a zero Decision.Timestamp means absent).
func DecisionFromProto(p *preceptv1.HITLDecision) (precept.Decision, error) {
	if p == nil {
		return precept.Decision{}, nil
	}
	d := precept.Decision{
		DecisionID:         p.GetDecisionId(),
		GateID:             p.GetGateId(),
		EpicID:             p.GetEpicId(),
		TaskID:             p.GetTaskId(),
		Agent:              p.GetAgent(),
		ReviewerID:         p.GetReviewerId(),
		AgentOutputSHA:     p.GetAgentOutputSha(),
		ApprovedOutputSHA:  p.GetApprovedOutputSha(),
		CorrectionDiffPath: p.GetCorrectionDiffPath(),
		CorrectionDiff:     p.GetCorrectionDiff(),
		AgentOutput:        p.GetAgentOutput(),
		ApprovedOutput:     p.GetApprovedOutput(),
		ReviewerComment:    p.GetReviewerComment(),
		Tags:               p.GetTags(),
		ScopePath:          p.GetScopePath(),
		PromptVersion:      p.GetPromptVersion(),
		Rating:             p.GetRating(),
		ErrorCategories:    p.GetErrorCategories(),
		QualityScores:      p.GetQualityScores(),
	}
	for v, pv := range verdictToProto {
		if pv == p.GetDecision() {
			d.Decision = v
		}
	}
	if p.GetDecision() != preceptv1.Verdict_VERDICT_UNSPECIFIED && d.Decision == "" {
		// An enum value this server does not know: keep it visible to the
		// validator instead of treating it as missing.
		d.Decision = precept.Verdict(p.GetDecision().String())
	}
	if p.ReviewDurationSeconds != nil {
		v := p.GetReviewDurationSeconds()
		d.ReviewDurationSeconds = &v
	}
	if p.Timestamp != nil {
		if err := p.Timestamp.CheckValid(); err != nil {
			return precept.Decision{}, precept.InvalidEvent("timestamp", "out of range (0001-01-01 to 9999-12-31)")
		}
		d.Timestamp = p.Timestamp.AsTime()
		if err := precept.CheckTimestamp(d.Timestamp); err != nil {
			return precept.Decision{}, precept.InvalidEvent("timestamp", "%v", err)
		}
	}
	return d, nil
}

// DecisionToProto converts a domain event for the API.
func DecisionToProto(d precept.Decision) *preceptv1.HITLDecision {
	p := &preceptv1.HITLDecision{
		DecisionId:            d.DecisionID,
		GateId:                d.GateID,
		EpicId:                d.EpicID,
		TaskId:                d.TaskID,
		Agent:                 d.Agent,
		Decision:              verdictToProto[d.Decision],
		ReviewerId:            d.ReviewerID,
		AgentOutputSha:        d.AgentOutputSHA,
		ApprovedOutputSha:     d.ApprovedOutputSHA,
		CorrectionDiffPath:    d.CorrectionDiffPath,
		CorrectionDiff:        d.CorrectionDiff,
		AgentOutput:           d.AgentOutput,
		ApprovedOutput:        d.ApprovedOutput,
		ReviewerComment:       d.ReviewerComment,
		Tags:                  d.Tags,
		ScopePath:             d.ScopePath,
		PromptVersion:         d.PromptVersion,
		Rating:                d.Rating,
		ErrorCategories:       d.ErrorCategories,
		QualityScores:         d.QualityScores,
		ReviewDurationSeconds: d.ReviewDurationSeconds,
	}
	if !d.Timestamp.IsZero() {
		p.Timestamp = timestamppb.New(d.Timestamp)
	}
	return p
}
