package embedding

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/precept-dev/precept"
)

// The fixtures in testdata/feedback (see its README). labelled.jsonl is the
// ground truth the embedder was developed against; the held-out sets were
// written apart from it to estimate how well it generalises.
const (
	labelledFile = "labelled.jsonl"
	holdout1File = "holdout-1.jsonl"
	holdout2File = "holdout-2.jsonl"
	holdout3File = "holdout-3.jsonl"
	holdout4File = "holdout-4.jsonl"
	holdout5File = "holdout-5.jsonl"
	dev1File     = "dev-1.jsonl"
)

// defaultThreshold is precept's default clustering threshold (docs/thresholds.md).
const defaultThreshold = 0.8

// labelled is one line of a fixture: a decision event plus its labels.
type labelled struct {
	precept.Decision
	Cluster       string `json:"cluster"`
	Category      string `json:"category"`
	ExpectedClass string `json:"expected_class"`
}

func loadFixture(t testing.TB, name string) []labelled {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "testdata", "feedback", name))
	if err != nil {
		t.Fatalf("open fixture: %v", err)
	}
	defer f.Close()
	var items []labelled
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for line := 1; sc.Scan(); line++ {
		dec := json.NewDecoder(strings.NewReader(sc.Text()))
		dec.DisallowUnknownFields()
		var it labelled
		if err := dec.Decode(&it); err != nil {
			t.Fatalf("%s:%d: %v", name, line, err)
		}
		items = append(items, it)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read fixture: %v", err)
	}
	return items
}

// categoryIDs reads the category ids the fixtures label with.
func categoryIDs(t testing.TB) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "lesson", "categories.txt"))
	if err != nil {
		t.Fatalf("read categories: %v", err)
	}
	ids := map[string]bool{}
	for _, line := range strings.Split(string(data), "\n") {
		if id, _, ok := strings.Cut(line, "|"); ok && !strings.HasPrefix(line, "#") {
			ids[strings.TrimSpace(id)] = true
		}
	}
	return ids
}

// Expected classes (docs/thresholds.md, "Cluster support").
const (
	classPositive  = "POSITIVE"
	classAmbiguous = "AMBIGUOUS"
	classEdge      = "EDGE_CASE"
	classLow       = "GENERALIZABLE_LOW"
	classHigh      = "GENERALIZABLE_HIGH"
)

// clusterClass is the class the default thresholds give the members of a cluster of
// similar negative feedback: it counts distinct reviewers and epics, never
// raw totals.
func clusterClass(members []labelled) string {
	reviewers, epics := map[string]bool{}, map[string]bool{}
	for _, m := range members {
		reviewers[m.ReviewerID] = true
		epics[m.EpicID] = true
	}
	switch {
	case len(members) >= 3 && len(reviewers) >= 2 && len(epics) >= 2:
		return classHigh
	case len(members) >= 2 && len(reviewers) >= 2:
		return classLow
	}
	return classEdge
}

func TestFixturesFollowTheLabellingRules(t *testing.T) {
	ids := map[string]string{}
	known := categoryIDs(t)
	for _, name := range []string{labelledFile, holdout1File, holdout2File, holdout3File, holdout4File, holdout5File, dev1File} {
		t.Run(name, func(t *testing.T) {
			// The later sets write vague rejections as reviewers do
			// ("not sure this is the right approach"), so their
			// comments may be longer; they must say nothing specific.
			vague := 16
			if name == holdout3File || name == holdout4File || name == holdout5File || name == dev1File {
				vague = 60
			}
			items := loadFixture(t, name)
			clusters := map[string][]labelled{}
			for _, it := range items {
				if prev, ok := ids[it.DecisionID]; ok {
					t.Errorf("decision_id %s is in %s and %s", it.DecisionID, prev, name)
				}
				ids[it.DecisionID] = name
				d := it.Decision
				if err := d.Validate(precept.Limits{}, time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)); err != nil {
					t.Errorf("%s: %v", it.DecisionID, err)
				}
				switch {
				case it.ExpectedClass == classPositive || it.Cluster == "positive" || it.Decision.Decision == precept.Approved:
					if it.ExpectedClass != classPositive || it.Cluster != "positive" || it.Decision.Decision != precept.Approved {
						t.Errorf("%s: positive feedback must be APPROVED, labelled positive and POSITIVE", it.DecisionID)
					}
				case it.ExpectedClass == classAmbiguous:
					if len(it.ReviewerComment) > vague || it.CorrectionDiff != "" || len(it.Tags) > 0 {
						t.Errorf("%s: AMBIGUOUS but carries signal: %q", it.DecisionID, it.ReviewerComment)
					}
					clusters[it.Cluster] = append(clusters[it.Cluster], it)
				default:
					if !known[it.Category] {
						t.Errorf("%s: a clear negative needs a category from lesson/categories.txt, not %q", it.DecisionID, it.Category)
					}
					clusters[it.Cluster] = append(clusters[it.Cluster], it)
				}
			}
			for label, members := range clusters {
				if members[0].ExpectedClass == classAmbiguous {
					if len(members) != 1 {
						t.Errorf("ambiguous label %q is shared by %d items", label, len(members))
					}
					continue
				}
				if len(members) > 8 {
					t.Errorf("cluster %q has %d members, want at most 8", label, len(members))
				}
				want := clusterClass(members)
				for _, m := range members {
					if m.ExpectedClass != want {
						t.Errorf("%s in cluster %q: expected_class %s, want %s by the default thresholds", m.DecisionID, label, m.ExpectedClass, want)
					}
				}
			}
		})
	}
}

