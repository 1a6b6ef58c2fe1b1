package clarification

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"sort"
	"sync"
	"testing"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/evaluator"
	"github.com/precept-dev/precept/feedbackstore"
	"github.com/precept-dev/precept/lib/embedding"
	"github.com/precept-dev/precept/lib/gitrepo"
	"github.com/precept-dev/precept/lib/vectorindex"
	"github.com/precept-dev/precept/lib/vectorindex/chromem"
)

// replica is one preceptd's feedback store, evaluator and clarification
// service over a shared feedback repository; nothing else is shared.
type replica struct {
	t   *testing.T
	fb  *feedbackstore.Store
	ev  *evaluator.Service
	svc *Service
}

func newReplica(t *testing.T, repo *gitrepo.Repo) *replica {
	t.Helper()
	dir := t.TempDir()
	fb, err := feedbackstore.Open(repo, filepath.Join(dir, "feedback.db"), feedbackstore.Options{BatchWait: 1})
	if err != nil {
		t.Fatal(err)
	}
	emb := embedding.NewLocal(embedding.LocalOptions{})
	idx, reset, err := chromem.Open(filepath.Join(dir, "vectors"), vectorindex.Spec{Embedder: emb.Name(), Dimension: emb.Dimension()})
	if err != nil {
		t.Fatal(err)
	}
	// Small batches, so replicas evaluate with different boundaries.
	ev, err := evaluator.New(context.Background(), evaluator.FeedFrom(fb), emb, idx, reset, filepath.Join(dir, "evaluator.db"), evaluator.Options{BatchSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ev.Close(); idx.Close(); fb.Close() })
	return &replica{t: t, fb: fb, ev: ev, svc: New(fb, ev, Options{}, nil)}
}

func (r *replica) store(fb ...precept.Feedback) {
	r.t.Helper()
	if _, err := r.fb.Store(context.Background(), fb); err != nil {
		r.t.Fatal(err)
	}
}

func (r *replica) sync() {
	r.t.Helper()
	if err := r.svc.sync(context.Background()); err != nil {
		r.t.Fatal(err)
	}
}

func (r *replica) reply(id, ts, text string) Step {
	r.t.Helper()
	step, _, recorded, err := r.svc.Reply(context.Background(), id, feedbackstore.Reply{TS: ts, User: "U0VIC", Text: text, At: t0})
	if err != nil || !recorded {
		r.t.Fatalf("reply %s: recorded %v, %v", ts, recorded, err)
	}
	return step
}

// outcome is what a replica concluded: every decision's class and
// cluster, and the review queue without the times of evaluation.
func (r *replica) outcome(ids []string) string {
	r.t.Helper()
	ctx := context.Background()
	var out []string
	for _, id := range ids {
		ev, _, err := r.ev.Evaluation(ctx, id)
		if err != nil {
			r.t.Fatal(err)
		}
		line := fmt.Sprintf("%s %s %s size=%d", id, ev.Class, ev.ClusterID, statsSize(ev.Stats))
		if nr, err := r.ev.Review(ctx, id); err == nil {
			line += fmt.Sprintf(" review=%s attempts=%d thread=%s replies=%q missing=%v", nr.Status, nr.Attempts, nr.Thread, nr.Replies, nr.Missing)
		}
		out = append(out, line)
	}
	sort.Strings(out)
	return fmt.Sprint(out)
}

func statsSize(s *evaluator.Stats) int {
	if s == nil {
		return 0
	}
	return s.Size
}

func negative(id, reviewer, epic, comment string) precept.Feedback {
	d := precept.Decision{
		DecisionID: id, GateID: "HITL-2", EpicID: epic, Agent: "coding-agent", Decision: precept.Rejected,
		ReviewerID: reviewer, Timestamp: t0, ReviewerComment: comment,
	}
	if err := d.Validate(precept.Limits{}, t0); err != nil {
		panic(err)
	}
	return precept.NewFeedback(d, "test", t0)
}

