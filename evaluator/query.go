package evaluator

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/lesson"
	"github.com/precept-dev/precept/lib/embedding"
	"github.com/precept-dev/precept/lib/vectorindex"
)

// Evaluate classifies a decision against the stored feedback without
// storing anything: a dry run. The decision is treated as if it arrived
// now.
func (s *Service) Evaluate(ctx context.Context, d precept.Decision) (Evaluation, error) {
	now := s.opts.Now().UTC()
	ev, j, clear := triage(d, s.opts.Rubric.Rubric(), func(d precept.Decision) lesson.Lesson { return s.learn(ctx, d) })
	if clear {
		f := precept.NewFeedback(d, "dry-run", now)
		c := &candidate{item: Item{Feedback: f}, judged: j, weights: s.opts.Lessons.Classifier().Taxonomy().Weights(j.lesson)}
		if err := s.embedAndQuery(ctx, []*candidate{c}); err != nil {
			return Evaluation{}, err
		}
		existing, err := s.state.clusterOf(d.DecisionID)
		if err != nil {
			return Evaluation{}, err
		}
		best, sim := existing, 1.0
		if best == "" {
			dry := &batchRun{s: s, clusters: map[string]*Cluster{}, founded: map[string][]string{}}
			best, sim = dry.nearestCluster(c)
		}
		cl := newCluster(clusterID(d.DecisionID), now)
		if best != "" {
			stored, ok, err := getJSON[Cluster](s.state, bClusters, best)
			if err != nil {
				return Evaluation{}, err
			}
			if ok {
				cl = stored.clone()
			}
		}
		if existing != cl.ID {
			cl.add(memberOf(f, max(sim, 0)))
		}
		ev = s.opts.Thresholds.clusterEvaluation(d, &j.rubric, cl.ID, cl.Stats(), cl.Tags(), cl.meanSimilarity())
		ev.Lesson = &j.lesson
		ev.SimilarIDs = s.similarIDs(c, nil)
		ev.Evaluator, ev.EvaluatedAt = "deterministic", now
		s.refine(ctx, d, cl, similarTexts(c, nil), &ev)
		return ev, nil
	}
	ev.Evaluator, ev.EvaluatedAt = "deterministic", now
	return ev, nil
}

// Evaluation returns a decision's evaluation. When there is none yet,
// pending says why (the last error), or is empty while it waits its turn.
func (s *Service) Evaluation(ctx context.Context, id string) (ev Evaluation, pending string, err error) {
	ev, ok, err := getJSON[Evaluation](s.state, bEvals, id)
	if err != nil {
		return Evaluation{}, "", fmt.Errorf("get evaluation: %w", err)
	}
	if !ok {
		msg, err := s.state.evaluationError(id)
		if err != nil {
			return Evaluation{}, "", err
		}
		return Evaluation{}, msg, precept.Errorf(precept.NotFound, "decision %q has no evaluation yet", id)
	}
	return ev, "", nil
}

// ClusterView is a cluster with what callers need to judge it.
type ClusterView struct {
	Cluster
	Stats           Stats
	Tags            []string
	Representatives []Representative
	// Confidence is the evaluator's confidence in the cluster: that of its
	// most central member's evaluation, or its class's typical confidence
	// while that evaluation is pending.
	Confidence float64
	// Members is filled by Cluster (one cluster), not by listings.
	Members []Member
}

// centralitySample bounds the members whose centrality is computed: the
// most recent ones, so a view costs the same for any cluster size. A
// variable so that tests can make clusters outgrow it.
var centralitySample = 64

// Cluster returns one cluster with its representatives and all its
// members.
func (s *Service) Cluster(ctx context.Context, id string) (ClusterView, error) {
	return s.ClusterPage(ctx, id, 0, 0)
}

// ClusterPage returns one cluster with its representatives and limit of
// its members (all when limit is 0) from position offset in join order:
// a page of a large cluster reads only that page.
func (s *Service) ClusterPage(ctx context.Context, id string, offset, limit int) (ClusterView, error) {
	c, ok, err := getJSON[Cluster](s.state, bClusters, id)
	if err != nil {
		return ClusterView{}, fmt.Errorf("get cluster: %w", err)
	}
	if !ok {
		return ClusterView{}, precept.Errorf(precept.NotFound, "cluster %q not found", id)
	}
	v, err := s.view(ctx, viewOf(c), 5, nil)
	if err != nil {
		return ClusterView{}, err
	}
	v.Members, err = s.state.memberPage(id, max(offset, 0), limit)
	return v, err
}

// ClusterQuery selects clusters for Clusters.
type ClusterQuery struct {
	// Agent keeps clusters that include it; empty keeps every agent's.
	Agent string
	// MinSize keeps clusters with at least this many members.
	MinSize int
	// Offset and Limit pick a page of the ordered list; Limit 0 means
	// to the end.
	Offset, Limit int
}

