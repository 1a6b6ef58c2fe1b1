package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"connectrpc.com/connect"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
	"github.com/precept-dev/precept/gen/precept/v1/preceptv1connect"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Written in review (ui-review): pages with unusual data render, and
// text from proposals, tags and decisions is escaped.
func TestPagesWithUnusualData(t *testing.T) {
	s := startServer(t, tokensYAML)
	ctx := context.Background()
	const xss = `<script>alert(1)</script><img src=x onerror=alert(2)>`
	resp, err := s.rules(aliceToken).ProposeRule(ctx, connect.NewRequest(&preceptv1.ProposeRuleRequest{
		AffectedAgents: []string{"coding-agent"}, RuleContent: "Always write tests " + xss,
		Rationale: "because " + xss, Tags: []string{"t" + "x"},
	}))
	if err != nil {
		t.Fatal(err)
	}
	p := resp.Msg.GetProposal()
	t.Logf("manual proposal %s cluster=%q rev=%d status=%v", p.GetProposalId(), p.GetClusterId(), p.GetRevision(), p.GetStatus())
	alice := s.signIn(t, aliceToken)
	bob := s.signIn(t, bobToken)
	for _, path := range []string{"/ui/queue", "/ui/proposals/" + p.GetProposalId(), "/ui/queue?agent=" + url.QueryEscape(xss), "/ui/rules?agent=" + url.QueryEscape(xss) + "&status=retired"} {
		status, body := alice.get(path)
		t.Logf("GET %s: %d", path, status)
		if status >= 500 || strings.Contains(body, "<script>alert") || strings.Contains(body, "<img src=x") {
			t.Errorf("GET %s: %d\n%s", path, status, body)
		}
	}
	// Reject: the page of a rejected proposal.
	_, body := bob.get("/ui/proposals/" + p.GetProposalId())
	rev := revisionOf(t, body)
	status, loc := bob.post("/ui/proposals/"+p.GetProposalId()+"/reject", url.Values{"revision": {rev}, "reason": {"no " + xss}})
	t.Logf("reject: %d %s", status, loc)
	status, body = alice.get("/ui/proposals/" + p.GetProposalId())
	if status != http.StatusOK || strings.Contains(body, "<script>alert") {
		t.Errorf("rejected proposal page: %d\n%s", status, body)
	}
	t.Logf("rejected page has reason: %v", strings.Contains(body, "Rejected by bob"))
	// Revision 0 skips the API's stale check.
	resp2, err := s.rules(aliceToken).ProposeRule(ctx, connect.NewRequest(&preceptv1.ProposeRuleRequest{
		AffectedAgents: []string{"coding-agent"}, RuleContent: "Name every retry constant", Rationale: "r",
	}))
	if err != nil {
		t.Fatal(err)
	}
	p2 := resp2.Msg.GetProposal()
	bob.get("/ui/proposals/" + p2.GetProposalId())
	status, loc = bob.post("/ui/proposals/"+p2.GetProposalId()+"/approve", url.Values{"revision": {"0"}})
	t.Logf("approve with revision 0: %d %s", status, loc)
	// A decision recorded by the API, read at once (no evaluation yet).
	fb := preceptv1connect.NewFeedbackServiceClient(&http.Client{Transport: bearer{aliceToken}}, s.url)
	_, err = fb.RecordFeedback(ctx, connect.NewRequest(&preceptv1.RecordFeedbackRequest{Decision: &preceptv1.HITLDecision{
		DecisionId: "probe-1", GateId: "HITL-2", EpicId: "E", Agent: "coding-agent", Decision: preceptv1.Verdict(2),
		ReviewerId: "rev-x", ReviewerComment: xss, Timestamp: timestamppb.Now(),
	}}))
	t.Logf("record: %v", err)
	status, body = alice.get("/ui/decisions/probe-1")
	t.Logf("decision page: %d", status)
	if status >= 500 || strings.Contains(body, "<script>alert") {
		t.Errorf("decision page: %d\n%s", status, body)
	}
	for _, path := range []string{"/ui/decisions/%00", "/ui/proposals/%20", "/ui/rules/r-%ff", "/ui/queue?page=99999999999", "/ui/rules?page=-1", "/ui/rules/r-x/effect", "/ui/proposals/p-%ff", "/ui/decisions/%ff", "/ui/queue?agent=%ff", "/ui/rules?agent=%ff"} {
		status, body := alice.get(path)
		t.Logf("GET %s: %d %.200s", path, status, strings.ReplaceAll(body[max(0, strings.Index(body, `class="error"`)):], "\n", " "))
	}
}
