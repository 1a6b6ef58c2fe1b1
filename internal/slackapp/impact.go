package slackapp

import "github.com/precept-dev/precept/rules"

// ImpactSummaries give a proposal's impact preview in one line, without
// computing anything (docs/lifecycle.md, "Impact preview");
// impact.Service implements it.
type ImpactSummaries interface {
	Summary(p rules.Proposal) string
}

// SetImpact shows each proposal's impact preview in its message: before
// Run.
func (s *Service) SetImpact(i ImpactSummaries) { s.impact = i }

// ImpactChanged is the impact service's update hook: the proposal's
// message is brought up to date soon, as a preview computed in the
// background replaces "pending".
func (s *Service) ImpactChanged(proposalID string) { s.post.markDirty(proposalID) }

func (s *Service) impactLine(p rules.Proposal) string {
	if s.impact == nil {
		return ""
	}
	return s.impact.Summary(p)
}