// Clusters lists clusters largest first (then by id) and how many match
// in all, from the clusters held in memory (groups): a listing reads no
// cluster record, so it costs its page, not the number or the size of
// the clusters. Listed clusters carry their statistics but not their
// counts per reviewer and per epic, nor their vector sum; Cluster
// returns one in full.
func (s *Service) Clusters(ctx context.Context, q ClusterQuery) ([]ClusterView, int, error) {
	page, total := s.groups.list(q)
	for i := range page {
		v, err := s.view(ctx, page[i], 3, nil)
		if err != nil {
			return nil, 0, fmt.Errorf("list clusters: %w", err)
		}
		page[i] = v
	}
	return page, total, nil
}

// Generalizable lists the clusters whose statistics support a rule.
func (s *Service) Generalizable(ctx context.Context) ([]ClusterView, error) {
	var picked []Cluster
	err := eachJSON(s.state, bClusters, func(c Cluster) error {
		if c.Class.Generalizable() {
			picked = append(picked, c)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]ClusterView, 0, len(picked))
	for _, c := range picked {
		v, err := s.view(ctx, viewOf(c), 5, nil)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// viewOf is a cluster with its statistics.
func viewOf(c Cluster) ClusterView { return ClusterView{Cluster: c, Stats: c.Stats(), Tags: c.Tags()} }

// view adds the n most central comments to a cluster's view.
// Centrality is a member's mean similarity to the others among the most
// recent centralitySample members, from their vectors in the index.
// sample, when not nil, is those members, already read by the caller.
func (s *Service) view(ctx context.Context, v ClusterView, n int, sample []Member) (ClusterView, error) {
	c := v.Cluster
	if reps, conf, ok := s.views.get(c); ok {
		v.Representatives, v.Confidence = reps[:min(n, len(reps))], conf
		return v, nil
	}
	if sample == nil {
		var err error
		if sample, err = s.state.members(c.ID, c.Size-centralitySample+1); err != nil {
			return ClusterView{}, err
		}
	}
	vecs, err := s.sampleVectors(ctx, sample)
	if err != nil {
		return ClusterView{}, fmt.Errorf("embed cluster %s: %w", c.ID, err)
	}
	cents := centralities(vecs)
	reps := make([]Representative, len(sample))
	for i, m := range sample {
		reps[i] = Representative{DecisionID: m.DecisionID, ReviewerID: m.ReviewerID, Agent: m.Agent, Text: m.Text, Centrality: round2(cents[i])}
	}
	sort.SliceStable(reps, func(i, j int) bool { return reps[i].Centrality > reps[j].Centrality })
	v.Representatives = reps[:min(n, len(reps))]
	v.Confidence = typicalConfidence(c.Class)
	if len(v.Representatives) > 0 {
		central, ok, err := getJSON[Evaluation](s.state, bEvals, v.Representatives[0].DecisionID)
		if err != nil {
			return ClusterView{}, fmt.Errorf("get evaluation: %w", err)
		}
		if ok {
			v.Confidence = central.Confidence
		}
	}
	s.views.put(c, reps, v.Confidence)
	return v, nil
}

// centralities returns each vector's mean cosine similarity to the
// others (1 for a lone vector) in time linear in their number: with u_i
// the vectors at unit length and S their sum, the similarities of u_i to
// the others add up to u_i·S − u_i·u_i. Sums run in float64 in a fixed
// order, so every machine gets the same figures. A zero vector is
// similar to nothing.
func centralities(vecs [][]float32) []float64 {
	out := make([]float64, len(vecs))
	if len(vecs) == 1 {
		out[0] = 1
		return out
	}
	if len(vecs) == 0 {
		return out
	}
	units := make([][]float64, len(vecs))
	sum := make([]float64, len(vecs[0]))
	for i, v := range vecs {
		units[i] = unit64(v, len(sum))
		for d, x := range units[i] {
			sum[d] += x
		}
	}
	for i, u := range units {
		var dot, self float64
		for d, x := range u {
			dot += x * sum[d]
			self += x * x
		}
		out[i] = max(-1, min(1, (dot-self)/float64(len(vecs)-1)))
	}
	return out
}

// unit64 returns v widened to float64 at unit length, zero when v is zero
// or not dim long.
func unit64(v []float32, dim int) []float64 {
	out := make([]float64, dim)
	if len(v) != dim {
		return out
	}
	var sq float64
	for _, x := range v {
		sq += float64(x) * float64(x)
	}
	if sq == 0 {
		return out
	}
	n := math.Sqrt(sq)
	for d, x := range v {
		out[d] = float64(x) / n
	}
	return out
}

// inProcess reports whether an index lives in this process.
func inProcess(idx vectorindex.Index) bool {
	ip, ok := idx.(interface{ InProcess() bool })
	return ok && ip.InProcess()
}

// vectorsFor returns the stored vectors of ids, unit length: from the
// state's copy when the index is remote, else (and for what the copy
// lacks) from the index.
func vectorsFor(ctx context.Context, st *state, idx vectorindex.Index, ids []string) (map[string][]float32, error) {
	out := map[string][]float32{}
	missing := ids
	if !inProcess(idx) {
		kept, err := st.vectors(ids)
		if err != nil {
			return nil, err
		}
		missing = nil
		for _, id := range ids {
			if v, ok := kept[id]; ok {
				out[id] = vectorindex.Normalized(v)
			} else {
				missing = append(missing, id)
			}
		}
	}
	if len(missing) > 0 {
		got, err := idx.Embeddings(ctx, missing)
		if err != nil {
			return nil, err
		}
		maps.Copy(out, got)
	}
	return out, nil
}

// sampleVectors returns the members' vectors: from an index in this
// process, or when embedding costs a round trip anyway; else (a Chroma
// server and the local embedder) the texts are embedded again, which is
// cheaper than fetching the vectors. Texts the index lacks are embedded.
func (s *Service) sampleVectors(ctx context.Context, sample []Member) ([][]float32, error) {
	if _, local := s.emb.(*embedding.Local); local && !inProcess(s.index) {
		texts := make([]string, len(sample))
		for i, m := range sample {
			texts[i] = m.Text
		}
		return s.emb.Embed(ctx, texts)
	}
	ids := make([]string, len(sample))
	for i, m := range sample {
		ids[i] = m.DecisionID
	}
	stored, err := s.index.Embeddings(ctx, ids)
	if err != nil {
		return nil, err
	}
	vecs := make([][]float32, len(sample))
	var missing []int
	var texts []string
	for i, m := range sample {
		if v, ok := stored[m.DecisionID]; ok {
			vecs[i] = v
			continue
		}
		missing = append(missing, i)
		texts = append(texts, m.Text)
	}
	if len(texts) > 0 {
		fresh, err := s.emb.Embed(ctx, texts)
		if err != nil {
			return nil, err
		}
		for k, i := range missing {
			vecs[i] = fresh[k]
		}
	}
	return vecs, nil
}

// viewCache keeps each cluster's ranked comments and confidence while the
// cluster is unchanged: the rule proposer asks for every generalizable
// cluster on every drafting round, and ranking re-embeds up to 64 comments.
type viewCache struct {
	mu sync.Mutex
	m  map[string]cachedView
}

type cachedView struct {
	size, revision int
	updated        time.Time
	reps           []Representative
	confidence     float64
}

// maxCachedViews bounds the cache; past it the cache starts again.
const maxCachedViews = 20000

func (vc *viewCache) get(c Cluster) ([]Representative, float64, bool) {
	vc.mu.Lock()
	defer vc.mu.Unlock()
	e, ok := vc.m[c.ID]
	if !ok || e.size != c.Size || e.revision != c.Revision || !e.updated.Equal(c.UpdatedAt) {
		return nil, 0, false
	}
	return slices.Clone(e.reps), e.confidence, true
}

func (vc *viewCache) put(c Cluster, reps []Representative, confidence float64) {
	vc.mu.Lock()
	defer vc.mu.Unlock()
	if vc.m == nil || len(vc.m) >= maxCachedViews {
		vc.m = map[string]cachedView{}
	}
	vc.m[c.ID] = cachedView{size: c.Size, revision: c.Revision, updated: c.UpdatedAt, reps: slices.Clone(reps), confidence: confidence}
}

// SimilarQuery asks for feedback similar to a stored decision or a text.
type SimilarQuery struct {
	DecisionID string
	Text       string
	Agent      string
	// Threshold defaults to the clustering threshold.
	Threshold float64
	Limit     int
}

// SimilarHit is one similar decision.
type SimilarHit struct {
	DecisionID string
	Similarity float64
	Agent      string
	ReviewerID string
	EpicID     string
	Text       string
	ClusterID  string
}

// FindSimilar searches the clustered feedback (clear negative decisions)
// for feedback similar to a decision or a text.
func (s *Service) FindSimilar(ctx context.Context, q SimilarQuery) ([]SimilarHit, error) {
	text := q.Text
	if q.DecisionID != "" {
		f, err := s.feed.Get(ctx, q.DecisionID)
		if err != nil {
			return nil, err
		}
		text = f.EmbeddingText
		if strings.TrimSpace(text) == "" {
			return nil, precept.Errorf(precept.FailedPrecondition, "decision %q has no comment or correction to compare", q.DecisionID)
		}
	}
	if q.Threshold == 0 {
		q.Threshold = s.opts.SimilarityThreshold
	}
	if q.Limit <= 0 {
		q.Limit = 10
	}
	vecs, err := s.emb.Embed(ctx, []string{text})
	if err != nil {
		return nil, fmt.Errorf("embed query: %w", err)
	}
	query := vectorindex.Query{Embedding: vecs[0], Limit: q.Limit + 1, MinSimilarity: q.Threshold}
	if q.Agent != "" {
		query.Where = map[string]string{"agent": q.Agent}
	}
	hits, err := s.index.Query(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("search similar feedback: %w", err)
	}
	var out []SimilarHit
	for _, h := range hits {
		if h.ID == q.DecisionID || len(out) == q.Limit {
			continue
		}
		out = append(out, SimilarHit{
			DecisionID: h.ID, Similarity: h.Similarity, Agent: h.Metadata["agent"], ReviewerID: h.Metadata["reviewer_id"],
			EpicID: h.Metadata["epic_id"], Text: h.Document, ClusterID: h.Metadata["cluster_id"],
		})
	}
	return out, nil
}
