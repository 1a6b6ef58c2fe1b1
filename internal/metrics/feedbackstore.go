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
	return m, nil
}

// ObserveCommit implements feedbackstore.Metrics.
func (m *FeedbackStore) ObserveCommit(d time.Duration) { m.commitSeconds.Observe(d.Seconds()) }

// ObserveBatch implements feedbackstore.Metrics.
func (m *FeedbackStore) ObserveBatch(decisions int) { m.batchSize.Observe(float64(decisions)) }

// SetDecisions implements feedbackstore.Metrics.
func (m *FeedbackStore) SetDecisions(n int) { m.records.Set(float64(n)) }
