package rules

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"text/template"
	"time"
	"unicode/utf8"

	"github.com/precept-dev/precept/lib/text"
	"github.com/precept-dev/precept/rules/gitstore"
	"github.com/precept-dev/precept/rules/rulefmt"

	"github.com/precept-dev/precept"
)

// policy is the middle of the rules packages' layers
// (docs/architecture.md): the guards, drafting, consolidation and the
// rules of meta-approval (docs/lifecycle.md). Each of its methods is a
// function of a state, a proposal and the options it holds; none reads
// the repository or commits, so the policy is tested with states built
// in memory.
type policy struct {
	opts Options
	// vecs compares rule texts.
	vecs *vectorCache
	// tmpl is the LLM drafting prompt.
	tmpl *template.Template
	log  *slog.Logger
}

func newPolicy(opts Options) (policy, error) {
	tmpl, err := parseDraftTemplate()
	if err != nil {
		return policy{}, err
	}
	return policy{opts: opts, vecs: newVectorCache(opts.Embedder), tmpl: tmpl, log: opts.Logger}, nil
}

// maxNoteRunes bounds approval notes and rejection reasons.
const maxNoteRunes = 4000

func checkProposalID(id string) error {
	if !rulefmt.ValidProposalID(id) {
		return precept.Errorf(precept.Invalid, "proposal_id: %q is not a proposal id (p-…)", text.ClipRunes(id, 64))
	}
	return nil
}

// mayDecide reports whether who may approve or reject through the API or
// Slack.
func (pol policy) mayDecide(who string) error {
	if who == "" {
		return precept.Errorf(precept.PermissionDenied, "an approver identity is required")
	}
	if len(pol.opts.Approvers) > 0 && !slices.Contains(pol.opts.Approvers, who) {
		return precept.Errorf(precept.PermissionDenied, "%s is not on the approver list (rules.approvers)", who)
	}
	return nil
}

// checkDecision checks an approval or rejection before anything is read:
// the id, the channel, the person and the length of the note.
func (pol policy) checkDecision(id, who, text, via string) error {
	if err := checkProposalID(id); err != nil {
		return err
	}
	if via != rulefmt.ViaAPI && via != rulefmt.ViaSlack && via != rulefmt.ViaConsole && via != rulefmt.ViaMCP {
		return precept.Errorf(precept.Invalid, "via: %q is not api, console, mcp or slack", via)
	}
	if err := pol.mayDecide(who); err != nil {
		return err
	}
	if utf8.RuneCountInString(text) > maxNoteRunes {
		return precept.Errorf(precept.Invalid, "note: longer than %d characters", maxNoteRunes)
	}
	return nil
}

// decidable returns why a proposal takes no decision, or nil.
func decidable(st *gitstore.State, id string) error {
	if p := st.Rejected[id]; p != nil {
		who, why := "", ""
		if p.Rejection != nil {
			who, why = p.Rejection.Rejector, p.Rejection.Reason
		}
		return precept.Errorf(precept.FailedPrecondition, "proposal %s was rejected by %s: %s", id, who, why)
	}
	if ruleID, merged := st.ByProposal[id]; merged {
		return precept.Errorf(precept.FailedPrecondition, "proposal %s was already approved as rule %s", id, ruleID)
	}
	if st.OnMain[id] != nil {
		return precept.Errorf(precept.FailedPrecondition, "proposal %s was merged in git and is becoming a rule", id)
	}
	if st.Merged[id] {
		return precept.Errorf(precept.FailedPrecondition, "proposal %s was already merged into main", id)
	}
	if _, ok := st.Branches[id]; ok {
		return nil
	}
	if p := st.Drafts[id]; p != nil {
		return precept.Errorf(precept.FailedPrecondition, "%s is a %s draft, not a rule PR: %s", id, strings.ToLower(string(p.Status)), draftReason(p))
	}
	return precept.Errorf(precept.NotFound, "proposal %s not found", id)
}

// checkRevision refuses a decision made on a stale view of the proposal.
func checkRevision(p rulefmt.Proposal, revision int) error {
	switch {
	case revision == 0:
		return nil
	case revision < 0 || revision > p.Revision:
		return precept.Errorf(precept.FailedPrecondition, "revision %d of proposal %s is unknown (the latest is %d); reload it", revision, p.ID, p.Revision)
	case revision < p.ContentRevision:
		return precept.Errorf(precept.FailedPrecondition, "stale revision %d: proposal %s changed at revision %d (now %d); reload it and decide again", revision, p.ID, p.ContentRevision, p.Revision)
	}
	return nil
}

