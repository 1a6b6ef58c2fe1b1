package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/precept-dev/precept/evaluator"
)

func TestEvaluatorMetricsKeepTheirNamesAndAreShared(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, err := NewEvaluator(reg)
	if err != nil {
		t.Fatal(err)
	}
	// A second evaluator in the process counts into the same series.
	b, err := NewEvaluator(reg)
	if err != nil {
		t.Fatal(err)
	}
	a.Evaluated(evaluator.GeneralizableHigh, 0.0003)
	b.Evaluated(evaluator.GeneralizableHigh, 0.0003)
	a.BatchFailed()
	b.LLMRefinement(evaluator.LLMUpgradeRefused)

	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*dto.MetricFamily{}
	for _, f := range families {
		got[f.GetName()] = f
	}
	for _, w := range []struct {
		name, help, label string
		value             float64
	}{
		{"precept_evaluations_total", "Decisions evaluated, by class.", "class=GENERALIZABLE_HIGH", 2},
		{"precept_evaluation_errors_total", "Batches whose evaluation failed and will be retried.", "", 1},
		{"precept_evaluator_llm_total", "LLM refinements: used, fallback (failed, deterministic kept), upgrade_refused.", "result=upgrade_refused", 1},
	} {
		f := got[w.name]
		if f == nil || f.GetHelp() != w.help {
			t.Fatalf("%s = %v", w.name, f)
		}
		// Other label values may be present at 0 (classes are
		// created up front); the one counted holds the value.
		var sum float64
		found := false
		for _, m := range f.GetMetric() {
			label := ""
			for _, l := range m.GetLabel() {
				label = l.GetName() + "=" + l.GetValue()
			}
			sum += m.GetCounter().GetValue()
			if label == w.label {
				found = m.GetCounter().GetValue() == w.value
			}
		}
		if !found || sum != w.value {
			t.Errorf("%s = %v, want {%s} %v and nothing else counted", w.name, f, w.label, w.value)
		}
	}
	f := got["precept_evaluation_seconds"]
	if f == nil {
		t.Fatal("precept_evaluation_seconds is not registered")
	}
	h := f.GetMetric()[0].GetHistogram()
	if f.GetHelp() != "Evaluation time per decision, amortised over its batch." || h.GetSampleCount() != 2 ||
		len(h.GetBucket()) != 16 || h.GetBucket()[0].GetUpperBound() != 0.0001 || h.GetBucket()[15].GetUpperBound() != 0.0001*(1<<15) {
		t.Fatalf("histogram %q: %v", f.GetHelp(), h)
	}
}
