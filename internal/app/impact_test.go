package app

import (
	"context"
	"testing"
	"time"

	"connectrpc.com/connect"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
	"github.com/precept-dev/precept/lib/fakeslack"
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

// With Slack, the proposal's message shows the preview once computed.
func TestTheSlackMessageShowsTheImpactPreview(t *testing.T) {
	ws := fakeslack.New(t)
	r := start(t, ruleTokensYAML+"rules: {propose_interval: 200ms}\n"+slackYAML(ws, ""))
	xaddAll(t, r.rdb, clusterEvents())
	p := pendingProposal(t, ruleClient(r.app.URL(), "connect", viewerToken))
	slackMessage(t, r, ws, p.GetProposalId(), func(m fakeslack.Message) bool {
		return m.Shows("*Impact* Addresses 3 past negatives (1 agent, 2 epics)") && m.Shows("could over-correct 0 of 0 approvals in scope")
	})
}
