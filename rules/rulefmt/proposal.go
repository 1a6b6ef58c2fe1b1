package rulefmt

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// ProposalStatus is where a proposal is in meta-approval.
type ProposalStatus string

// The proposal statuses. Pending, Approved and Rejected proposals were
// committed as rule PRs; Blocked, Deferred and Merged drafts were not and
// are kept on main under rules/drafts/ as an audit trail.
const (
	Pending  ProposalStatus = "PENDING"
	Approved ProposalStatus = "APPROVED"
	Rejected ProposalStatus = "REJECTED"
	// Blocked: a guard stopped the draft; Guards say which and why.
	Blocked ProposalStatus = "BLOCKED"
	// Deferred: the rate cap held the draft back; it is proposed when the
	// window allows.
	Deferred ProposalStatus = "DEFERRED"
	// Merged: the draft duplicated an existing rule or proposal, which
	// received its evidence instead (MergedInto).
	Merged ProposalStatus = "MERGED"
)

// Valid reports whether s is a known status.
func (s ProposalStatus) Valid() bool {
	switch s {
	case Pending, Approved, Rejected, Blocked, Deferred, Merged:
		return true
	}
	return false
}

// Kind says what a proposal would change.
type Kind string

// The proposal kinds.
const (
	KindNewRule Kind = "NEW_RULE"
	// KindConsolidation replaces active rules of one agent (Supersedes)
	// with one rule, to stay within the per-agent rule cap.
	KindConsolidation Kind = "CONSOLIDATION"
	// KindSunset retires an ineffective rule.
	KindSunset Kind = "SUNSET"
)

// Via values say where a decision was made.
const (
	ViaAPI   = "api"
	ViaSlack = "slack"
	ViaGit   = "git"
	// ViaConsole is the web console, which calls the API's handlers in
	// process (docs/console.md).
	ViaConsole = "console"
	// ViaMCP is the MCP server at /mcp, which calls the API's handlers in
	// process (docs/mcp.md).
	ViaMCP = "mcp"
)

// SystemProposer is ProposedBy for proposals precept drafted from
// feedback clusters.
const SystemProposer = "precept"

// Rejection is the decision that ended a proposal.
type Rejection struct {
	Rejector string    `yaml:"rejector"`
	Reason   string    `yaml:"reason"`
	At       time.Time `yaml:"at"`
	Via      string    `yaml:"via"`
	// Commit recorded the rejection; filled from history, not stored.
	Commit string `yaml:"-"`
}

// The kinds of ConflictReport.
const (
	ConflictDuplicate = "duplicate"
	ConflictOverlap   = "overlap"
	ConflictOpposing  = "opposing"
)

// ConflictReport is an existing rule or proposal that duplicates,
// overlaps or opposes a proposal.
type ConflictReport struct {
	// OtherID is a rule id or a proposal id.
	OtherID string `yaml:"other_id"`
	// Kind is duplicate, overlap or opposing.
	Kind           string  `yaml:"kind"`
	Similarity     float64 `yaml:"similarity"`
	OtherContent   string  `yaml:"other_content"`
	Explanation    string  `yaml:"explanation"`
	Agent          string  `yaml:"agent"`
	InsertionPoint string  `yaml:"insertion_point"`
}

// The guards a draft passes before it is committed (docs/lifecycle.md, "The guards in order").
const (
	GuardQuality         = "quality"
	GuardReconsolidation = "reconsolidation"
	GuardConflict        = "conflict"
	GuardRateCap         = "rate_cap"
	GuardRuleCap         = "rule_cap"
	GuardSafetyFloor     = "safety_floor"
	GuardRejectedBefore  = "rejected_before"
	// GuardEvidence checks that every clause of the rule text is asked
	// for by the evidence (docs/lessons.md, "Rules no wider than the
	// evidence"). It never holds a proposal: it fails to show a curator
	// the clauses that go beyond the evidence.
	GuardEvidence = "evidence"
)

// Where a clause of a rule text came from (Clause.Source).
const (
	// SourceReviewers: the reviewers' own words.
	SourceReviewers = "reviewers"
	// SourceGuidance: the canonical rule of the lesson's category.
	SourceGuidance = "guidance"
	// SourceModel: written by the drafting LLM.
	SourceModel = "model"
	// SourceEdit: a person's edit of the drafted text.
	SourceEdit = "edit"
)

