package analytics

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/precept-dev/precept"
)

// evaluations is what the evaluator has recorded so far, by decision.
type evaluations struct {
	mu sync.Mutex
	m  map[string]Facts
}

func (e *evaluations) set(id string, f Facts) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.m[id] = f
}

func (e *evaluations) lookup(_ context.Context, id string) (Facts, bool, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	f, ok := e.m[id]
	return f, ok, nil
}

func rubric(wrong, where bool) []Attribute {
	return []Attribute{{Name: "what_was_wrong", Met: wrong}, {Name: "where", Met: where}}
}

// TestUnclearFeedbackFiguresFollowTheClarificationsAndSurviveARebuild
// counts four rejections of one day, each reaching analytics its own way:
//
//	x1  unclear when counted (looked up); resolved 30 min after arrival (hook)
//	x2  not evaluated when counted; evaluated unclear, then resolved 2 h after arrival (hooks)
//	x3  left for needs-review when counted (looked up)
//	x4  unclear and still being asked about (looked up)
//
// and x5, an approval, which is never unclear. The rubric: x1 and x3
// miss both attributes, x2 and x4 have both once evaluated.
func TestUnclearFeedbackFiguresFollowTheClarificationsAndSurviveARebuild(t *testing.T) {
	feed := &memFeed{}
	evs := &evaluations{m: map[string]Facts{}}
	path := filepath.Join(t.TempDir(), "analytics.db")
	open := func() *Aggregate {
		agg, err := Open(feed, path, Options{Evaluations: evs.lookup, BatchSize: 2, NoSync: true, Now: func() time.Time { return day2 }})
		if err != nil {
			t.Fatal(err)
		}
		return agg
	}
	drain := func(agg *Aggregate) {
		for {
			n, err := agg.Step(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				return
			}
		}
	}
	for i, id := range []string{"x1", "x2", "x3", "x4", "x5"} {
		v := precept.Rejected
		if id == "x5" {
			v = precept.Approved
		}
		feed.add(precept.Decision{DecisionID: id, Agent: "coder", GateID: "code-review", EpicID: "E1", TaskID: id,
			Decision: v, ReviewerID: "r1", Timestamp: day1.Add(time.Duration(i) * time.Minute)})
	}
	arrived := func(i int) time.Time { return day1.Add(time.Duration(i) * time.Minute) }
	evs.set("x1", Facts{Category: "naming", Rubric: rubric(false, false), Review: Clarifying})
	evs.set("x3", Facts{Rubric: rubric(false, false), Review: NeedsHumanReview})
	evs.set("x4", Facts{Rubric: rubric(true, true), Review: Clarifying})
	agg := open()
	drain(agg)

	x1 := Evaluated{DecisionID: "x1", Review: Resolved, ResolvedAt: arrived(0).Add(30 * time.Minute)}
	x2eval := Evaluated{DecisionID: "x2", Evaluation: true, Category: "tests", Rubric: rubric(true, true)}
	x2open := Evaluated{DecisionID: "x2", Review: Clarifying}
	x2done := Evaluated{DecisionID: "x2", Review: Resolved, ResolvedAt: arrived(1).Add(2 * time.Hour)}
	// The same report twice counts once.
	agg.Evaluated([]Evaluated{x1, x2eval, x2open, x2done, x2done})
	drain(agg)

	want := Figures{
		Unclear: 4, UnclearResolved: 2, UnclearNeedsReview: 1, UnclearOpen: 1, ResolutionRate: 2.0 / 3,
		Promotions: 2, PromotionP50Seconds: binValue(durationBin(1800)), PromotionP90Seconds: binValue(durationBin(7200)),
		RubricEvaluations: 4,
		RubricFill: []Fill{
			{Name: "what_was_wrong", Evaluations: 4, Met: 2, Rate: 0.5},
			{Name: "where", Evaluations: 4, Met: 2, Rate: 0.5},
		},
	}
	check := func(when string, agg *Aggregate) {
		t.Helper()
		rep, err := agg.Query(Query{From: day1.Truncate(24 * time.Hour), To: day2.Truncate(24 * time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		f := rep.Totals
		got := Figures{Unclear: f.Unclear, UnclearResolved: f.UnclearResolved, UnclearNeedsReview: f.UnclearNeedsReview,
			UnclearOpen: f.UnclearOpen, ResolutionRate: f.ResolutionRate, Promotions: f.Promotions,
			PromotionP50Seconds: f.PromotionP50Seconds, PromotionP90Seconds: f.PromotionP90Seconds,
			RubricEvaluations: f.RubricEvaluations, RubricFill: f.RubricFill}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", when, got, want)
		}
		if d := f.PromotionP50Seconds/1800 - 1; d < -DurationErrorBound || d > DurationErrorBound {
			t.Errorf("%s: median time to promotion %.0fs, not within %.1f%% of 1800s", when, f.PromotionP50Seconds, 100*DurationErrorBound)
		}
		if cats := f.LessonCategories; len(cats) != 2 {
			t.Errorf("%s: lesson categories %v, want naming and tests once each", when, cats)
		}
	}
	check("as counted", agg)
	agg.Close()
	agg = open()
	check("reopened", agg)
	agg.Close()

	// Rebuilt from the feed, with the evaluator's state as it ends.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	evs.set("x1", Facts{Category: "naming", Rubric: rubric(false, false), Review: Resolved, ResolvedAt: x1.ResolvedAt})
	evs.set("x2", Facts{Category: "tests", Rubric: rubric(true, true), Review: Resolved, ResolvedAt: x2done.ResolvedAt})
	agg = open()
	defer agg.Close()
	drain(agg)
	check("rebuilt", agg)
}

func TestFactsRecordsRoundTrip(t *testing.T) {
	k := cellKey{Day: 20000, Agent: "coder", Gate: "code-review"}
	for _, f := range []countedFacts{
		{},
		{Facts: Facts{Category: "naming"}, Arrived: day1},
		{Facts: Facts{Rubric: []Attribute{}, Review: Clarifying}, Arrived: day1},
		{Facts: Facts{Category: "tests", Rubric: rubric(true, false), Review: Resolved, ResolvedAt: day2}, Arrived: day1},
	} {
		gk, got, err := decodeFacts(encodeFacts(k, f))
		if err != nil || gk != k || !got.same(f) {
			t.Errorf("%+v came back as %+v (%v)", f, got, err)
		}
	}
	if _, _, err := decodeFacts([]byte{0, 3, 1}); err == nil {
		t.Error("a truncated record decodes")
	}
}

// TestAMoveAfterReopeningTakesAwayWhatWasCounted: times are counted in
// whole seconds, as the file keeps them, so a decision resolved 1.9 s
// after an arrival at half a second, counted, reopened and then moved
// elsewhere leaves no promotion behind.
func TestAMoveAfterReopeningTakesAwayWhatWasCounted(t *testing.T) {
	feed := &memFeed{}
	arrived := day1.Add(500 * time.Millisecond)
	feed.add(precept.Decision{DecisionID: "y1", Agent: "coder", GateID: "code-review", EpicID: "E1", TaskID: "T1",
		Decision: precept.Rejected, ReviewerID: "r1", Timestamp: arrived})
	evs := &evaluations{m: map[string]Facts{"y1": {Review: Resolved, ResolvedAt: arrived.Add(1900 * time.Millisecond)}}}
	path := filepath.Join(t.TempDir(), "analytics.db")
	open := func() *Aggregate {
		agg, err := Open(feed, path, Options{Evaluations: evs.lookup, NoSync: true, Now: func() time.Time { return day2 }})
		if err != nil {
			t.Fatal(err)
		}
		return agg
	}
	agg := open()
	if _, err := agg.Step(context.Background()); err != nil {
		t.Fatal(err)
	}
	agg.Close()
	agg = open()
	defer agg.Close()
	agg.Evaluated([]Evaluated{{DecisionID: "y1", Review: NeedsHumanReview}})
	if _, err := agg.Step(context.Background()); err != nil {
		t.Fatal(err)
	}
	rep, err := agg.Query(Query{From: day1.Truncate(24 * time.Hour), To: day2.Truncate(24 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if f := rep.Totals; f.Unclear != 1 || f.UnclearResolved != 0 || f.UnclearNeedsReview != 1 || f.Promotions != 0 {
		t.Errorf("after the move: %d unclear, %d resolved, %d needs review, %d promotions; want 1, 0, 1, 0",
			f.Unclear, f.UnclearResolved, f.UnclearNeedsReview, f.Promotions)
	}
}
