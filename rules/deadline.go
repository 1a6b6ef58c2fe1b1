package rules

import (
	"slices"
	"time"

	"github.com/precept-dev/precept/rules/rulefmt"
)

// DefaultApprovalSLA is how long a proposal may wait for its approvals
// before it is overdue: reminded in its Slack thread and counted by
// precept_rules_proposals_overdue (docs/lifecycle.md, "Approval
// deadlines").
const DefaultApprovalSLA = 48 * time.Hour

// Overdue reports how many whole approval SLA periods a pending proposal
// has waited for approvals since it was proposed: 0 while it is within
// its deadline (or is not pending, or already holds every valid approval
// it needs, its merge held, or sla is not positive), 1 once it passed the
// deadline, 2 after twice the SLA, and so on.
func Overdue(p rulefmt.Proposal, now time.Time, sla time.Duration) int64 {
	if sla <= 0 || p.Status != rulefmt.Pending || p.CreatedAt.IsZero() {
		return 0
	}
	if n, _ := StillNeeded(p, nil); n == 0 {
		return 0
	}
	waited := now.Sub(p.CreatedAt)
	if waited < sla {
		return 0
	}
	return int64(waited / sla)
}

// StillNeeded says how many more valid approvals a proposal needs, and
// who of approvers may still give one: those who have not approved its
// current text and did not propose it. approvers empty (every caller
// with the approver role may approve) leaves who empty.
func StillNeeded(p rulefmt.Proposal, approvers []string) (n int, who []string) {
	valid := p.ValidApprovals()
	n = max(p.Required-len(valid), 0)
	for _, a := range approvers {
		approved := slices.ContainsFunc(valid, func(v rulefmt.Approval) bool { return v.Approver == a })
		self := a == p.ProposedBy && p.ProposedBy != rulefmt.SystemProposer
		if !approved && !self && !slices.Contains(who, a) {
			who = append(who, a)
		}
	}
	return n, who
}
