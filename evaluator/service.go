package evaluator

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/lesson"
	"github.com/precept-dev/precept/lib/embedding"
	"github.com/precept-dev/precept/lib/text"
	"github.com/precept-dev/precept/lib/vectorindex"
)

// Item is one entry of the feedback store as the evaluator follows it: a
// stored decision, or a clarification record or a curator correction to
// apply.
type Item struct {
	Seq uint64
	// Commit names the feed's commit that brought a decision: with
	// Options.PassEvery a batch holds decisions of one commit only.
	Commit       string
	Feedback     precept.Feedback
	Conversation *Conversation
	// Correction, when set, is a curator correction to apply.
	Correction *Correction
	// Skip, when set, says why the entry cannot be applied: the
	// evaluator moves past it and logs the reason.
	Skip string
}

// Feed is the feedback store as the evaluator reads it: decisions and
// clarification records in commit order, numbered alike on every
// replica.
type Feed interface {
	Since(seq uint64, limit int) ([]Item, error)
	// Last returns the number of the newest item.
	Last() (uint64, error)
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
	// SimilarityThreshold is the clustering threshold; default
	// DefaultSimilarityThreshold.
	SimilarityThreshold float64
	// LinkageThreshold is the mean similarity to a cluster's members from
	// which a decision joins it (average linkage, within its agent and family of
	// categories); default DefaultLinkageThreshold.
	LinkageThreshold float64
	// MaxSimilar bounds the similar ids of an evaluation; default
	// DefaultMaxSimilar.
	MaxSimilar int
	Rubric     *RubricSource
	// Lessons serves the taxonomy classifier; default the embedded one.
	Lessons *lesson.Source
	// EmbedLessons embeds a decision's lesson (its problem in canonical
	// words and the reviewer's sentences) rather than its raw text: for
	// embedding models that read meaning, not for the local embedder,
	// whose concept table was built for raw comments.
	EmbedLessons bool
	LLM          LLM
	LLMTimeout   time.Duration
	// ReclusterEvery is how often Run re-clusters the groups that changed
	// (docs/lessons.md, "Re-clustering"); default DefaultReclusterEvery,
	// negative never (Recluster still runs on demand).
	ReclusterEvery time.Duration
	// PassEvery, when set, paces re-clustering by the feed instead of
	// the clock, for several nodes evaluating one feed: Run re-clusters
	// after the batch that carried the position past each multiple of
	// PassEvery, batches never mix the feed's commits, and
	// ReclusterEvery and passes on demand are off (paced.go).
	PassEvery uint64
	// BatchSize is how many decisions are evaluated together; default
	// DefaultBatchSize.
	BatchSize int
	EdgeCases EdgeCaseWriter
	// OnChange is called after each batch that changed something.
	OnChange func(Change)
	// OnEvaluated is called with the evaluations each commit recorded,
	// after it committed: a batch, a correction, a clarification reply or
	// a re-clustering pass. It runs on the evaluator's goroutine and must
	// not block; analytics counts lesson categories from it
	// (docs/analytics.md).
	OnEvaluated func([]Evaluation)
	// OnReviewed is called with the needs-review records each commit
	// wrote, after it committed: an ambiguous decision's record when it
	// is created, and each time its clarification moves on (a question,
	// a reply, resolved, left for human review). Like OnEvaluated it must
	// not block; analytics counts unclear feedback from it.
	OnReviewed func([]NeedsReview)
	Logger     *slog.Logger
	// Metrics receives what the evaluator measures; default none.
	Metrics Metrics
	Now     func() time.Time
}

// The defaults of Options. Configuration (internal/config) starts from
// these, so each is written once (docs/thresholds.md gives their reasons).
const (
	// DefaultSimilarityThreshold is the cosine similarity from which two
	// decisions are similar and cluster together.
	DefaultSimilarityThreshold = 0.8
	// DefaultLinkageThreshold is the mean similarity to a cluster's
	// members, within one agent and family of categories, from which a decision
	// joins the cluster.
	DefaultLinkageThreshold = 0.4
	// DefaultMaxSimilar bounds the similar ids an evaluation lists.
	DefaultMaxSimilar = 10
	// DefaultLLMTimeout bounds one LLM refinement; past it the
	// deterministic evaluation stands.
	DefaultLLMTimeout = 20 * time.Second
	// DefaultReclusterEvery is how often changed groups are re-clustered.
	DefaultReclusterEvery = time.Minute
	// DefaultBatchSize is how many decisions are evaluated together.
	DefaultBatchSize = 256
)

