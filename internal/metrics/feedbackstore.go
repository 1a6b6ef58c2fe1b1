package metrics

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/precept-dev/precept/feedbackstore"
)

// FeedbackStore publishes what a feedbackstore.Store measures.
type FeedbackStore struct {
	commitSeconds prometheus.Histogram
	batchSize     prometheus.Histogram
	records       prometheus.Gauge
	ordered       prometheus.Counter
	orderFailed   prometheus.Counter
}

var _ feedbackstore.Metrics = (*FeedbackStore)(nil)

// NewFeedbackStore returns the feedback store's collectors, registered
// on reg (when not nil).
func NewFeedbackStore(reg prometheus.Registerer) (*FeedbackStore, error) {
	m := &FeedbackStore{
		commitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "precept_feedback_batch_commit_seconds",
			Help:    "Time to commit one batch of decisions to the feedback repository.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
		}),
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "precept_feedback_batch_decisions",
			Help:    "Decisions per feedback commit.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 14),
		}),
		records: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "precept_feedback_decisions",
			Help: "Decisions in this replica's feedback index.",
		}),
		ordered: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "precept_feedback_ordered_decisions_total",
			Help: "Decisions of the node branches this node merged into main (feedback.git.branch_per_node).",
		}),
		orderFailed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "precept_feedback_order_failures_total",
			Help: "Rounds of ordering the node branches into main that failed (the git server unreachable, or refused too often).",
		}),
	}
	var err error
	if m.commitSeconds, err = register(reg, m.commitSeconds); err != nil {
		return nil, fmt.Errorf("register feedback store metrics: %w", err)
	}
	if m.batchSize, err = register(reg, m.batchSize); err != nil {
		return nil, fmt.Errorf("register feedback store metrics: %w", err)
	}
	if m.records, err = register(reg, m.records); err != nil {
		return nil, fmt.Errorf("register feedback store metrics: %w", err)
	}
	if m.ordered, err = register(reg, m.ordered); err != nil {
		return nil, fmt.Errorf("register feedback store metrics: %w", err)
	}
	if m.orderFailed, err = register(reg, m.orderFailed); err != nil {
		return nil, fmt.Errorf("register feedback store metrics: %w", err)
	}
	return m, nil
}

// ObserveCommit implements feedbackstore.Metrics.
func (m *FeedbackStore) ObserveCommit(d time.Duration) { m.commitSeconds.Observe(d.Seconds()) }

// ObserveBatch implements feedbackstore.Metrics.
func (m *FeedbackStore) ObserveBatch(decisions int) { m.batchSize.Observe(float64(decisions)) }

// SetDecisions implements feedbackstore.Metrics.
func (m *FeedbackStore) SetDecisions(n int) { m.records.Set(float64(n)) }

// ObserveOrder implements feedbackstore.Metrics.
func (m *FeedbackStore) ObserveOrder(decisions int, err error) {
	if err != nil {
		m.orderFailed.Inc()
		return
	}
	m.ordered.Add(float64(decisions))
}
