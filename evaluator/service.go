package evaluator

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/embedding"
	"github.com/precept-dev/precept/vectorindex"
)

// Item is one entry of the feedback store as the evaluator follows it: a
// stored decision, or — when Conversation is set — a clarification
// record to apply.
type Item struct {
	Seq          uint64
	Feedback     precept.Feedback
	Conversation *Conversation
}

// Feed is the feedback store as the evaluator reads it: decisions and
// clarification records in commit order, numbered alike on every
// replica.
type Feed interface {
	Since(seq uint64, limit int) ([]Item, error)
	Get(ctx context.Context, id string) (precept.Feedback, error)
	Changed() <-chan struct{}
}

// EdgeCaseDoc documents an edge case under feedback/edge_cases/.
type EdgeCaseDoc struct {
	DecisionID string    `json:"decision_id"`
	Agent      string    `json:"agent"`
	ClusterID  string    `json:"cluster_id"`
	Rationale  string    `json:"rationale"`
	Comment    string    `json:"comment"`
	Correction string    `json:"correction,omitempty"`
	Stats      Stats     `json:"stats"`
	At         time.Time `json:"at"`
	// Remove drops the document: the decision is no longer an edge case.
	Remove bool `json:"remove,omitempty"`
}

// EdgeCaseWriter writes edge-case documents where humans read them.
type EdgeCaseWriter interface {
	WriteEdgeCases(ctx context.Context, docs []EdgeCaseDoc) error
}

// LLM completes a prompt. Implementations enforce their own timeouts too.
type LLM interface {
	Complete(ctx context.Context, prompt string) (string, error)
	Model() string
}

// Proposals finds the rule proposal drafted from a cluster.
type Proposals interface {
	ProposalForCluster(ctx context.Context, clusterID string) (string, bool)
}

// Change tells listeners what an evaluated batch changed.
type Change struct {
	// GeneralizableClusters became or stayed generalizable and grew.
	GeneralizableClusters []string
	// NeedsReview lists decisions that became ambiguous.
	NeedsReview []string
}

// Options configure a Service. Zero values mean the defaults.
type Options struct {
	Thresholds Thresholds
	// SimilarityThreshold is the clustering threshold; default 0.8.
	SimilarityThreshold float64
	// MaxSimilar bounds the similar ids of an evaluation; default 10.
	MaxSimilar int
	Rubric     *RubricSource
	LLM        LLM
	LLMTimeout time.Duration
	// BatchSize is how many decisions are evaluated together; default 256.
	BatchSize int
	EdgeCases EdgeCaseWriter
	// OnChange is called after each batch that changed something.
	OnChange   func(Change)
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	Now        func() time.Time
}