func TestLabelledFixtureComposition(t *testing.T) {
	items := loadFixture(t, labelledFile)
	agents := map[string]bool{}
	byClass := map[string]int{}
	clusters := map[string][]labelled{}
	for _, it := range items {
		agents[it.Agent] = true
		byClass[it.ExpectedClass]++
		if it.ExpectedClass != classPositive && it.ExpectedClass != classAmbiguous {
			clusters[it.Cluster] = append(clusters[it.Cluster], it)
		}
	}
	var multi, singletons, oneReviewer, oneEpic int
	for _, members := range clusters {
		if len(members) == 1 {
			singletons++
			continue
		}
		multi++
		if len(members) < 3 {
			t.Errorf("cluster %q has %d members, want 3 to 8", members[0].Cluster, len(members))
		}
		reviewers, epics := map[string]bool{}, map[string]bool{}
		for _, m := range members {
			reviewers[m.ReviewerID] = true
			epics[m.EpicID] = true
		}
		if len(reviewers) == 1 {
			oneReviewer++
		}
		if len(reviewers) >= 2 && len(epics) == 1 {
			oneEpic++
		}
	}
	for _, c := range []struct {
		what      string
		got, want int
	}{
		{"items", len(items), 180},
		{"agents", len(agents), 4},
		{"clusters of paraphrases", multi, 25},
		{"negative singletons", singletons, 25},
		{"positives", byClass[classPositive], 20},
		{"ambiguous items", byClass[classAmbiguous], 12},
		{"clusters from one reviewer (EDGE_CASE)", oneReviewer, 2},
		{"clusters from two reviewers in one epic (LOW)", oneEpic, 2},
	} {
		if c.got < c.want {
			t.Errorf("%s: %d, want at least %d", c.what, c.got, c.want)
		}
	}
}

// clusterable returns the items the similarity index clusters: negative
// decisions with enough signal to classify.
func clusterable(items []labelled) []labelled {
	var out []labelled
	for _, it := range items {
		if it.Decision.Decision.Negative() && it.ExpectedClass != classAmbiguous {
			out = append(out, it)
		}
	}
	return out
}

// arrivalOrder returns the indexes of items by timestamp, the order in
// which precept would see them.
func arrivalOrder(items []labelled) []int {
	order := make([]int, len(items))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return items[a].Timestamp.Compare(items[b].Timestamp) })
	return order
}

// clusterIncrementally is single-pass clustering over the pairwise
// similarities sims: in the given order, an item joins the cluster of its
// most similar earlier item when that similarity reaches threshold, and
// starts a new cluster otherwise. It returns a cluster id per item.
func clusterIncrementally(sims [][]float64, order []int, threshold float64) []int {
	assign := make([]int, len(sims))
	seen := make([]int, 0, len(sims))
	clusters := 0
	for _, i := range order {
		best, bestSim := -1, threshold
		for _, j := range seen {
			if s := sims[i][j]; s >= bestSim {
				best, bestSim = j, s
			}
		}
		if best < 0 {
			assign[i] = clusters
			clusters++
		} else {
			assign[i] = assign[best]
		}
		seen = append(seen, i)
	}
	return assign
}

// pairScores are pairwise clustering scores: a pair of items is a true
// positive when both the prediction and the labels put them together.
type pairScores struct {
	precision, recall, f1 float64
}

