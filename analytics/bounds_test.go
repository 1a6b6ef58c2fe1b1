package analytics

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"
)

// Changed lines that look like file headers inside a hunk are changes.
func TestLinesChangedCountsHunkLinesThatLookLikeHeaders(t *testing.T) {
	diff := "--- a/q.sql\n+++ b/q.sql\n@@ -1,3 +1,3 @@\n--- old comment\n+-- new comment\n select 1;\n-x\n+++i;\n"
	// Hunk: old 3 (removed "-- old comment", context, removed "x"), new 3
	// (added "-- new comment", context, added "++i;"): 4 changed lines.
	if got := LinesChanged(diff); got != 4 {
		t.Fatalf("LinesChanged = %d, want 4", got)
	}
	// Without hunk headers, +/- lines count and headers do not.
	if got := LinesChanged("--- a\n+++ b\n-x\n+y\n z\n"); got != 2 {
		t.Fatalf("LinesChanged without hunks = %d, want 2", got)
	}
}

// Names past MaxLabels count as OtherLabel, so queries stay bounded.
func TestLabelsAreBounded(t *testing.T) {
	in := newInterner(&noLock{})
	for i := range MaxLabels + 50 {
		in.id(string(rune('a'+i%26)) + string(rune('0'+i)))
	}
	if len(in.names) > MaxLabels+1 {
		t.Fatalf("%d names kept, want at most %d", len(in.names), MaxLabels+1)
	}
	if in.names[in.id("brand-new")] != OtherLabel {
		t.Fatalf("a name past the bound is %q", in.names[in.id("brand-new")])
	}
}

type noLock struct{}

func (noLock) Lock()   {}
func (noLock) Unlock() {}

// After the store is renumbered, a step with lessons queued starts again
// from the beginning rather than writing the old position back.
func TestARenumberedStoreIsCountedAgainWhateverIsQueued(t *testing.T) {
	h := loaded(t)
	h.feed.mu.Lock()
	h.feed.recs = h.feed.recs[:3]
	h.feed.mu.Unlock()
	h.agg.Evaluated([]Evaluated{{DecisionID: "a2", Evaluation: true, Category: "naming"}})
	if _, err := h.agg.Step(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, d := range fixture()[3:] {
		d.DecisionID += "x"
		h.feed.add(d)
	}
	h.drain(t)
	h.feed.mu.Lock()
	n := len(h.feed.recs)
	h.feed.mu.Unlock()
	if got := h.query(t, Query{}).Totals.Decisions; got != int64(n) {
		t.Fatalf("%d decisions counted, the feed has %d", got, n)
	}
}

// A reclassification handed over just before a graceful stop is applied
// by Run's last step, so a restart agrees with a rebuild.
func TestAReclassificationBeforeAStopIsKept(t *testing.T) {
	h := loaded(t)
	h.agg.Close()
	// Steps an hour apart: only the last step at the stop can apply it.
	agg, err := Open(h.feed, h.path, Options{Evaluations: h.lessons.lookup, BatchSize: 4, NoSync: true, StepInterval: time.Hour, PollInterval: time.Hour,
		Now: func() time.Time { return day2 }})
	if err != nil {
		t.Fatal(err)
	}
	h.agg = agg
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.agg.Run(ctx) }()
	time.Sleep(50 * time.Millisecond)
	h.lessons.set("a6", "requirements")
	h.agg.Evaluated([]Evaluated{{DecisionID: "a6", Evaluation: true, Category: "requirements"}})
	time.Sleep(50 * time.Millisecond)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	h.agg.Close()
	h.open(t)
	got := fmt.Sprint(h.query(t, Query{}).Totals.LessonCategories)
	h.agg.Close()
	os.Remove(h.path)
	h.open(t)
	h.drain(t)
	if rebuilt := fmt.Sprint(h.query(t, Query{}).Totals.LessonCategories); got != rebuilt {
		t.Fatalf("after a restart %s, after a rebuild %s", got, rebuilt)
	}
}