// Two replicas share only the feedback repository — no Redis, no reply
// log. Questions and replies recorded through either, some through both,
// lead both to the same classifications and review queue, and so does a
// third replica that starts later from git alone.
func TestReplicasReachTheSameClarificationOutcomeFromGitAlone(t *testing.T) {
	repo, err := gitrepo.Open(filepath.Join(t.TempDir(), "feedback.git"), gitrepo.Options{NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { repo.Close() })
	a, b := newReplica(t, repo), newReplica(t, repo)
	ctx := context.Background()
	a.store(
		negative("t1", "ann", "E1", "The HTTP client in client.go has no timeout and hangs forever; set a 10s timeout because users wait."),
		negative("v", "vic", "E2", "fix this"),
		negative("w", "wes", "E3", "wrong"),
	)
	a.sync()
	b.sync()
	// Both replicas ask the first question about v at once: one record.
	var wg sync.WaitGroup
	for _, r := range []*replica{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := r.svc.Asked(ctx, "v", "C1:1.0", feedbackstore.Question{Attempt: 1, Kind: KindFirst, AskedAt: t0}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if _, err := a.svc.Asked(ctx, "w", "C1:2.0", feedbackstore.Question{Attempt: 1, Kind: KindFirst, AskedAt: t0}); err != nil {
		t.Fatal(err)
	}
	// A vague reply reaches b; the follow-up is asked through a.
	if step := b.reply("v", "1.1", "redo it please"); step.Action != FollowUp || step.Attempt != 2 {
		t.Fatalf("after a vague reply: %+v", step)
	}
	if _, err := a.svc.Asked(ctx, "v", "C1:1.0", feedbackstore.Question{Attempt: 2, Kind: KindFollowUp, AskedAt: t0}); err != nil {
		t.Fatal(err)
	}
	// More feedback on the same problem arrives between the replies.
	b.store(negative("t2", "bob", "E4", "Set a timeout on the HTTP client; requests to the API hang indefinitely without one."))
	// The clear reply reaches both replicas (event and recovery): it is
	// recorded once, and only one of them is told to thank.
	clear := "The HTTP client in client.go has no timeout and can hang forever; set a timeout because requests hang."
	steps := make([]Step, 2)
	recorded := make([]bool, 2)
	for i, r := range []*replica{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			steps[i], _, recorded[i], err = r.svc.Reply(ctx, "v", feedbackstore.Reply{TS: "1.2", User: "U0VIC", Text: clear, At: t0})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if recorded[0] == recorded[1] {
		t.Fatalf("the same reply was recorded %v / %v", recorded[0], recorded[1])
	}
	thanked := steps[0]
	if recorded[1] {
		thanked = steps[1]
	}
	if thanked.Action != Thank {
		t.Fatalf("after the clear reply: %+v", thanked)
	}
	// w goes unanswered and is left for human review; a reply after that
	// is absorbed.
	if left, err := b.svc.Leave(ctx, "w"); err != nil || !left {
		t.Fatalf("Leave = %v, %v", left, err)
	}
	if left, _ := a.svc.Leave(ctx, "w"); left {
		t.Fatal("left for human review twice")
	}
	if step := a.reply("w", "2.1", "the export is broken"); step.Action != Absorb {
		t.Fatalf("a reply after human review: %+v", step)
	}
	a.store(negative("t3", "cat", "E5", "No timeout on the http client means requests hang forever; add one in client.go."))

	ids := []string{"t1", "t2", "t3", "v", "w"}
	a.sync()
	b.sync()
	want := a.outcome(ids)
	if got := b.outcome(ids); got != want {
		t.Fatalf("replica b:\n%s\nreplica a:\n%s", got, want)
	}
	c := newReplica(t, repo)
	c.sync()
	if got := c.outcome(ids); got != want {
		t.Fatalf("a replica rebuilt from git:\n%s\nthe others:\n%s", got, want)
	}
	ev, _, _ := c.ev.Evaluation(ctx, "v")
	if ev.Class == evaluator.Ambiguous || ev.Revision != 2 {
		t.Fatalf("v after its clear reply: %+v", ev)
	}
	rec, err := c.fb.Clarification(ctx, "v")
	if err != nil || len(rec.Replies) != 2 || rec.Attempts() != 2 || rec.Thread != "C1:1.0" {
		t.Fatalf("v's record = %+v, %v", rec, err)
	}
	if pending, _ := c.svc.Pending(ctx); len(pending) != 1 || pending[0].DecisionID != "w" || pending[0].Status != evaluator.NeedsHumanReview || !reflect.DeepEqual(pending[0].Replies, []string{"the export is broken"}) {
		t.Fatalf("pending = %+v", pending)
	}
}

// A conversation an older precept kept elsewhere is merged into the
// record once: what the record has stays, what it lacks is added.
func TestImportMergesAConversationOnce(t *testing.T) {
	repo, err := gitrepo.Open(filepath.Join(t.TempDir(), "feedback.git"), gitrepo.Options{NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { repo.Close() })
	r := newReplica(t, repo)
	ctx := context.Background()
	r.store(negative("v", "vic", "E1", "fix this"))
	r.sync()
	if _, err := r.svc.Asked(ctx, "v", "C1:1.0", feedbackstore.Question{Attempt: 1, Kind: KindFirst, AskedAt: t0}); err != nil {
		t.Fatal(err)
	}
	old := feedbackstore.Clarification{DecisionID: "v", Thread: "C1:9.9", Status: evaluator.NeedsHumanReview,
		Questions: []feedbackstore.Question{{Attempt: 1}, {Attempt: 2}, {Attempt: 3, AskedAt: t0}},
		Replies:   []feedbackstore.Reply{{TS: "1.1", Text: "redo it"}, {TS: "1.2", Text: "nope"}}}
	for i, want := range []bool{true, false} {
		if changed, err := r.svc.Import(ctx, old); err != nil || changed != want {
			t.Fatalf("import %d: changed %v, %v", i, changed, err)
		}
	}
	rec, _ := r.fb.Clarification(ctx, "v")
	if rec.Thread != "C1:1.0" || rec.Attempts() != 3 || rec.Questions[0].Kind != KindFirst || len(rec.Replies) != 2 || rec.Status != evaluator.NeedsHumanReview {
		t.Fatalf("merged record = %+v", rec)
	}
	r.sync()
	if nr, _ := r.ev.Review(ctx, "v"); nr.Status != evaluator.NeedsHumanReview || len(nr.Replies) != 2 || nr.Attempts != 3 {
		t.Fatalf("review after the import = %+v", nr)
	}
}

func TestARecordKeepsAtMostMaxReplies(t *testing.T) {
	ctx := context.Background()
	r := newReplica(t, openTestRepo(t))
	r.store(negative("v", "vic", "E1", "fix this"))
	r.sync()
	if _, err := r.svc.Leave(ctx, "v"); err != nil {
		t.Fatal(err)
	}
	for i := range MaxReplies {
		r.reply("v", fmt.Sprintf("1800000000.%06d", i), "more about it")
	}
	_, _, recorded, err := r.svc.Reply(ctx, "v", feedbackstore.Reply{TS: "1800000001.000000", User: "U0VIC", Text: "and more", At: t0})
	if err != nil || recorded {
		t.Fatalf("reply %d: recorded %v, %v", MaxReplies+1, recorded, err)
	}
	sit, err := r.svc.Situation(ctx, "v")
	if err != nil || len(sit.Record.Replies) != MaxReplies {
		t.Fatalf("record holds %d replies, %v", len(sit.Record.Replies), err)
	}
}

func openTestRepo(t *testing.T) *gitrepo.Repo {
	t.Helper()
	repo, err := gitrepo.Open(filepath.Join(t.TempDir(), "feedback.git"), gitrepo.Options{NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { repo.Close() })
	return repo
}
