package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/precept-dev/precept/effect"
)

// Effects turns each effects pass into gauges per rule on main:
//
//	precept_rule_exposures{rule_id}                decisions made with the rule in the prompt
//	precept_rule_recurrences{rule_id}              of those, recurrences of its failure pattern
//	precept_rule_recurrence_rate{rule_id,window}   window "after" (with the rule) or "before" (the same number of decisions before it)
//	precept_rule_change_upper{rule_id}             upper end of the 95% interval of after − before: below 0, the rule helps
//	precept_rule_validations{rule_id}              approved work in the pattern's gates with the rule in the prompt
//	precept_rule_confidence{rule_id}               confidence after recurrences
//	precept_rules_verdicts{verdict}                rules on main judged improving, not_improving, inconclusive,
//	                                               no_evidence or no_pattern (every verdict always present)
//
// A rule id is a label value only while the rule is on main, so the
// series are bounded by the rule cap (rules.max_active_rules_per_agent
// per agent); rules that leave main lose their series at the next pass.
type Effects struct {
	mu                                                     sync.Mutex
	exposures, recurrences, rate, upper, valid, confidence *prometheus.GaugeVec
	verdicts                                               *prometheus.GaugeVec
}

// verdicts are the label values of precept_rules_verdicts, set to 0
// before the first pass so an alert on not_improving has a series to read.
var verdicts = []string{effect.Improving, effect.NotImproving, effect.Inconclusive, effect.NoEvidence, effect.NoPattern}

var _ effect.Metrics = (*Effects)(nil)

// NewEffects registers the gauges on reg.
func NewEffects(reg prometheus.Registerer) (*Effects, error) {
	g := func(name, help string, labels ...string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, append([]string{"rule_id"}, labels...))
	}
	m := &Effects{
		exposures:   g("precept_rule_exposures", "Decisions made with the rule in the agent's prompt."),
		recurrences: g("precept_rule_recurrences", "Negative decisions in the rule's failure pattern made with the rule in the prompt."),
		rate:        g("precept_rule_recurrence_rate", "Recurrence rate of the rule's failure pattern, after activation or over as many decisions before it.", "window"),
		upper:       g("precept_rule_change_upper", "Upper end of the 95% interval of the rate after minus before; below zero the rule helps."),
		valid:       g("precept_rule_validations", "Approved decisions in the pattern's gates with the rule in the prompt."),
		confidence:  g("precept_rule_confidence", "The rule's confidence after recurrences."),
		verdicts: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "precept_rules_verdicts",
			Help: "Rules on main by the verdict of the last effects pass (docs/effects.md, \"Verdicts\"); not_improving rules get a sunset proposal."}, []string{"verdict"}),
	}
	for _, v := range verdicts {
		m.verdicts.WithLabelValues(v).Set(0)
	}
	for _, c := range []prometheus.Collector{m.exposures, m.recurrences, m.rate, m.upper, m.valid, m.confidence, m.verdicts} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// RuleEffects replaces the series with one effects pass's effects.
func (m *Effects) RuleEffects(effects []effect.Effect) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, v := range []*prometheus.GaugeVec{m.exposures, m.recurrences, m.rate, m.upper, m.valid, m.confidence} {
		v.Reset()
	}
	counts := map[string]int{}
	for _, e := range effects {
		if e.RetiredAt.IsZero() {
			counts[e.Verdict]++
		}
		m.exposures.WithLabelValues(e.RuleID).Set(float64(e.Exposures))
		m.recurrences.WithLabelValues(e.RuleID).Set(float64(e.Recurrences))
		m.rate.WithLabelValues(e.RuleID, "after").Set(e.RateAfter)
		m.rate.WithLabelValues(e.RuleID, "before").Set(e.RateBefore)
		m.upper.WithLabelValues(e.RuleID).Set(e.ChangeInterval.High)
		m.valid.WithLabelValues(e.RuleID).Set(float64(e.Validations))
		m.confidence.WithLabelValues(e.RuleID).Set(e.Confidence)
	}
	m.verdicts.Reset()
	for _, v := range verdicts {
		m.verdicts.WithLabelValues(v).Set(float64(counts[v]))
	}
}
