package metrics

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/precept-dev/precept"
)

// TestAnalyticsLabelsStayBounded: however many agents and gates come, the
// series stay within (agents+1) × (gates+1) × verdicts.
func TestAnalyticsLabelsStayBounded(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewAnalytics(reg, 3, 2)
	if err != nil {
		t.Fatal(err)
	}
	d := int64(42)
	for i := range 50 {
		for g := range 10 {
			m.Counted(fmt.Sprintf("agent-%d", i), fmt.Sprintf("gate-%d", g), precept.Rejected, true, &d)
			m.Counted(fmt.Sprintf("agent-%d", i), fmt.Sprintf("gate-%d", g), precept.Approved, false, nil)
		}
	}
	m.Counted(Other, "gate-0", precept.Approved, true, nil) // an agent named "other" takes no slot of its own
	m.Followed(500)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := map[string]int{}
	var others float64
	for _, f := range families {
		series[f.GetName()] = len(f.GetMetric())
		if f.GetName() != "precept_analytics_decisions_total" {
			continue
		}
		for _, mm := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range mm.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["agent"] == Other && labels["gate"] == Other {
				others += mm.GetCounter().GetValue()
			}
		}
	}
	// (3 agents + other) × (2 gates + other) × 2 verdicts.
	if got := series["precept_analytics_decisions_total"]; got != 4*3*2 {
		t.Errorf("decision series = %d, want %d", got, 4*3*2)
	}
	if got := series["precept_analytics_review_duration_seconds"]; got != 4*3 {
		t.Errorf("histograms = %d, want %d", got, 4*3)
	}
	// agents 3..49 at gates 2..9: 47 × 8 × 2 decisions.
	if others != 47*8*2 {
		t.Errorf("other/other = %v, want %d", others, 47*8*2)
	}
	if series["precept_analytics_position"] != 1 {
		t.Errorf("position gauge missing: %v", series)
	}
}
