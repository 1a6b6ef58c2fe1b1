package evaluator

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/lesson"
	"github.com/precept-dev/precept/lib/embedding"
	"github.com/precept-dev/precept/lib/vectorindex"
	"github.com/precept-dev/precept/lib/vectorindex/chromem"
)

func (f *memFeed) addCorrection(c Correction) {
	f.mu.Lock()
	f.items = append(f.items, Item{Seq: uint64(len(f.items) + 1), Correction: &c})
	close(f.ch)
	f.ch = make(chan struct{})
	f.mu.Unlock()
}

// partitionOf returns the clusters of the evaluated decisions as sorted
// id lists, sorted.
func partitionOf(t *testing.T, svc *Service, ids []string) [][]string {
	t.Helper()
	by := map[string][]string{}
	for _, id := range ids {
		ev, _, err := svc.Evaluation(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if ev.ClusterID != "" {
			by[ev.ClusterID] = append(by[ev.ClusterID], id)
		}
	}
	var out [][]string
	for _, k := range slices.Sorted(maps.Keys(by)) {
		out = append(out, slices.Sorted(slices.Values(by[k])))
	}
	slices.SortFunc(out, func(a, b []string) int { return strings.Compare(a[0], b[0]) })
	return out
}

func clusterIDs(t *testing.T, svc *Service, ids []string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, id := range ids {
		ev, _, err := svc.Evaluation(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		out[id] = ev.ClusterID
	}
	return out
}

// Arrival order decides the clusters between re-clustering passes; a
// pass makes them the same for every order, keeps them on a second pass,
// and keeps ids.
func TestReclusteringMakesClustersIndependentOfArrivalOrder(t *testing.T) {
	items := loadFixture(t, "labelled.jsonl")
	var ids []string
	for _, it := range items {
		ids = append(ids, it.Feedback.DecisionID)
	}
	var parts [][][]string
	orders := 0
	for seed := range uint64(3) {
		shuffled := slices.Clone(items)
		rng := rand.New(rand.NewPCG(seed, 99))
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		feed := newFeed()
		for _, it := range shuffled {
			feed.add(it.Feedback)
		}
		e := newEnv(t, t.TempDir(), feed, Options{})
		e.drain(t)
		before := partitionOf(t, e.svc, ids)
		rep, err := e.svc.Recluster(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		after := partitionOf(t, e.svc, ids)
		if len(parts) > 0 && !slices.EqualFunc(before, parts[0], slices.Equal) {
			orders++
		}
		parts = append(parts, after)
		idsAfter := clusterIDs(t, e.svc, ids)
		again, err := e.svc.Recluster(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if again.Moved != 0 || again.Reclassified != 0 {
			t.Fatalf("a second pass changed things: %+v", again)
		}
		if got := clusterIDs(t, e.svc, ids); !maps.Equal(got, idsAfter) {
			t.Fatal("a second pass renamed clusters")
		}
		t.Logf("order %d: first pass over %d groups moved %d, reclassified %d", seed, rep.Groups, rep.Moved, rep.Reclassified)
	}
	for i := 1; i < len(parts); i++ {
		if !slices.EqualFunc(parts[i], parts[0], slices.Equal) {
			t.Fatalf("order %d clustered differently after a pass", i)
		}
	}
	if orders == 0 {
		t.Log("note: arrival order did not change the clusters before a pass either")
	}
}

// curatorTaxonomy adds categories whose cues are made-up words, so the
// tests below do not depend on the embedded taxonomy's wording; the
// comments about them are made-up words too, which no embedded category
// speaks for.
const curatorTaxonomy = `
categories:
  - id: zorb-problem
    group: test
    name: Zorb problem
    description: The zorb is wrong.
    rule: Keep the zorb right.
    cues: [zorblax]
  - id: quux-problem
    group: test
    name: Quux problem
    description: The quux is wrong.
    rule: Keep the quux right.
    cues: [quuxly]
`

func curatorLessons(t *testing.T) *lesson.Source {
	t.Helper()
	path := filepath.Join(t.TempDir(), "taxonomy.yaml")
	if err := os.WriteFile(path, []byte(curatorTaxonomy), 0o644); err != nil {
		t.Fatal(err)
	}
	src, err := lesson.NewSource(path)
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// zorbsAndQuuxes are two zorb complaints that share few words and two
// quux ones, for the curator taxonomy.
func zorbsAndQuuxes() []precept.Feedback {
	return []precept.Feedback{
		neg("z1", "ann", "E1", "zorblax frobnicates the wibbler backwards; unfrob it"),
		neg("z2", "bob", "E2", "zorblax: the gizmo spins after the third twirl, keep it"),
		neg("q1", "cat", "E1", "quuxly sprockets wobble sideways; use the blorp"),
		neg("q2", "dan", "E3", "quuxly wobbles the sprocket again"),
	}
}

func TestCuratorCorrectionsApplyAndSurviveReclustering(t *testing.T) {
	feed := newFeed()
	// A linkage no two of these comments reach, so every merge below is
	// the curator's.
	e := newEnv(t, t.TempDir(), feed, Options{Lessons: curatorLessons(t), LinkageThreshold: 0.99})
	ctx := context.Background()
	feed.add(zorbsAndQuuxes()...)
	e.drain(t)
	ev := func(id string) Evaluation {
		t.Helper()
		x, _, err := e.svc.Evaluation(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	if ev("z1").Lesson.Category != "zorb-problem" || ev("q1").Lesson.Category != "quux-problem" {
		t.Fatalf("lessons: %+v %+v", ev("z1").Lesson, ev("q1").Lesson)
	}
	if ev("z1").ClusterID == ev("q1").ClusterID {
		t.Fatal("clusters crossed categories")
	}
	apply := func(c Correction) {
		t.Helper()
		c.By, c.ID = "curator-1", "corr-"+string(c.Kind)
		c, err := e.svc.CheckCorrection(ctx, c)
		if err != nil {
			t.Fatalf("check %s: %v", c.Kind, err)
		}
		feed.addCorrection(c)
		e.drain(t)
		if ok, err := e.svc.CorrectionApplied(c.ID); err != nil || !ok {
			t.Fatalf("%s not applied (%v)", c.Kind, err)
		}
		// Listings come from memory: they must follow every correction.
		checkListings(t, e.svc)
	}
	recluster := func() {
		t.Helper()
		if _, err := e.svc.Recluster(ctx); err != nil {
			t.Fatal(err)
		}
		checkListings(t, e.svc)
	}

	// Merge: the zorb decisions belong together, re-clustered or not.
	if ev("z1").ClusterID == ev("z2").ClusterID {
		t.Fatal("z1 and z2 share a cluster before any merge")
	}
	apply(Correction{Kind: CorrectMerge, Clusters: []string{ev("z1").ClusterID, ev("z2").ClusterID}})
	if ev("z1").ClusterID != ev("z2").ClusterID {
		t.Fatal("the merge did not put z1 and z2 together")
	}
	recluster()
	if ev("z1").ClusterID != ev("z2").ClusterID {
		t.Fatal("merged decisions came apart in a re-clustering pass")
	}
	if ev("z2").Class != GeneralizableLow {
		t.Fatalf("merged cluster: class %s", ev("z2").Class)
	}

	// Not a pattern: the cluster stays an edge case.
	apply(Correction{Kind: CorrectNotAPattern, Clusters: []string{ev("z1").ClusterID}})
	recluster()
	if ev("z1").Class != EdgeCase || !strings.Contains(ev("z1").Rationale, "not a pattern") {
		t.Fatalf("not a pattern: %s %q", ev("z1").Class, ev("z1").Rationale)
	}

	// Split q2 off: it stays apart after re-clustering.
	if ev("q1").ClusterID == ev("q2").ClusterID {
		t.Fatal("q1 and q2 share a cluster before any merge")
	}
	apply(Correction{Kind: CorrectMerge, Clusters: []string{ev("q1").ClusterID, ev("q2").ClusterID}})
	apply(Correction{Kind: CorrectSplit, Clusters: []string{ev("q1").ClusterID}, Decisions: []string{"q2"}})
	recluster()
	if ev("q1").ClusterID == ev("q2").ClusterID {
		t.Fatal("a split decision came back in a re-clustering pass")
	}

	// Set category: q2 becomes a zorb problem, by the curator, and joins
	// that group.
	apply(Correction{Kind: CorrectCategory, Decisions: []string{"q2"}, Category: "zorb-problem"})
	recluster()
	got := ev("q2")
	if got.Lesson.Category != "zorb-problem" || got.Lesson.By != "curator:curator-1" {
		t.Fatalf("recategorised lesson: %+v", got.Lesson)
	}
	cl, err := e.svc.Cluster(ctx, got.ClusterID)
	if err != nil || cl.Category != "zorb-problem" {
		t.Fatalf("q2's cluster %s: category %q (%v)", got.ClusterID, cl.Category, err)
	}

	// Keep apart: suggestions leave the pair out.
	a, b := ev("z1").ClusterID, ev("q2").ClusterID
	if a == b {
		t.Fatal("q2 joined the not-a-pattern zorb cluster")
	}
	{
		apply(Correction{Kind: CorrectKeepApart, Clusters: []string{a, b}})
		sgs, err := e.svc.SuggestMerges(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range sgs {
			if (s.A == a && s.B == b) || (s.A == b && s.B == a) {
				t.Fatal("a pair kept apart is still suggested")
			}
		}
	}

	// Bad corrections are refused before they are recorded.
	for _, c := range []Correction{
		{Kind: CorrectMerge, Clusters: []string{a}, By: "x"},
		{Kind: CorrectMerge, Clusters: []string{a, "c-missing"}, By: "x"},
		{Kind: CorrectCategory, Decisions: []string{"z1"}, Category: "no-such-category", By: "x"},
		{Kind: CorrectSplit, Clusters: []string{a}, Decisions: []string{"q1"}, By: "x"},
		{Kind: "explode", By: "x"},
		{Kind: CorrectMerge, Clusters: []string{a, b}, Category: "zorb-problem", By: "x"},
		{Kind: CorrectMerge, Clusters: []string{a, b}, Decisions: []string{"z1"}, By: "x"},
		{Kind: CorrectNotAPattern, Clusters: []string{"c-1\nCorrected-By: mallory"}, By: "x"},
		{Kind: CorrectCategory, Decisions: []string{"z1"}, Category: "zorb-problem\x1b[2J", By: "x"},
		{Kind: CorrectNotAPattern, Clusters: []string{a}},
	} {
		if _, err := e.svc.CheckCorrection(ctx, c); err == nil {
			t.Errorf("%+v accepted", c)
		} else if code := precept.ErrorCode(err); code != precept.Invalid && code != precept.NotFound {
			t.Errorf("%+v: %v (code %s), want invalid or not found", c, err, code)
		}
	}
}

// TestACorrectionAppliesAsRecorded: a correction carries the members its
// clusters had on the replica that recorded it; every replica applies
// those, whatever its own clusters hold, so replicas agree.
func TestACorrectionAppliesAsRecorded(t *testing.T) {
	feed := newFeed()
	e := newEnv(t, t.TempDir(), feed, Options{Lessons: curatorLessons(t), LinkageThreshold: 0.99})
	ctx := context.Background()
	feed.add(zorbsAndQuuxes()...)
	e.drain(t)
	cluster := func(id string) string {
		t.Helper()
		ev, _, err := e.svc.Evaluation(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return ev.ClusterID
	}
	// Recorded elsewhere: the second cluster then held q2, not q1.
	c := Correction{ID: "corr-elsewhere", Kind: CorrectMerge, Clusters: []string{cluster("z1"), cluster("q1")}, By: "curator-1",
		Members: [][]string{{"z1"}, {"q2"}}, Into: "zorb-problem"}
	feed.addCorrection(c)
	e.drain(t)
	if ok, err := e.svc.CorrectionApplied(c.ID); err != nil || !ok {
		t.Fatalf("not applied: %v", err)
	}
	if _, err := e.svc.Recluster(ctx); err != nil {
		t.Fatal(err)
	}
	if cluster("q2") != cluster("z1") || cluster("q1") == cluster("z1") {
		t.Fatalf("z1 in %s, q1 in %s, q2 in %s: want q2 with z1 as recorded", cluster("z1"), cluster("q1"), cluster("q2"))
	}
}

// remoteIndex is an index that is not in this process, as a Chroma
// server is: it counts the vectors read back from it.
type remoteIndex struct {
	vectorindex.Index
	mu   sync.Mutex
	read int
}

func (r *remoteIndex) Embeddings(ctx context.Context, ids []string) (map[string][]float32, error) {
	r.mu.Lock()
	r.read += len(ids)
	r.mu.Unlock()
	return r.Index.Embeddings(ctx, ids)
}

// TestReclusteringOverARemoteIndexReadsTheStatesCopyOfTheVectors: with a
// remote index the evaluator keeps each clustered decision's vector, so a
// re-clustering pass costs no round trip per vector, and clusters the same.
func TestReclusteringOverARemoteIndexReadsTheStatesCopyOfTheVectors(t *testing.T) {
	comments := []string{
		"Hardcoded API key in config.go; load secrets from the environment.",
		"API key is hardcoded in the config file, read it from an env var instead.",
		"The error from db.Close() is silently dropped; return it.",
		"err is swallowed in saveUser, handle it",
		"Wrap the error with context so we know which file failed",
	}
	run := func(remote bool) (map[string]string, int) {
		dir := t.TempDir()
		emb := embedding.NewLocal(embedding.LocalOptions{})
		local, reset, err := chromem.Open(filepath.Join(dir, "vectors"), vectorindex.Spec{Embedder: emb.Name(), Dimension: emb.Dimension()})
		if err != nil {
			t.Fatal(err)
		}
		defer local.Close()
		var idx vectorindex.Index = local
		r := &remoteIndex{Index: local}
		if remote {
			idx = r
		}
		feed := newFeed()
		for i, c := range comments {
			feed.add(neg(fmt.Sprintf("d%d", i), fmt.Sprintf("r%d", i), fmt.Sprintf("E%d", i%2), c))
		}
		svc, err := New(context.Background(), feed, emb, idx, reset, filepath.Join(dir, "evaluator.db"), Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer svc.Close()
		for {
			n, err := svc.Step(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				break
			}
		}
		before := r.read
		if _, err := svc.ReclusterAll(context.Background()); err != nil {
			t.Fatal(err)
		}
		clusters := map[string]string{}
		for i := range comments {
			ev, _, err := svc.Evaluation(context.Background(), fmt.Sprintf("d%d", i))
			if err != nil {
				t.Fatal(err)
			}
			clusters[ev.DecisionID] = ev.ClusterID
		}
		return clusters, r.read - before
	}
	inProcess, _ := run(false)
	remote, read := run(true)
	if read != 0 {
		t.Fatalf("a re-clustering pass read %d vectors from the remote index, want none", read)
	}
	same := func(m map[string]string, a, b string) bool { return m[a] == m[b] }
	for _, pair := range [][2]string{{"d0", "d1"}, {"d2", "d3"}, {"d0", "d2"}, {"d3", "d4"}} {
		if same(inProcess, pair[0], pair[1]) != same(remote, pair[0], pair[1]) {
			t.Fatalf("%v: clustered differently over a remote index (%v vs %v)", pair, inProcess, remote)
		}
	}
}

// A pass run in slices, as Run runs it between batches, does one group
// per slice when its budget is spent at once, and ends with the clusters
// a pass run at one go makes.
func TestAPassInSlicesEqualsAPassAtOneGo(t *testing.T) {
	ctx := context.Background()
	sliced := newEnv(t, t.TempDir(), labelledFeed(t), Options{})
	whole := newEnv(t, t.TempDir(), labelledFeed(t), Options{})
	for _, e := range []*env{sliced, whole} {
		e.drain(t)
		e.svc.groups.markAllDirty()
	}
	p := newPass(sliced.svc, true)
	groups := len(p.pending)
	if groups < 5 {
		t.Fatalf("only %d groups to re-cluster", groups)
	}
	for i := 1; !p.done(); i++ {
		if err := p.run(ctx, time.Nanosecond); err != nil {
			t.Fatal(err)
		}
		if left := len(p.pending) + len(p.held); p.rep.Groups != i || left != groups-i {
			t.Fatalf("after slice %d: %d groups done, %d left; want %d and %d", i, p.rep.Groups, left, i, groups-i)
		}
	}
	rep, err := whole.svc.Recluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Groups != groups || rep.Moved != p.rep.Moved || rep.Members != p.rep.Members {
		t.Fatalf("at one go %+v, in slices %+v", rep, p.rep)
	}
	for _, it := range loadFixture(t, "labelled.jsonl") {
		id := it.Feedback.DecisionID
		a, _, errA := sliced.svc.Evaluation(ctx, id)
		b, _, errB := whole.svc.Evaluation(ctx, id)
		if (errA == nil) != (errB == nil) || a.ClusterID != b.ClusterID || a.Class != b.Class {
			t.Fatalf("%s: in slices %s %s (%v), at one go %s %s (%v)", id, a.ClusterID, a.Class, errA, b.ClusterID, b.Class, errB)
		}
	}
}

// A Recluster asked for while Run's pass is between slices does the
// groups that pass has not done yet, at one go, and the pass then ends
// without doing them again.
func TestReclusterTakesTheGroupsAPassInSlicesHasNotDone(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, t.TempDir(), labelledFeed(t), Options{})
	e.drain(t)
	e.svc.groups.markAllDirty()
	p := newPass(e.svc, true)
	groups := len(p.pending)
	if err := p.run(ctx, time.Nanosecond); err != nil {
		t.Fatal(err)
	}
	rep, err := e.svc.Recluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Groups != groups-1 {
		t.Fatalf("Recluster did %d groups while a pass had done 1 of %d; want %d", rep.Groups, groups, groups-1)
	}
	if err := p.run(ctx, time.Nanosecond); err != nil {
		t.Fatal(err)
	}
	if !p.done() || p.rep.Groups > 2 {
		t.Fatalf("the pass did %d groups after Recluster took its rest; done %v", p.rep.Groups, p.done())
	}
}
