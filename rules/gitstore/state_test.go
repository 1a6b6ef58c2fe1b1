package gitstore

import (
	"slices"
	"testing"
	"time"

	"github.com/precept-dev/precept/rules/rulefmt"
)

func TestARuleForSeveralAgentsIsOneRuleWithTheirDirectories(t *testing.T) {
	st := NewState()
	r := rulefmt.Rule{ID: "r-0123456789", ProposalID: "p-0123456789", Status: rulefmt.Active}
	st.AddRule(r, "docs-agent", rulefmt.ActiveRulePath("docs-agent", r.ID))
	st.AddRule(r, "coding-agent", rulefmt.ActiveRulePath("coding-agent", r.ID))
	got := st.Rules[r.ID]
	if got == nil || !slices.Equal(got.Agents, []string{"coding-agent", "docs-agent"}) {
		t.Fatalf("rule = %+v, want one rule for both agents, sorted", got)
	}
	if len(st.rulePaths[r.ID]) != 2 || st.ByProposal[r.ProposalID] != r.ID {
		t.Fatalf("paths %v, by proposal %v", st.rulePaths[r.ID], st.ByProposal)
	}
	if st.ActiveCount("docs-agent") != 1 || st.ActiveCount("other-agent") != 0 {
		t.Fatal("ActiveCount counts the rule for each of its agents only")
	}
	if st.Open(r.ProposalID) {
		t.Fatal("a proposal that became a rule is not open")
	}
}

func TestTheProposalOfAClusterIsTheOpenOneElseTheNewest(t *testing.T) {
	st := NewState()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	add := func(id string, status rulefmt.ProposalStatus, created time.Time) {
		st.OnBranch[id] = &rulefmt.Proposal{ID: id, Status: status, CreatedAt: created, ClusterID: "c-1"}
		st.ByCluster["c-1"] = append(st.ByCluster["c-1"], id)
	}
	add("p-0000000001", rulefmt.Rejected, at)
	st.Rejected["p-0000000001"] = st.OnBranch["p-0000000001"]
	add("p-0000000002", rulefmt.Rejected, at.Add(time.Hour))
	st.Rejected["p-0000000002"] = st.OnBranch["p-0000000002"]
	if id, ok := st.ProposalOfCluster("c-1"); !ok || id != "p-0000000002" {
		t.Fatalf("ProposalOfCluster = %s, %v; want the newest, p-0000000002", id, ok)
	}
	add("p-0000000003", rulefmt.Pending, at.Add(-time.Hour))
	if id, ok := st.ProposalOfCluster("c-1"); !ok || id != "p-0000000003" {
		t.Fatalf("ProposalOfCluster = %s, %v; want the open one, p-0000000003", id, ok)
	}
	if _, ok := st.ProposalOfCluster("c-2"); ok {
		t.Fatal("a cluster without proposals has none")
	}
}