func (o Options) withDefaults() Options {
	if o.Thresholds == (Thresholds{}) {
		o.Thresholds = DefaultThresholds()
	}
	if o.SimilarityThreshold == 0 {
		o.SimilarityThreshold = 0.8
	}
	if o.MaxSimilar <= 0 {
		o.MaxSimilar = 10
	}
	if o.Rubric == nil {
		o.Rubric, _ = NewRubricSource("")
	}
	if o.LLMTimeout <= 0 {
		o.LLMTimeout = 20 * time.Second
	}
	if o.BatchSize <= 0 {
		o.BatchSize = 256
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Service is the evaluator of one replica.
type Service struct {
	feed   Feed
	emb    embedding.Embedder
	index  vectorindex.Index
	state  *state
	opts   Options
	m      *metrics
	log    *slog.Logger
	mu     sync.Mutex // serialises batches and Clarify
	propMu sync.RWMutex
	props  Proposals
}

// New opens the evaluator's state at statePath over an index whose spec
// matches emb. reset says the index was (re)created empty: everything
// already clustered is re-indexed, so index and store agree.
func New(ctx context.Context, feed Feed, emb embedding.Embedder, index vectorindex.Index, reset bool, statePath string, opts Options) (*Service, error) {
	opts = opts.withDefaults()
	if sp := index.Spec(); sp.Embedder != emb.Name() || sp.Dimension != emb.Dimension() {
		return nil, fmt.Errorf("open evaluator: index holds %s embeddings, the embedder makes %s/%d", sp, emb.Name(), emb.Dimension())
	}
	st, err := openState(statePath)
	if err != nil {
		return nil, err
	}
	s := &Service{feed: feed, emb: emb, index: index, state: st, opts: opts, m: newMetrics(opts.Registerer), log: opts.Logger}
	if err := s.syncIndex(ctx, reset); err != nil {
		st.close()
		return nil, err
	}
	return s, nil
}

// Close closes the state; the caller closes the index.
func (s *Service) Close() error { return s.state.close() }

// SetProposals connects the rule manager, which drafts proposals from
// generalizable clusters.
func (s *Service) SetProposals(p Proposals) {
	s.propMu.Lock()
	s.props = p
	s.propMu.Unlock()
}

func (s *Service) proposalFor(ctx context.Context, clusterID string) string {
	s.propMu.RLock()
	p := s.props
	s.propMu.RUnlock()
	if p == nil || clusterID == "" {
		return ""
	}
	id, _ := p.ProposalForCluster(ctx, clusterID)
	return id
}

// syncIndex makes the index hold exactly the clustered decisions: after
// an embedder change (reset) or a lost or partial index, every cluster
// member is embedded again from the store.
func (s *Service) syncIndex(ctx context.Context, reset bool) error {
	_, indexed, err := s.state.position()
	if err != nil {
		return err
	}
	count, err := s.index.Count(ctx)
	if err != nil {
		return fmt.Errorf("count index: %w", err)
	}
	if !reset && uint64(count) == indexed {
		return nil
	}
	start := time.Now()
	var vectors []vectorindex.Vector
	var total uint64
	flush := func() error {
		if len(vectors) == 0 {
			return nil
		}
		texts := make([]string, len(vectors))
		for i, v := range vectors {
			texts[i] = v.Document
		}
		embs, err := s.emb.Embed(ctx, texts)
		if err != nil {
			return fmt.Errorf("re-index: %w", err)
		}
		for i := range vectors {
			vectors[i].Embedding = embs[i]
			vectors[i].Document = clip(texts[i], maxDocument)
		}
		if err := s.index.Upsert(ctx, vectors); err != nil {
			return fmt.Errorf("re-index: %w", err)
		}
		total += uint64(len(vectors))
		vectors = vectors[:0]
		return nil
	}
	type membership struct{ decision, cluster string }
	var all []membership
	err = s.state.eachMembership(func(decisionID, clusterID string) error {
		all = append(all, membership{decisionID, clusterID})
		return nil
	})
	// Each decision is read after the listing's transaction has ended (see
	// Clusters).
	for i := 0; err == nil && i < len(all); i++ {
		m := all[i]
		var f precept.Feedback
		if f, err = s.feed.Get(ctx, m.decision); err != nil {
			err = fmt.Errorf("re-index %s: %w", m.decision, err)
			break
		}
		text := f.EmbeddingText
		// A clarified decision was clustered with its replies.
		if r, ok, rerr := getJSON[NeedsReview](s.state, bReview, m.decision); rerr == nil && ok && len(r.Replies) > 0 {
			text = clarifiedText(f.Decision, r.Replies).EmbeddingText
		}
		v := vectorFor(f.Decision, m.cluster)
		v.Document = text
		vectors = append(vectors, v)
		if len(vectors) == 512 {
			err = flush()
		}
	}
	if err == nil {
		err = flush()
	}
	if err != nil {
		return err
	}
	s.log.Info("re-indexed clustered feedback", "vectors", total, "was", count, "expected", indexed, "reset", reset, "took", time.Since(start).Round(time.Millisecond))
	return s.state.setIndexed(total)
}

// maxDocument bounds the text kept with each vector.
const maxDocument = 1000

func vectorFor(d precept.Decision, clusterID string) vectorindex.Vector {
	return vectorindex.Vector{
		ID: d.DecisionID,
		Metadata: map[string]string{
			"cluster_id": clusterID, "agent": d.Agent, "reviewer_id": d.ReviewerID, "epic_id": d.EpicID,
		},
	}
}

// Run evaluates new decisions as the store indexes them, until ctx is
// done. A failing batch is retried with backoff; its decisions show the
// error until they are evaluated.
func (s *Service) Run(ctx context.Context) error {
	failures := 0
	for {
		changed := s.feed.Changed()
		n, err := s.Step(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			failures++
			wait := min(time.Duration(1<<min(failures, 6))*250*time.Millisecond, 15*time.Second)
			s.log.Error("evaluate decisions; will retry", "err", err, "retry_in", wait)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(wait):
			}
		case n > 0:
			failures = 0
		default:
			failures = 0
			select {
			case <-ctx.Done():
				return nil
			case <-changed:
			case <-time.After(5 * time.Second):
			}
		}
	}
}

// Step evaluates the next batch of decisions and returns how many.
func (s *Service) Step(ctx context.Context) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pos, indexed, err := s.state.position()
	if err != nil {
		return 0, err
	}
	items, err := s.feed.Since(pos, s.opts.BatchSize)
	if err != nil || len(items) == 0 {
		return 0, err
	}
	if items[0].Conversation != nil {
		return s.applyConversations(ctx, items)
	}
	items = leadingDecisions(items)
	start := time.Now()
	b, err := s.evaluateBatch(ctx, items)
	if err != nil {
		ids := make([]string, len(items))
		for i, it := range items {
			ids[i] = it.Feedback.DecisionID
		}
		s.m.errors.Inc()
		if rerr := s.state.recordErrors(ids, err.Error()); rerr != nil {
			s.log.Warn("record evaluation errors", "err", rerr)
		}
		return 0, err
	}
	// The index first: should the process die before the state commits,
	// the batch is evaluated again and finds its own vectors, which it
	// skips; the reverse order would leave clustered decisions missing
	// from the index.
	if len(b.vectors) > 0 {
		if err := s.index.Upsert(ctx, b.vectors); err != nil {
			return 0, fmt.Errorf("index clustered feedback: %w", err)
		}
	}
	b.commit.position = items[len(items)-1].Seq
	b.commit.indexed = indexed + uint64(len(b.vectors))
	if err := s.state.apply(b.commit); err != nil {
		return 0, fmt.Errorf("save evaluations: %w", err)
	}
	s.flushEdgeCases(ctx)
	per := time.Since(start).Seconds() / float64(len(items))
	for _, e := range b.fresh {
		s.m.evaluations.WithLabelValues(string(e.Class)).Inc()
		s.m.seconds.Observe(per)
	}
	if s.opts.OnChange != nil && (len(b.change.GeneralizableClusters) > 0 || len(b.change.NeedsReview) > 0) {
		s.opts.OnChange(b.change)
	}
	return len(items), nil
}

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
	rubric  RubricResult
	vec     []float32
	hits    []vectorindex.Hit
	cluster string
	joinSim float64
}

