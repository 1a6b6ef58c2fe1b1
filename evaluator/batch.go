package evaluator

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"math"
	"runtime"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/lesson"
	"github.com/precept-dev/precept/lib/embedding"
	"github.com/precept-dev/precept/lib/text"
	"github.com/precept-dev/precept/lib/vectorindex"
)

// batch is what evaluating a batch produced, before it is saved.
type batch struct {
	commit  commit
	vectors []vectorindex.Vector
	fresh   []Evaluation
	change  Change
}

// candidate is a clear negative decision on its way into a cluster.
type candidate struct {
	item    Item
	judged  judgement
	vec     []float32
	hits    []vectorindex.Hit
	cluster string
	joinSim float64
	// weights are the lesson's category weights (lesson.Taxonomy.Weights).
	weights map[string]float64
}

// evaluateBatch evaluates a batch of stored decisions without saving
// anything: decisions that are positive or ambiguous are evaluated alone;
// clear negatives are embedded, joined to clusters and evaluated from
// their cluster's statistics, and clusters whose class changed
// re-evaluate their older members.
func (s *Service) evaluateBatch(ctx context.Context, items []Item) (*batch, error) {
	r := &batchRun{
		s: s, now: s.opts.Now().UTC(), b: &batch{},
		evals:    make(map[string]*Evaluation, len(items)),
		clusters: map[string]*Cluster{},
		before:   map[string]Class{},
		founded:  map[string][]string{},
	}
	r.triage(items, s.opts.Rubric.Rubric(), func(d precept.Decision) lesson.Lesson { return s.learn(ctx, d) })
	tax := s.opts.Lessons.Classifier().Taxonomy()
	s.groups.setTaxonomy(tax)
	for _, c := range r.cands {
		c.weights = tax.Weights(c.judged.lesson)
	}
	if err := s.embedAndQuery(ctx, r.cands); err != nil {
		return nil, err
	}
	// Assign clusters in feed order, so every replica founds and joins the
	// same clusters whatever its batch boundaries.
	for i := range r.cands {
		if err := r.assign(i); err != nil {
			return nil, err
		}
	}
	r.evaluateCandidates(ctx)
	if err := r.reclassifyClusters(); err != nil {
		return nil, err
	}
	r.collect(items)
	return r.b, nil
}

// batchRun is the working state of one evaluateBatch.
type batchRun struct {
	s   *Service
	now time.Time
	b   *batch
	// evals holds the batch's evaluations and those of older members a
	// reclassified cluster re-evaluated, by decision id.
	evals map[string]*Evaluation
	// cands are the clear negatives, in feed order.
	cands []*candidate
	// clusters holds every cluster the batch touched, loaded or founded.
	clusters map[string]*Cluster
	// before is each touched cluster's class before the batch; "" for a
	// cluster the batch founded.
	before map[string]Class
	// founded lists the clusters the batch founded, per group.
	founded map[string][]string
}

// triage evaluates the decisions that need no cluster (positive,
// ambiguous) and keeps the clear negatives as candidates. Ambiguous ones
// start a needs-review record.
func (r *batchRun) triage(items []Item, rubric *Rubric, learn func(precept.Decision) lesson.Lesson) {
	for _, it := range items {
		d := it.Feedback.Decision
		r.b.commit.clearErrors = append(r.b.commit.clearErrors, d.DecisionID)
		ev, judged, clear := triage(d, rubric, learn)
		if clear {
			r.cands = append(r.cands, &candidate{item: it, judged: judged})
			continue
		}
		ev.Evaluator, ev.EvaluatedAt = "deterministic", r.now
		r.evals[d.DecisionID] = &ev
		if ev.Class == Ambiguous {
			r.b.commit.reviews = append(r.b.commit.reviews, newNeedsReview(d, ev.Rubric, r.now))
			r.b.change.NeedsReview = append(r.b.change.NeedsReview, d.DecisionID)
		}
	}
}

