package api

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/precept-dev/precept"
	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
	"github.com/precept-dev/precept/impact"
	"github.com/precept-dev/precept/lib/gitrepo"
	"github.com/precept-dev/precept/rules"
	"github.com/precept-dev/precept/rules/rulefmt"
)

// previews hands out fixed previews by proposal id.
type previews map[string]impact.Preview

func (p previews) Preview(pr rulefmt.Proposal) (impact.Preview, bool) {
	pv, ok := p[pr.ID]
	return pv, ok
}

func TestGetAndListProposalsCarryTheImpactPreview(t *testing.T) {
	ctx := context.Background()
	repo, err := gitrepo.Open(filepath.Join(t.TempDir(), "rules.git"), gitrepo.Options{NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { repo.Close() })
	m, err := rules.New(repo, rules.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := m.Propose(ctx, rules.ManualProposal{Agents: []string{"coder"}, Content: "Always set a timeout on outbound HTTP calls.",
		Rationale: "Three hangs."}, precept.Identity{Name: "carol", Role: precept.RoleApprover})
	if err != nil {
		t.Fatal(err)
	}
	pv := impact.Preview{ProposalID: p.ID, ContentRevision: p.ContentRevision, Category: "retry-timeout",
		CategoryNegatives: impact.Counts{Total: 11, ByAgent: map[string]int{"coder": 11}, ByEpic: map[string]int{"E1": 3, "E2": 1}, Epics: 9, OtherEpics: 7},
		Unevaluated:       2, SimilarLeftOut: 12,
		ApprovalsInScope: 3, OverCorrect: impact.Counts{Total: 1, ByAgent: map[string]int{"coder": 1}, ByEpic: map[string]int{"E1": 1}},
		Scope:       impact.Scope{Agents: []string{"coder"}, Gates: []string{"HITL-2"}, PathPrefixes: []string{"src/api"}},
		Similar:     []impact.Similar{{Kind: impact.KindBasePrompt, Path: "prompts/review.md", Similarity: 0.8, Opposing: true, Excerpt: "Never …"}},
		Replay:      impact.Replay{State: impact.ReplayDone, Model: "openai/judge", EvidenceJudged: 6, EvidenceFlagged: 3, ApprovalsJudged: 5, ApprovalsFlagged: 1, Calls: 10, Timeouts: 1},
		FeedbackSeq: 42, ComputedAt: time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)}
	svc := &RuleService{Rules: m, Impact: previews{p.ID: pv}, Log: slog.New(slog.DiscardHandler)}

	got, err := svc.GetProposal(ctx, connect.NewRequest(&preceptv1.GetProposalRequest{ProposalId: p.ID}))
	if err != nil {
		t.Fatal(err)
	}
	im := got.Msg.GetProposal().GetImpact()
	r := im.GetReplay()
	switch {
	case im == nil:
		t.Fatal("GetProposal has no impact preview")
	case im.GetCategory() != "retry-timeout" || im.GetCategoryNegatives().GetTotal() != 11 || im.GetCategoryNegatives().GetByEpic()["E1"] != 3:
		t.Errorf("negatives = %v", im.GetCategoryNegatives())
	case im.GetCategoryNegatives().GetEpics() != 9 || im.GetCategoryNegatives().GetOtherEpics() != 7 || im.GetOverCorrect().GetEpics() != 1:
		t.Errorf("epics beyond the listed ones: %v, %v", im.GetCategoryNegatives(), im.GetOverCorrect())
	case im.GetUnevaluated() != 2 || im.GetSimilarLeftOut() != 12:
		t.Errorf("unevaluated %d, similar left out %d; want 2 and 12", im.GetUnevaluated(), im.GetSimilarLeftOut())
	case im.GetApprovalsInScope() != 3 || im.GetOverCorrect().GetTotal() != 1 || im.GetScope().GetPathPrefixes()[0] != "src/api":
		t.Errorf("over-correction = %v in scope %v", im.GetOverCorrect(), im.GetScope())
	case len(im.GetSimilar()) != 1 || !im.GetSimilar()[0].GetOpposing() || im.GetSimilar()[0].GetPath() != "prompts/review.md":
		t.Errorf("similar = %v", im.GetSimilar())
	case r.GetState() != preceptv1.ImpactReplayState_IMPACT_REPLAY_STATE_DONE || r.GetPrecisionN() != 4 || r.GetPrecision() != 0.75 ||
		r.GetRecallN() != 6 || r.GetRecall() != 0.5 || r.GetTimeouts() != 1:
		t.Errorf("replay = %v", r)
	case im.GetFeedbackSeq() != 42 || im.GetContentRevision() != int32(p.ContentRevision) || !im.GetComputedAt().AsTime().Equal(pv.ComputedAt):
		t.Errorf("computed at = %v", im)
	}

	list, err := svc.ListProposals(ctx, connect.NewRequest(&preceptv1.ListProposalsRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if ps := list.Msg.GetProposals(); len(ps) != 1 || ps[0].GetImpact().GetOverCorrect().GetTotal() != 1 {
		t.Errorf("ListProposals = %v", ps)
	}
}