// approve applies one approval to a proposal as read from its branch.
// recorded is false when the approver had approved already (a no-op);
// completed says the approval gave the proposal its required approvals.
func approve(p rulefmt.Proposal, req ApproveRequest, now time.Time) (next rulefmt.Proposal, recorded, completed bool, err error) {
	approvedBy := func(a rulefmt.Approval) bool { return a.Approver == req.By }
	if slices.ContainsFunc(p.ValidApprovals(), approvedBy) {
		return p, false, false, nil
	}
	if p.Status != rulefmt.Pending {
		return p, false, false, precept.Errorf(precept.FailedPrecondition, "proposal %s is %s; it takes no more approvals", p.ID, p.Status)
	}
	if p.ProposedBy == req.By && p.ProposedBy != rulefmt.SystemProposer {
		return p, false, false, precept.Errorf(precept.PermissionDenied, "%s proposed %s and cannot approve it", req.By, p.ID)
	}
	if err := checkRevision(p, req.Revision); err != nil {
		return p, false, false, err
	}
	// An approval of text the proposal no longer says gives way.
	p.Approvals = slices.DeleteFunc(slices.Clone(p.Approvals), approvedBy)
	p.Approvals = append(p.Approvals, rulefmt.Approval{Approver: req.By, Note: req.Note, At: now, Via: req.Via, TextSHA256: p.TextSHA256()})
	p.Revision++
	p.UpdatedAt = now
	if len(p.ValidApprovals()) >= p.Required {
		p.Status = rulefmt.Approved
		completed = true
	}
	return p, true, completed, nil
}

// reject applies a rejection to a pending proposal.
func reject(p rulefmt.Proposal, req RejectRequest, now time.Time) (rulefmt.Proposal, error) {
	if p.Status != rulefmt.Pending {
		return p, precept.Errorf(precept.FailedPrecondition, "proposal %s is %s and waits to be merged; roll its rule back once it is", p.ID, p.Status)
	}
	if err := checkRevision(p, req.Revision); err != nil {
		return p, err
	}
	p.Status = rulefmt.Rejected
	p.Rejection = &rulefmt.Rejection{Rejector: req.By, Reason: req.Reason, At: now, Via: req.Via}
	p.Revision++
	p.ContentRevision = p.Revision
	p.UpdatedAt = now
	return p, nil
}

// ruleFor is the rule an approved proposal becomes at now: ACTIVE, or
// SHADOW for the shadow period.
func (pol policy) ruleFor(p rulefmt.Proposal, now time.Time) rulefmt.Rule {
	confidence := p.Confidence
	if confidence == 0 {
		confidence = 1
	}
	typ := p.Type
	if !typ.Valid() {
		typ = rulefmt.Guideline
	}
	r := rulefmt.Rule{
		ID: p.RuleID, ProposalID: p.ID, Agents: p.Agents, Type: typ, InsertionPoint: p.InsertionPoint,
		Status: rulefmt.Active, Importance: rulefmt.Normal, Confidence: confidence, Frequency: 1 + len(p.EvidenceClusters),
		FeedbackIDs: p.FeedbackIDs, ClusterID: p.ClusterID, Approvals: p.Approvals, Tags: p.Tags,
		Protected: p.Protected, ActivatedAt: now, EvidenceSummary: p.EvidenceSummary, ProposedBy: p.ProposedBy,
		EvidenceClusters: p.EvidenceClusters, Content: p.Content,
	}
	if pol.opts.ShadowPeriod > 0 {
		until := now.Add(pol.opts.ShadowPeriod)
		r.Status, r.ShadowUntil = rulefmt.Shadow, &until
	}
	return r
}

// protected returns the protected tags among tags.
func (pol policy) protected(tags []string) []string {
	var out []string
	for _, t := range tags {
		if slices.Contains(pol.opts.ProtectedTags, t) {
			out = append(out, t)
		}
	}
	return out
}

// draftReason says why a held draft was held.
func draftReason(p *rulefmt.Proposal) string {
	if p.Status == rulefmt.Merged {
		return "its evidence was added to " + p.MergedInto
	}
	if g, ok := p.FailedGuard(); ok {
		return g.Guard + ": " + g.Reason
	}
	return "held"
}

// openLifecycleProposal returns the open lifecycle proposal about a rule, if any.

func openLifecycleProposal(st *gitstore.State, ruleID string) (rulefmt.Proposal, bool) {
	for _, id := range st.IDs() {
		if !st.Open(id) {
			continue
		}
		if p := st.OnBranch[id]; p.Kind.DecidesOnRule() && p.RuleID == ruleID {
			out, _ := st.Proposal(id)
			return out, true
		}
	}
	return rulefmt.Proposal{}, false
}

// mergeable says why an APPROVED proposal may not be merged, "" when it
// may: its approvals must be enough for the text it says now, and a new
// rule's text must pass the quality gate (docs/decisions/0016-trust-model.md).
func (pol policy) mergeable(p rulefmt.Proposal) string {
	// The file's required count is a floor the configuration raises, never
	// lowers: a file that asks for none asks for the configured number.
	required := max(p.Required, pol.opts.RequiredApprovals)
	if n := len(p.ValidApprovals()); n < required {
		return fmt.Sprintf("marked APPROVED with %d approvals of its current text, fewer than the %d it needs", n, required)
	}
	if !p.Kind.DecidesOnRule() {
		if reason := pol.opts.Quality.Check(p.Content); reason != "" {
			return "its text fails the quality gate: " + reason
		}
	}
	return ""
}
