package slackapp

import "github.com/precept-dev/precept/rules/rulefmt"

// ImpactSummaries give a proposal's impact preview in one line, without
// computing anything, and say when a preview changed (docs/lifecycle.md,
// "Impact preview"); impact.Service implements it.
type ImpactSummaries interface {
	Summary(p rulefmt.Proposal) string
	// OnUpdate registers fn to be called with a proposal's id whenever
	// its preview changes.
	OnUpdate(fn func(proposalID string))
}

// impactLine is p's preview in one line, "" without previews.
func impactLine(i ImpactSummaries, p rulefmt.Proposal) string {
	if i == nil {
		return ""
	}
	return i.Summary(p)
}
