package app

import (
	"path/filepath"

	"github.com/precept-dev/precept/impact"
	"github.com/precept-dev/precept/internal/api"
	"github.com/precept-dev/precept/internal/slackapp"
)

// openImpact previews what each pending proposal would do
// (docs/lifecycle.md, "Impact preview") and shows it through svc. It
// reads the evaluator's evaluations, so it runs only where the evaluator
// does; the configured LLM, when there is one, replays each rule.
// Previews are kept under the node's directory.
func (a *App) openImpact(svc *api.RuleService) error {
	if a.Evaluator == nil || !a.Config.Evaluator.Enabled || a.Lessons == nil {
		return nil
	}
	opts := impact.Options{
		Thresholds: a.ruleThresholds(),
		Dir:        filepath.Join(a.Config.DataDir, "nodes", a.Config.NodeName(), "impact"),
		Denylist:   a.Config.Rules.Quality.Denylist,
		Logger:     a.Log.With("component", "impact"),
	}
	if a.LLM != nil {
		opts.Model = a.LLM
	}
	s, err := impact.New(impact.Sources{Proposals: a.Rules, Feedback: a.Feedback, Evaluations: evaluatorReads{a.Evaluator.Placements(), a.Evaluator},
		Lessons: a.Lessons, Documents: a.Prompts, Embedder: a.Embedder}, opts)
	if err != nil {
		return err
	}
	a.Impact = s
	a.Rules.OnChange(s.ProposalChanged)
	svc.Impact = s
	return nil
}

// impactSummaries is the impact service for the Slack app: a nil
// interface, not a nil pointer, when there is none.
func impactSummaries(s *impact.Service) slackapp.ImpactSummaries {
	if s == nil {
		return nil
	}
	return s
}
