package effect

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/rules/rulefmt"
)

// Attribution says how a rule's exposures were found.
type Attribution string

// The attributions (docs/effects.md, "Which rules were in the prompt").
const (
	// ByPromptVersion: every exposure carried a recorded prompt_version.
	ByPromptVersion Attribution = "prompt_version"
	// ByAgentTime: no exposure did; decisions were tied to the rules
	// active for their agent when they were made.
	ByAgentTime Attribution = "agent_time"
	// Mixed: some of each.
	Mixed Attribution = "mixed"
)

// The verdicts of an effect.
const (
	// Improving: the change's interval lies below zero.
	Improving = "improving"
	// NotImproving: the pattern recurs at or above its rate before the
	// rule, and the interval excludes an improvement of at least
	// Options.MinImprovement: the rule gets a sunset proposal.
	NotImproving = "not_improving"
	// Inconclusive: enough exposures, but the interval allows both.
	Inconclusive = "inconclusive"
	// NoEvidence: fewer exposures than Options.MinExposures.
	NoEvidence = "no_evidence"
	// NoPattern: the rule has no source cluster or category (a manual
	// proposal), so recurrences cannot be counted; exposures and
	// validations still are.
	NoPattern = "no_pattern"
)

// Shadow compares decisions made with a SHADOW rule's shadow prompt
// against those made with the main prompt, by prompt_version.
type Shadow struct {
	ShadowDecisions, ShadowRecurrences int64
	ShadowRate                         float64
	ShadowInterval                     Interval
	MainDecisions, MainRecurrences     int64
	MainRate                           float64
	MainInterval                       Interval
	Change                             float64
	ChangeInterval                     Interval
}

// Effect is what the evidence says about one rule.
type Effect struct {
	RuleID     string
	Agents     []string
	Status     rulefmt.Status
	Importance rulefmt.Importance
	Confidence float64
	Category   string
	ClusterID  string
	// ActivatedAt starts the window of exposures; RetiredAt ends it for a
	// rule that left main (zero while it is on main).
	ActivatedAt, RetiredAt time.Time
	Attribution            Attribution

	Exposures, ExposuresByVersion, ExposuresByTime int64
	Recurrences                                    int64
	RateAfter                                      float64
	RateAfterInterval                              Interval
	BeforeDecisions, BeforeRecurrences             int64
	// BeforeEvidenceLeftOut counts the rule's evidence decisions the
	// baseline passed over; RateBeforeWithEvidence is the rate over as
	// many decisions with them, which NotImproving is judged against.
	BeforeEvidenceLeftOut  int64
	RateBeforeWithEvidence float64
	changeWithEvidence     Interval
	RateBefore             float64
	RateBeforeInterval     Interval
	Change                 float64
	ChangeInterval         Interval
	Validations            int64
	// Validators and Recurrers are the distinct reviewers, epics and
	// producers of the validations and the recurrences; importance and
	// confidence move only when they meet Options.Diversity.
	Validators, Recurrers Distinct

	Verdict string
	// Reason says why the verdict is what it is, e.g. "needs 50
	// exposures, has 20".
	Reason  string
	Summary string
	// LastExposure and LastValidation are zero when there was none.
	LastExposure, LastValidation time.Time
	// Shadow is set for SHADOW rules.
	Shadow     *Shadow
	ComputedAt time.Time

	// baseConfidence is the confidence recurrences lower; reapprovedAt
	// and reasonShadowed (SHADOW for being idle) come from the rule file.
	baseConfidence float64
	reapprovedAt   time.Time
	reasonShadowed bool
	// firstActivatedAt bounds the baseline; recordedValidations are the
	// validations last written to the rule file, promote the importance
	// the validations crossed into since.
	firstActivatedAt    time.Time
	recordedValidations int64
	promote             rulefmt.Importance
	// raisedTo and raisedFrom are the importance precept raised the
	// rule to and from (rulefmt.EffectSummary); lower is where the
	// evidence brings it back down, "" when it stays.
	raisedTo, raisedFrom rulefmt.Importance
	lower                rulefmt.Importance
}

// Effect computes one rule's effect now, also for a rule that left main;
// one computed less than EffectMaxAge ago for the same rule is returned
// again.
func (t *Tracker) Effect(ctx context.Context, ruleID string) (Effect, error) {
	r, hist, err := t.rules.Rule(ctx, ruleID)
	if err != nil {
		return Effect{}, err
	}
	var retired time.Time
	if r.Status != rulefmt.Active && r.Status != rulefmt.Shadow && len(hist) > 0 {
		retired = hist[0].At
	}
	c, key := t.newComputation(), memoKey(r, retired)
	if e, ok := t.memo.get(r.ID, key, c.now); ok {
		return e, nil
	}
	e, err := c.effect(ctx, r, retired)
	if err == nil {
		t.memo.put(r.ID, key, c.now, e)
	}
	return e, err
}

