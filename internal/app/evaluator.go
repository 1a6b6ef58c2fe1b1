package app

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/precept-dev/precept/evaluator"
	"github.com/precept-dev/precept/feedbackstore"
	"github.com/precept-dev/precept/internal/llm"
	"github.com/precept-dev/precept/internal/metrics"
	"github.com/precept-dev/precept/lesson"
	"github.com/precept-dev/precept/lib/embedding"
	"github.com/precept-dev/precept/lib/text"
	"github.com/precept-dev/precept/lib/vectorindex"
	"github.com/precept-dev/precept/lib/vectorindex/chroma"
	"github.com/precept-dev/precept/lib/vectorindex/chromem"
)

// openEvaluator builds the embedder, the vector index and the evaluator
// the configuration names.
func (a *App) openEvaluator(ctx context.Context, nodeDir string) error {
	cfg := a.Config.Evaluator
	var emb embedding.Embedder
	switch cfg.Embedder.Provider {
	case "local":
		emb = embedding.NewLocal(embedding.LocalOptions{Dimension: cfg.Embedder.Dimension})
	default:
		e, err := llm.NewEmbedder(ctx, llmProvider(cfg.Embedder))
		if err != nil {
			return fmt.Errorf("evaluator.embedder: %w", err)
		}
		emb = e
	}
	a.Embedder = emb
	spec := vectorindex.Spec{Embedder: emb.Name(), Dimension: emb.Dimension()}
	var (
		idx   vectorindex.Index
		reset bool
		err   error
	)
	switch cfg.Index.Backend {
	case "chroma":
		c := cfg.Index.Chroma
		idx, reset, err = chroma.Open(ctx, chroma.Options{
			URL: c.URL, Tenant: c.Tenant, Database: c.Database, CollectionPrefix: c.CollectionPrefix,
			Spec: spec, Timeout: c.Timeout, Token: c.Token,
		})
	default:
		idx, reset, err = chromem.Open(filepath.Join(nodeDir, "vectors"), spec)
	}
	if err != nil {
		return fmt.Errorf("open %s vector index (evaluator.index): %w", cfg.Index.Backend, err)
	}
	a.Vectors = idx
	a.closers = append(a.closers, idx.Close)

	rubric, err := evaluator.NewRubricSource(cfg.RubricFile)
	if err != nil {
		return fmt.Errorf("evaluator.rubric_file: %w", err)
	}
	lessons, err := lesson.NewSource(cfg.TaxonomyFile)
	if err != nil {
		return fmt.Errorf("evaluator.taxonomy_file: %w", err)
	}
	a.Lessons = lessons
	files := metrics.ReloadFiles{}
	if cfg.RubricFile != "" {
		files[cfg.RubricFile] = rubric.Status
	}
	if cfg.TaxonomyFile != "" {
		files[cfg.TaxonomyFile] = lessons.Status
	}
	if err := metrics.NewReloadFiles(a.Registry, files); err != nil {
		return err
	}
	a.reloads = newReloadWatch(a.Log, files)
	model, err := llm.NewModel(llmProvider(cfg.LLM))
	if err != nil {
		return fmt.Errorf("evaluator.llm: %w", err)
	}
	var refiner evaluator.LLM
	if model != nil {
		refiner = model
		a.LLM = model
	}
	measured, err := metrics.NewEvaluator(a.Registry)
	if err != nil {
		return err
	}
	t := cfg.Thresholds
	start := time.Now()
	a.Evaluator, err = evaluator.New(ctx, evaluator.FeedFrom(a.Feedback), emb, idx, reset, filepath.Join(nodeDir, "evaluator.db"), evaluator.Options{
		Thresholds: evaluator.Thresholds{
			LowMinSize: t.LowMinSize, LowMinReviewers: t.LowMinReviewers,
			HighMinSize: t.HighMinSize, HighMinReviewers: t.HighMinReviewers, HighMinEpics: t.HighMinEpics,
			HighMinProducers: t.HighMinProducers,
		},
		SimilarityThreshold: cfg.SimilarityThreshold,
		LinkageThreshold:    cfg.LinkageThreshold,
		ReclusterEvery:      reclusterEvery(cfg.ReclusterEvery),
		PassEvery:           passEvery(cfg.ReclusterEveryDecisions, a.Config.Feedback.Git.RemoteURL != ""),
		MaxSimilar:          cfg.MaxSimilar,
		Rubric:              rubric,
		Lessons:             lessons,
		EmbedLessons:        cfg.Embedder.Provider != "local",
		LLM:                 refiner,
		LLMTimeout:          cfg.LLM.Timeout,
		EdgeCases:           edgeCaseDocs{write: a.Feedback.WriteEdgeCases},
		OnChange:            a.evaluatorChanged,
		OnEvaluated:         a.evaluated,
		OnReviewed:          a.reviewed,
		Logger:              a.Log.With("component", "evaluator"),
		Metrics:             measured,
	})
	if err != nil {
		return err
	}
	a.closers = append(a.closers, a.Evaluator.Close)
	if err := metrics.NeedsReview(a.Registry, a.Evaluator); err != nil {
		return err
	}
	a.Log.Info("evaluator ready", "embedder", emb.Name(), "index", cfg.Index.Backend, "llm", cfg.LLM.Provider, "reset_index", reset, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// reclusterEvery maps the configuration's 0 (never) to the evaluator's
// negative.
func reclusterEvery(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// DefaultPassEvery is how many decisions apart nodes sharing a feedback
// remote re-cluster (evaluator.recluster_every_decisions): about the work
// of the clock's minute on one busy node, at a few seconds' evaluation.
const DefaultPassEvery = 5000

// passEvery maps evaluator.recluster_every_decisions to the evaluator's
// PassEvery: paced by the feedback history when several nodes evaluate
// it, unless configured otherwise.
func passEvery(configured int, remote bool) uint64 {
	switch {
	case configured > 0:
		return uint64(configured)
	case configured == 0 && remote:
		return DefaultPassEvery
	}
	return 0
}

// evaluatorChanged fans the evaluator's changes out to whoever listens
// (the rule proposer, the clarification loop).
func (a *App) evaluatorChanged(c evaluator.Change) {
	a.listenersMu.Lock()
	ls := append([]func(evaluator.Change){}, a.evaluatorListeners...)
	a.listenersMu.Unlock()
	for _, l := range ls {
		l(c)
	}
}

// OnEvaluatorChange registers a listener for evaluated batches.
func (a *App) OnEvaluatorChange(l func(evaluator.Change)) {
	a.listenersMu.Lock()
	a.evaluatorListeners = append(a.evaluatorListeners, l)
	a.listenersMu.Unlock()
}

// edgeCaseDocs is where the evaluator's edge cases are documented: the
// feedback store, under feedbackstore.EdgeCasesDir.
type edgeCaseDocs struct {
	write func(context.Context, []feedbackstore.EdgeCase) error
}

func (w edgeCaseDocs) WriteEdgeCases(ctx context.Context, docs []evaluator.EdgeCaseDoc) error {
	out := make([]feedbackstore.EdgeCase, len(docs))
	for i, d := range docs {
		out[i] = feedbackstore.EdgeCase{
			DecisionID: d.DecisionID, Agent: d.Agent, ClusterID: d.ClusterID,
			ClusterSize: d.Stats.Size, DistinctReviewers: d.Stats.DistinctReviewers, DistinctEpics: d.Stats.DistinctEpics,
			DecidedAt: d.At, Rationale: d.Rationale, Comment: d.Comment, Correction: d.Correction, Remove: d.Remove,
		}
	}
	return w.write(ctx, out)
}

// correctionRecorder records curators' corrections in the feedback
// repository, where every replica's evaluator reads them in order.
type correctionRecorder struct {
	record func(ctx context.Context, c feedbackstore.Correction, subject string) error
}

func (r correctionRecorder) RecordCorrection(ctx context.Context, c evaluator.Correction) (evaluator.Correction, error) {
	c.ID = "corr-" + strings.ToLower(ulid.Make().String())
	c.At = time.Now().UTC()
	rec, err := evaluator.RecordOf(c)
	if err != nil {
		return evaluator.Correction{}, err
	}
	if err := r.record(ctx, rec, correctionSubject(c)); err != nil {
		return evaluator.Correction{}, err
	}
	return c, nil
}

// correctionSubject is a correction's commit subject, e.g.
// "Correct clusters: merge c-1, c-2".
func correctionSubject(c evaluator.Correction) string {
	var what []string
	what = append(what, c.Clusters...)
	if len(c.Decisions) > 0 {
		what = append(what, fmt.Sprintf("%d decisions", len(c.Decisions)))
	}
	if c.Category != "" {
		what = append(what, "category "+c.Category)
	}
	return text.Truncate(fmt.Sprintf("Correct clusters: %s %s", c.Kind, strings.Join(what, ", ")), 120)
}