func (s *Service) evaluateBatch(ctx context.Context, items []Item) (*batch, error) {
	now := s.opts.Now().UTC()
	rubric := s.opts.Rubric.Rubric()
	b := &batch{}
	evals := make(map[string]*Evaluation, len(items))
	var cands []*candidate

	for _, it := range items {
		d := it.Feedback.Decision
		b.commit.clearErrors = append(b.commit.clearErrors, d.DecisionID)
		ev, r, clear := triage(d, rubric)
		if clear {
			cands = append(cands, &candidate{item: it, rubric: r})
			continue
		}
		ev.Evaluator, ev.EvaluatedAt = "deterministic", now
		evals[d.DecisionID] = &ev
		if ev.Class == Ambiguous {
			b.commit.reviews = append(b.commit.reviews, newNeedsReview(d, ev.Rubric, now))
			b.change.NeedsReview = append(b.change.NeedsReview, d.DecisionID)
		}
	}

	if err := s.embedAndQuery(ctx, cands); err != nil {
		return nil, err
	}

	// Assign clusters in feed order, so every replica founds and joins the
	// same clusters whatever its batch boundaries.
	clusters := map[string]*Cluster{}
	load := func(id string) (*Cluster, error) {
		if c, ok := clusters[id]; ok {
			return c, nil
		}
		c, ok, err := getJSON[Cluster](s.state, bClusters, id)
		if err != nil || !ok {
			return nil, err
		}
		clusters[id] = &c
		return &c, nil
	}
	before := map[string]Class{}
	for i, c := range cands {
		d := c.item.Feedback.Decision
		// Evaluated before (a batch re-run after a crash, or a clarified
		// decision): it keeps its cluster and is not counted twice.
		existing, err := s.state.clusterOf(d.DecisionID)
		if err != nil {
			return nil, err
		}
		best, bestSim, bestID := existing, 1.0, ""
		if existing == "" {
			best, bestSim = "", -1
			for _, h := range c.hits {
				if h.ID == d.DecisionID || h.Similarity < s.opts.SimilarityThreshold {
					continue
				}
				if h.Similarity > bestSim || (h.Similarity == bestSim && h.ID < bestID) {
					best, bestSim, bestID = h.Metadata["cluster_id"], h.Similarity, h.ID
				}
			}
			for _, p := range cands[:i] {
				sim := embedding.Cosine(c.vec, p.vec)
				if sim < s.opts.SimilarityThreshold {
					continue
				}
				if sim > bestSim || (sim == bestSim && p.item.Feedback.DecisionID < bestID) {
					best, bestSim, bestID = p.cluster, sim, p.item.Feedback.DecisionID
				}
			}
		}
		var cl *Cluster
		if best != "" {
			if cl, err = load(best); err != nil {
				return nil, err
			}
		}
		if cl == nil {
			cl = newCluster(clusterID(d.DecisionID), now)
			clusters[cl.ID] = cl
			bestSim = 1
		}
		if _, seen := before[cl.ID]; !seen {
			before[cl.ID] = cl.Class
			if cl.Size == 0 {
				before[cl.ID] = ""
			}
		}
		c.cluster, c.joinSim = cl.ID, bestSim
		if existing == "" {
			m := memberOf(c.item.Feedback, bestSim)
			cl.add(m)
			b.commit.members = append(b.commit.members, memberRecord{ClusterID: cl.ID, Seq: cl.Size, Member: m})
		}
		cl.UpdatedAt = now
		v := vectorFor(d, cl.ID)
		v.Embedding, v.Document = c.vec, clip(c.item.Feedback.EmbeddingText, maxDocument)
		b.vectors = append(b.vectors, v)
	}

	// Evaluate each new member from its cluster as it now stands.
	for _, c := range cands {
		d := c.item.Feedback.Decision
		cl := clusters[c.cluster]
		ev := s.opts.Thresholds.clusterEvaluation(d, &c.rubric, cl.ID, cl.Stats(), cl.Tags(), cl.meanSimilarity())
		ev.SimilarIDs = s.similarIDs(c, cands)
		ev.Evaluator, ev.EvaluatedAt = "deterministic", now
		s.refine(ctx, d, cl, similarTexts(c, cands), &ev)
		evals[d.DecisionID] = &ev
	}

	// A cluster whose class changed re-evaluates its older members too.
	var ids []string
	for id := range clusters {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		cl := clusters[id]
		class := s.opts.Thresholds.ClassOf(cl.Stats())
		if class != cl.Class {
			cl.Class = class
			cl.Revision++
		}
		if class.Generalizable() {
			b.change.GeneralizableClusters = append(b.change.GeneralizableClusters, id)
		}
		if old := before[id]; old != "" && old != class {
			if err := s.reclassMembers(cl, evals, now, b); err != nil {
				return nil, err
			}
		}
		b.commit.clusters = append(b.commit.clusters, cl)
	}

	for _, it := range items {
		ev := evals[it.Feedback.DecisionID]
		b.fresh = append(b.fresh, *ev)
		s.noteEdgeCase(it.Feedback, ev, clusters[ev.ClusterID], b)
	}
	for _, ev := range evals {
		b.commit.evaluations = append(b.commit.evaluations, *ev)
	}
	sort.Slice(b.commit.evaluations, func(i, j int) bool { return b.commit.evaluations[i].DecisionID < b.commit.evaluations[j].DecisionID })
	return b, nil
}

