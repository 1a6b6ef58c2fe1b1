// Package evalrun measures precept's judgement on labelled feedback
// (testdata/feedback, docs/lessons.md "Evaluation"): it sends every item
// through the real evaluator on the embedded defaults — lesson
// classifier, clarity rubric, local embedder, embedded index, clustering
// — and scores what comes out against the labels: pairwise clustering
// precision, recall and F1, class accuracy, category accuracy, and the
// confusion of classes.
package evalrun

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/evaluator"
	"github.com/precept-dev/precept/lesson"
	"github.com/precept-dev/precept/lib/embedding"
	"github.com/precept-dev/precept/lib/vectorindex"
	"github.com/precept-dev/precept/lib/vectorindex/chromem"
)

// Item is one labelled decision.
type Item struct {
	Feedback precept.Feedback
	// Cluster groups items that say the same thing; Category is the
	// taxonomy id the item's problem belongs to ("positive" for approvals,
	// "unclear" for vague rejections); Class is the expected class.
	Cluster  string
	Category string
	Class    evaluator.Class
}

// Load reads a labelled file: decision events with the label fields
// cluster, category and expected_class (testdata/feedback/README.md).
func Load(path string) ([]Item, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Item
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for line := 1; sc.Scan(); line++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		var it Item
		var class string
		for key, dst := range map[string]*string{"cluster": &it.Cluster, "category": &it.Category, "expected_class": &class} {
			if err := json.Unmarshal(m[key], dst); err != nil || *dst == "" {
				return nil, fmt.Errorf("%s:%d: label %s missing", path, line, key)
			}
			delete(m, key)
		}
		it.Class = evaluator.Class(class)
		event, _ := json.Marshal(m)
		d, err := precept.ParseDecisionJSON(event)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		if err := d.Validate(precept.Limits{}, time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		it.Feedback = precept.NewFeedback(d, "eval", d.Timestamp)
		out = append(out, it)
	}
	return out, sc.Err()
}

// Report is what a run measured.
type Report struct {
	Name  string
	Items int
	// Pairwise clustering scores over the items labelled as clustered
	// (not POSITIVE, not AMBIGUOUS): a pair is a true positive when both
	// the labels and the evaluator put it together.
	Precision, Recall, F1 float64
	ClassCorrect          int
	// CategoryItems counts the negative items with a taxonomy category;
	// CategoryCorrect those whose lesson has it. UnclearItems and
	// UnclearCorrect do the same for vague rejections.
	CategoryItems, CategoryCorrect int
	UnclearItems, UnclearCorrect   int
	// Confusion counts expected → evaluated classes.
	Confusion map[[2]evaluator.Class]int
	// Miscategorised lists up to 20 category errors: id, want, got.
	Miscategorised [][3]string
}

// ClassAccuracy is the share of items given their expected class.
func (r Report) ClassAccuracy() float64 { return ratio(r.ClassCorrect, r.Items) }

// CategoryAccuracy is the share of categorised negatives whose lesson has
// their category.
func (r Report) CategoryAccuracy() float64 { return ratio(r.CategoryCorrect, r.CategoryItems) }

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// Options change the evaluator of a run; zero values are the defaults.
type Options = evaluator.Options

// Run evaluates items in timestamp order through a fresh evaluator whose
// state lives in dir, and scores the result.
func Run(ctx context.Context, name string, items []Item, dir string, opts Options) (Report, error) {
	evals, err := Evaluate(ctx, items, dir, opts)
	if err != nil {
		return Report{}, err
	}
	return Score(name, items, evals), nil
}

// Evaluate runs items in timestamp order through a fresh evaluator whose
// state lives in dir and returns their evaluations, one per item in the
// order given.
func Evaluate(ctx context.Context, items []Item, dir string, opts Options) ([]evaluator.Evaluation, error) {
	emb := embedding.NewLocal(embedding.LocalOptions{})
	idx, reset, err := chromem.Open(filepath.Join(dir, "vectors"), vectorindex.Spec{Embedder: emb.Name(), Dimension: emb.Dimension()})
	if err != nil {
		return nil, err
	}
	defer idx.Close()
	feed := &sliceFeed{changed: make(chan struct{})}
	ordered := slices.Clone(items)
	slices.SortStableFunc(ordered, func(a, b Item) int { return a.Feedback.Timestamp.Compare(b.Feedback.Timestamp) })
	for i, it := range ordered {
		feed.items = append(feed.items, evaluator.Item{Seq: uint64(i + 1), Feedback: it.Feedback})
	}
	svc, err := evaluator.New(ctx, feed, emb, idx, reset, filepath.Join(dir, "evaluator.db"), opts)
	if err != nil {
		return nil, err
	}
	defer svc.Close()
	for {
		n, err := svc.Step(ctx)
		if err != nil {
			return nil, err
		}
		if n == 0 {
			break
		}
	}
	// Measured after a round, as a user sees the clusters once the
	// periodic re-clustering has run.
	if _, err := svc.Recluster(ctx); err != nil {
		return nil, err
	}
	evals := make([]evaluator.Evaluation, len(items))
	for i, it := range items {
		if evals[i], _, err = svc.Evaluation(ctx, it.Feedback.DecisionID); err != nil {
			return nil, err
		}
	}
	return evals, nil
}

