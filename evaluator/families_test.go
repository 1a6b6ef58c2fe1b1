package evaluator

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/lesson"
)

// familyTaxonomy has two neighbouring categories and a third that is no
// one's neighbour; their cues are made-up words, so the tests do not
// depend on the embedded taxonomy's wording.
func familyTaxonomy(neighbours bool) string {
	s := `
categories:
  - id: zorb-problem
    group: test
    name: Zorb problem
    description: The zorb is wrong.
    rule: Keep the zorb right.
    cues: [zorblax]
  - id: zorb-variant
    group: test
    name: Zorb variant
    description: The zorb is wrong again.
    rule: Keep the zorb right again.
    cues: [zorbvar]
  - id: quux-problem
    group: test
    name: Quux problem
    description: The zorb is quux.
    rule: Keep the quux right.
    cues: [quuxly]
`
	if neighbours {
		s = "neighbours:\n  - [zorb-problem, zorb-variant]\n" + s
	}
	return s
}

func familyLessons(t *testing.T, neighbours bool) *lesson.Source {
	t.Helper()
	path := filepath.Join(t.TempDir(), "taxonomy.yaml")
	if err := os.WriteFile(path, []byte(familyTaxonomy(neighbours)), 0o644); err != nil {
		t.Fatal(err)
	}
	src, err := lesson.NewSource(path)
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// Lessons of neighbouring categories that say the same thing end in one
// cluster after a pass; the same lessons without the neighbour set, or a
// lesson of a category that is not a neighbour, stay apart however
// similar; a curator's keep-apart still binds across neighbours.
func TestClustersCrossNeighbouringCategoriesOnly(t *testing.T) {
	ctx := context.Background()
	all := []precept.Feedback{
		neg("a1", "ann", "E1", "zorblax frobnicates the wibbler backwards on every twirl; unfrob the wibbler"),
		neg("a2", "bob", "E2", "zorbvar frobnicates the wibbler backwards on every twirl; unfrob the wibbler"),
		neg("a3", "cat", "E3", "quuxly frobnicates the wibbler backwards on every twirl; unfrob the wibbler"),
		neg("a4", "dan", "E4", "zorbvar: gizmo spins thrice after tea, stop that"),
	}
	run := func(t *testing.T, neighbours bool, ids ...int) (*env, *memFeed, func(string) Evaluation) {
		feed := newFeed()
		e := newEnv(t, t.TempDir(), feed, Options{Lessons: familyLessons(t, neighbours)})
		for _, i := range ids {
			feed.add(all[i])
		}
		e.drain(t)
		if _, err := e.svc.ReclusterAll(ctx); err != nil {
			t.Fatal(err)
		}
		return e, feed, func(id string) Evaluation {
			t.Helper()
			x, _, err := e.svc.Evaluation(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			return x
		}
	}
	t.Run("neighbours join", func(t *testing.T) {
		e, feed, ev := run(t, true, 0, 1, 2)
		if ev("a1").Lesson.Category != "zorb-problem" || ev("a2").Lesson.Category != "zorb-variant" || ev("a3").Lesson.Category != "quux-problem" {
			t.Fatalf("lessons: %s %s %s", ev("a1").Lesson.Category, ev("a2").Lesson.Category, ev("a3").Lesson.Category)
		}
		if ev("a1").ClusterID != ev("a2").ClusterID {
			t.Fatal("lessons of neighbouring categories that say the same thing were not joined")
		}
		if ev("a3").ClusterID == ev("a1").ClusterID {
			t.Fatal("a lesson of a category that is no neighbour joined the cluster")
		}
		cl, err := e.svc.Cluster(ctx, ev("a1").ClusterID)
		if err != nil {
			t.Fatal(err)
		}
		// Tied weights: the smaller id leads.
		if cl.Category != "zorb-problem" || cl.Size != 2 {
			t.Fatalf("joined cluster: category %q size %d", cl.Category, cl.Size)
		}
		// A curator keeps them apart: that binds on every later pass.
		c, err := e.svc.CheckCorrection(ctx, Correction{Kind: CorrectSplit, Clusters: []string{cl.ID}, Decisions: []string{"a2"}, By: "curator-1", ID: "corr-1"})
		if err != nil {
			t.Fatal(err)
		}
		feed.addCorrection(c)
		e.drain(t)
		if _, err := e.svc.ReclusterAll(ctx); err != nil {
			t.Fatal(err)
		}
		if ev("a1").ClusterID == ev("a2").ClusterID {
			t.Fatal("a pass joined what a curator split")
		}
	})
	t.Run("neighbours that say something else stay apart", func(t *testing.T) {
		_, _, ev := run(t, true, 0, 3)
		if ev("a4").ClusterID == ev("a1").ClusterID {
			t.Fatal("a neighbour's lesson that says something else joined the cluster")
		}
	})
	t.Run("no neighbours, no join", func(t *testing.T) {
		_, _, ev := run(t, false, 0, 1, 2)
		if ev("a1").ClusterID == ev("a2").ClusterID {
			t.Fatal("lessons of categories that are not neighbours were joined")
		}
	})
}

// Weights hold a lesson's category and its neighbouring alternatives;
// a category without neighbours, or a curator's placement, stands alone.
func TestLessonWeightsStayInTheFamily(t *testing.T) {
	tax := familyLessons(t, true).Classifier().Taxonomy()
	if tax.Family("zorb-variant") != "zorb-problem" || tax.Family("quux-problem") != "quux-problem" {
		t.Fatalf("families: %q %q", tax.Family("zorb-variant"), tax.Family("quux-problem"))
	}
	l := lesson.Lesson{Category: "zorb-problem", By: "deterministic", Alternatives: []lesson.Match{
		{Category: "zorb-problem", Score: 1}, {Category: "zorb-variant", Score: 0.5}, {Category: "quux-problem", Score: 0.9}}}
	w := tax.Weights(l)
	if len(w) != 2 || w["quux-problem"] != 0 || w["zorb-problem"] <= w["zorb-variant"] || w["zorb-variant"] == 0 {
		t.Fatalf("weights %v", w)
	}
	if n := w["zorb-problem"]*w["zorb-problem"] + w["zorb-variant"]*w["zorb-variant"]; n < 0.998 || n > 1.002 {
		t.Fatalf("weights %v are not a unit vector (%f)", w, n)
	}
	l.By = "curator:c1"
	if w := tax.Weights(l); len(w) != 1 || w["zorb-problem"] != 1 {
		t.Fatalf("a curator's placement: %v", w)
	}
}

// A pass makes clusters that cross neighbouring categories independent
// of arrival order, as within one category.
func TestFamilyClustersAreIndependentOfArrivalOrder(t *testing.T) {
	fb := []precept.Feedback{
		neg("f1", "ann", "E1", "please delete the commented-out block in parse(), it is dead weight"),
		neg("f2", "bob", "E2", "this function is never called anywhere, remove the dead code"),
		neg("f3", "cat", "E3", "leftover console.log debugging statements, strip them before merging"),
		neg("f4", "dan", "E1", "commented out code again at the bottom of the file, just delete it"),
		neg("f5", "eve", "E4", "unused helper, nothing references it any more; drop it"),
		neg("f6", "fay", "E2", "there's a debug print left in the loop"),
		neg("f7", "gus", "E5", "the null check is missing, this crashes when user is nil"),
		neg("f8", "hal", "E6", "validate the input: an empty name gets through and breaks the save"),
	}
	var ids []string
	for _, f := range fb {
		ids = append(ids, f.DecisionID)
	}
	var first [][]string
	for seed := range uint64(4) {
		shuffled := slices.Clone(fb)
		rand.New(rand.NewPCG(seed, 7)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		feed := newFeed()
		feed.add(shuffled...)
		e := newEnv(t, t.TempDir(), feed, Options{})
		e.drain(t)
		if _, err := e.svc.ReclusterAll(context.Background()); err != nil {
			t.Fatal(err)
		}
		got := partitionOf(t, e.svc, ids)
		if seed == 0 {
			first = got
			t.Logf("clusters: %v", got)
			// The order must be shown to hold across categories: some
			// cluster holds lessons of two categories.
			crossed := false
			for _, part := range got {
				cats := map[string]bool{}
				for _, id := range part {
					ev, _, err := e.svc.Evaluation(context.Background(), id)
					if err != nil {
						t.Fatal(err)
					}
					cats[ev.Lesson.Category] = true
				}
				crossed = crossed || len(cats) > 1
			}
			if !crossed {
				t.Fatal("no cluster crosses neighbouring categories; the test shows nothing")
			}
			continue
		}
		if !slices.EqualFunc(got, first, slices.Equal) {
			t.Fatalf("order %d: %v, order 0: %v", seed, got, first)
		}
	}
}

// A cluster's category is the one its members' weights favour, between
// passes and after one, not its founder's.
func TestClusterCategoryFollowsItsMembers(t *testing.T) {
	ctx := context.Background()
	feed := newFeed()
	e := newEnv(t, t.TempDir(), feed, Options{Lessons: familyLessons(t, true)})
	feed.add(
		neg("b1", "bob", "E2", "zorbvar frobnicates the wibbler backwards on every twirl; unfrob the wibbler"),
		neg("a1", "ann", "E1", "zorblax frobnicates the wibbler backwards on every twirl; unfrob the wibbler"),
		neg("a2", "cat", "E3", "zorblax frobnicates the wibbler backwards on each twirl; unfrob the wibbler"),
		neg("a3", "dan", "E4", "zorblax frobnicates the wibbler backwards on any twirl; unfrob the wibbler"),
	)
	e.drain(t)
	check := func(when string) {
		t.Helper()
		ev, _, err := e.svc.Evaluation(ctx, "a3")
		if err != nil {
			t.Fatal(err)
		}
		cl, err := e.svc.Cluster(ctx, ev.ClusterID)
		if err != nil {
			t.Fatal(err)
		}
		if cl.Size != 4 || cl.Category != "zorb-problem" {
			t.Errorf("%s: size %d, category %q, sums %v", when, cl.Size, cl.Category, cl.CategorySum)
		}
	}
	check("between passes")
	if _, err := e.svc.ReclusterAll(ctx); err != nil {
		t.Fatal(err)
	}
	check("after a pass")
}

// diffNeg is a rejection whose comment is unclear but whose correction
// diff is clustered.
func diffNeg(id, reviewer, epic, comment, diff string) precept.Feedback {
	d := precept.Decision{DecisionID: id, GateID: "HITL-2", EpicID: epic, Agent: "coding-agent", Decision: precept.Rejected,
		ReviewerID: reviewer, Timestamp: t0, ReviewerComment: comment, CorrectionDiff: diff}
	if err := d.Validate(precept.Limits{}, t0); err != nil {
		panic(err)
	}
	return precept.NewFeedback(d, "test", t0)
}

// Unclear lessons clustered for their diffs are compared alike between
// passes and in a pass.
func TestUnclearLessonsWithADiffAreComparedAlikeBetweenAndInPasses(t *testing.T) {
	ctx := context.Background()
	feed := newFeed()
	e := newEnv(t, t.TempDir(), feed, Options{})
	feed.add(
		diffNeg("u1", "ann", "E1", "hmm", "-frobnicate(wibbler, twirl)\n+unfrobnicate(wibbler, twirl, gizmo)\n"),
		diffNeg("u2", "bob", "E2", "hmm", "-frobnicate(gadget, spin)\n+retry(gadget, spin, doohickey, thrice)\n"),
	)
	e.drain(t)
	c := func(id string) string {
		ev, _, err := e.svc.Evaluation(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return ev.ClusterID
	}
	before := c("u1") == c("u2")
	if _, err := e.svc.ReclusterAll(ctx); err != nil {
		t.Fatal(err)
	}
	if after := c("u1") == c("u2"); before != after {
		t.Fatalf("together between passes: %v, after a pass: %v", before, after)
	}
}

// When a reloaded taxonomy splits a family, the next pass splits the
// clusters that crossed it, and each part joins its own family's group.
func TestClustersSplitWhenAFamilySplits(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "taxonomy.yaml")
	if err := os.WriteFile(path, []byte(familyTaxonomy(true)), 0o644); err != nil {
		t.Fatal(err)
	}
	src, err := lesson.NewSource(path)
	if err != nil {
		t.Fatal(err)
	}
	feed := newFeed()
	e := newEnv(t, t.TempDir(), feed, Options{Lessons: src})
	feed.add(
		neg("a1", "ann", "E1", "zorblax frobnicates the wibbler backwards on every twirl; unfrob the wibbler"),
		neg("a2", "bob", "E2", "zorbvar frobnicates the wibbler backwards on every twirl; unfrob the wibbler"),
	)
	e.drain(t)
	if _, err := e.svc.ReclusterAll(ctx); err != nil {
		t.Fatal(err)
	}
	c := func(id string) string {
		ev, _, err := e.svc.Evaluation(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return ev.ClusterID
	}
	if c("a1") != c("a2") {
		t.Fatal("precondition: the neighbours did not join")
	}
	if err := os.WriteFile(path, []byte(familyTaxonomy(false)), 0o644); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(path, later, later); err != nil {
		t.Fatal(err)
	}
	// No decision arrives: the pass itself picks up the new families.
	if _, err := e.svc.Recluster(ctx); err != nil {
		t.Fatal(err)
	}
	if c("a1") == c("a2") {
		t.Fatal("a cluster still crosses two families")
	}
	for _, id := range []string{"a1", "a2"} {
		cl, err := e.svc.Cluster(ctx, c(id))
		if err != nil {
			t.Fatal(err)
		}
		if len(cl.CategorySum) != 1 {
			t.Errorf("%s's cluster %s keeps weights of another family: %v", id, cl.ID, cl.CategorySum)
		}
	}
}
