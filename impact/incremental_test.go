package impact

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/evaluator"
	"github.com/precept-dev/precept/feedbackstore"
	"github.com/precept-dev/precept/lesson"
	"github.com/precept-dev/precept/lib/gitrepo"
	"github.com/precept-dev/precept/rules/rulefmt"
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

// countOf is what a count of proposal p finds, as one comparable value:
// the finished preview and the outputs kept.
func countOf(t *testing.T, s *Service, p rulefmt.Proposal) (Preview, tally) {
	t.Helper()
	pos, err := s.position()
	if err != nil {
		t.Fatal(err)
	}
	pv, tl, err := s.count(context.Background(), p, pos, true)
	if err != nil {
		t.Fatal(err)
	}
	tl.preview = Preview{}
	return pv, tl
}

// A count extended with the decisions stored since equals a count from
// the first decision, step after step: new approvals, negatives and
// evidence, evaluations arriving late and moving between clusters, a
// decision indexed again and decisions dropped by a rewritten history
// whose numbers then grew past the old ones; for a second proposal
// counted only now and then too; and it reads only what was stored
// since, unless decisions were deleted or indexed again.
func TestACountExtendedWithNewDecisionsEqualsAWholeCount(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	ev := e.sources.Evaluations.(*evaluations)
	e.proposal.FeedbackIDs = append(e.proposal.FeedbackIDs, "inc-0-n0", "inc-2-n3")
	second := e.proposal
	second.ID, second.ClusterID, second.EvidenceClusters, second.FeedbackIDs = "p-second", "C2", nil, []string{"n2", "inc-1-n4"}
	opts := Options{MaxCalls: 4, ApprovalSample: 3}
	src := e.sources
	reads := &readCounter{Feedback: e.feedback}
	src.Feedback = reads
	s, err := New(src, opts)
	if err != nil {
		t.Fatal(err)
	}
	same := func(step string, p rulefmt.Proposal) {
		t.Helper()
		got, gotTl := countOf(t, s, p)
		if want := naiveCount(t, e, p, got); got.ApprovalsInScope != want.ApprovalsInScope || got.OverCorrect.Total != want.OverCorrect.Total ||
			got.Cluster.Total != want.Cluster.Total || got.CategoryNegatives.Total != want.CategoryNegatives.Total || got.Unevaluated != want.Unevaluated {
			t.Fatalf("%s, %s: counted %+v\nreading every decision: %+v", step, p.ID, got, want)
		}
		whole, err := New(e.sources, opts)
		if err != nil {
			t.Fatal(err)
		}
		want, wantTl := countOf(t, whole, p)
		got.ComputedAt = want.ComputedAt
		if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotTl, wantTl) {
			t.Fatalf("%s, %s: extended count\n%+v\n%+v\nwhole count\n%+v\n%+v", step, p.ID, got, gotTl, want, wantTl)
		}
	}
	steps := 0
	check := func(step string, wantRead func(int) bool) {
		t.Helper()
		before := reads.read
		same(step, e.proposal)
		if n := reads.read - before; !wantRead(n) {
			t.Errorf("%s: read %d decisions", step, n)
		}
		if steps%3 == 0 {
			same(step, second)
		}
		steps++
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
	rewind(t, e, base)
	// Renumbered from one, the index then grows past where it was.
	var fb []precept.Feedback
	for i := range 12 {
		fb = append(fb, precept.NewFeedback(precept.Decision{DecisionID: fmt.Sprintf("inc-4-a%d", i), GateID: "HITL-2", EpicID: "EPIC-4",
			Agent: "coder", Decision: precept.Approved, ReviewerID: "rev", Timestamp: t0, ScopePath: "src/api/z.go"}, "api:test", t0))
	}
	if _, err := e.feedback.Store(ctx, fb); err != nil {
		t.Fatal(err)
	}
	if _, err := e.feedback.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	if pos, err := s.position(); err != nil || pos.seq <= s.counter.l.seq {
		t.Fatalf("the rebuilt index is at %+v (%v), not past the %d counted", pos, err, s.counter.l.seq)
	}
	check("history rewritten", all)
	pv, tl := countOf(t, s, e.proposal)
	if pv.ApprovalsInScope == 0 || pv.Cluster.Total == 0 || pv.Unevaluated == 0 || len(tl.evidence) == 0 || len(tl.approvals) == 0 {
		t.Errorf("the counts are not exercised: %+v %+v", pv, tl)
	}
	for _, o := range slices.Concat(tl.evidence, tl.approvals) {
		d, err := e.feedback.Decision(ctx, o.DecisionID)
		if err != nil || o.Text == "" || o.Text != replayText(d.AgentOutput) {
			t.Errorf("output %s has text %q (%v)", o.DecisionID, o.Text, err)
		}
	}
}

