package app

import (
	"context"
	"testing"
	"time"

	"connectrpc.com/connect"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
)

// A drafted proposal gets its impact preview in the background: pending
// at first, then its cluster's three reviews in two epics.
func TestADraftedProposalGetsItsImpactPreview(t *testing.T) {
	r := start(t, ruleTokensYAML+"rules: {propose_interval: 200ms}\n")
	xaddAll(t, r.rdb, clusterEvents())
	viewer := ruleClient(r.app.URL(), "connect", viewerToken)
	p := pendingProposal(t, viewer)
	var im *preceptv1.ImpactPreview
	eventually(t, "the proposal's impact preview", 30*time.Second, func() bool {
		resp, err := viewer.GetProposal(context.Background(), connect.NewRequest(&preceptv1.GetProposalRequest{ProposalId: p.GetProposalId()}))
		if err != nil {
			return false
		}
		im = resp.Msg.GetProposal().GetImpact()
		return im != nil && !im.GetPending()
	})
	c := im.GetCluster()
	if c.GetTotal() != 3 || len(c.GetByEpic()) != 2 || im.GetCategory() == "" || im.GetCategoryNegatives().GetTotal() < 3 {
		t.Errorf("impact = %v; want the cluster's 3 reviews in 2 epics, in a known category", im)
	}
	if im.GetReplay().GetState() != preceptv1.ImpactReplayState_IMPACT_REPLAY_STATE_OFF {
		t.Errorf("replay = %v without an LLM, want off", im.GetReplay())
	}
}