// Score compares evaluations (one per item, in order) with the labels.
func Score(name string, items []Item, evals []evaluator.Evaluation) Report {
	r := Report{Name: name, Items: len(items), Confusion: map[[2]evaluator.Class]int{}}
	var clustered []int
	for i, it := range items {
		ev := evals[i]
		if ev.Class == it.Class {
			r.ClassCorrect++
		}
		r.Confusion[[2]evaluator.Class{it.Class, ev.Class}]++
		if it.Class != evaluator.Positive && it.Class != evaluator.Ambiguous {
			clustered = append(clustered, i)
		}
		got := ""
		if ev.Lesson != nil {
			got = ev.Lesson.Category
		}
		switch it.Category {
		case "positive":
		case lesson.Unclear:
			r.UnclearItems++
			// No lesson at all: a rejection with nothing to read, which
			// counts only when it ended ambiguous.
			if got == lesson.Unclear || (got == "" && ev.Class == evaluator.Ambiguous) {
				r.UnclearCorrect++
			}
		default:
			r.CategoryItems++
			if got == it.Category {
				r.CategoryCorrect++
			} else if len(r.Miscategorised) < 20 {
				r.Miscategorised = append(r.Miscategorised, [3]string{it.Feedback.DecisionID, it.Category, got})
			}
		}
	}
	var tp, fp, fn int
	for a := range clustered {
		for b := a + 1; b < len(clustered); b++ {
			i, j := clustered[a], clustered[b]
			same := items[i].Cluster == items[j].Cluster
			pred := evals[i].ClusterID != "" && evals[i].ClusterID == evals[j].ClusterID
			switch {
			case same && pred:
				tp++
			case pred:
				fp++
			case same:
				fn++
			}
		}
	}
	r.Precision, r.Recall = ratio(tp, tp+fp), ratio(tp, tp+fn)
	if r.Precision+r.Recall > 0 {
		r.F1 = 2 * r.Precision * r.Recall / (r.Precision + r.Recall)
	}
	return r
}

var classes = []evaluator.Class{evaluator.Positive, evaluator.Ambiguous, evaluator.EdgeCase, evaluator.GeneralizableLow, evaluator.GeneralizableHigh}

// Write prints the report: the figures on one line, then the confusion
// table, then category errors when verbose.
func (r Report) Write(w io.Writer, verbose bool) {
	fmt.Fprintf(w, "%-22s items %4d  pairwise P %.3f R %.3f F1 %.3f  class acc %.3f (%d/%d)  category acc %.3f (%d/%d)  unclear found %d/%d\n",
		r.Name, r.Items, r.Precision, r.Recall, r.F1, r.ClassAccuracy(), r.ClassCorrect, r.Items,
		r.CategoryAccuracy(), r.CategoryCorrect, r.CategoryItems, r.UnclearCorrect, r.UnclearItems)
	short := func(c evaluator.Class) string {
		return strings.NewReplacer("GENERALIZABLE_", "GEN_", "_CASE", "").Replace(string(c))
	}
	fmt.Fprintf(w, "  %-12s", "want \\ got")
	for _, c := range classes {
		fmt.Fprintf(w, " %9s", short(c))
	}
	fmt.Fprintln(w)
	for _, want := range classes {
		fmt.Fprintf(w, "  %-12s", short(want))
		for _, got := range classes {
			fmt.Fprintf(w, " %9d", r.Confusion[[2]evaluator.Class{want, got}])
		}
		fmt.Fprintln(w)
	}
	if verbose {
		for _, m := range r.Miscategorised {
			fmt.Fprintf(w, "  %s: want %s, got %s\n", m[0], m[1], m[2])
		}
	}
}

// sliceFeed is a feed of fixed items.
type sliceFeed struct {
	mu      sync.Mutex
	items   []evaluator.Item
	changed chan struct{}
}

func (f *sliceFeed) Since(seq uint64, limit int) ([]evaluator.Item, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if int(seq) >= len(f.items) {
		return nil, nil
	}
	return slices.Clone(f.items[seq:min(len(f.items), int(seq)+limit)]), nil
}

func (f *sliceFeed) Last() (uint64, error) { return uint64(len(f.items)), nil }

func (f *sliceFeed) Get(_ context.Context, id string) (precept.Feedback, error) {
	for _, it := range f.items {
		if it.Feedback.DecisionID == id {
			return it.Feedback, nil
		}
	}
	return precept.Feedback{}, fmt.Errorf("decision %s: %w", id, precept.ErrNotFound)
}

func (f *sliceFeed) Changed() <-chan struct{} { return f.changed }
