package rulefmt

// ChangeKind says what a committed transition did.
type ChangeKind string

// The transitions OnChange reports.
const (
	ProposalCreated  ChangeKind = "proposal_created"
	ApprovalRecorded ChangeKind = "approval_recorded"
	// ProposalApproved: the proposal has its approvals (merged or not).
	ProposalApproved ChangeKind = "proposal_approved"
	// RuleMerged: the approved rule is on main.
	RuleMerged       ChangeKind = "rule_merged"
	ProposalRejected ChangeKind = "proposal_rejected"
	RuleRolledBack   ChangeKind = "rule_rolled_back"
	// RuleActivated: a SHADOW rule became ACTIVE.
	RuleActivated ChangeKind = "rule_activated"
	// RuleShadowed: an idle ACTIVE rule whose re-approval went unanswered
	// went to SHADOW.
	RuleShadowed ChangeKind = "rule_shadowed"
	// RuleEffectsRecorded: the learning loop wrote importance, confidence
	// and effect figures into rule files.
	RuleEffectsRecorded ChangeKind = "rule_effects_recorded"
	// EvidenceAdded: a duplicate draft's evidence went to an existing rule
	// or proposal.
	EvidenceAdded ChangeKind = "evidence_added"
	// DraftHeld: a draft was blocked by a guard or deferred by the rate cap.
	DraftHeld ChangeKind = "draft_held"
	// RemoteSynced: commits from the remote were brought into main, or
	// remote merges and branch deletions were applied.
	RemoteSynced ChangeKind = "remote_synced"
	// ProposalEdited: the proposal's text was edited on the remote; its
	// approvals were reset and the guards ran again.
	ProposalEdited ChangeKind = "proposal_edited"
	// RemoteChangeIgnored: something fetched from the remote claimed what
	// precept did not record; Detail says what (Ignored*).
	RemoteChangeIgnored ChangeKind = "remote_change_ignored"
)

// Change is one committed transition.
type Change struct {
	Kind       ChangeKind
	ProposalID string
	RuleID     string
	Agents     []string
	// Commit is the commit that recorded it.
	Commit string
	// Revision is the proposal's revision after the change.
	Revision int
	// Actor is who caused it; Via is api, slack, git or precept.
	Actor string
	Via   string
	// MainChanged says whether main (and so the prompts) changed.
	MainChanged bool
	// Guard is the guard that held a draft (DraftHeld), or
	// reconsolidation when a duplicate's evidence was added
	// (EvidenceAdded).
	Guard string
	// Detail says what kind of remote change was ignored, and why.
	Detail string
}
