package effect

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// The baseline a rule's effect is measured against (docs/effects.md,
// "The baseline"). A rule is drafted exactly when its pattern has
// gathered enough failures, so the decisions just before it are
// selected for failing: measured against them, regression to the mean
// makes almost any rule look effective. The baseline therefore leaves
// out the rule's evidence, the decisions it was drafted from.
//
// Each verdict is judged against the baseline least favourable to it:
// Improving against the rate without the evidence (which cannot flatter
// the rule), NotImproving against the rate with it (which cannot
// condemn it). Between the two, the verdict is Inconclusive.

// earlier is a decision of the rule's agents before its first
// activation.
type earlier struct {
	at       time.Time
	id       string
	recurs   bool
	evidence bool
}

// Baseline is the rate the pattern recurred at before the rule.
type Baseline struct {
	// Decisions and Recurrences are the newest decisions before the
	// rule's first activation that were not its evidence, as many as it
	// has exposures (fewer when there were fewer).
	Decisions, Recurrences int64
	// EvidenceLeftOut counts the evidence decisions passed over to
	// gather them.
	EvidenceLeftOut int64
	// WithEvidence are the same number of newest decisions, its
	// evidence included: the rate the rule looked best against.
	WithEvidenceDecisions, WithEvidenceRecurrences int64
}

// baselineOf takes n decisions from before, newest first.
func baselineOf(before []earlier, n int64) Baseline {
	slices.SortFunc(before, func(a, b earlier) int { return cmp.Or(b.at.Compare(a.at), strings.Compare(b.id, a.id)) })
	var b Baseline
	for _, d := range before {
		if b.WithEvidenceDecisions < n {
			b.WithEvidenceDecisions++
			if d.recurs {
				b.WithEvidenceRecurrences++
			}
		}
		if b.Decisions >= n {
			if b.WithEvidenceDecisions >= n {
				break
			}
			continue
		}
		if d.evidence {
			b.EvidenceLeftOut++
			continue
		}
		b.Decisions++
		if d.recurs {
			b.Recurrences++
		}
	}
	return b
}

// verdict judges an effect and says why (docs/effects.md, "Verdicts").
func verdict(e Effect, pat pattern, o Options) (string, string) {
	before, after := pct(e.RateBefore), pct(e.RateAfter)
	interval := fmt.Sprintf("%+.1f to %+.1f points", 100*e.ChangeInterval.Low, 100*e.ChangeInterval.High)
	withEvidence := e.RateBeforeWithEvidence
	switch {
	case pat.empty():
		return NoPattern, "no source cluster or category to count recurrences of"
	case e.Exposures < int64(o.MinExposures):
		return NoEvidence, fmt.Sprintf("needs %d exposures, has %d", o.MinExposures, e.Exposures)
	case e.BeforeDecisions > 0 && e.ChangeInterval.High < 0:
		return Improving, fmt.Sprintf("%s after against %s before, leaving out its %d evidence decisions; the change's 95%% interval, %s, lies below zero",
			after, before, e.BeforeEvidenceLeftOut, interval)
	case e.Recurrences > 0 && e.RateAfter >= withEvidence && e.changeWithEvidence.Low > -min(o.MinImprovement, withEvidence):
		// An improvement larger than the rate before is impossible: a
		// rare pattern is judged against its own rate, so no recurrence
		// on either side never looks like failure.
		return NotImproving, fmt.Sprintf("%s after is not below %s before even counting its own evidence, and the interval excludes an improvement of %s points",
			after, pct(withEvidence), pct(min(o.MinImprovement, withEvidence)))
	case e.BeforeDecisions == 0:
		return Inconclusive, "every decision before the rule was its own evidence, so there is no rate to improve on yet"
	default:
		return Inconclusive, fmt.Sprintf("%s after against %s before (without its evidence); the change's 95%% interval, %s, allows both an improvement and none",
			after, before, interval)
	}
}
