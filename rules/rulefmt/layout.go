package rulefmt

import (
	"fmt"
	"regexp"
	"strings"
)

// The layout of the rules repository (docs/formats.md). On main:
//
//	rules/active/<agent>/<rule_id>.md     approved rules (front matter + text)
//	rules/rejected/<proposal_id>.md       rejected proposals, with the reason
//	rules/drafts/<proposal_id>.md         drafts a guard held, or merged into a rule
//	tuning/examples/<agent>/<good|bad>/   approve / reject notes
//
// and on branch proposal/<proposal_id>, rules/proposals/<proposal_id>.md.
const (
	ActiveDir    = "rules/active"
	ProposalsDir = "rules/proposals"
	RejectedDir  = "rules/rejected"
	DraftsDir    = "rules/drafts"
	TuningDir    = "tuning/examples"
	// BranchPrefix starts every proposal branch.
	BranchPrefix = "proposal/"
)

// ActiveRulePath returns where a rule lives for one agent.
func ActiveRulePath(agent, ruleID string) string {
	return ActiveDir + "/" + agent + "/" + ruleID + ".md"
}

// ProposalPath is where a proposal lives on its branch.
func ProposalPath(id string) string { return ProposalsDir + "/" + id + ".md" }

// RejectedPath is where a rejected proposal is archived on main.
func RejectedPath(id string) string { return RejectedDir + "/" + id + ".md" }

// DraftPath is where a draft that did not become a rule PR is recorded.
func DraftPath(id string) string { return DraftsDir + "/" + id + ".md" }

// ProposalBranch is a proposal's branch: its rule PR.
func ProposalBranch(id string) string { return BranchPrefix + id }

// TuningPath is where an approve (good) or reject (bad) note on a
// proposal is kept for an agent.
func TuningPath(agent, label, proposalID, curator string) string {
	return TuningDir + "/" + agent + "/" + label + "/" + proposalID + "-" + Slug(curator) + ".md"
}

// The trailers precept writes; history is read back from them.
const (
	TrailerProposalID   = "Proposal-Id"
	TrailerRuleID       = "Rule-Id"
	TrailerApprovedBy   = "Approved-by"
	TrailerRejectedBy   = "Rejected-by"
	TrailerRolledBackBy = "Rolled-back-by"
	TrailerReason       = "Reason"
	TrailerFeedbackIDs  = "Feedback-Ids"
	TrailerSupersedes   = "Supersedes"
	TrailerMergeCommit  = "Merge-Commit"
	TrailerReverts      = "Reverts"
	TrailerVia          = "Via"
	TrailerClusterID    = "Cluster-Id"
	// TrailerRemoteSync marks the commits that merge the remote's main
	// into the local one.
	TrailerRemoteSync = "Remote-Sync"
	// TrailerOverrules names the remote commit precept's record was put
	// back on top of: precept took nothing from it but a checked text
	// (docs/decisions/0016-trust-model.md).
	TrailerOverrules = "Overrules"
)

// maxFeedbackTrailerIDs bounds the Feedback-Ids trailer; the full list is
// in the files.
const maxFeedbackTrailerIDs = 50

func FeedbackTrailer(ids []string) string {
	if len(ids) <= maxFeedbackTrailerIDs {
		return strings.Join(ids, " ")
	}
	return strings.Join(ids[:maxFeedbackTrailerIDs], " ") + fmt.Sprintf(" (+%d more)", len(ids)-maxFeedbackTrailerIDs)
}

// RuleIDFor returns the rule id an approved proposal becomes.
func RuleIDFor(proposalID string) string {
	return "r-" + strings.TrimPrefix(proposalID, "p-")
}

var (
	proposalIDPattern = regexp.MustCompile(`^p-[0-9a-z]{6,40}$`)
	ruleIDPattern     = regexp.MustCompile(`^r-[0-9a-z][0-9a-z_-]{0,63}$`)
	namePattern       = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
)

// ValidProposalID reports whether id is a well-formed proposal id.
func ValidProposalID(id string) bool { return proposalIDPattern.MatchString(id) }

// ValidRuleID reports whether id is a well-formed rule id.
func ValidRuleID(id string) bool { return ruleIDPattern.MatchString(id) }

// ValidName reports whether s can name an agent or an insertion point:
// letters, digits, '.', '_' and '-', starting with a letter or digit. Such
// names are safe as path components.
func ValidName(s string) bool { return namePattern.MatchString(s) && !strings.Contains(s, "..") }

// Slug makes a name safe as part of a file name.
func Slug(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if r < 0x80 && (r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' || r == '_') {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
		if b.Len() >= 64 {
			break
		}
	}
	out := strings.Trim(b.String(), "-.")
	if out == "" {
		return "unknown"
	}
	return out
}

// ReadmeText starts a rules repository that has no main yet.
const ReadmeText = `# Rules repository

Managed by precept. On main:

- rules/active/<agent>/<rule_id>.md — approved rules
- rules/rejected/<proposal_id>.md — rejected proposals, with the reason
- rules/drafts/<proposal_id>.md — drafts a guard blocked or deferred, or merged into a rule
- prompts/<stage>.md and prompts/**/_rules.md — stage prompts and directory-scoped rules
- tuning/examples/<agent>/<good|bad>/ — approve / reject notes

Each proposal is a branch proposal/<proposal_id> holding rules/proposals/<proposal_id>.md.
`