func (o Options) withDefaults() Options {
	if o.Thresholds == (Thresholds{}) {
		o.Thresholds = DefaultThresholds()
	}
	if o.SimilarityThreshold == 0 {
		o.SimilarityThreshold = DefaultSimilarityThreshold
	}
	if o.LinkageThreshold == 0 {
		o.LinkageThreshold = DefaultLinkageThreshold
	}
	if o.Lessons == nil {
		o.Lessons = lesson.DefaultSource()
	}
	if o.MaxSimilar <= 0 {
		o.MaxSimilar = DefaultMaxSimilar
	}
	if o.Rubric == nil {
		o.Rubric = builtinRubric()
	}
	if o.LLMTimeout <= 0 {
		o.LLMTimeout = DefaultLLMTimeout
	}
	if o.ReclusterEvery == 0 {
		o.ReclusterEvery = DefaultReclusterEvery
	}
	if o.BatchSize <= 0 {
		o.BatchSize = DefaultBatchSize
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Metrics == nil {
		o.Metrics = noMetrics{}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Service is the evaluator of one replica.
type Service struct {
	feed  Feed
	emb   embedding.Embedder
	index vectorindex.Index
	state *state
	// groups mirrors the committed clusters' centroids per agent and family of
	// categories.
	groups *groups
	opts   Options
	m      Metrics
	log    *slog.Logger
	mu     sync.Mutex // serialises batches and clarification records
	// views caches each cluster's central comments until it changes.
	views viewCache
	// evidence keeps each cluster's evidence for rules until its record
	// changes.
	evidence evidenceCache
	// reclusterer re-clusters groups, corrections applies curators'
	// corrections; both work on the state above under mu.
	reclusterer *reclusterer
	corrections *corrections
	// pace, with Options.PassEvery, runs the passes at the feed's
	// positions; nil otherwise.
	pace *pacer
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
	st.evaluated, st.reviewed = opts.OnEvaluated, opts.OnReviewed
	s := &Service{feed: feed, emb: emb, index: index, state: st, groups: newGroups(opts.Lessons.Classifier().Taxonomy()), opts: opts, m: opts.Metrics, log: opts.Logger}
	s.reclusterer = &reclusterer{state: st, index: index, groups: s.groups, linkage: opts.LinkageThreshold,
		thresholds: opts.Thresholds, now: opts.Now, log: opts.Logger}
	s.corrections = &corrections{state: st, index: index, groups: s.groups, lessons: opts.Lessons,
		thresholds: opts.Thresholds, now: opts.Now, log: opts.Logger, recluster: s.reclusterer}
	err = eachJSON(st, bClusters, func(c Cluster) error { s.groups.put(&c); return nil })
	if opts.PassEvery > 0 {
		// The groups a pass takes follow from the state, not from
		// this start.
		s.pace = &pacer{every: opts.PassEvery, state: st, groups: s.groups}
		if err == nil {
			err = s.pace.load()
		}
	} else {
		s.groups.markAllDirty()
	}
	if err == nil {
		err = s.syncIndex(ctx, reset)
	}
	if err != nil {
		st.close()
		return nil, err
	}
	return s, nil
}

// Close closes the state; the caller closes the index.
func (s *Service) Close() error { return s.state.close() }

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
			vectors[i].Document = text.TruncateTrim(texts[i], maxDocument)
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
		var r NeedsReview
		var ok bool
		if r, ok, err = getJSON[NeedsReview](s.state, bReview, m.decision); err != nil {
			err = fmt.Errorf("re-index %s: %w", m.decision, err)
			break
		}
		if ok && len(r.Replies) > 0 {
			text = clarifiedText(f.Decision, r.Replies).EmbeddingText
		}
		if s.opts.EmbedLessons {
			var ev Evaluation
			if ev, ok, err = getJSON[Evaluation](s.state, bEvals, m.decision); err != nil {
				err = fmt.Errorf("re-index %s: %w", m.decision, err)
				break
			}
			if ok && ev.Lesson != nil && ev.Lesson.Known() {
				text = lessonText(*ev.Lesson)
			}
		}
		ce, _ := s.groups.get(m.cluster)
		v := vectorFor(f.Decision, m.cluster, ce.category)
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

// passSlice is how long Run re-clusters before it evaluates the next
// batch while a pass is under way (at least one group each time): a
// quarter or so of the time while decisions arrive, all of it when none
// do.
const passSlice = 250 * time.Millisecond

// maxDocument bounds the text kept with each vector.
const maxDocument = 1000

// Run evaluates new decisions as the store indexes them, until ctx is
// done. A failing batch is retried with backoff; its decisions show the
// error until they are evaluated.
func (s *Service) Run(ctx context.Context) error {
	failures := 0
	lastRecluster := time.Now()
	var p *pass
	// advance runs a slice of the pass under way: a pass over every group
	// of a large store takes tens of seconds, which evaluation must not
	// wait for (docs/lessons.md).
	advance := func(budget time.Duration) {
		err := p.run(ctx, budget)
		switch {
		case err != nil:
			if ctx.Err() == nil {
				s.log.Error("re-cluster; will retry at the next pass", "err", err)
			}
			p = nil
		case p.done():
			if p.rep.Groups > 0 {
				s.log.Info("re-clustered", "groups", p.rep.Groups, "decisions", p.rep.Members, "moved", p.rep.Moved,
					"reclassified", p.rep.Reclassified, "took", time.Since(p.start).Round(time.Millisecond))
			}
			p = nil
		}
	}
	for {
		if s.pace != nil {
			if _, err := s.pace.catchUp(ctx, s); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				// No batch before the pass: the next would be evaluated
				// against other clusters than on the other nodes.
				failures++
				wait := min(time.Duration(1<<min(failures, 6))*250*time.Millisecond, 15*time.Second)
				s.log.Error("re-cluster at the feed's position; will retry", "err", err, "retry_in", wait)
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(wait):
				}
				continue
			}
		}
		if p == nil && s.pace == nil && s.opts.ReclusterEvery > 0 && time.Since(lastRecluster) >= s.opts.ReclusterEvery {
			lastRecluster = time.Now()
			p = newPass(s, true)
		}
		if p != nil {
			advance(passSlice)
		}
		changed := s.feed.Changed()
		n, err := s.Step(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			failures++
			wait := min(time.Duration(1<<min(failures, 6))*250*time.Millisecond, 15*time.Second)
			s.log.Error("evaluate decisions; will retry", "err", err, "retry_in", wait)
			retry := time.Now().Add(wait)
			if p != nil {
				// The pass goes on while the batch waits.
				advance(wait)
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(time.Until(retry)):
			}
		case n > 0:
			failures = 0
		case p != nil:
			// Nothing to evaluate: the pass goes on at once.
			failures = 0
		default:
			failures = 0
			select {
			case <-ctx.Done():
				return nil
			case <-changed:
			case <-time.After(min(5*time.Second, max(s.opts.ReclusterEvery, time.Second))):
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
	if items[0].Correction != nil {
		return s.corrections.applyAll(ctx, items)
	}
	if items[0].Skip != "" {
		s.log.Warn("skip a feed entry that cannot be applied", "seq", items[0].Seq, "reason", items[0].Skip)
		if err := s.state.apply(commit{position: items[0].Seq}); err != nil {
			return 0, err
		}
		return 1, nil
	}
	items = leadingDecisions(items)
	if s.pace != nil {
		items = oneCommit(items)
	}
	start := time.Now()
	b, err := s.evaluateBatch(ctx, items)
	if err != nil {
		ids := make([]string, len(items))
		for i, it := range items {
			ids[i] = it.Feedback.DecisionID
		}
		s.m.BatchFailed()
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
	if !inProcess(s.index) {
		// Rounds read these back without a round trip per vector.
		b.commit.vectors = b.vectors
	}
	b.commit.position = items[len(items)-1].Seq
	b.commit.indexed = indexed + uint64(len(b.vectors))
	if err := s.state.apply(b.commit); err != nil {
		return 0, fmt.Errorf("save evaluations: %w", err)
	}
	s.groups.committed(b.commit)
	for _, cl := range b.commit.clusters {
		s.groups.markGrown(s.groups.keyOf(cl.Agent, cl.Category))
	}
	s.flushEdgeCases(ctx)
	per := time.Since(start).Seconds() / float64(len(items))
	for _, e := range b.fresh {
		s.m.Evaluated(e.Class, per)
	}
	if s.opts.OnChange != nil && (len(b.change.GeneralizableClusters) > 0 || len(b.change.NeedsReview) > 0) {
		s.opts.OnChange(b.change)
	}
	return len(items), nil
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