func scorePairs(pred []int, labels []string) pairScores {
	var tp, predPairs, truePairs int
	for i := range pred {
		for j := i + 1; j < len(pred); j++ {
			samePred, sameLabel := pred[i] == pred[j], labels[i] == labels[j]
			if samePred {
				predPairs++
			}
			if sameLabel {
				truePairs++
			}
			if samePred && sameLabel {
				tp++
			}
		}
	}
	s := pairScores{precision: 1}
	if predPairs > 0 {
		s.precision = float64(tp) / float64(predPairs)
	}
	if truePairs > 0 {
		s.recall = float64(tp) / float64(truePairs)
	}
	if s.precision+s.recall > 0 {
		s.f1 = 2 * s.precision * s.recall / (s.precision + s.recall)
	}
	return s
}

// fixtureRun is one fixture embedded by one embedder.
type fixtureRun struct {
	items  []labelled
	labels []string
	sims   [][]float64
	order  []int
}

func embedFixture(t testing.TB, e Embedder, name string) fixtureRun {
	t.Helper()
	items := clusterable(loadFixture(t, name))
	texts := make([]string, len(items))
	labels := make([]string, len(items))
	for i, it := range items {
		// What the feedback store embeds: correction summary and comment.
		texts[i] = precept.EmbeddingText(it.Decision)
		labels[i] = it.Cluster
	}
	vecs, err := e.Embed(context.Background(), texts)
	if err != nil {
		t.Fatalf("Embed: %v", err)
	}
	sims := make([][]float64, len(vecs))
	for i := range vecs {
		sims[i] = make([]float64, len(vecs))
		for j := range vecs {
			sims[i][j] = Cosine(vecs[i], vecs[j])
		}
	}
	return fixtureRun{items: items, labels: labels, sims: sims, order: arrivalOrder(items)}
}

// quality is how well one fixture clusters at one threshold.
type quality struct {
	arrival       pairScores // in timestamp order
	meanF1, minF1 float64    // over shuffled orders, since single-pass clustering depends on order
}

// shuffles is how many random arrival orders quality averages over.
const shuffles = 100

func (r fixtureRun) quality(threshold float64) quality {
	q := quality{arrival: scorePairs(clusterIncrementally(r.sims, r.order, threshold), r.labels), minF1: 1}
	rng := rand.New(rand.NewPCG(1, 2))
	for range shuffles {
		f1 := scorePairs(clusterIncrementally(r.sims, rng.Perm(len(r.sims)), threshold), r.labels).f1
		q.meanF1 += f1 / shuffles
		q.minF1 = min(q.minF1, f1)
	}
	return q
}

// meanCosines returns the mean cosine of pairs with the same label and of
// pairs with different labels.
func (r fixtureRun) meanCosines() (intra, inter float64) {
	var ni, nx int
	for i := range r.sims {
		for j := i + 1; j < len(r.sims); j++ {
			if r.labels[i] == r.labels[j] {
				intra += r.sims[i][j]
				ni++
			} else {
				inter += r.sims[i][j]
				nx++
			}
		}
	}
	return intra / float64(max(ni, 1)), inter / float64(max(nx, 1))
}

// report logs a fixture's quality: scores at the default threshold, mean
// cosines, the F1 curve, and the predicted clusters that mix labels.
func (r fixtureRun) report(t *testing.T, name string) quality {
	q := r.quality(defaultThreshold)
	intra, inter := r.meanCosines()
	t.Logf("%s: %d items, %d labels; at %.2f: precision %.3f recall %.3f F1 %.3f (arrival order); F1 over %d shuffles: mean %.3f min %.3f",
		name, len(r.items), countDistinct(r.labels), defaultThreshold, q.arrival.precision, q.arrival.recall, q.arrival.f1, shuffles, q.meanF1, q.minF1)
	t.Logf("%s: mean cosine within a label %.3f, across labels %.3f", name, intra, inter)
	var curve []string
	for th := 0.60; th <= 0.901; th += 0.05 {
		c := r.quality(th)
		curve = append(curve, fmt.Sprintf("%.2f: P %.2f R %.2f F1 %.3f (mean %.3f)", th, c.arrival.precision, c.arrival.recall, c.arrival.f1, c.meanF1))
	}
	t.Logf("%s: F1 by threshold\n\t%s", name, strings.Join(curve, "\n\t"))
	pred := clusterIncrementally(r.sims, r.order, defaultThreshold)
	mixed := map[int][]string{}
	for i, p := range pred {
		if !slices.Contains(mixed[p], r.labels[i]) {
			mixed[p] = append(mixed[p], r.labels[i])
		}
	}
	var merges []string
	for _, labels := range mixed {
		if len(labels) > 1 {
			slices.Sort(labels)
			merges = append(merges, strings.Join(labels, " + "))
		}
	}
	slices.Sort(merges)
	if len(merges) == 0 {
		merges = []string{"(none)"}
	}
	t.Logf("%s: predicted clusters mixing labels at %.2f:\n\t%s", name, defaultThreshold, strings.Join(merges, "\n\t"))
	return q
}

