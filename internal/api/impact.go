package api

import (
	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
	"github.com/precept-dev/precept/impact"
	"github.com/precept-dev/precept/rules/rulefmt"
)

// ImpactPreviews give a proposal's latest impact preview without
// computing anything; impact.Service implements it.
type ImpactPreviews interface {
	Preview(p rulefmt.Proposal) (impact.Preview, bool)
}

var _ ImpactPreviews = (*impact.Service)(nil)

var replayStates = map[impact.ReplayState]preceptv1.ImpactReplayState{
	impact.ReplayOff:     preceptv1.ImpactReplayState_IMPACT_REPLAY_STATE_OFF,
	impact.ReplayPending: preceptv1.ImpactReplayState_IMPACT_REPLAY_STATE_PENDING,
	impact.ReplayDone:    preceptv1.ImpactReplayState_IMPACT_REPLAY_STATE_DONE,
}

func impactToProto(pv impact.Preview) *preceptv1.ImpactPreview {
	out := &preceptv1.ImpactPreview{
		Pending: pv.Pending, Category: pv.Category, Cluster: countsToProto(pv.Cluster),
		CategoryNegatives: countsToProto(pv.CategoryNegatives), ApprovalsInScope: int64(pv.ApprovalsInScope),
		OverCorrect: countsToProto(pv.OverCorrect), ContentRevision: int32(pv.ContentRevision), FeedbackSeq: pv.FeedbackSeq,
		ComputedAt: tsOrNil(pv.ComputedAt), Unevaluated: int64(pv.Unevaluated), SimilarLeftOut: int64(pv.SimilarLeftOut),
		Scope:        &preceptv1.ImpactScope{Agents: pv.Scope.Agents, Gates: pv.Scope.Gates, PathPrefixes: pv.Scope.PathPrefixes},
		AddedClauses: pv.Added,
	}
	for _, s := range pv.Similar {
		out.Similar = append(out.Similar, &preceptv1.ImpactSimilar{Kind: s.Kind, Path: s.Path, RuleId: s.RuleID,
			Similarity: s.Similarity, Opposing: s.Opposing, Excerpt: s.Excerpt})
	}
	r := pv.Replay
	prec, pn := r.Precision()
	rec, rn := r.Recall()
	out.Replay = &preceptv1.ImpactReplay{
		State: replayStates[r.State], Model: r.Model, EvidenceJudged: int32(r.EvidenceJudged), EvidenceFlagged: int32(r.EvidenceFlagged),
		ApprovalsJudged: int32(r.ApprovalsJudged), ApprovalsFlagged: int32(r.ApprovalsFlagged),
		Precision: prec, PrecisionN: int32(pn), Recall: rec, RecallN: int32(rn), Calls: int32(r.Calls),
		Malformed: int32(r.Malformed), Timeouts: int32(r.Timeouts), Errors: int32(r.Errors), UnsafeSkipped: int32(r.UnsafeSkipped), Capped: r.Capped,
		Attempts: int32(r.Attempts), RetryAt: tsOrNil(r.RetryAt),
	}
	return out
}

func countsToProto(c impact.Counts) *preceptv1.ImpactCounts {
	out := &preceptv1.ImpactCounts{Total: int64(c.Total), Epics: int64(max(c.Epics, len(c.ByEpic))), OtherEpics: int64(c.OtherEpics)}
	if len(c.ByAgent) > 0 {
		out.ByAgent = make(map[string]int64, len(c.ByAgent))
		for k, v := range c.ByAgent {
			out.ByAgent[k] = int64(v)
		}
	}
	if len(c.ByEpic) > 0 {
		out.ByEpic = make(map[string]int64, len(c.ByEpic))
		for k, v := range c.ByEpic {
			out.ByEpic[k] = int64(v)
		}
	}
	return out
}