// Clause is one clause of a proposal's rule text, where it came from
// and the evidence that asks for it (docs/formats.md, "Proposal
// files").
type Clause struct {
	Text string `yaml:"text"`
	// Source is reviewers, guidance, model or edit.
	Source string `yaml:"source"`
	// Category is the taxonomy category whose guidance it is.
	Category string `yaml:"category,omitempty"`
	// Decisions are the decisions whose comments ask for it; none when
	// it goes beyond the evidence.
	Decisions []string `yaml:"decisions,omitempty"`
	// Words are the (stemmed) terms those comments share with it.
	Words []string `yaml:"words,omitempty"`
}

// Beyond reports whether no decision of the evidence asks for the
// clause.
func (c Clause) Beyond() bool { return len(c.Decisions) == 0 }

// FirmSource reports whether a clause from source needs firm support:
// two distinctive terms shared with one comment of the evidence, not one
// rare term (docs/lessons.md, "Rules no wider than the evidence"). An
// edit or a model can keep one of the reviewers' words while asking for
// something else.
func FirmSource(source string) bool { return source == SourceEdit || source == SourceModel }

// KnownClause is the clause of known whose text is text, ignoring case,
// surrounding space and a final full stop.
func KnownClause(known []Clause, text string) (Clause, bool) {
	norm := func(s string) string { return strings.ToLower(strings.TrimRight(strings.TrimSpace(s), ". ")) }
	for _, k := range known {
		if norm(k.Text) == norm(text) {
			return k, true
		}
	}
	return Clause{}, false
}

// GuardResult is the outcome of one guard applied to a proposal.
type GuardResult struct {
	Guard  string `yaml:"guard"`
	Passed bool   `yaml:"passed"`
	Reason string `yaml:"reason,omitempty"`
}

// Proposal is a rule waiting for, or past, meta-approval, with its
// approvals, rejection, guards and provenance (docs/formats.md). It is
// stored as YAML front matter with the rule text as the Markdown body:
// on its branch as rules/proposals/<id>.md, once rejected as
// rules/rejected/<id>.md, and as rules/drafts/<id>.md when it never
// became a rule PR.
type Proposal struct {
	ID     string         `yaml:"proposal_id"`
	Kind   Kind           `yaml:"kind"`
	Status ProposalStatus `yaml:"status"`
	// Revision increases with every change to the proposal; Slack buttons
	// carry it. Recording where it was posted does not change it.
	Revision int `yaml:"revision"`
	// ContentRevision is the revision of the last change other than an
	// approval. A decision made at an older revision is stale; approvals
	// recorded meanwhile by others do not make it stale.
	ContentRevision int              `yaml:"content_revision"`
	FeedbackIDs     []string         `yaml:"created_from_feedback_ids"`
	Confidence      float64          `yaml:"classification_confidence"`
	Agents          []string         `yaml:"affected_agents"`
	Type            Type             `yaml:"rule_type"`
	InsertionPoint  string           `yaml:"insertion_point"`
	EvidenceSummary string           `yaml:"evidence_summary"`
	CreatedAt       time.Time        `yaml:"created_at"`
	UpdatedAt       time.Time        `yaml:"updated_at"`
	ProposedBy      string           `yaml:"proposed_by"`
	ClusterID       string           `yaml:"cluster_id,omitempty"`
	Generation      int              `yaml:"generation,omitempty"`
	Class           string           `yaml:"class,omitempty"`
	Priority        string           `yaml:"priority,omitempty"`
	Support         int              `yaml:"support"`
	Reviewers       []string         `yaml:"reviewers,omitempty"`
	Epics           []string         `yaml:"epics,omitempty"`
	Producers       []string         `yaml:"producers,omitempty"`
	Tags            []string         `yaml:"tags,omitempty"`
	Protected       bool             `yaml:"protected,omitempty"`
	DraftedBy       string           `yaml:"drafted_by,omitempty"`
	Required        int              `yaml:"required_approvals"`
	Approvals       []Approval       `yaml:"approvals,omitempty"`
	Rejection       *Rejection       `yaml:"rejection,omitempty"`
	Supersedes      []string         `yaml:"supersedes,omitempty"`
	Conflicts       []ConflictReport `yaml:"conflicts,omitempty"`
	Guards          []GuardResult    `yaml:"guards,omitempty"`
	// Clauses say where each clause of the rule text came from and which
	// decisions ask for it; empty for a proposal drafted before they
	// were recorded, or proposed by a person.
	Clauses []Clause `yaml:"clauses,omitempty"`
	// EvidenceClusters are other clusters whose duplicate drafts added
	// their evidence here.
	EvidenceClusters []string `yaml:"evidence_clusters,omitempty"`
	// MergedInto is the rule or proposal a Merged draft's evidence went to.
	MergedInto string `yaml:"merged_into,omitempty"`
	// RuleID is the rule an approval creates.
	RuleID string `yaml:"rule_id"`

	// Content is the rule text: the Markdown body of the file.
	Content string `yaml:"-"`

	// The fields below are not stored in the file; the Manager fills them
	// from the repository.

	// Branch is the rule PR's branch while one exists.
	Branch string `yaml:"-"`
	// Commits are the commits that recorded this proposal's transitions,
	// oldest first.
	Commits []string `yaml:"-"`
	// MergedCommit is the commit on main that turned the proposal into its
	// rule, once it did.
	MergedCommit string `yaml:"-"`
	// ReviewURL opens a PR / compare view on the remote's web UI.
	ReviewURL string `yaml:"-"`
}

