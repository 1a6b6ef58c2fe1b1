package impact

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/evaluator"
	"github.com/precept-dev/precept/feedbackstore"
	"github.com/precept-dev/precept/lesson"
	"github.com/precept-dev/precept/lib/gitrepo"
)

// readCounter counts the decisions a service reads of the store.
type readCounter struct {
	Feedback
	read int
}

func (c *readCounter) Since(seq uint64, limit int) ([]feedbackstore.Record, error) {
	rs, err := c.Feedback.Since(seq, limit)
	c.read += len(rs)
	return rs, err
}

// countOf is what a count of the fixture's proposal finds, as one
// comparable value: the finished preview and the outputs kept.
func countOf(t *testing.T, s *Service, e *env) (Preview, tally) {
	t.Helper()
	pos, err := s.position()
	if err != nil {
		t.Fatal(err)
	}
	pv, tl, err := s.count(context.Background(), e.proposal, pos, true)
	if err != nil {
		t.Fatal(err)
	}
	tl.preview = Preview{}
	return pv, tl
}

// A count extended with the decisions stored since equals a count from
// the first decision, step after step: new approvals, negatives and
// evidence, evaluations arriving late and moving between clusters, a
// decision indexed again and decisions dropped by a rewritten history;
// and it reads only what was stored since, unless decisions were
// deleted or indexed again.
func TestACountExtendedWithNewDecisionsEqualsAWholeCount(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	ev := e.sources.Evaluations.(*evaluations)
	e.proposal.FeedbackIDs = append(e.proposal.FeedbackIDs, "inc-0-n0", "inc-2-n3")
	opts := Options{MaxCalls: 4, ApprovalSample: 3}
	src := e.sources
	reads := &readCounter{Feedback: e.feedback}
	src.Feedback = reads
	s, err := New(src, opts)
	if err != nil {
		t.Fatal(err)
	}
	check := func(step string, wantRead func(int) bool) {
		t.Helper()
		before := reads.read
		got, gotTl := countOf(t, s, e)
		whole, err := New(e.sources, opts)
		if err != nil {
			t.Fatal(err)
		}
		want, wantTl := countOf(t, whole, e)
		got.ComputedAt = want.ComputedAt
		if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotTl, wantTl) {
			t.Fatalf("%s: extended count\n%+v\n%+v\nwhole count\n%+v\n%+v", step, got, gotTl, want, wantTl)
		}
		if n := reads.read - before; !wantRead(n) {
			t.Errorf("%s: read %d decisions", step, n)
		}
	}
	all := func(n int) bool { return n > 0 }
	check("first count", all)
	first := reads.read
	add := func(step, prefix string, n int) {
		var fb []precept.Feedback
		for i := range n {
			d := precept.Decision{DecisionID: fmt.Sprintf("%s-a%d", prefix, i), GateID: "HITL-2", EpicID: fmt.Sprintf("EPIC-%d", i%3), Agent: "coder",
				Decision: precept.Approved, ReviewerID: "rev", Timestamp: t0, ScopePath: "src/api/y.go",
				ReviewerComment: "Good: the HTTP call now has a timeout and retries with backoff.", AgentOutput: fmt.Sprintf("output %s %d", prefix, i)}
			fb = append(fb, precept.NewFeedback(d, "api:test", t0))
			neg := d
			neg.DecisionID, neg.Decision, neg.ReviewerComment = fmt.Sprintf("%s-n%d", prefix, i), precept.Rejected, "No timeout on this call."
			fb = append(fb, precept.NewFeedback(neg, "api:test", t0))
			if i%2 == 0 { // every other negative is evaluated at once
				ev.evals[neg.DecisionID] = evaluator.Evaluation{DecisionID: neg.DecisionID, ClusterID: "C1", Lesson: &lesson.Lesson{Category: "retry-timeout"}}
			}
		}
		if _, err := e.feedback.Store(ctx, fb); err != nil {
			t.Fatal(err)
		}
		if _, err := e.feedback.CatchUp(ctx); err != nil {
			t.Fatal(err)
		}
		check(step, func(read int) bool { return read == len(fb) })
	}
	add("new decisions", "inc-0", 5)
	add("more", "inc-1", 7)
	// Evaluations change without the store moving: late ones, and a
	// decision moved to a cluster the proposal does not cover.
	ev.evals["inc-0-n1"] = evaluator.Evaluation{DecisionID: "inc-0-n1", ClusterID: "C1", Lesson: &lesson.Lesson{Category: "retry-timeout"}}
	ev.evals["inc-1-n0"] = evaluator.Evaluation{DecisionID: "inc-1-n0", ClusterID: "C9", Lesson: &lesson.Lesson{Category: "naming"}}
	check("evaluations changed", func(read int) bool { return read == 0 })
	add("evidence arrives", "inc-2", 4)
	base, err := e.feedback.Repo().Tip(feedbackstore.Branch)
	if err != nil {
		t.Fatal(err)
	}

	// A commit rewrites an approval in scope: it is indexed again under
	// a new number, and must not count twice.
	layout, err := e.feedback.Layout()
	if err != nil {
		t.Fatal(err)
	}
	rec, err := e.feedback.Get(ctx, "inc-1-a2")
	if err != nil {
		t.Fatal(err)
	}
	rec.Feedback.EpicID = "EPIC-rewritten"
	b, err := json.MarshalIndent(rec.Feedback, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.feedback.Repo().Update(ctx, feedbackstore.Branch, func(*gitrepo.Snapshot) (*gitrepo.CommitSpec, error) {
		return &gitrepo.CommitSpec{Message: "rewrite a decision", Changes: []gitrepo.Change{{Path: layout.DecisionPath("inc-1-a2"), Data: b}}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.feedback.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	check("a decision indexed again", func(read int) bool { return read >= first })

	// An operator resets the branch to before the last batch.
	add("another batch", "inc-3", 3)
	tip, err := e.feedback.Repo().Tip(feedbackstore.Branch)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.feedback.Repo().SetBranch(feedbackstore.Branch, tip, base); err != nil {
		t.Fatal(err)
	}
	if _, err := e.feedback.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	check("history rewritten", all)
	if pv, _ := countOf(t, s, e); pv.ApprovalsInScope == 0 || pv.Cluster.Total == 0 || pv.Unevaluated == 0 {
		t.Errorf("the counts are not exercised: %+v", pv)
	}
}
