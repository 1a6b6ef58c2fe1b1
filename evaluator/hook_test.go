package evaluator

import (
	"context"
	"sync"
	"testing"
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
