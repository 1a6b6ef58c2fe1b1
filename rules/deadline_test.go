package rules

import (
	"slices"
	"testing"
	"time"

	"github.com/precept-dev/precept/rules/rulefmt"
)

func TestOverdueCountsWholeSLAPeriodsOfPendingProposals(t *testing.T) {
	created := time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)
	sla := 48 * time.Hour
	for _, tc := range []struct {
		name   string
		status rulefmt.ProposalStatus
		waited time.Duration
		sla    time.Duration
		want   int64
	}{
		{"within the deadline", rulefmt.Pending, 47 * time.Hour, sla, 0},
		{"at the deadline", rulefmt.Pending, sla, sla, 1},
		{"past it", rulefmt.Pending, 60 * time.Hour, sla, 1},
		{"past twice the SLA", rulefmt.Pending, 100 * time.Hour, sla, 2},
		{"decided proposals are never overdue", rulefmt.Approved, 100 * time.Hour, sla, 0},
		{"rejected ones neither", rulefmt.Rejected, 100 * time.Hour, sla, 0},
		{"an SLA of 0 turns deadlines off", rulefmt.Pending, 100 * time.Hour, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := rulefmt.Proposal{Status: tc.status, CreatedAt: created, Required: 2}
			if got := Overdue(p, created.Add(tc.waited), tc.sla); got != tc.want {
				t.Errorf("Overdue = %d, want %d", got, tc.want)
			}
		})
	}
	// A pending proposal that holds every approval it needs (its merge
	// is held) waits for no approver.
	p := rulefmt.Proposal{Status: rulefmt.Pending, CreatedAt: created, Required: 2, Content: "Cite the ticket.", Agents: []string{"coding-agent"}}
	p.Approvals = []rulefmt.Approval{{Approver: "alice", TextSHA256: p.TextSHA256()}, {Approver: "bob", TextSHA256: p.TextSHA256()}}
	if got := Overdue(p, created.Add(100*time.Hour), sla); got != 0 {
		t.Errorf("Overdue with every approval = %d, want 0", got)
	}
	p.Approvals[1].TextSHA256 = "0000"
	if got := Overdue(p, created.Add(100*time.Hour), sla); got != 2 {
		t.Errorf("Overdue with one valid approval of two = %d, want 2", got)
	}
}

func TestStillNeededLeavesOutWhoApprovedAndWhoProposed(t *testing.T) {
	p := rulefmt.Proposal{Required: 3, ProposedBy: "erin", Content: "Cite the ticket.", Agents: []string{"coding-agent"}}
	sum := p.TextSHA256()
	p.Approvals = []rulefmt.Approval{
		{Approver: "alice", TextSHA256: sum},
		// bob approved a text the proposal no longer says: his approval
		// lapsed and he may approve again.
		{Approver: "bob", TextSHA256: "0000"},
	}
	n, who := StillNeeded(p, []string{"alice", "bob", "carol", "erin"})
	if n != 2 {
		t.Errorf("still needed = %d, want 2", n)
	}
	if want := []string{"bob", "carol"}; !slices.Equal(who, want) {
		t.Errorf("who = %v, want %v", who, want)
	}
	if n, who := StillNeeded(p, nil); n != 2 || len(who) != 0 {
		t.Errorf("without configured approvers: %d %v, want 2 and nobody named", n, who)
	}
	p.Approvals = append(p.Approvals, rulefmt.Approval{Approver: "carol", TextSHA256: sum}, rulefmt.Approval{Approver: "dave", TextSHA256: sum})
	if n, _ := StillNeeded(p, nil); n != 0 {
		t.Errorf("with every approval: still needed = %d, want 0", n)
	}
}
