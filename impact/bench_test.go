package impact

import (
	"context"
	"fmt"
	"testing"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/evaluator"
	"github.com/precept-dev/precept/lesson"
	"github.com/precept-dev/precept/lib/testenv"
)

// BenchmarkComputeOverTenThousandDecisions measures one preview's count
// and comparison with main over the fixture plus 10,000 decisions
// (scaled by testenv.BenchSize) of the proposal's agent: half negatives
// in the category, half approvals in scope with a comment the classifier
// reads. "whole" counts with a ledger read from the first decision, as
// after a start; "extend" counts once 100 more decisions arrived,
// extending the ledger (docs/lifecycle.md, "Impact preview").
func BenchmarkComputeOverTenThousandDecisions(b *testing.B) {
	n := testenv.BenchSize(b, 10_000)
	e := newEnv(b)
	ctx := context.Background()
	ev := e.sources.Evaluations.(*evaluations)
	next := 0
	store := func(k int) {
		var batch []precept.Feedback
		for i := next; i < next+k; i++ {
			d := precept.Decision{DecisionID: fmt.Sprintf("bench-%07d", i), GateID: "HITL-2", EpicID: fmt.Sprintf("EPIC-%d", i%40), Agent: "coder",
				ReviewerID: fmt.Sprintf("rev-%d", i%25), Timestamp: t0, ScopePath: "src/api/client.go"}
			if i%2 == 0 {
				d.Decision, d.ReviewerComment = precept.Rejected, "This call can hang forever: no timeout and no retry."
				ev.evals[d.DecisionID] = evaluator.Evaluation{DecisionID: d.DecisionID, ClusterID: "C1", Lesson: &lesson.Lesson{Category: "retry-timeout"}}
			} else {
				d.Decision, d.ReviewerComment = precept.Approved, "Looks good; the HTTP call now has a timeout and retries with backoff."
			}
			batch = append(batch, precept.NewFeedback(d, "api:bench", t0))
		}
		next += k
		if _, err := e.feedback.Store(ctx, batch); err != nil {
			b.Fatal(err)
		}
		if _, err := e.feedback.CatchUp(ctx); err != nil {
			b.Fatal(err)
		}
	}
	store(n)
	s, err := New(e.sources, Options{})
	if err != nil {
		b.Fatal(err)
	}
	check := func(pv Preview) {
		// The fixture's 4, and every other decision stored.
		if want := 4 + (next+1)/2; pv.CategoryNegatives.Total != want {
			b.Fatalf("category negatives = %d, want %d", pv.CategoryNegatives.Total, want)
		}
	}
	b.Run("whole", func(b *testing.B) {
		for range b.N {
			s.counter.reset() // the ledger is read from the first decision
			pv, err := s.Refresh(ctx, e.proposal)
			if err != nil {
				b.Fatal(err)
			}
			check(pv)
		}
	})
	b.Run("extend", func(b *testing.B) {
		for range b.N {
			b.StopTimer()
			store(100)
			b.StartTimer()
			pv, _, err := s.count(ctx, e.proposal, mustPosition(b, s), false)
			if err != nil {
				b.Fatal(err)
			}
			check(pv)
		}
	})
}

func mustPosition(b *testing.B, s *Service) position {
	pos, err := s.position()
	if err != nil {
		b.Fatal(err)
	}
	return pos
}
