package evaluator

// Metrics receives what the evaluator measures. internal/metrics
// implements it with Prometheus collectors; the evaluator itself stays
// free of any metrics client. A nil Options.Metrics measures nothing.
type Metrics interface {
	// Evaluated counts one decision evaluated into class; seconds is its
	// share of its batch's evaluation time.
	Evaluated(class Class, seconds float64)
	// BatchFailed counts a batch whose evaluation failed and will be
	// retried.
	BatchFailed()
	// LLMRefinement counts one LLM refinement by its outcome.
	LLMRefinement(outcome LLMOutcome)
}

// LLMOutcome is what became of an LLM refinement.
type LLMOutcome string

// The outcomes of an LLM refinement.
const (
	// LLMUsed: the LLM's verdict was applied.
	LLMUsed LLMOutcome = "used"
	// LLMFallback: the LLM failed or answered nonsense; the deterministic
	// evaluation stands.
	LLMFallback LLMOutcome = "fallback"
	// LLMUpgradeRefused: the LLM tried to raise the class past what the
	// statistics support; the statistics' class stands.
	LLMUpgradeRefused LLMOutcome = "upgrade_refused"
)

// noMetrics measures nothing.
type noMetrics struct{}

func (noMetrics) Evaluated(Class, float64) {}
func (noMetrics) BatchFailed()             {}
func (noMetrics) LLMRefinement(LLMOutcome) {}