// assign puts candidate i into a cluster: the one it is already in (a
// batch re-run after a crash, or a clarified decision: it is not counted
// twice), else the cluster of its agent and family it is most similar
// to on average, when that reaches the linkage threshold, else a cluster
// it founds. It queues the candidate's vector for the index.
func (r *batchRun) assign(i int) error {
	c := r.cands[i]
	d := c.item.Feedback.Decision
	existing, err := r.s.state.clusterOf(d.DecisionID)
	if err != nil {
		return err
	}
	best, sim := existing, 1.0
	if existing == "" {
		best, sim = r.nearestCluster(c)
	}
	var cl *Cluster
	if best != "" {
		if cl, err = r.load(best); err != nil {
			return err
		}
	}
	if cl == nil {
		cl = newCluster(clusterID(d.DecisionID), r.now)
		cl.Agent, cl.Category = d.Agent, c.judged.lesson.Category
		r.clusters[cl.ID] = cl
		key := r.s.groups.keyOf(cl.Agent, cl.Category)
		r.founded[key] = append(r.founded[key], cl.ID)
		sim = 1
	}
	if _, seen := r.before[cl.ID]; !seen {
		r.before[cl.ID] = cl.Class
		if cl.Size == 0 {
			r.before[cl.ID] = ""
		}
	}
	c.cluster, c.joinSim = cl.ID, sim
	if existing == "" {
		m := memberOf(c.item.Feedback, sim)
		m.Asked, m.Categories = c.judged.lesson.Asked, c.weights
		cl.add(m)
		// A cluster's category is the one its members' weights favour
		// (docs/lessons.md, "Clustering"); it stays in its family.
		if lead := leadingCategory(cl.CategorySum); lead != "" {
			cl.Category = lead
		}
		cl.addVector(c.vec)
		r.b.commit.members = append(r.b.commit.members, memberRecord{ClusterID: cl.ID, Seq: cl.Size, Member: m})
	}
	cl.UpdatedAt = r.now
	v := vectorFor(d, cl.ID, cl.Category)
	v.Embedding, v.Document = c.vec, text.TruncateTrim(c.item.Feedback.EmbeddingText, maxDocument)
	r.b.vectors = append(r.b.vectors, v)
	return nil
}

// load returns a cluster the batch touched, reading it from the state on
// first use; nil when it does not exist.
func (r *batchRun) load(id string) (*Cluster, error) {
	if c, ok := r.clusters[id]; ok {
		return c, nil
	}
	c, ok, err := getJSON[Cluster](r.s.state, bClusters, id)
	if err != nil || !ok {
		return nil, err
	}
	r.clusters[id] = &c
	return &c, nil
}

// evaluateCandidates evaluates each candidate from its cluster as it
// stands after the whole batch joined, and lets the LLM refine it.
func (r *batchRun) evaluateCandidates(ctx context.Context) {
	for _, c := range r.cands {
		d := c.item.Feedback.Decision
		cl := r.clusters[c.cluster]
		ev := r.s.opts.Thresholds.clusterEvaluation(d, &c.judged.rubric, cl.ID, cl.Stats(), cl.Tags(), cl.meanSimilarity())
		ev.Lesson = &c.judged.lesson
		ev.SimilarIDs = r.s.similarIDs(c, r.cands)
		ev.Evaluator, ev.EvaluatedAt = "deterministic", r.now
		r.s.refine(ctx, d, cl, similarTexts(c, r.cands), &ev)
		r.evals[d.DecisionID] = &ev
	}
}

// reclassifyClusters gives each touched cluster its class as it now
// stands; a cluster whose class changed re-evaluates its older members.
// Generalizable clusters are reported as changed.
func (r *batchRun) reclassifyClusters() error {
	for _, id := range slices.Sorted(maps.Keys(r.clusters)) {
		cl := r.clusters[id]
		class := r.s.opts.Thresholds.ClassOf(cl.Stats())
		if class != cl.Class {
			cl.Class = class
			cl.Revision++
		}
		if class.Generalizable() {
			r.b.change.GeneralizableClusters = append(r.b.change.GeneralizableClusters, id)
		}
		if old := r.before[id]; old != "" && old != class {
			if err := r.s.reclassMembers(cl, r.evals, r.now, r.b); err != nil {
				return err
			}
		}
		r.b.commit.clusters = append(r.b.commit.clusters, cl)
	}
	return nil
}

