package analytics

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/feedbackstore"
)

// memFeed is an in-memory Feed: records numbered from 1 in the order
// they were added, as the feedback store numbers commits.
type memFeed struct {
	mu   sync.Mutex
	recs []feedbackstore.Record
}

func (f *memFeed) add(d precept.Decision) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := feedbackstore.Record{Feedback: precept.NewFeedback(d, "test", d.Timestamp), Seq: uint64(len(f.recs) + 1)}
	f.recs = append(f.recs, r)
}

func (f *memFeed) Since(seq uint64, limit int) ([]feedbackstore.Record, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []feedbackstore.Record
	for _, r := range f.recs {
		if r.Seq > seq && len(out) < limit {
			out = append(out, r)
		}
	}
	return out, nil
}

func (f *memFeed) LastSeq() (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return uint64(len(f.recs)), nil
}

func (f *memFeed) Changed() <-chan struct{} { return make(chan struct{}) }

// lessons is what the evaluator has classified so far.
type lessons struct {
	mu sync.Mutex
	m  map[string]string
}

func (l *lessons) set(id, cat string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.m[id] = cat
}

func (l *lessons) lookup(_ context.Context, id string) (Facts, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c, ok := l.m[id]
	return Facts{Category: c}, ok, nil
}

var (
	day1 = time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC) // a Monday
	day2 = day1.Add(24 * time.Hour)
)

func secs(n int64) *int64 { return &n }

// fixture is six decisions whose figures are computed by hand in the
// tests below. In commit order:
//
//	id  agent    gate         epic/task verdict  day dur tags          error_categories quality    text
//	a1  coder    code-review  E1/T1     APPROVED  1   4  -             -                clarity 80 -
//	a2  coder    code-review  E1/T2     REJECTED  1   8  style         naming           clarity 40 diff: 2 lines (+1 -1)
//	a3  coder    code-review  E1/T2     WITH_CH.  1   2  style,tests   -                -          "abcd"→"abXd": 40%
//	a4  coder    code-review  E1/T1     REJECTED  2   6  -             naming,security  -          diff: 3 lines
//	a5  coder    code-review  E2/-      APPROVED  2   -  -             -                clarity 100 -
//	a6  planner  plan-review  E1/-      REJECTED  1  10  scope         -                -          "aaaa"→"bbbb": 100%
//
// Lessons: a2 naming and a6 scope are evaluated before the aggregate
// reaches them; a3 (tests) only afterwards; a4 has none.
func fixture() []precept.Decision {
	d := func(id, agent, gate, epic, task string, v precept.Verdict, at time.Time) precept.Decision {
		return precept.Decision{DecisionID: id, Agent: agent, GateID: gate, EpicID: epic, TaskID: task, Decision: v,
			ReviewerID: "r1", Timestamp: at}
	}
	a1 := d("a1", "coder", "code-review", "E1", "T1", precept.Approved, day1)
	a1.ReviewDurationSeconds, a1.QualityScores = secs(4), map[string]int32{"clarity": 80}
	a2 := d("a2", "coder", "code-review", "E1", "T2", precept.Rejected, day1.Add(time.Hour))
	a2.ReviewDurationSeconds, a2.Tags, a2.ErrorCategories = secs(8), []string{"style"}, []string{"naming"}
	a2.QualityScores = map[string]int32{"clarity": 40}
	a2.CorrectionDiff = "--- a/x.go\n+++ b/x.go\n@@ -1 +1 @@\n-foo := 1\n+count := 1\n"
	a3 := d("a3", "coder", "code-review", "E1", "T2", precept.ApprovedWithChanges, day1.Add(2*time.Hour))
	a3.ReviewDurationSeconds, a3.Tags = secs(2), []string{"style", "tests"}
	a3.AgentOutput, a3.ApprovedOutput = "abcd", "abXd"
	a4 := d("a4", "coder", "code-review", "E1", "T1", precept.Rejected, day2)
	a4.ReviewDurationSeconds, a4.ErrorCategories = secs(6), []string{"naming", "security"}
	a4.CorrectionDiff = "-a\n-b\n+c"
	a5 := d("a5", "coder", "code-review", "E2", "", precept.Approved, day2.Add(time.Hour))
	a5.QualityScores = map[string]int32{"clarity": 100}
	a6 := d("a6", "planner", "plan-review", "E1", "", precept.Rejected, day1.Add(3*time.Hour))
	a6.ReviewDurationSeconds, a6.Tags = secs(10), []string{"scope"}
	a6.AgentOutput, a6.ApprovedOutput = "aaaa", "bbbb"
	return []precept.Decision{a1, a2, a3, a4, a5, a6}
}

