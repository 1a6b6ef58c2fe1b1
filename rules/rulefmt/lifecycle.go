package rulefmt

import (
	"time"
)

// DecidesOnRule reports whether proposals of this kind decide on an existing
// rule (its RuleID) rather than create one: SUNSET, REAPPROVE, ACTIVATE
// (docs/effects.md, "Lifecycle from evidence").
func (k Kind) DecidesOnRule() bool {
	return k == KindSunset || k == KindReapprove || k == KindActivate
}

// The lifecycle proposal kinds besides KindSunset.
const (
	// KindReapprove asks people to confirm a rule nothing exercised for
	// a long time; unanswered, the rule goes to SHADOW.
	KindReapprove Kind = "REAPPROVE"
	// KindActivate brings a SHADOW rule back into the prompt.
	KindActivate Kind = "ACTIVATE"
)

// TrailerSunsets names the rule a sunset approval retired; TrailerLifecycle
// the kind of a lifecycle proposal, on the commit that proposes it.
const (
	TrailerSunsets   = "Sunsets"
	TrailerLifecycle = "Lifecycle"
)

// EffectSummary is what the evidence said about a rule when it was last
// recorded in the rule file's front matter (docs/effects.md). It is
// written periodically, not per decision.
type EffectSummary struct {
	// Category is the lesson category whose recurrences count; kept so
	// the pattern is known after its source cluster merged away.
	Category string `yaml:"category,omitempty"`
	// RaisedTo is the importance precept's own evidence raised the rule
	// to, RaisedFrom what it was before; both are empty when precept has
	// not raised it (or a curator set it since). Only an importance
	// precept raised comes back down when its evidence no longer holds.
	RaisedTo   Importance `yaml:"raised_to,omitempty"`
	RaisedFrom Importance `yaml:"raised_from,omitempty"`
	// BaseConfidence is the confidence the rule was approved with, which
	// recurrences lower.
	BaseConfidence float64 `yaml:"base_confidence"`
	// FirstActivatedAt is the rule's first activation: the baseline is
	// taken before it, so a re-activated rule is never compared with its
	// own earlier exposures.
	FirstActivatedAt  time.Time `yaml:"first_activated_at"`
	Attribution       string    `yaml:"attribution"`
	Exposures         int64     `yaml:"exposures"`
	Recurrences       int64     `yaml:"recurrences"`
	RateAfter         float64   `yaml:"rate_after"`
	RateAfterInterval []float64 `yaml:"rate_after_interval,flow"`
	BeforeDecisions   int64     `yaml:"before_decisions"`
	RateBefore        float64   `yaml:"rate_before"`
	ChangeInterval    []float64 `yaml:"change_interval,flow"`
	Validations       int64     `yaml:"validations"`
	Verdict           string    `yaml:"verdict"`
	Method            string    `yaml:"method"`
	ComputedAt        time.Time `yaml:"computed_at"`
}

// RuleStatusFor is the rule status each lifecycle kind applies to.
func RuleStatusFor(k Kind) Status {
	if k == KindActivate {
		return Shadow
	}
	return Active
}

// ExampleAgents returns the agents whose tuning examples a decision on
// p writes: none for a lifecycle proposal.
func ExampleAgents(p Proposal) []string {
	if p.Kind.DecidesOnRule() {
		return nil
	}
	return p.Agents
}

// SameEffect reports whether next records nothing new: the same
// importance, confidence and figures (the computation time aside).
func (r Rule) SameEffect(next Rule) bool {
	if r.Importance != next.Importance || r.Confidence != next.Confidence ||
		r.PositiveValidations != next.PositiveValidations || r.NegativeValidations != next.NegativeValidations {
		return false
	}
	if r.Effect == nil || next.Effect == nil {
		return r.Effect == next.Effect
	}
	a, b := *r.Effect, *next.Effect
	a.ComputedAt, b.ComputedAt = time.Time{}, time.Time{}
	return a.Attribution == b.Attribution && a.Exposures == b.Exposures && a.Recurrences == b.Recurrences &&
		a.BeforeDecisions == b.BeforeDecisions && a.Validations == b.Validations && a.Verdict == b.Verdict &&
		a.RateBefore == b.RateBefore && a.Method == b.Method && a.Category == b.Category &&
		a.BaseConfidence == b.BaseConfidence && a.FirstActivatedAt.Equal(b.FirstActivatedAt) &&
		a.RaisedTo == b.RaisedTo && a.RaisedFrom == b.RaisedFrom
}

// LifecycleRequest asks people to decide on an existing rule: retire it
// (KindSunset), confirm it (KindReapprove) or bring it back from SHADOW
// (KindActivate), with the evidence that prompted the question.
type LifecycleRequest struct {
	Kind   Kind
	RuleID string
	// Evidence is the effect report in words; it becomes the proposal's
	// evidence summary.
	Evidence string
}

// EffectUpdate is what the learning loop concluded about one rule:
// its importance and confidence, and the figures behind them.
type EffectUpdate struct {
	RuleID string
	// Importance is the level the validations crossed into since the
	// last recording ("" when none); a rule is raised to it.
	Importance Importance
	// Lower, when set, is the importance the evidence still supports for
	// a rule precept raised: the rule comes back down to it, unless a
	// curator set its importance since.
	Lower      Importance
	Confidence float64
	// Validations and Recurrences go to positive_validations and
	// negative_validations.
	Validations int
	Recurrences int
	Effect      EffectSummary
}