// collect puts the evaluations into the batch: the batch's own in feed
// order as fresh, with their edge cases, and every evaluation in
// decision-id order for the commit.
func (r *batchRun) collect(items []Item) {
	for _, it := range items {
		ev := r.evals[it.Feedback.DecisionID]
		r.b.fresh = append(r.b.fresh, *ev)
		r.s.noteEdgeCase(it.Feedback, ev, r.clusters[ev.ClusterID], r.b)
	}
	for _, ev := range r.evals {
		r.b.commit.evaluations = append(r.b.commit.evaluations, *ev)
	}
	sort.Slice(r.b.commit.evaluations, func(i, j int) bool {
		return r.b.commit.evaluations[i].DecisionID < r.b.commit.evaluations[j].DecisionID
	})
}

// embedAndQuery embeds the candidates and queries the index for each,
// in one batch: every query sees the index as it was before the batch.
func (s *Service) embedAndQuery(ctx context.Context, cands []*candidate) error {
	if len(cands) == 0 {
		return nil
	}
	texts := make([]string, len(cands))
	for i, c := range cands {
		texts[i] = s.embeddingText(c)
	}
	vecs, err := s.emb.Embed(ctx, texts)
	if err != nil {
		return fmt.Errorf("embed feedback: %w", err)
	}
	for i, c := range cands {
		c.vec = vecs[i]
	}
	// No Count first: a limit above the stored count is allowed, and with
	// a Chroma server every call is a round trip. The similar decisions
	// listed are the agent's own (docs/lessons.md, "Similar decisions"):
	// the embedded index then scans that agent's vectors only.
	limit := s.opts.MaxSimilar + 1
	qs := make([]vectorindex.Query, len(cands))
	for i, c := range cands {
		qs[i] = vectorindex.Query{Embedding: c.vec, Limit: limit, MinSimilarity: s.opts.SimilarityThreshold,
			Where: map[string]string{"agent": c.item.Feedback.Agent}}
	}
	// One batch: the embedded index reads its rows once for all of them.
	hits, err := vectorindex.QueryAll(ctx, s.index, qs, runtime.GOMAXPROCS(0))
	if err != nil {
		return fmt.Errorf("query similar feedback: %w", err)
	}
	for i, c := range cands {
		c.hits = hits[i]
	}
	return nil
}

// similarIDs lists the most similar feedback of the same agent for an
// evaluation: index hits and earlier decisions of the same batch.
func (s *Service) similarIDs(c *candidate, cands []*candidate) []string {
	type scored struct {
		id  string
		sim float64
	}
	var all []scored
	for _, h := range c.hits {
		if h.ID != c.item.Feedback.DecisionID {
			all = append(all, scored{h.ID, h.Similarity})
		}
	}
	for _, p := range cands {
		if p == c {
			break
		}
		if p.item.Feedback.Agent != c.item.Feedback.Agent {
			continue
		}
		if sim := embedding.Cosine(c.vec, p.vec); sim >= s.opts.SimilarityThreshold {
			all = append(all, scored{p.item.Feedback.DecisionID, sim})
		}
	}
	// Index hits and batch neighbours reach their similarities by
	// different arithmetic, so two copies of one comment may score
	// 0.99999994 and 1 depending on whether the earlier one was already
	// indexed or still in the batch: ordered at float32's precision,
	// they tie and are listed by id, however the batches fell.
	key := func(sim float64) float64 { return math.Round(sim * 1e6) }
	sort.Slice(all, func(i, j int) bool {
		if a, b := key(all[i].sim), key(all[j].sim); a != b {
			return a > b
		}
		return all[i].id < all[j].id
	})
	var out []string
	for _, x := range all {
		if len(out) == s.opts.MaxSimilar {
			break
		}
		out = append(out, x.id)
	}
	return out
}