// embedAndQuery embeds the candidates and queries the index for each,
// concurrently: every query sees the index as it was before the batch.
func (s *Service) embedAndQuery(ctx context.Context, cands []*candidate) error {
	if len(cands) == 0 {
		return nil
	}
	texts := make([]string, len(cands))
	for i, c := range cands {
		texts[i] = c.item.Feedback.EmbeddingText
	}
	vecs, err := s.emb.Embed(ctx, texts)
	if err != nil {
		return fmt.Errorf("embed feedback: %w", err)
	}
	for i, c := range cands {
		c.vec = vecs[i]
	}
	// No Count first: a limit above the stored count is allowed, and with
	// a Chroma server every call is a round trip.
	limit := s.opts.MaxSimilar + 1
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	errs := make([]error, len(cands))
	var wg sync.WaitGroup
	for i, c := range cands {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			c.hits, errs[i] = s.index.Query(ctx, vectorindex.Query{Embedding: c.vec, Limit: limit, MinSimilarity: s.opts.SimilarityThreshold})
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("query similar feedback: %w", err)
	}
	return nil
}

// similarIDs lists the most similar feedback for an evaluation: index
// hits and earlier decisions of the same batch.
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
		if sim := embedding.Cosine(c.vec, p.vec); sim >= s.opts.SimilarityThreshold {
			all = append(all, scored{p.item.Feedback.DecisionID, sim})
		}
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].sim != all[j].sim {
			return all[i].sim > all[j].sim
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
// changed (DESIGN.md §4: re-evaluated when it grows across a threshold).
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
		ev.SimilarIDs, ev.Evaluator, ev.EvaluatedAt = old.SimilarIDs, "deterministic", now
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

// flushEdgeCases writes pending edge-case documents; failures are
// retried after the next batch.
func (s *Service) flushEdgeCases(ctx context.Context) {
	if s.opts.EdgeCases == nil {
		return
	}
	var docs []EdgeCaseDoc
	if err := eachJSON(s.state, bEdge, func(d EdgeCaseDoc) error { docs = append(docs, d); return nil }); err != nil || len(docs) == 0 {
		return
	}
	if err := s.opts.EdgeCases.WriteEdgeCases(ctx, docs); err != nil {
		s.log.Warn("document edge cases; will retry", "docs", len(docs), "err", err)
		return
	}
	done := make([]string, len(docs))
	for i, d := range docs {
		done[i] = d.DecisionID
	}
	if err := s.state.apply(commit{edgeDone: done}); err != nil {
		s.log.Warn("mark edge cases documented", "err", err)
	}
}

func clusterID(founder string) string {
	sum := sha256.Sum256([]byte(founder))
	return "c-" + hex.EncodeToString(sum[:6])
}

func memberOf(f precept.Feedback, sim float64) Member {
	return Member{
		DecisionID: f.DecisionID, Agent: f.Agent, ReviewerID: f.ReviewerID, EpicID: f.EpicID,
		Text: clip(f.EmbeddingText, 500), Tags: f.Tags, At: f.Timestamp, Similarity: round2(sim),
	}
}

// similarTexts lists the comments a decision was found similar to, for
// the LLM: index hits and earlier decisions of the batch.
func similarTexts(c *candidate, cands []*candidate) []similarText {
	var out []similarText
	for _, h := range c.hits {
		if h.ID != c.item.Feedback.DecisionID && len(out) < 5 {
			out = append(out, similarText{ReviewerID: h.Metadata["reviewer_id"], EpicID: h.Metadata["epic_id"], Text: clip(h.Document, 300)})
		}
	}
	for _, p := range cands {
		if p == c || len(out) >= 5 {
			break
		}
		if p.cluster == c.cluster && p.cluster != "" {
			f := p.item.Feedback
			out = append(out, similarText{ReviewerID: f.ReviewerID, EpicID: f.EpicID, Text: clip(f.EmbeddingText, 300)})
		}
	}
	return out
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8RuneStart(s[n]) {
		n--
	}
	return strings.TrimSpace(s[:n]) + "…"
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
