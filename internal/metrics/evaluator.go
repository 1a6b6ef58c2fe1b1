package metrics

import (
	"context"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/precept-dev/precept/evaluator"
)

// Evaluator publishes what the evaluator measures.
type Evaluator struct {
	evaluations *prometheus.CounterVec
	errors      prometheus.Counter
	seconds     prometheus.Histogram
	llm         *prometheus.CounterVec
}

var _ evaluator.Metrics = (*Evaluator)(nil)

// NewEvaluator returns the evaluator's collectors, registered on reg
// (which may be nil).
func NewEvaluator(reg prometheus.Registerer) (*Evaluator, error) {
	var m Evaluator
	var err error
	if m.evaluations, err = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "precept_evaluations_total", Help: "Decisions evaluated, by class.",
	}, []string{"class"})); err != nil {
		return nil, err
	}
	// Every class has a series from the start (dashboards read them).
	for _, c := range []evaluator.Class{evaluator.Positive, evaluator.Ambiguous, evaluator.EdgeCase, evaluator.GeneralizableLow, evaluator.GeneralizableHigh} {
		m.evaluations.WithLabelValues(string(c))
	}
	if m.errors, err = register(reg, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "precept_evaluation_errors_total", Help: "Batches whose evaluation failed and will be retried.",
	})); err != nil {
		return nil, err
	}
	if m.seconds, err = register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "precept_evaluation_seconds", Help: "Evaluation time per decision, amortised over its batch.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
	})); err != nil {
		return nil, err
	}
	if m.llm, err = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "precept_evaluator_llm_total", Help: "LLM refinements: used, fallback (failed, deterministic kept), upgrade_refused.",
	}, []string{"result"})); err != nil {
		return nil, err
	}
	return &m, nil
}

// Evaluated implements evaluator.Metrics.
func (m *Evaluator) Evaluated(class evaluator.Class, seconds float64) {
	m.evaluations.WithLabelValues(string(class)).Inc()
	m.seconds.Observe(seconds)
}

// BatchFailed implements evaluator.Metrics.
func (m *Evaluator) BatchFailed() { m.errors.Inc() }

// LLMRefinement implements evaluator.Metrics.
func (m *Evaluator) LLMRefinement(outcome evaluator.LLMOutcome) {
	m.llm.WithLabelValues(string(outcome)).Inc()
}

// ReviewQueue is what the needs-review gauge reads of the evaluator
// (evaluator.Service).
type ReviewQueue interface {
	NeedsReview(ctx context.Context, q evaluator.ReviewQuery) ([]evaluator.NeedsReview, int, error)
}

var _ ReviewQueue = (*evaluator.Service)(nil)

// NeedsReview registers precept_needs_review on reg: the ambiguous
// decisions waiting for a human (docs/clarification.md), read at scrape
// time from the evaluator's index of open records. A failed read reports
// the last count.
func NeedsReview(reg prometheus.Registerer, q ReviewQueue) error {
	var mu sync.Mutex
	last := 0
	_, err := register(reg, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "precept_needs_review",
		Help: "Ambiguous decisions waiting in the needs-review queue for a human.",
	}, func() float64 {
		ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
		defer cancel()
		// The total comes from the index; one record is read.
		_, total, err := q.NeedsReview(ctx, evaluator.ReviewQuery{Limit: 1})
		mu.Lock()
		defer mu.Unlock()
		if err == nil {
			last = total
		}
		return float64(last)
	}))
	return err
}