// reclassMembers re-evaluates a cluster's earlier members after its class
// changed (docs/thresholds.md: re-evaluated when it grows across a threshold).
func (s *Service) reclassMembers(cl *Cluster, evals map[string]*Evaluation, now time.Time, b *batch) error {
	stats, tags, meanSim := cl.Stats(), cl.Tags(), cl.meanSimilarity()
	members, err := s.state.members(cl.ID, 1)
	if err != nil {
		return err
	}
	for _, m := range members {
		if _, fresh := evals[m.DecisionID]; fresh {
			continue
		}
		old, ok, err := getJSON[Evaluation](s.state, bEvals, m.DecisionID)
		if err != nil {
			return err
		}
		d := precept.Decision{DecisionID: m.DecisionID, Agent: m.Agent}
		ev := s.opts.Thresholds.clusterEvaluation(d, old.Rubric, cl.ID, stats, tags, meanSim)
		ev.SimilarIDs, ev.Evaluator, ev.EvaluatedAt, ev.Lesson = old.SimilarIDs, "deterministic", now, old.Lesson
		if ok {
			ev.Revision = old.Revision + 1
		}
		evals[m.DecisionID] = &ev
		if old.Class == EdgeCase && ev.Class != EdgeCase {
			b.commit.edgeAdd = append(b.commit.edgeAdd, EdgeCaseDoc{DecisionID: m.DecisionID, Remove: true})
		}
	}
	return nil
}

func (s *Service) noteEdgeCase(f precept.Feedback, ev *Evaluation, cl *Cluster, b *batch) {
	if ev.Class != EdgeCase || cl == nil || s.opts.EdgeCases == nil {
		return
	}
	b.commit.edgeAdd = append(b.commit.edgeAdd, EdgeCaseDoc{
		DecisionID: f.DecisionID, Agent: f.Agent, ClusterID: cl.ID, Rationale: ev.Rationale,
		Comment: f.ReviewerComment, Correction: precept.CorrectionSummary(f.CorrectionDiff),
		Stats: *ev.Stats, At: f.Timestamp,
	})
}

func clusterID(founder string) string {
	sum := sha256.Sum256([]byte(founder))
	return "c-" + hex.EncodeToString(sum[:6])
}

func memberOf(f precept.Feedback, sim float64) Member {
	return Member{
		DecisionID: f.DecisionID, Agent: f.Agent, ReviewerID: f.ReviewerID, EpicID: f.EpicID, Producer: f.ProducerName(),
		Text: text.TruncateTrim(f.EmbeddingText, 500), Tags: f.Tags, At: f.Timestamp, Similarity: round2(sim),
	}
}

// similarTexts lists the comments a decision was found similar to, for
// the LLM: index hits and earlier decisions of the batch.
func similarTexts(c *candidate, cands []*candidate) []similarText {
	var out []similarText
	for _, h := range c.hits {
		if h.ID != c.item.Feedback.DecisionID && len(out) < 5 {
			out = append(out, similarText{ReviewerID: h.Metadata["reviewer_id"], EpicID: h.Metadata["epic_id"], Text: text.TruncateTrim(h.Document, 300)})
		}
	}
	for _, p := range cands {
		if p == c || len(out) >= 5 {
			break
		}
		if p.cluster == c.cluster && p.cluster != "" {
			f := p.item.Feedback
			out = append(out, similarText{ReviewerID: f.ReviewerID, EpicID: f.EpicID, Text: text.TruncateTrim(f.EmbeddingText, 300)})
		}
	}
	return out
}

// embeddingText is what a candidate is embedded as: its text, or — with
// Options.EmbedLessons — its lesson: the category's problem and the
// reviewer's own sentences (docs/lessons.md).
func (s *Service) embeddingText(c *candidate) string {
	if l := c.judged.lesson; s.opts.EmbedLessons && l.Known() {
		return lessonText(l)
	}
	return c.item.Feedback.EmbeddingText
}

func lessonText(l lesson.Lesson) string {
	return strings.Join(slices.DeleteFunc([]string{l.Problem, l.Said, l.Asked}, func(s string) bool { return s == "" }), "\n")
}