// Effects computes the effects of an agent's rules on main (every
// agent's when agent is empty), by rule id.
func (t *Tracker) Effects(ctx context.Context, agent string) ([]Effect, error) {
	rs, err := t.rules.ActiveRules(ctx, agent)
	if err != nil {
		return nil, err
	}
	c := t.newComputation()
	out := make([]Effect, 0, len(rs))
	var errs []error
	for _, r := range rs {
		e, err := c.effect(ctx, r, time.Time{})
		if err != nil {
			// One rule's failed lookup does not hide the others.
			errs = append(errs, fmt.Errorf("effect of %s: %w", r.ID, err))
			continue
		}
		t.memo.put(r.ID, memoKey(r, time.Time{}), c.now, e)
		out = append(out, e)
	}
	return out, errors.Join(errs...)
}

// inPrompt says whether a decision was made with the rule in its prompt,
// and how that was found.
func (c *computation) inPrompt(ctx context.Context, f fact, version string, r rulefmt.Rule, from, until time.Time) (exposed, shadow, byVersion bool, err error) {
	if version != "" && c.t.versions != nil {
		rec, err := c.version(ctx, version)
		if err != nil {
			return false, false, false, err
		}
		if rec != nil {
			in := rec.Contains(r.ID)
			// A SHADOW rule in a shadow prompt is the variant under test;
			// an ACTIVE rule is in the shadow prompt too, and exposed.
			shadow := in && rec.Shadow && r.Status == rulefmt.Shadow
			return in && !shadow, shadow, true, nil
		}
	}
	// No known version: the rule was in the main prompt when it was
	// ACTIVE (a SHADOW rule never is).
	if r.Status == rulefmt.Shadow && r.ShadowReason == "" {
		return false, false, false, nil
	}
	at := f.time()
	in := !at.Before(from) && (until.IsZero() || at.Before(until))
	return in, false, false, nil
}

