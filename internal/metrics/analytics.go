package metrics

import (
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/analytics"
)

// Other is the label value of the agents and gates beyond the caps.
const Other = "other"

// Analytics publishes what analytics counts, with bounded labels: the
// first maxAgents agents and maxGates gates seen get their own label
// value, every later one is "other"; no label per day, reviewer or
// category (docs/analytics.md, "Prometheus").
type Analytics struct {
	decisions *prometheus.CounterVec
	first     *prometheus.CounterVec
	durations *prometheus.HistogramVec
	position  prometheus.Gauge
	agents    *capped
	gates     *capped
}

var _ analytics.Metrics = (*Analytics)(nil)

// NewAnalytics returns the analytics collectors, registered on reg (which
// may be nil).
func NewAnalytics(reg prometheus.Registerer, maxAgents, maxGates int) (*Analytics, error) {
	m := Analytics{agents: newCapped(maxAgents), gates: newCapped(maxGates)}
	var err error
	if m.decisions, err = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "precept_analytics_decisions_total", Help: "Decisions counted by analytics, by agent, gate and verdict (agents and gates beyond the caps are \"other\").",
	}, []string{"agent", "gate", "verdict"})); err != nil {
		return nil, err
	}
	if m.first, err = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "precept_analytics_first_attempts_total", Help: "First decisions on a work item, by agent, gate and whether they were APPROVED.",
	}, []string{"agent", "gate", "accepted"})); err != nil {
		return nil, err
	}
	if m.durations, err = register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "precept_analytics_review_duration_seconds", Help: "Review durations the decisions carried, by agent and gate.",
		Buckets: []float64{5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400},
	}, []string{"agent", "gate"})); err != nil {
		return nil, err
	}
	if m.position, err = register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "precept_analytics_position", Help: "The feedback-store position analytics has counted up to.",
	})); err != nil {
		return nil, err
	}
	return &m, nil
}

// Counted implements analytics.Metrics.
func (m *Analytics) Counted(agent, gate string, verdict precept.Verdict, firstAttempt bool, reviewSeconds *int64) {
	agent, gate = m.agents.label(agent), m.gates.label(gate)
	m.decisions.WithLabelValues(agent, gate, string(verdict)).Inc()
	if firstAttempt {
		m.first.WithLabelValues(agent, gate, strconv.FormatBool(verdict == precept.Approved)).Inc()
	}
	if reviewSeconds != nil {
		m.durations.WithLabelValues(agent, gate).Observe(float64(*reviewSeconds))
	}
}

// Followed implements analytics.Metrics.
func (m *Analytics) Followed(seq uint64) { m.position.Set(float64(seq)) }

// capped hands out at most max distinct label values, first come first
// served, and Other for the rest.
type capped struct {
	mu   sync.Mutex
	max  int
	seen map[string]bool
}

func newCapped(max int) *capped { return &capped{max: max, seen: map[string]bool{}} }

func (c *capped) label(v string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen[v] {
		return v
	}
	if len(c.seen) < c.max && v != Other {
		c.seen[v] = true
		return v
	}
	return Other
}