func countDistinct(s []string) int {
	m := map[string]bool{}
	for _, x := range s {
		m[x] = true
	}
	return len(m)
}

// The floors below are the figures measured when the embedder was tuned,
// minus a small margin, so that a regression fails.
func TestLocalClustersLabelledFeedback(t *testing.T) {
	r := embedFixture(t, NewLocal(LocalOptions{}), labelledFile)
	q := r.report(t, labelledFile)
	intra, inter := r.meanCosines()
	for _, c := range []struct {
		what       string
		got, floor float64
	}{
		{"precision at 0.8", q.arrival.precision, 0.82},   // measured 0.856
		{"recall at 0.8", q.arrival.recall, 0.80},         // measured 0.840
		{"F1 at 0.8", q.arrival.f1, 0.82},                 // measured 0.848
		{"mean F1 over shuffles", q.meanF1, 0.77},         // measured 0.803
		{"min F1 over shuffles", q.minF1, 0.68},           // measured 0.719
		{"intra minus inter cosine", intra - inter, 0.24}, // measured 0.272
	} {
		if c.got < c.floor {
			t.Errorf("%s = %.3f, below the floor %.2f", c.what, c.got, c.floor)
		}
	}
}

// The held-out sets say how the embedder does on feedback it was not
// developed against. holdout-1 was written before tuning and first looked
// at after it; its errors then shaped the concept table. holdout-2 was
// written after that, scored once (mean F1 0.27: the table did not know
// its topics), and the table was then extended with software-review topics
// including its own, so it is no longer independent either. Their floors
// guard against regressions, not against overfitting.
func TestLocalClustersHeldOutFeedback(t *testing.T) {
	e := NewLocal(LocalOptions{})
	for _, c := range []struct {
		name  string
		floor float64
	}{
		{holdout1File, 0.44}, // measured mean F1 0.511
		{holdout2File, 0.74}, // measured mean F1 0.807
	} {
		q := embedFixture(t, e, c.name).report(t, c.name)
		if q.meanF1 < c.floor {
			t.Errorf("%s: mean F1 at 0.8 = %.3f, below the floor %.2f", c.name, q.meanF1, c.floor)
		}
	}
}

func TestDefaultDimensionIsWithinAPointOfTheBest(t *testing.T) {
	if testing.Short() {
		t.Skip("embeds the labelled fixture at five dimensions")
	}
	best, bestDim := 0.0, 0
	var atDefault float64
	var line []string
	for _, dim := range []int{256, 384, 512, 768, 1024} {
		f1 := embedFixture(t, NewLocal(LocalOptions{Dimension: dim}), labelledFile).quality(defaultThreshold).meanF1
		line = append(line, fmt.Sprintf("%d: %.3f", dim, f1))
		if f1 > best {
			best, bestDim = f1, dim
		}
		if dim == DefaultLocalDimension {
			atDefault = f1
		}
	}
	t.Logf("mean F1 at 0.8 by dimension: %s", strings.Join(line, ", "))
	// A point of F1, plus half a point for the noise hash collisions add.
	if atDefault < best-0.015 {
		t.Errorf("default dimension %d: mean F1 %.3f; %d reaches %.3f: choose the smallest dimension within a point of the best",
			DefaultLocalDimension, atDefault, bestDim, best)
	}
}

// BenchmarkLocalEmbed embeds every comment of the labelled fixture, one
// per call as the stream consumer does, and reports the time per comment.
func BenchmarkLocalEmbed(b *testing.B) {
	var texts []string
	for _, it := range loadFixture(b, labelledFile) {
		if text := precept.EmbeddingText(it.Decision); text != "" {
			texts = append(texts, text)
		}
	}
	e := NewLocal(LocalOptions{})
	ctx := context.Background()
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		for _, text := range texts {
			if _, err := e.Embed(ctx, []string{text}); err != nil {
				b.Fatal(err)
			}
		}
		n += len(texts)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/comment")
}