// effect computes a rule's effect; until is when it left main (zero while
// it is there).
func (c *computation) effect(ctx context.Context, r rulefmt.Rule, until time.Time) (Effect, error) {
	if r.ID == "" {
		return Effect{}, errNoRule
	}
	e := Effect{
		RuleID: r.ID, Agents: slices.Clone(r.Agents), Status: r.Status, Importance: r.Importance,
		Confidence: r.Confidence, ClusterID: r.ClusterID, ActivatedAt: r.ActivatedAt.UTC(), RetiredAt: until, ComputedAt: c.now,
	}
	if e.Importance == "" {
		e.Importance = rulefmt.Normal
	}
	pat, err := c.patternOf(ctx, r)
	if err != nil {
		return Effect{}, err
	}
	e.Category = pat.category
	base := r.Confidence
	if r.Effect != nil && r.Effect.BaseConfidence > 0 {
		base = r.Effect.BaseConfidence
	}
	e.baseConfidence = base
	e.recordedValidations = int64(r.PositiveValidations)
	switch {
	case r.Effect != nil && r.Effect.RaisedTo != "" && r.Effect.RaisedTo == r.Importance:
		e.raisedTo, e.raisedFrom = r.Effect.RaisedTo, r.Effect.RaisedFrom
	case r.Effect != nil && r.Effect.RaisedTo == "" && r.Importance != "" && r.Importance == c.t.opts.raisedBy(r.PositiveValidations):
		// Written before rule files said who raised them: the importance
		// the recorded validations would have raised it to is taken as
		// precept's, from NORMAL (docs/effects.md).
		e.raisedTo, e.raisedFrom = r.Importance, rulefmt.Normal
	}
	if r.ReapprovedAt != nil {
		e.reapprovedAt = r.ReapprovedAt.UTC()
	}
	e.reasonShadowed = r.Status == rulefmt.Shadow && r.ShadowReason != ""
	from := r.ActivatedAt.UTC()
	if e.reasonShadowed && r.ShadowedAt != nil {
		// Idle, back in SHADOW: its ACTIVE period counts by time until
		// the move, and no longer.
		until = r.ShadowedAt.UTC()
	}
	// The baseline lies before the first activation, so a rule activated
	// again is never compared with its own earlier exposures.
	first := from
	if r.Effect != nil && !r.Effect.FirstActivatedAt.IsZero() && r.Effect.FirstActivatedAt.Before(from) {
		first = r.Effect.FirstActivatedAt.UTC()
	}
	e.firstActivatedAt = first
	var sh Shadow
	gates := map[name]bool{}
	type approved struct {
		at time.Time
		f  fact
	}
	recurrers := newPeople()
	var approvals []approved
	evidence := make(map[string]bool, len(r.FeedbackIDs))
	for _, id := range r.FeedbackIDs {
		evidence[id] = true
	}
	var before []earlier
	for _, agent := range r.Agents {
		// Names number per tracker, so facts of several agents share
		// them.
		facts, names := c.t.facts(agent)
		for _, f := range facts {
			rec, err := c.recurs(ctx, f, pat)
			if err != nil {
				return Effect{}, err
			}
			if rec && f.gate != 0 {
				gates[f.gate] = true
			}
			at := f.time()
			if at.Before(first) {
				before = append(before, earlier{at: at, id: f.id, recurs: rec, evidence: evidence[f.id]})
			}
			if at.Before(from) {
				continue
			}
			exposed, shadow, byVersion, err := c.inPrompt(ctx, f, names[f.version], r, from, until)
			if err != nil {
				return Effect{}, err
			}
			switch {
			case shadow:
				sh.ShadowDecisions++
				if rec {
					sh.ShadowRecurrences++
				}
			case exposed:
				e.Exposures++
				if byVersion {
					e.ExposuresByVersion++
				} else {
					e.ExposuresByTime++
				}
				if rec {
					e.Recurrences++
					recurrers.add(f)
				}
				if at.After(e.LastExposure) {
					e.LastExposure = at
				}
				if f.decision() == precept.Approved {
					approvals = append(approvals, approved{at, f})
				}
			case byVersion && r.Status == rulefmt.Shadow:
				sh.MainDecisions++
				if rec {
					sh.MainRecurrences++
				}
			}
		}
	}
	// The baseline: the decisions before activation that were not its
	// evidence, as many as the rule has exposures (baseline.go).
	b := baselineOf(before, e.Exposures)
	e.BeforeDecisions, e.BeforeRecurrences, e.BeforeEvidenceLeftOut = b.Decisions, b.Recurrences, b.EvidenceLeftOut
	e.RateBeforeWithEvidence = rate(b.WithEvidenceRecurrences, b.WithEvidenceDecisions)
	// Validations: approved work at a gate where the pattern was flagged,
	// with the rule in the prompt (every gate when none is known).
	validators := newPeople()
	for _, a := range approvals {
		if len(gates) == 0 || gates[a.f.gate] {
			e.Validations++
			validators.add(a.f)
			if a.at.After(e.LastValidation) {
				e.LastValidation = a.at
			}
		}
	}
	e.RateAfter = rate(e.Recurrences, e.Exposures)
	e.RateAfterInterval = wilson(e.Recurrences, e.Exposures)
	e.RateBefore = rate(e.BeforeRecurrences, e.BeforeDecisions)
	e.RateBeforeInterval = wilson(e.BeforeRecurrences, e.BeforeDecisions)
	e.Change = e.RateAfter - e.RateBefore
	e.ChangeInterval = newcombe(e.Recurrences, e.Exposures, e.BeforeRecurrences, e.BeforeDecisions)
	e.changeWithEvidence = newcombe(e.Recurrences, e.Exposures, b.WithEvidenceRecurrences, b.WithEvidenceDecisions)
	switch {
	case e.ExposuresByVersion > 0 && e.ExposuresByTime > 0:
		e.Attribution = Mixed
	case e.ExposuresByVersion > 0:
		e.Attribution = ByPromptVersion
	case e.ExposuresByTime > 0:
		e.Attribution = ByAgentTime
	}
	if r.Status == rulefmt.Shadow {
		sh.ShadowRate, sh.ShadowInterval = rate(sh.ShadowRecurrences, sh.ShadowDecisions), wilson(sh.ShadowRecurrences, sh.ShadowDecisions)
		sh.MainRate, sh.MainInterval = rate(sh.MainRecurrences, sh.MainDecisions), wilson(sh.MainRecurrences, sh.MainDecisions)
		sh.Change = sh.ShadowRate - sh.MainRate
		sh.ChangeInterval = newcombe(sh.ShadowRecurrences, sh.ShadowDecisions, sh.MainRecurrences, sh.MainDecisions)
		e.Shadow = &sh
	}
	e.Validators, e.Recurrers = validators.count(), recurrers.count()
	e.Confidence = base
	if c.t.opts.Diversity.met(e.Recurrers) {
		e.Confidence = c.t.opts.confidence(base, e.Recurrences)
	}
	c.t.judge(&e, pat)
	return e, nil
}

