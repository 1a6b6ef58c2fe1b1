package rules

import "github.com/precept-dev/precept/rules/rulefmt"

// ManualProposal is a rule a person proposes through the API.
type ManualProposal struct {
	Agents []string
	// Type defaults to GUIDELINE.
	Type    rulefmt.Type
	Content string
	// InsertionPoint defaults to DefaultInsertionPoint.
	InsertionPoint string
	// Rationale says why the rule is needed; it becomes the evidence
	// summary.
	Rationale   string
	FeedbackIDs []string
	Tags        []string
}

// ApproveRequest is one person's approval of a proposal.
type ApproveRequest struct {
	ProposalID string
	// By is the approver's identity: the API token's name or the mapped
	// Slack user.
	By   string
	Note string
	// Revision is the proposal's revision the approver saw; 0 skips the
	// check. A decision made on a proposal that changed since (other than
	// by approvals from others) is refused as stale.
	Revision int
	// Via is ViaAPI, ViaConsole, ViaMCP or ViaSlack.
	Via string
}

// RejectRequest is one person's rejection of a proposal.
type RejectRequest struct {
	ProposalID string
	By         string
	// Reason is required: it is recorded on main and shown wherever the
	// proposal is.
	Reason   string
	Revision int
	Via      string
}

// RollbackRequest asks for an active (or shadow) rule to be rolled back.
type RollbackRequest struct {
	RuleID string
	// By is who rolls it back; Reason is required and recorded.
	By     string
	Reason string
}

// ListFilter selects proposals.
type ListFilter struct {
	// Status; empty lists every status.
	Status rulefmt.ProposalStatus
	// Agent; empty lists every agent.
	Agent string
}

// Rollback is a rolled-back rule as it was, with status ROLLED_BACK, and
// the commit that rolled it back.
type Rollback struct {
	Rule   rulefmt.Rule
	Commit string
}