type harness struct {
	feed    *memFeed
	lessons *lessons
	path    string
	agg     *Aggregate
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{feed: &memFeed{}, lessons: &lessons{m: map[string]string{}}, path: filepath.Join(t.TempDir(), "analytics.db")}
	h.open(t)
	return h
}

func (h *harness) open(t *testing.T) {
	t.Helper()
	agg, err := Open(h.feed, h.path, Options{Evaluations: h.lessons.lookup, BatchSize: 4, NoSync: true,
		Now: func() time.Time { return day2 }})
	if err != nil {
		t.Fatal(err)
	}
	h.agg = agg
	t.Cleanup(func() { agg.Close() })
}

// drain steps until nothing is left.
func (h *harness) drain(t *testing.T) {
	t.Helper()
	for {
		n, err := h.agg.Step(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
	}
}

func (h *harness) query(t *testing.T, q Query) Report {
	t.Helper()
	if q.From.IsZero() {
		q.From, q.To = day1.Truncate(24*time.Hour), day2.Truncate(24*time.Hour).Add(24*time.Hour)
	}
	r, err := h.agg.Query(q)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// loaded runs the fixture through the aggregate as preceptd would: a2
// and a6 classified before the aggregate follows them, a3 after.
func loaded(t *testing.T) *harness {
	h := newHarness(t)
	for _, d := range fixture() {
		h.feed.add(d)
	}
	h.lessons.set("a2", "naming")
	h.lessons.set("a6", "scope")
	h.drain(t)
	h.lessons.set("a3", "tests")
	h.agg.Evaluated([]Evaluated{{DecisionID: "a3", Evaluation: true, Category: "tests"}})
	h.drain(t)
	return h
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestFiguresMatchHandComputedTotals(t *testing.T) {
	h := loaded(t)
	f := h.query(t, Query{}).Totals
	// Verdicts: APPROVED a1 a5, REJECTED a2 a4 a6, WITH_CHANGES a3.
	if f.Decisions != 6 || f.Approved != 2 || f.Rejected != 3 || f.ApprovedWithChanges != 1 {
		t.Errorf("verdicts = %d/%d/%d/%d, want 6/2/3/1", f.Decisions, f.Approved, f.Rejected, f.ApprovedWithChanges)
	}
	// Work items and their first decisions: code-review/E1/T1 → a1
	// (approved; a4 is a second attempt), code-review/E1/T2 → a2
	// (rejected; a3 second), code-review/E2 → a5 (approved),
	// plan-review/E1 → a6 (rejected): 2 of 4 = 0.5.
	if f.FirstAttempts != 4 || f.FirstPassAccepted != 2 || !near(f.FirstPassAcceptance, 0.5) {
		t.Errorf("first pass = %d of %d (%v), want 2 of 4 (0.5)", f.FirstPassAccepted, f.FirstAttempts, f.FirstPassAcceptance)
	}
	// Character edit distance: "abcd"→"abXd" is ab, -c, +X, d: 2 of 5
	// characters changed = 40%; "aaaa"→"bbbb" 8 of 8 = 100%; mean 70.
	if f.EditDistanceCount != 2 || !near(f.EditDistanceMeanPercent, 70) {
		t.Errorf("edit distance = %d decisions, mean %v; want 2, 70", f.EditDistanceCount, f.EditDistanceMeanPercent)
	}
	// Correction diffs: a2 changes 2 lines (headers not counted), a4 3.
	if f.CorrectionDiffs != 2 || f.LinesChanged != 5 || !near(f.LinesChangedMean, 2.5) {
		t.Errorf("lines changed = %d diffs, %d lines, mean %v; want 2, 5, 2.5", f.CorrectionDiffs, f.LinesChanged, f.LinesChangedMean)
	}
	// Durations 2 4 6 8 10 (a5 has none): nearest rank p50 is the 3rd
	// (6 s), p90 the ceil(4.5) = 5th (10 s); bins below 11 s are exact.
	if f.ReviewDurations != 5 || f.ReviewP50Seconds != 6 || f.ReviewP90Seconds != 10 {
		t.Errorf("durations = %d, p50 %v, p90 %v; want 5, 6, 10", f.ReviewDurations, f.ReviewP50Seconds, f.ReviewP90Seconds)
	}
	wantCounts(t, "tags", f.Tags, []Count{{"style", 2}, {"scope", 1}, {"tests", 1}})
	wantCounts(t, "error categories", f.ErrorCategories, []Count{{"naming", 2}, {"security", 1}})
	// Lessons: a2 naming and a6 scope looked up, a3 tests reported later.
	wantCounts(t, "lessons", f.LessonCategories, []Count{{"naming", 1}, {"scope", 1}, {"tests", 1}})
	// Quality: clarity 80, 40, 100 → mean 220/3.
	if len(f.QualityScores) != 1 || f.QualityScores[0].Name != "clarity" || f.QualityScores[0].Count != 3 || !near(f.QualityScores[0].Mean, 220.0/3) {
		t.Errorf("quality = %+v, want clarity 3 × 73.33", f.QualityScores)
	}
}

func wantCounts(t *testing.T, what string, got, want []Count) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

func TestFiguresPerAgentAndDay(t *testing.T) {
	h := loaded(t)
	r := h.query(t, Query{Split: SplitAgent})
	if len(r.Series) != 2 || r.Series[0].Agent != "coder" || r.Series[1].Agent != "planner" {
		t.Fatalf("series = %+v, want coder and planner", r.Series)
	}
	coder := r.Series[0]
	// coder's first attempts: a1 (approved), a2 (rejected), a5 (approved).
	if coder.Totals.FirstAttempts != 3 || !near(coder.Totals.FirstPassAcceptance, 2.0/3) {
		t.Errorf("coder first pass = %v of %d, want 2/3 of 3", coder.Totals.FirstPassAcceptance, coder.Totals.FirstAttempts)
	}
	// coder's durations 2 4 6 8: p50 is the 2nd (4 s), p90 the 4th (8 s).
	if coder.Totals.ReviewP50Seconds != 4 || coder.Totals.ReviewP90Seconds != 8 {
		t.Errorf("coder p50/p90 = %v/%v, want 4/8", coder.Totals.ReviewP50Seconds, coder.Totals.ReviewP90Seconds)
	}
	if len(coder.Buckets) != 2 || !coder.Buckets[0].Start.Equal(time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("coder buckets = %+v, want two days from 2026-11-02", coder.Buckets)
	}
	// Day 1: a1 approved and a2 rejected were first attempts (a3 was
	// not): 1/2. Day 2: a5 was (a4 was not): 1/1.
	b1, b2 := coder.Buckets[0], coder.Buckets[1]
	if b1.Decisions != 3 || b1.FirstAttempts != 2 || !near(b1.FirstPassAcceptance, 0.5) {
		t.Errorf("coder day 1 = %d decisions, %d first, rate %v; want 3, 2, 0.5", b1.Decisions, b1.FirstAttempts, b1.FirstPassAcceptance)
	}
	if b2.Decisions != 2 || b2.FirstAttempts != 1 || !near(b2.FirstPassAcceptance, 1) {
		t.Errorf("coder day 2 = %d decisions, %d first, rate %v; want 2, 1, 1", b2.Decisions, b2.FirstAttempts, b2.FirstPassAcceptance)
	}
	planner := r.Series[1].Totals
	if planner.Decisions != 1 || planner.FirstPassAcceptance != 0 || planner.EditDistanceMeanPercent != 100 || planner.ReviewP50Seconds != 10 {
		t.Errorf("planner = %+v", planner)
	}
	// A gate filter keeps one gate; the week holds both days.
	w := h.query(t, Query{Gates: []string{"plan-review"}, Granularity: Week})
	if len(w.Series) != 1 || len(w.Series[0].Buckets) != 1 || w.Totals.Decisions != 1 {
		t.Errorf("plan-review by week = %+v", w)
	}
	if got := w.Series[0].Buckets[0]; !got.Start.Equal(time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)) || !got.End.Equal(time.Date(2026, 11, 9, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("week = %s..%s, want the week of Monday 2026-11-02", got.Start, got.End)
	}
}

func TestLessonCountedOnceAndMovedOnReclassification(t *testing.T) {
	h := loaded(t)
	// The evaluator reports a2 again with the same category (a
	// re-evaluation after its cluster grew): counted once.
	h.agg.Evaluated([]Evaluated{{DecisionID: "a2", Evaluation: true, Category: "naming"}, {DecisionID: "a2", Evaluation: true, Category: "naming"}})
	// A curator moves a6 from scope to requirements.
	h.lessons.set("a6", "requirements")
	h.agg.Evaluated([]Evaluated{{DecisionID: "a6", Evaluation: true, Category: "requirements"}})
	// An evaluation of a decision the aggregate has not reached yet is
	// left for its lookup then.
	h.agg.Evaluated([]Evaluated{{DecisionID: "a7", Evaluation: true, Category: "naming"}})
	h.drain(t)
	a7 := fixture()[1]
	a7.DecisionID, a7.TaskID = "a7", "T7"
	h.lessons.set("a7", "naming")
	h.feed.add(a7)
	h.drain(t)
	wantCounts(t, "lessons", h.query(t, Query{}).Totals.LessonCategories,
		[]Count{{"naming", 2}, {"requirements", 1}, {"tests", 1}})
}

func TestRebuildAfterLosingTheFileGivesTheSameFigures(t *testing.T) {
	h := loaded(t)
	h.lessons.set("a6", "requirements")
	h.agg.Evaluated([]Evaluated{{DecisionID: "a6", Evaluation: true, Category: "requirements"}})
	h.drain(t)
	queries := []Query{{}, {Split: SplitAgent}, {Split: SplitGate, Granularity: Month}}
	var before []Report
	for _, q := range queries {
		before = append(before, h.query(t, q))
	}
	if err := h.agg.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(h.path); err != nil {
		t.Fatal(err)
	}
	h.open(t)
	if h.agg.Position() != 0 {
		t.Fatalf("position after losing the file = %d, want 0", h.agg.Position())
	}
	h.drain(t)
	for i, q := range queries {
		if got := h.query(t, q); !reflect.DeepEqual(got, before[i]) {
			t.Errorf("query %d after rebuild:\n got %+v\nwant %+v", i, got, before[i])
		}
	}
}

// TestRolledUpCellsAnswerAsTheCellsDo: queries without a gate filter
// read the cells rolled up per day and agent; naming every gate reads the
// cells themselves. Both must agree, as kept by steps and as loaded.
func TestRolledUpCellsAnswerAsTheCellsDo(t *testing.T) {
	h := loaded(t)
	h.lessons.set("a6", "requirements")
	h.agg.Evaluated([]Evaluated{{DecisionID: "a6", Evaluation: true, Category: "requirements"}})
	h.drain(t)
	check := func(when string) {
		t.Helper()
		for _, q := range []Query{{}, {Split: SplitAgent}, {Granularity: Week}} {
			rolled := h.query(t, q)
			q.Gates = []string{"code-review", "plan-review"}
			raw := h.query(t, q)
			if !reflect.DeepEqual(rolled, raw) {
				t.Errorf("%s, %+v: rolled up\n%+v\ncells\n%+v", when, q, rolled, raw)
			}
		}
	}
	check("kept by steps")
	h.agg.Close()
	h.open(t)
	check("loaded")
}

func TestReopenKeepsFiguresAndResolvesPendingLessons(t *testing.T) {
	h := newHarness(t)
	for _, d := range fixture() {
		h.feed.add(d)
	}
	h.drain(t) // no lesson known yet: a2, a3, a4, a6 wait
	h.agg.Close()
	// Evaluated while the aggregate was down.
	h.lessons.set("a2", "naming")
	h.lessons.set("a6", "scope")
	h.open(t)
	if got := h.query(t, Query{}).Totals.Decisions; got != 6 {
		t.Fatalf("decisions after reopening = %d, want 6", got)
	}
	if err := h.agg.resolvePending(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.drain(t)
	wantCounts(t, "lessons", h.query(t, Query{}).Totals.LessonCategories, []Count{{"naming", 1}, {"scope", 1}})
}

// TestTurningLessonsOnRebuilds: decisions counted while the evaluator
// was off carry no lesson; once it is on, the file is rebuilt so that
// they do.
func TestTurningLessonsOnRebuilds(t *testing.T) {
	h := newHarness(t)
	h.agg.Close()
	agg, err := Open(h.feed, h.path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	h.agg = agg
	for _, d := range fixture() {
		h.feed.add(d)
	}
	h.drain(t)
	h.agg.Close()
	h.lessons.set("a2", "naming")
	h.open(t)
	if h.agg.Position() != 0 {
		t.Fatalf("position %d after turning lessons on, want a rebuild from 0", h.agg.Position())
	}
	h.drain(t)
	wantCounts(t, "lessons", h.query(t, Query{}).Totals.LessonCategories, []Count{{"naming", 1}})
}

func TestBadQueriesGetClearErrors(t *testing.T) {
	h := loaded(t)
	for name, q := range map[string]Query{
		"from after to":  {From: day2, To: day1},
		"from equals to": {From: day1, To: day1},
		"huge range":     {From: day1.AddDate(-5, 0, 0), To: day1},
		"granularity":    {From: day1, To: day2, Granularity: 9},
		"split":          {From: day1, To: day2, Split: 7},
		"empty agent":    {From: day1, To: day2, Agents: []string{""}},
		"before 2000":    {From: time.Date(1999, 1, 1, 0, 0, 0, 0, time.UTC), To: time.Date(2000, 6, 1, 0, 0, 0, 0, time.UTC)},
	} {
		_, err := h.agg.Query(q)
		if !(precept.ErrorCode(err) == precept.Invalid) {
			t.Errorf("%s: err = %v, want an Invalid error", name, err)
		}
	}
	h.agg.opts.MaxSeries = 1
	if _, err := h.agg.Query(Query{From: day1, To: day2, Split: SplitAgent}); !(precept.ErrorCode(err) == precept.Invalid) {
		t.Errorf("two agents with one series allowed: err = %v", err)
	}
}

func TestDurationPercentilesStayWithinTheErrorBound(t *testing.T) {
	for d := int64(1); d < 1<<maxDoublings; d = d*9/8 + 1 {
		got := binValue(durationBin(d))
		if rel := math.Abs(got-float64(d)) / float64(d); rel > DurationErrorBound+1e-12 {
			t.Fatalf("%d s reported as %v: error %.4f above the bound %.4f", d, got, rel, DurationErrorBound)
		}
	}
	if DurationErrorBound > 0.045 {
		t.Errorf("bound %v, want about 4.4%%", DurationErrorBound)
	}
}

func TestLinesChangedSkipsHeaders(t *testing.T) {
	for diff, want := range map[string]int{
		"":                                    0,
		"--- a\n+++ b\n@@ -1 +1 @@\n-x\n+y\n": 2,
		" context\n+added":                    1,
	} {
		if got := LinesChanged(diff); got != want {
			t.Errorf("LinesChanged(%q) = %d, want %d", diff, got, want)
		}
	}
}

// TestQueriesRunWhileStepsCommit: queries, steps and the evaluator's
// hook run at once (go test -race checks the locking); every query sees
// whole steps, never a half-applied one.
func TestQueriesRunWhileStepsCommit(t *testing.T) {
	h := newHarness(t)
	for i := range 300 {
		for _, d := range fixture() {
			d.DecisionID = fmt.Sprintf("%s-%d", d.DecisionID, i)
			d.Tags = append(d.Tags, fmt.Sprintf("t%d", i%17))
			h.feed.add(d)
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 300 {
			h.agg.Evaluated([]Evaluated{{DecisionID: fmt.Sprintf("a2-%d", i), Evaluation: true, Category: "naming"}})
			if _, err := h.agg.Step(context.Background()); err != nil {
				t.Error(err)
				return
			}
		}
		h.drain(t)
	}()
	for {
		r, err := h.agg.Query(Query{From: day1.Truncate(24 * time.Hour), To: day2.Truncate(24 * time.Hour).Add(24 * time.Hour), Split: SplitAgent})
		if err != nil {
			t.Fatal(err)
		}
		// A step adds 4 decisions (BatchSize 4): totals move in whole steps.
		if r.Totals.Decisions%4 != 0 && r.Totals.Decisions != 1800 {
			t.Fatalf("a query saw %d decisions: half a step", r.Totals.Decisions)
		}
		select {
		case <-done:
			if got := h.query(t, Query{}).Totals.Decisions; got != 1800 {
				t.Fatalf("decisions = %d, want 1800", got)
			}
			return
		default:
		}
	}
}

func TestDistributionsListMostFrequentFirstThenByName(t *testing.T) {
	for _, n := range []int{3, 40} { // the insertion sort and the general one
		names := make([]string, n)
		d := dist{n: make([]int64, n)}
		for i := n - 1; i >= 0; i-- {
			names[i] = fmt.Sprintf("l%02d", i)
			d.add(uint32(i), int64(i%3+1))
		}
		got := d.countsIn(nil, names)
		for i := 1; i < len(got); i++ {
			if !before(got[i-1], got[i]) {
				t.Fatalf("%d labels: %v before %v", n, got[i-1], got[i])
			}
		}
		if len(got) != n || got[0].Count != 3 || got[0].Name != "l02" {
			t.Errorf("%d labels: %v", n, got)
		}
	}
}

// TotalsOnlyLists leaves each bucket's distributions out and nothing
// else: every other figure, and the totals with their lists, are the
// full report's.
func TestTotalsOnlyListsLeavesOnlyTheBucketDistributionsOut(t *testing.T) {
	h := loaded(t)
	h.lessons.set("a6", "requirements")
	h.agg.Evaluated([]Evaluated{{DecisionID: "a6", Evaluation: true, Category: "requirements"}})
	h.drain(t)
	lists := 0
	for _, q := range []Query{{}, {Split: SplitAgent}, {Granularity: Week, Split: SplitGate}} {
		full := h.query(t, q)
		q.TotalsOnlyLists = true
		short := h.query(t, q)
		for i := range full.Series {
			for j := range full.Series[i].Buckets {
				b := &full.Series[i].Buckets[j]
				lists += len(b.Tags) + len(b.ErrorCategories) + len(b.LessonCategories) + len(b.QualityScores)
				b.Tags, b.ErrorCategories, b.LessonCategories, b.QualityScores = nil, nil, nil, nil
			}
		}
		if !reflect.DeepEqual(full, short) {
			t.Errorf("%+v: without the bucket lists\n%+v\nwant\n%+v", q, short, full)
		}
	}
	if lists == 0 {
		t.Fatal("the fixture's buckets hold no distributions: the test shows nothing")
	}
}

// Top keeps the busiest series, in key order, with their figures as in
// the full report; the totals and the series count still cover all.
func TestTopKeepsTheBusiestSeriesAndCountsAll(t *testing.T) {
	h := loaded(t)
	for _, split := range []Split{SplitAgent, SplitGate} {
		full := h.query(t, Query{Split: split})
		if len(full.Series) < 2 {
			t.Fatalf("the fixture has %d series split by %v: the test shows nothing", len(full.Series), split)
		}
		busiest := slices.Clone(full.Series)
		slices.SortStableFunc(busiest, func(a, b Series) int { return cmp.Compare(b.Totals.Decisions, a.Totals.Decisions) })
		for top := 1; top <= len(full.Series)+1; top++ {
			got := h.query(t, Query{Split: split, Top: top})
			want := busiest[:min(top, len(busiest))]
			if len(got.Series) != len(want) || got.SeriesTotal != len(full.Series) || !reflect.DeepEqual(got.Totals, full.Totals) {
				t.Fatalf("split %v, top %d: %d series of %d, totals equal %v", split, top, len(got.Series), got.SeriesTotal, reflect.DeepEqual(got.Totals, full.Totals))
			}
			for _, w := range want {
				i := slices.IndexFunc(got.Series, func(s Series) bool { return s.Agent == w.Agent && s.Gate == w.Gate })
				if i < 0 || !reflect.DeepEqual(got.Series[i], w) {
					t.Errorf("split %v, top %d: series %q/%q missing or changed", split, top, w.Agent, w.Gate)
				}
			}
			if !slices.IsSortedFunc(got.Series, func(a, b Series) int { return strings.Compare(a.Agent+a.Gate, b.Agent+b.Gate) }) {
				t.Errorf("split %v, top %d: series not in key order", split, top)
			}
		}
	}
}