// judge sets the verdict, the summary, importance and confidence.
func (t *Tracker) judge(e *Effect, pat pattern) {
	o := t.opts
	e.Verdict, e.Reason = verdict(*e, pat, o)
	// Importance rises when the validations cross a threshold since the
	// last recording, so a curator who lowers it is not overruled until
	// the next threshold.
	switch prev := e.recordedValidations; {
	case !o.Diversity.met(e.Validators):
		// Validations from too few people raise nothing.
	case prev < int64(o.CriticalAt) && e.Validations >= int64(o.CriticalAt):
		e.promote = rulefmt.Critical
	case prev < int64(o.ImportantAt) && e.Validations >= int64(o.ImportantAt):
		e.promote = rulefmt.Important
	}
	// An importance precept raised comes back down when the evidence no
	// longer supports it: validations from too few people, or fewer
	// validations than its threshold (docs/effects.md).
	if e.raisedTo != "" && e.promote == "" {
		supported := maxImportance(e.raisedFrom, o.supported(*e))
		if supported.Rank() < e.raisedTo.Rank() {
			e.lower, e.Importance = supported, supported
		}
	}
	e.Importance = maxImportance(e.Importance, e.promote)
	e.Summary = summary(*e, o)
}

// raisedBy is the importance validations recorded in a rule file would
// have raised it to, "" below the first threshold.
func (o Options) raisedBy(validations int) rulefmt.Importance {
	switch {
	case validations >= o.CriticalAt:
		return rulefmt.Critical
	case validations >= o.ImportantAt:
		return rulefmt.Important
	}
	return ""
}

// supported is the importance the validations support now, "" below
// the first threshold.
func (o Options) supported(e Effect) rulefmt.Importance {
	switch {
	case !o.Diversity.met(e.Validators):
		return ""
	case e.Validations >= int64(o.CriticalAt):
		return rulefmt.Critical
	case e.Validations >= int64(o.ImportantAt):
		return rulefmt.Important
	}
	return ""
}

func maxImportance(a, b rulefmt.Importance) rulefmt.Importance {
	if b.Rank() > a.Rank() {
		return b
	}
	return a
}

// confidence lowers the confidence a rule was approved with by Factor per
// recurrence, never below Floor (docs/effects.md).
func (o Options) confidence(base float64, recurrences int64) float64 {
	c := base * math.Pow(o.ConfidenceFactor, float64(recurrences))
	return math.Round(math.Max(o.ConfidenceFloor, math.Min(base, c))*1000) / 1000
}

func pct(x float64) string { return fmt.Sprintf("%.1f%%", 100*x) }

func summary(e Effect, o Options) string {
	var b strings.Builder
	title := map[string]string{Improving: "Improving", NotImproving: "Not improving", Inconclusive: "Inconclusive", NoEvidence: "Collecting evidence"}[e.Verdict]
	if e.Verdict == NoPattern {
		fmt.Fprintf(&b, "No failure pattern to count (no source cluster): %d exposures, %d validations.", e.Exposures, e.Validations)
		return b.String()
	}
	fmt.Fprintf(&b, "%s: %s. ", title, e.Reason)
	attribution := string(e.Attribution)
	if attribution == "" {
		attribution = "none yet"
	}
	fmt.Fprintf(&b, "After: %d of %d exposures (%s, 95%% CI %s–%s). Before: %d of the %d decisions before activation that were not its evidence (%s; %d evidence decisions left out, %s with them). Change %+.1f points (95%% CI %+.1f to %+.1f). Validations: %d. Attribution: %s.",
		e.Recurrences, e.Exposures, pct(e.RateAfter), pct(e.RateAfterInterval.Low), pct(e.RateAfterInterval.High),
		e.BeforeRecurrences, e.BeforeDecisions, pct(e.RateBefore), e.BeforeEvidenceLeftOut, pct(e.RateBeforeWithEvidence),
		100*e.Change, 100*e.ChangeInterval.Low, 100*e.ChangeInterval.High, e.Validations, attribution)
	if s := e.Shadow; s != nil {
		fmt.Fprintf(&b, " Shadow prompt: %d of %d decisions (%s); main prompt: %d of %d (%s); change %+.1f points (95%% CI %+.1f to %+.1f).",
			s.ShadowRecurrences, s.ShadowDecisions, pct(s.ShadowRate), s.MainRecurrences, s.MainDecisions, pct(s.MainRate),
			100*s.Change, 100*s.ChangeInterval.Low, 100*s.ChangeInterval.High)
	}
	return b.String()
}
