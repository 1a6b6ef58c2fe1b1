package console

import (
	"context"
	"net/http"
	"testing"

	"connectrpc.com/connect"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
	"github.com/precept-dev/precept/gen/precept/v1/preceptv1connect"
)

// stubRules answers GetProposal with a fixed proposal.
type stubRules struct {
	preceptv1connect.UnimplementedRuleServiceHandler
}

func (stubRules) GetProposal(context.Context, *connect.Request[preceptv1.GetProposalRequest]) (*connect.Response[preceptv1.GetProposalResponse], error) {
	return connect.NewResponse(&preceptv1.GetProposalResponse{Proposal: &preceptv1.Proposal{ProposalId: "p-1", RuleContent: "Always write tests."}}), nil
}

// Written in review (ui-review): the console's in-process clients ask
// for gzip, and connect handlers compress every response (no minimum
// size by default): each page pays gzip and gunzip for answers that
// never leave the process.
func TestInProcessCallsAreNotCompressed(t *testing.T) {
	path, h := preceptv1connect.NewRuleServiceHandler(stubRules{})
	mux := http.NewServeMux()
	var encoding string
	mux.Handle(path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r)
		encoding = w.Header().Get("Content-Encoding")
	}))
	c := newClients(mux)
	if _, err := c.rules.GetProposal(context.Background(), connect.NewRequest(&preceptv1.GetProposalRequest{ProposalId: "p-1"})); err != nil {
		t.Fatal(err)
	}
	if encoding != "" {
		t.Fatalf("an in-process response was sent with Content-Encoding %q", encoding)
	}
}
