package effect

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/precept-dev/precept/rules/rulefmt"
)

// PassReport says what an effects pass did.
type PassReport struct {
	Effects []Effect
	// Recorded counts the rules whose files got new figures.
	Recorded int
	// Proposed are the lifecycle proposals made, Shadowed the idle rules
	// moved to SHADOW.
	Proposed []string
	Shadowed []string
}

// Pass is an effects pass: it computes every rule's effect, reports it to Metrics and, with
// Options.Lifecycle, records the figures in the rule files and acts on
// them (docs/effects.md, "Lifecycle from evidence"). One rule's failure
// does not stop the others.
func (t *Tracker) Pass(ctx context.Context) (PassReport, error) {
	var rep PassReport
	t.placements.reset()
	effects, err := t.Effects(ctx, "")
	var errs []error
	if err != nil {
		if len(effects) == 0 {
			return rep, err
		}
		errs = append(errs, err)
	}
	rep.Effects = effects
	if t.opts.Metrics != nil {
		t.opts.Metrics.RuleEffects(effects)
	}
	if !t.opts.Lifecycle {
		return rep, errors.Join(errs...)
	}
	updates := make([]rulefmt.EffectUpdate, 0, len(effects))
	for _, e := range effects {
		updates = append(updates, t.update(e))
	}
	if rep.Recorded, err = t.rules.RecordEffects(ctx, updates); err != nil {
		errs = append(errs, fmt.Errorf("record effects: %w", err))
	}
	for _, e := range effects {
		if err := t.act(ctx, e, &rep); err != nil {
			errs = append(errs, fmt.Errorf("rule %s: %w", e.RuleID, err))
		}
	}
	return rep, errors.Join(errs...)
}

func (t *Tracker) update(e Effect) rulefmt.EffectUpdate {
	return rulefmt.EffectUpdate{
		RuleID: e.RuleID, Importance: e.promote, Lower: e.lower, Confidence: e.Confidence,
		Validations: int(e.Validations), Recurrences: int(e.Recurrences),
		Effect: rulefmt.EffectSummary{
			Category: e.Category, BaseConfidence: e.baseConfidence, FirstActivatedAt: e.firstActivatedAt, Attribution: string(e.Attribution),
			Exposures: e.Exposures, Recurrences: e.Recurrences, RateAfter: round4(e.RateAfter),
			RateAfterInterval: []float64{round4(e.RateAfterInterval.Low), round4(e.RateAfterInterval.High)},
			BeforeDecisions:   e.BeforeDecisions, RateBefore: round4(e.RateBefore),
			ChangeInterval: []float64{round4(e.ChangeInterval.Low), round4(e.ChangeInterval.High)},
			Validations:    e.Validations, Verdict: e.Verdict, Method: Method, ComputedAt: e.ComputedAt,
		},
	}
}

func round4(x float64) float64 { return math.Round(x*10000) / 10000 }

// act makes the lifecycle proposal the evidence calls for, or moves an
// idle rule whose re-approval went unanswered to SHADOW.
func (t *Tracker) act(ctx context.Context, e Effect, rep *PassReport) error {
	now := t.opts.Now().UTC()
	open, hasOpen, err := t.rules.OpenProposal(ctx, e.RuleID)
	if err != nil {
		return err
	}
	if hasOpen {
		if open.Kind == rulefmt.KindReapprove && e.lastActivity().After(open.CreatedAt) {
			// Used again since it was asked about: the question is moot.
			return t.rules.Withdraw(ctx, open.ID, fmt.Sprintf("moot: the rule was exercised again on %s", e.lastActivity().Format(time.DateOnly)))
		}
		if open.Kind == rulefmt.KindReapprove && !open.CreatedAt.Add(t.opts.GracePeriod).After(now) {
			why := fmt.Sprintf("idle since %s: no exposures or validations for %s; re-approval %s unanswered for %s",
				e.lastActivity().Format(time.DateOnly), t.opts.IdlePeriod, open.ID, t.opts.GracePeriod)
			if err := t.rules.ShadowIdle(ctx, e.RuleID, open.ID, why); err != nil {
				return err
			}
			rep.Shadowed = append(rep.Shadowed, e.RuleID)
		}
		return nil
	}
	var kind rulefmt.Kind
	switch {
	case e.Status == rulefmt.Active && e.Verdict == NotImproving:
		kind = rulefmt.KindSunset
	case e.Status == rulefmt.Active && !e.lastActivity().Add(t.opts.IdlePeriod).After(now):
		kind = rulefmt.KindReapprove
	case e.Status == rulefmt.Shadow && e.reasonShadowed && e.Shadow != nil && e.Shadow.ShadowDecisions >= int64(t.opts.MinExposures):
		kind = rulefmt.KindActivate
	default:
		return nil
	}
	fresh, err := t.freshEvidence(ctx, e, kind)
	if err != nil || !fresh {
		return err
	}
	p, created, err := t.rules.Propose(ctx, rulefmt.LifecycleRequest{Kind: kind, RuleID: e.RuleID, Evidence: t.evidence(e, kind)})
	if err != nil {
		return err
	}
	if created {
		rep.Proposed = append(rep.Proposed, p.ID)
	}
	return nil
}

// freshEvidence keeps people from being asked the same question on the
// same evidence: after a rejected proposal of a kind, the next one needs
// MinExposures new exposures (shadow decisions for an activation) since
// the rejection; a re-approval, a new idle period since.
func (t *Tracker) freshEvidence(ctx context.Context, e Effect, kind rulefmt.Kind) (bool, error) {
	past, err := t.rules.DecidedProposals(ctx, e.RuleID, kind)
	if err != nil || len(past) == 0 {
		return err == nil, err
	}
	last := past[len(past)-1]
	if last.Status != rulefmt.Rejected {
		return true, nil
	}
	since := last.UpdatedAt
	if last.Rejection != nil {
		since = last.Rejection.At
	}
	if kind == rulefmt.KindReapprove {
		return !since.Add(t.opts.IdlePeriod).After(t.opts.Now()), nil
	}
	r, _, err := t.rules.Rule(ctx, e.RuleID)
	if err != nil {
		return false, err
	}
	r.ActivatedAt = since
	later, err := t.newComputation().effect(ctx, r, time.Time{})
	if err != nil {
		return false, err
	}
	n := later.Exposures
	if kind == rulefmt.KindActivate && later.Shadow != nil {
		n = later.Shadow.ShadowDecisions
	}
	return n >= int64(t.opts.MinExposures), nil
}

func (t *Tracker) evidence(e Effect, kind rulefmt.Kind) string {
	switch kind {
	case rulefmt.KindSunset:
		return "Sunset proposed: this rule does not reduce the failure it targets. " + e.Summary
	case rulefmt.KindReapprove:
		return fmt.Sprintf("Re-approval requested: nothing exercised this rule since %s (no exposures or validations for %s). Approve to keep it; unanswered for %s it moves to SHADOW. %s",
			e.lastActivity().Format(time.DateOnly), t.opts.IdlePeriod, t.opts.GracePeriod, e.Summary)
	default:
		return "Activation proposed: this SHADOW rule's shadow prompt was run enough to compare. " + e.Summary
	}
}

// lastActivity is the latest of activation, re-approval, exposure and
// validation.
func (e Effect) lastActivity() time.Time {
	last := e.ActivatedAt
	for _, t := range []time.Time{e.reapprovedAt, e.LastExposure, e.LastValidation} {
		if t.After(last) {
			last = t
		}
	}
	return last
}
