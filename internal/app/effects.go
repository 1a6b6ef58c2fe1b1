package app

import (
	"context"

	"github.com/precept-dev/precept/effect"
	"github.com/precept-dev/precept/evaluator"
	"github.com/precept-dev/precept/gen/precept/v1/preceptv1connect"
	"github.com/precept-dev/precept/internal/api"
	"github.com/precept-dev/precept/internal/metrics"
	"github.com/precept-dev/precept/prompts"
)

// openVersions records the prompt versions prompt assembly serves, on a
// branch of the rules repository, so decisions carrying prompt_version
// are tied to their rules (docs/effects.md). Called before openPrompts.
func (a *App) openVersions() {
	if !a.Config.Effects.Enabled {
		return
	}
	a.Versions = prompts.NewVersions(a.RulesRepo, nil, a.Log.With("component", "prompt-versions"))
	if up := rulesUpstream(a.RulesRepo, a.Config.Rules.Git); up != nil {
		a.Versions.WriteThrough(up)
	}
}

// openEffects starts the learning loop on the feedback store, the
// evaluator, the recorded prompt versions and the rule manager, and
// serves EffectService (which says the loop is off when it is).
func (a *App) openEffects() error {
	svc := &api.EffectService{Log: a.Log, Retired: a.Rules.Upkeep().RetiredRules}
	if a.Config.Effects.Enabled {
		m, err := metrics.NewEffects(a.Registry)
		if err != nil {
			return err
		}
		opts := a.Config.Effects.Options()
		opts.Metrics, opts.Logger = m, a.Log.With("component", "effects")
		// Validations and recurrences move a rule only when they come from
		// as many people as a high cluster needs (docs/effects.md).
		th := a.Config.Evaluator.Thresholds
		opts.Diversity = effect.Diversity{Reviewers: th.HighMinReviewers, Epics: th.HighMinEpics, Producers: max(th.HighMinProducers, 1)}
		var evals effect.Evaluations
		if a.Evaluator != nil && a.Config.Evaluator.Enabled {
			// The evaluator is what the learning loop reads: each
			// decision's placement and each cluster.
			evals = evaluatorReads{a.Evaluator.Placements(), a.Evaluator}
		} else if opts.Lifecycle {
			// Without evaluations no recurrence can be seen: acting on
			// that would overwrite the figures of a replica that evaluates.
			opts.Lifecycle = false
			a.Log.Warn("evaluator.enabled is off: rule effects are reported without recurrences, and effects.lifecycle is off on this replica")
		}
		a.Effects = effect.New(a.Feedback, evals, a.Versions, a.Rules.Upkeep(), opts)
		svc.Effects = a.Effects
	}
	a.Handle(preceptv1connect.NewEffectServiceHandler(svc, a.ConnectOptions()...))
	return nil
}

// runEffects follows decisions and records prompt versions until ctx is
// done; with the loop off it returns at once.
func (a *App) runEffects(ctx context.Context) error {
	if a.Effects == nil {
		return nil
	}
	done := make(chan error, 1)
	go func() { done <- a.Versions.Run(ctx, a.Config.Effects.VersionFlush) }()
	err := a.Effects.Run(ctx)
	if verr := <-done; err == nil {
		err = verr
	}
	return err
}

// evaluatorReads is what the learning loop and the impact preview read
// of the evaluator: placements from its placements reader, clusters and
// evaluations from the service.
type evaluatorReads struct {
	evaluator.Placements
	*evaluator.Service
}