// ParseProposal reads a proposal file.
func ParseProposal(data []byte) (Proposal, error) {
	var p Proposal
	body, err := parseFrontMatter(data, &p)
	if err != nil {
		return Proposal{}, fmt.Errorf("parse proposal: %w", err)
	}
	p.Content = body
	if p.ID == "" {
		return Proposal{}, errors.New("parse proposal: proposal_id is missing")
	}
	if !p.Status.Valid() {
		return Proposal{}, fmt.Errorf("parse proposal %s: unknown status %q", p.ID, p.Status)
	}
	if p.Kind == "" {
		p.Kind = KindNewRule
	}
	if p.InsertionPoint == "" {
		p.InsertionPoint = DefaultInsertionPoint
	}
	if p.RuleID == "" {
		p.RuleID = RuleIDFor(p.ID)
	}
	return p, nil
}

// Marshal renders a proposal file.
func (p Proposal) Marshal() ([]byte, error) {
	return renderFrontMatter(p, p.Content)
}

// ApprovedBy reports whether approver has approved the proposal.
func (p *Proposal) ApprovedBy(approver string) bool {
	return slices.ContainsFunc(p.Approvals, func(a Approval) bool { return a.Approver == approver })
}

// Clone returns a deep copy, so cached proposals are never shared with
// callers.
func (p Proposal) Clone() Proposal {
	p.FeedbackIDs = slices.Clone(p.FeedbackIDs)
	p.Agents = slices.Clone(p.Agents)
	p.Reviewers = slices.Clone(p.Reviewers)
	p.Epics = slices.Clone(p.Epics)
	p.Producers = slices.Clone(p.Producers)
	p.Tags = slices.Clone(p.Tags)
	p.Approvals = slices.Clone(p.Approvals)
	p.Supersedes = slices.Clone(p.Supersedes)
	p.Conflicts = slices.Clone(p.Conflicts)
	p.Guards = slices.Clone(p.Guards)
	p.Clauses = slices.Clone(p.Clauses)
	for i := range p.Clauses {
		p.Clauses[i].Decisions = slices.Clone(p.Clauses[i].Decisions)
		p.Clauses[i].Words = slices.Clone(p.Clauses[i].Words)
	}
	p.EvidenceClusters = slices.Clone(p.EvidenceClusters)
	p.Commits = slices.Clone(p.Commits)
	if p.Rejection != nil {
		r := *p.Rejection
		p.Rejection = &r
	}
	return p
}

// FailedGuard returns the first guard that did not pass and held the
// proposal; the evidence guard never holds one.
func (p *Proposal) FailedGuard() (GuardResult, bool) {
	for _, g := range p.Guards {
		if !g.Passed && g.Guard != GuardEvidence {
			return g, true
		}
	}
	return GuardResult{}, false
}
