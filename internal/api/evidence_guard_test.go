package api

import (
	"context"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"connectrpc.com/connect"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
	"github.com/precept-dev/precept/impact"
	"github.com/precept-dev/precept/lesson"
	"github.com/precept-dev/precept/lib/gitrepo"
	"github.com/precept-dev/precept/rules"
	"github.com/precept-dev/precept/rules/rulefmt"
)

// addingModel drafts a rule that adds retries to what reviewers asked.
type addingModel struct{}

func (addingModel) Complete(context.Context, string) (string, error) {
	return `{"rule_type": "GUIDELINE", "rule_content": "Give every outbound network call a timeout, and retry failed calls with exponential backoff."}`, nil
}
func (addingModel) Model() string { return "adding-model" }

// A drafted rule text that says more than its evidence reaches the
// curator through the API: the evidence guard names the added clause,
// each clause says where it came from, and the impact preview names the
// added clauses too (docs/lessons.md, "Rules no wider than the
// evidence").
func TestTheAPIShowsTheCuratorAClauseNoReviewerAskedFor(t *testing.T) {
	ctx := context.Background()
	repo, err := gitrepo.Open(filepath.Join(t.TempDir(), "rules.git"), gitrepo.Options{NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { repo.Close() })
	retry, _ := lesson.DefaultTaxonomy().Category("retry-timeout")
	ev := rulefmt.Evidence{ClusterID: "c-1", Class: rulefmt.ClassGeneralizableHigh, Confidence: 0.9, Agents: []string{"coder"},
		FeedbackIDs: []string{"d1", "d2", "d3"}, Reviewers: []string{"r1", "r2", "r3"}, Epics: []string{"E1", "E2"}, Size: 3,
		Category: retry.ID, CategoryRule: retry.Rule,
		Comments: []rulefmt.Comment{
			{DecisionID: "d1", ReviewerID: "r1", Text: "no timeout on this outbound call, it will hang when the upstream stalls"},
			{DecisionID: "d2", ReviewerID: "r2", Text: "Please set a timeout on outbound requests."},
			{DecisionID: "d3", ReviewerID: "r3", Text: "the default client has no deadline; add one"},
		}}
	m, err := rules.New(repo, rules.Options{LLM: addingModel{}, Evidence: rulefmt.EvidenceFunc(func(context.Context) ([]rulefmt.Evidence, error) {
		return []rulefmt.Evidence{ev}, nil
	})})
	if err != nil {
		t.Fatal(err)
	}
	drafted, err := m.ProposeFromEvidence(ctx)
	if err != nil || len(drafted) != 1 {
		t.Fatalf("drafted %v, %v", drafted, err)
	}
	id := drafted[0].ID
	const added = "retry failed calls with exponential backoff"
	svc := &RuleService{Rules: m, Log: slog.New(slog.DiscardHandler),
		Impact: previews{id: impact.Preview{ProposalID: id, ContentRevision: drafted[0].ContentRevision, Added: []string{added}}}}
	got, err := svc.GetProposal(ctx, connect.NewRequest(&preceptv1.GetProposalRequest{ProposalId: id}))
	if err != nil {
		t.Fatal(err)
	}
	p := got.Msg.GetProposal()
	if p.GetStatus() != preceptv1.ProposalStatus_PROPOSAL_STATUS_PENDING {
		t.Fatalf("status %v: the evidence guard holds no proposal", p.GetStatus())
	}
	i := slices.IndexFunc(p.GetGuards(), func(g *preceptv1.GuardResult) bool { return g.GetGuard() == rulefmt.GuardEvidence })
	if i < 0 || p.GetGuards()[i].GetPassed() || !strings.Contains(p.GetGuards()[i].GetReason(), "“"+added+"”") {
		t.Fatalf("guards = %v, want a failed evidence guard naming %q", p.GetGuards(), added)
	}
	var beyond, asked []string
	for _, c := range p.GetClauses() {
		if c.GetBeyondEvidence() {
			beyond = append(beyond, c.GetText())
		} else {
			asked = append(asked, c.GetText())
		}
	}
	if !slices.Equal(beyond, []string{added}) || len(asked) != 1 {
		t.Fatalf("clauses beyond the evidence %q, asked for %q", beyond, asked)
	}
	if a := p.GetImpact().GetAddedClauses(); !slices.Equal(a, []string{added}) {
		t.Fatalf("impact added clauses = %q", a)
	}
}
