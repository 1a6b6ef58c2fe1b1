package effect

import (
	"context"
	"testing"
	"time"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/rules/rulefmt"
)

// An effect read twice within EffectMaxAge is computed once; an edited
// rule, or the age passed, computes it anew with the decisions since.
func TestAnEffectIsServedAgainUntilItAgesOrItsRuleChanges(t *testing.T) {
	ctx := context.Background()
	w := newWorld()
	w.clusters["c-1"] = "tests-missing"
	w.rules.byID["r-1"] = rulefmt.Rule{ID: "r-1", Agents: []string{"coder"}, Status: rulefmt.Active, ClusterID: "c-1", ActivatedAt: t0, Confidence: 0.8, Importance: rulefmt.Normal}
	for i := 1; i <= 5; i++ {
		w.decide("coder", t0.Add(time.Duration(i)*time.Minute), precept.Rejected, "g1", "", "c-1", "tests-missing")
	}
	now := t0.Add(time.Hour)
	tr := New(w, w, w, w.rules, Options{MinExposures: 10, Now: func() time.Time { return now }})
	catchUp := func() {
		if _, err := tr.CatchUp(ctx); err != nil {
			t.Fatal(err)
		}
	}
	recurrences := func() int64 {
		t.Helper()
		e, err := tr.Effect(ctx, "r-1")
		if err != nil {
			t.Fatal(err)
		}
		return e.Recurrences
	}
	catchUp()
	if got := recurrences(); got != 5 {
		t.Fatalf("recurrences = %d, want 5", got)
	}
	w.decide("coder", t0.Add(10*time.Minute), precept.Rejected, "g1", "", "c-1", "tests-missing")
	catchUp()
	now = now.Add(EffectMaxAge - time.Second)
	if got := recurrences(); got != 5 {
		t.Fatalf("within EffectMaxAge recurrences = %d, want the 5 computed before", got)
	}
	r := w.rules.byID["r-1"]
	r.Confidence = 0.9
	w.rules.byID["r-1"] = r
	if got := recurrences(); got != 6 {
		t.Fatalf("after the rule changed recurrences = %d, want 6", got)
	}
	w.decide("coder", t0.Add(11*time.Minute), precept.Rejected, "g1", "", "c-1", "tests-missing")
	catchUp()
	now = now.Add(EffectMaxAge)
	if got := recurrences(); got != 7 {
		t.Fatalf("after EffectMaxAge recurrences = %d, want 7", got)
	}
}
