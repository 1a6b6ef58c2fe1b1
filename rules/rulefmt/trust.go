package rulefmt

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
)

// TextSHA256 identifies what an approver sees and a rule becomes: the
// rule text, its agents, type and insertion point. An approval records
// it, and counts only while the proposal still says the same
// (docs/decisions/0016-trust-model.md).
func (p Proposal) TextSHA256() string {
	h := sha256.New()
	for _, part := range []string{strings.TrimSpace(p.Content), strings.Join(p.Agents, ","), string(p.Type), p.InsertionPoint} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// ValidApprovals are the approvals of the proposal's current text, one
// per approver. An approval recorded before approvals carried the text
// they approved (no TextSHA256) counts as it did then.
func (p Proposal) ValidApprovals() []Approval {
	sum := p.TextSHA256()
	var out []Approval
	for _, a := range p.Approvals {
		if (a.TextSHA256 == "" || a.TextSHA256 == sum) && !slices.ContainsFunc(out, func(b Approval) bool { return b.Approver == a.Approver }) {
			out = append(out, a)
		}
	}
	return out
}

// SameText reports whether two versions of a proposal say the same: the
// fields TextSHA256 covers.
func (p Proposal) SameText(q Proposal) bool { return p.TextSHA256() == q.TextSHA256() }

// The kinds of remote change precept ignored (Change.Detail of
// RemoteChangeIgnored).
const (
	// IgnoredUnknownBranch: a proposal branch precept never made.
	IgnoredUnknownBranch = "unknown_branch"
	// IgnoredClaim: approvals, a status or other recorded fields that
	// precept did not record.
	IgnoredClaim = "claim"
	// IgnoredUnreadable: a proposal file that does not parse.
	IgnoredUnreadable = "unreadable"
	// IgnoredEditRefused: an edit of the text that fails a guard.
	IgnoredEditRefused = "edit_refused"
	// IgnoredMerge: an APPROVED proposal whose approvals no longer
	// suffice for its text, held back from main.
	IgnoredMerge = "merge_held"
)