// naiveCount counts p's totals the plain way, reading every stored
// decision, with the category and scope of pv: what counts computed from
// the ledger must equal.
func naiveCount(t *testing.T, e *env, p rulefmt.Proposal, pv Preview) Preview {
	t.Helper()
	ev := e.sources.Evaluations.(*evaluations)
	cls := e.sources.Lessons.Classifier()
	var out Preview
	for seq := uint64(0); ; {
		page, err := e.feedback.Since(seq, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			return out
		}
		for _, r := range page {
			seq = r.Seq
			d := r.Decision
			if !slices.Contains(p.Agents, d.Agent) {
				continue
			}
			if !d.Decision.Negative() {
				if pv.Scope.in(d.Agent, d.GateID, scopePath(d.ScopePath), d.ScopePath != "") {
					out.ApprovalsInScope++
					if strings.TrimSpace(d.ReviewerComment) != "" && pv.Category != "" && cls.Classify(lesson.InputOf(d)).Category == pv.Category {
						out.OverCorrect.Total++
					}
				}
				continue
			}
			x, ok := ev.evals[d.DecisionID]
			switch {
			case !ok:
				out.Unevaluated++
				continue
			case x.ClusterID != "" && (x.ClusterID == p.ClusterID || slices.Contains(p.EvidenceClusters, x.ClusterID)):
				out.Cluster.Total++
			}
			if x.Lesson != nil && pv.Category != "" && x.Lesson.Category == pv.Category {
				out.CategoryNegatives.Total++
			}
		}
	}
}

// A rebuilt index numbers decisions again from one: when the decisions
// dropped by a rewritten history are replaced by as many new ones, the
// numbers and the count are where they were, and only the index's
// generation tells the ledger that every row may be another decision.
func TestARebuiltIndexIsReadAgainWhateverItsNumbers(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	s, err := New(e.sources, Options{})
	if err != nil {
		t.Fatal(err)
	}
	store := func(prefix string, verdict precept.Verdict) {
		var fb []precept.Feedback
		for i := range 4 {
			fb = append(fb, precept.NewFeedback(precept.Decision{DecisionID: fmt.Sprintf("%s-%d", prefix, i), GateID: "HITL-2", EpicID: "EPIC-7",
				Agent: "coder", Decision: verdict, ReviewerID: "rev", Timestamp: t0, ScopePath: "src/api/q.go", ReviewerComment: "No timeout on this call."}, "api:test", t0))
		}
		if _, err := e.feedback.Store(ctx, fb); err != nil {
			t.Fatal(err)
		}
		if _, err := e.feedback.CatchUp(ctx); err != nil {
			t.Fatal(err)
		}
	}
	base, err := e.feedback.Repo().Tip(feedbackstore.Branch)
	if err != nil {
		t.Fatal(err)
	}
	store("approved", precept.Approved)
	before, _ := countOf(t, s, e.proposal)
	rewind(t, e, base)
	store("rejected", precept.Rejected)
	got, _ := countOf(t, s, e.proposal)
	if want := naiveCount(t, e, e.proposal, got); got.ApprovalsInScope != want.ApprovalsInScope || got.Unevaluated != want.Unevaluated {
		t.Fatalf("after the rebuild: %d approvals in scope and %d unevaluated, reading every decision %d and %d (before it: %d and %d)",
			got.ApprovalsInScope, got.Unevaluated, want.ApprovalsInScope, want.Unevaluated, before.ApprovalsInScope, before.Unevaluated)
	}
}

// rewind resets the feedback branch to base, as an operator restoring a
// backup would, and lets the store's index follow: it is rebuilt.
func rewind(t *testing.T, e *env, base gitrepo.Hash) {
	t.Helper()
	repo := e.feedback.Repo()
	tip, err := repo.Tip(feedbackstore.Branch)
	if err != nil {
		t.Fatal(err)
	}
	if err := repo.SetBranch(feedbackstore.Branch, tip, base); err != nil {
		t.Fatal(err)
	}
	if _, err := e.feedback.CatchUp(context.Background()); err != nil {
		t.Fatal(err)
	}
}
