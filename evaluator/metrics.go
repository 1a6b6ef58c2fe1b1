package evaluator

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	evaluations *prometheus.CounterVec
	errors      prometheus.Counter
	seconds     prometheus.Histogram
	llm         *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		evaluations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "precept_evaluations_total", Help: "Decisions evaluated, by class.",
		}, []string{"class"}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "precept_evaluation_errors_total", Help: "Batches whose evaluation failed and will be retried.",
		}),
		seconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "precept_evaluation_seconds", Help: "Evaluation time per decision, amortised over its batch.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}),
		llm: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "precept_evaluator_llm_total", Help: "LLM refinements: used, fallback (failed, deterministic kept), upgrade_refused.",
		}, []string{"result"}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.evaluations, m.errors, m.seconds, m.llm} {
			if err := reg.Register(c); err != nil {
				if _, dup := err.(prometheus.AlreadyRegisteredError); !dup {
					panic(err)
				}
			}
		}
	}
	return m
}
