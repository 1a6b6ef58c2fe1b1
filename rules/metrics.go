package rules

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the Manager's Prometheus collectors.
type metrics struct {
	proposals   *prometheus.GaugeVec
	approvals   *prometheus.CounterVec
	rejections  *prometheus.CounterVec
	guardBlocks *prometheus.CounterVec
	rollbacks   prometheus.Counter
}

// newMetrics creates the collectors and registers them on reg when it is
// not nil; collectors already registered by another Manager in the same
// process are shared.
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		proposals: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "precept_rules_proposals",
			Help: "Rule proposals and held drafts in the rules repository, by status.",
		}, []string{"status"}),
		approvals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "precept_rules_approvals_total",
			Help: "Approvals recorded on rule proposals, by channel (api, slack, git).",
		}, []string{"via"}),
		rejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "precept_rules_rejections_total",
			Help: "Rule proposals rejected, by channel (api, slack, git).",
		}, []string{"via"}),
		guardBlocks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "precept_rules_guard_blocks_total",
			Help: "Drafts a guard blocked or deferred before they became rule PRs, by guard.",
		}, []string{"guard"}),
		rollbacks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "precept_rules_rollbacks_total",
			Help: "Rules rolled back.",
		}),
	}
	for _, s := range []ProposalStatus{Pending, Approved, Rejected, Blocked, Deferred, Merged} {
		m.proposals.WithLabelValues(string(s))
	}
	if reg == nil {
		return m, nil
	}
	var err error
	m.proposals = register(reg, m.proposals, &err)
	m.approvals = register(reg, m.approvals, &err)
	m.rejections = register(reg, m.rejections, &err)
	m.guardBlocks = register(reg, m.guardBlocks, &err)
	m.rollbacks = register(reg, m.rollbacks, &err)
	return m, err
}

// register registers c, or returns the collector already registered under
// its name.
func register[C prometheus.Collector](reg prometheus.Registerer, c C, errp *error) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		if *errp == nil {
			*errp = err
		}
	}
	return c
}

// setProposalCounts publishes how many proposals are in each status.
func (m *metrics) setProposalCounts(counts map[ProposalStatus]int) {
	for _, s := range []ProposalStatus{Pending, Approved, Rejected, Blocked, Deferred, Merged} {
		m.proposals.WithLabelValues(string(s)).Set(float64(counts[s]))
	}
}
