package evaluator

import (
	"context"
	"reflect"
	"sync"
	"testing"
	"time"
)

// TestOnEvaluatedReportsEveryLessonAsStored: the hook sees each
// evaluation after it is committed, and again with the new category when
// a curator's correction reclassifies it, so a listener (analytics) always
// ends with the category the state holds.
func TestOnEvaluatedReportsEveryLessonAsStored(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]string{}
	calls := 0
	hook := func(evs []Evaluation) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		for _, ev := range evs {
			if ev.Lesson != nil {
				seen[ev.DecisionID] = ev.Lesson.Category
			}
		}
	}
	feed := newFeed()
	e := newEnv(t, t.TempDir(), feed, Options{Lessons: curatorLessons(t), LinkageThreshold: 0.99, OnEvaluated: hook})
	ctx := context.Background()
	feed.add(zorbsAndQuuxes()...)
	e.drain(t)
	agree := func(when string) {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		for _, it := range feed.items {
			if it.Correction != nil {
				continue
			}
			ev, _, err := e.svc.Evaluation(ctx, it.Feedback.DecisionID)
			if err != nil {
				t.Fatal(err)
			}
			if ev.Lesson == nil {
				continue
			}
			if got := seen[ev.DecisionID]; got != ev.Lesson.Category {
				t.Errorf("%s: hook saw %s as %q, the state holds %q", when, ev.DecisionID, got, ev.Lesson.Category)
			}
		}
	}
	agree("after evaluation")
	if calls == 0 || len(seen) == 0 {
		t.Fatalf("hook called %d times with %d lessons", calls, len(seen))
	}
	ev, _, err := e.svc.Evaluation(ctx, "z1")
	if err != nil {
		t.Fatal(err)
	}
	q, _, err := e.svc.Evaluation(ctx, "q1")
	if err != nil {
		t.Fatal(err)
	}
	feed.addCorrection(Correction{ID: "corr-1", Kind: CorrectMerge, Clusters: []string{ev.ClusterID, q.ClusterID}, By: "curator-1",
		Members: [][]string{{"z1"}, {"q1"}}, Into: "zorb-problem"})
	e.drain(t)
	agree("after the correction")
	mu.Lock()
	defer mu.Unlock()
	if seen["q1"] != "zorb-problem" {
		t.Errorf("q1 after merging into zorb-problem: hook saw %q", seen["q1"])
	}
}

// TestOnReviewedReportsEachStepOfAClarification: the hook sees an
// ambiguous decision's needs-review record when it is created, when a
// reply resolves it (with the reply's time) and when another is left for
// human review, so a listener (analytics) ends with the state's records.
func TestOnReviewedReportsEachStepOfAClarification(t *testing.T) {
	var mu sync.Mutex
	last := map[string]NeedsReview{}
	statuses := map[string][]string{}
	hook := func(rs []NeedsReview) {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range rs {
			last[r.DecisionID] = r
			if s := statuses[r.DecisionID]; len(s) == 0 || s[len(s)-1] != r.Status {
				statuses[r.DecisionID] = append(s, r.Status)
			}
		}
	}
	feed := newFeed()
	e := newEnv(t, t.TempDir(), feed, Options{BatchSize: 2, OnReviewed: hook})
	at := time.Date(2026, 11, 2, 8, 0, 0, 0, time.UTC)
	feed.add(neg("v", "vic", "E3", "fix this"), neg("w", "wes", "E4", "wrong"))
	feed.addConversation(Conversation{DecisionID: "v", Thread: "C1:1.0", Attempts: 1, AskedAt: at, Status: PendingClarification,
		Replies: []ConversationReply{{Text: "The retry loop has no timeout and hangs forever; set a timeout on the HTTP client.", At: at.Add(90 * time.Minute)}}})
	feed.addConversation(Conversation{DecisionID: "w", Thread: "C1:2.0", Attempts: 3, AskedAt: at, Status: NeedsHumanReview})
	e.drain(t)

	mu.Lock()
	defer mu.Unlock()
	want := map[string][]string{"v": {PendingClarification, Resolved}, "w": {PendingClarification, NeedsHumanReview}}
	if !reflect.DeepEqual(statuses, want) {
		t.Errorf("the hook saw %v, want %v", statuses, want)
	}
	for _, id := range []string{"v", "w"} {
		r, err := e.svc.Review(context.Background(), id)
		if err != nil || !reflect.DeepEqual(last[id], r) {
			t.Errorf("%s: the hook's last record %+v, the state holds %+v (%v)", id, last[id], r, err)
		}
	}
	if got := last["v"].UpdatedAt; !got.Equal(at.Add(90 * time.Minute)) {
		t.Errorf("v resolved at %s, want the reply's time", got)
	}
}
