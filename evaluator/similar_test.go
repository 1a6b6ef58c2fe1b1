package evaluator

import (
	"context"
	"slices"
	"testing"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/lib/vectorindex"
)

// The similar decisions an evaluation lists are its agent's own, from
// the index and from earlier in the same batch; the dry run lists the
// same.
func TestSimilarDecisionsAreTheAgentsOwn(t *testing.T) {
	feed := newFeed()
	e := newEnv(t, t.TempDir(), feed, Options{})
	ctx := context.Background()
	other := func(f precept.Feedback) precept.Feedback {
		f.Decision.Agent = "docs-agent"
		f.Agent = "docs-agent"
		return f
	}
	comment := "The handler has no unit tests for the error path; add table tests."
	feed.add(neg("a", "alice", "E1", comment))
	feed.add(other(neg("x", "xavier", "E1", comment)))
	e.drain(t)
	// b's twins: a in the index, y earlier in b's batch.
	feed.add(other(neg("y", "yves", "E2", comment)))
	feed.add(neg("b", "bob", "E2", comment))
	e.drain(t)
	b, _, _ := e.svc.Evaluation(ctx, "b")
	y, _, _ := e.svc.Evaluation(ctx, "y")
	if !slices.Equal(b.SimilarIDs, []string{"a"}) || !slices.Equal(y.SimilarIDs, []string{"x"}) {
		t.Fatalf("similar to b %v, to y %v; want [a] and [x]", b.SimilarIDs, y.SimilarIDs)
	}
	dry := neg("probe", "paula", "E3", comment).Decision
	ev, err := e.svc.Evaluate(ctx, dry)
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(ev.SimilarIDs, func(id string) bool { return id == "x" || id == "y" }) || !slices.Contains(ev.SimilarIDs, "a") {
		t.Fatalf("the dry run lists %v", ev.SimilarIDs)
	}
}

// Two copies of one comment score alike whether the earlier one came
// from the index (its arithmetic: 0.99999994) or from the same batch
// (1): the list is by id either way, so it does not depend on how the
// decisions fell into batches (the README's worked example once listed
// dec-102 before dec-101).
func TestSimilarIDsDoNotDependOnWhereTheTwinWasScored(t *testing.T) {
	s := &Service{opts: Options{}.withDefaults()}
	vec := []float32{0.1, 0.7, 0.3}
	cand := func(id string) *candidate {
		return &candidate{item: Item{Feedback: precept.Feedback{Decision: precept.Decision{DecisionID: id, Agent: "coding-agent"}}}, vec: vec}
	}
	batchTwin, c := cand("dec-102"), cand("dec-103")
	c.hits = []vectorindex.Hit{{ID: "dec-101", Similarity: 0.99999994}}
	if got := s.similarIDs(c, []*candidate{batchTwin, c}); !slices.Equal(got, []string{"dec-101", "dec-102"}) {
		t.Errorf("similar %v, want [dec-101 dec-102]", got)
	}
}
