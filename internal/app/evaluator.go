package app

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/embedding"
	"github.com/precept-dev/precept/evaluator"
	"github.com/precept-dev/precept/feedbackstore"
	"github.com/precept-dev/precept/gitrepo"
	"github.com/precept-dev/precept/internal/llm"
	"github.com/precept-dev/precept/internal/metrics"
	"github.com/precept-dev/precept/vectorindex"
	"github.com/precept-dev/precept/vectorindex/chroma"
	"github.com/precept-dev/precept/vectorindex/chromem"
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
	a.Evaluator, err = evaluator.New(ctx, feedFrom(a.Feedback), emb, idx, reset, filepath.Join(nodeDir, "evaluator.db"), evaluator.Options{
		Thresholds: evaluator.Thresholds{
			LowMinSize: t.LowMinSize, LowMinReviewers: t.LowMinReviewers,
			HighMinSize: t.HighMinSize, HighMinReviewers: t.HighMinReviewers, HighMinEpics: t.HighMinEpics,
		},
		SimilarityThreshold: cfg.SimilarityThreshold,
		MaxSimilar:          cfg.MaxSimilar,
		Rubric:              rubric,
		LLM:                 refiner,
		LLMTimeout:          cfg.LLM.Timeout,
		EdgeCases:           edgeCaseDocs{repo: a.FeedbackRepo},
		OnChange:            a.evaluatorChanged,
		Logger:              a.Log.With("component", "evaluator"),
		Metrics:             measured,
	})
	if err != nil {
		return err
	}
	a.closers = append(a.closers, a.Evaluator.Close)
	a.Log.Info("evaluator ready", "embedder", emb.Name(), "index", cfg.Index.Backend, "llm", cfg.LLM.Provider, "reset_index", reset, "took", time.Since(start).Round(time.Millisecond))
	return nil
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

// storeFeed adapts the feedback store to the evaluator's Feed.
type storeFeed struct{ s *feedbackstore.Store }

func feedFrom(s *feedbackstore.Store) evaluator.Feed { return storeFeed{s} }

func (f storeFeed) Since(seq uint64, limit int) ([]evaluator.Item, error) {
	recs, err := f.s.Since(seq, limit)
	if err != nil {
		return nil, err
	}
	out := make([]evaluator.Item, len(recs))
	for i, r := range recs {
		out[i] = evaluator.Item{Seq: r.Seq, Feedback: r.Feedback}
	}
	return out, nil
}

func (f storeFeed) Get(ctx context.Context, id string) (precept.Feedback, error) {
	r, err := f.s.Get(ctx, id)
	return r.Feedback, err
}

func (f storeFeed) Changed() <-chan struct{} { return f.s.Changed() }

// edgeCaseDocs documents edge cases in the feedback repository, under
// feedback/edge_cases/ (seed 004), one Markdown file per decision.
type edgeCaseDocs struct{ repo *gitrepo.Repo }

// EdgeCasesDir is where edge cases are documented.
const EdgeCasesDir = "feedback/edge_cases"

func (w edgeCaseDocs) WriteEdgeCases(ctx context.Context, docs []evaluator.EdgeCaseDoc) error {
	_, err := w.repo.Update(ctx, feedbackstore.Branch, func(snap *gitrepo.Snapshot) (*gitrepo.CommitSpec, error) {
		var changes []gitrepo.Change
		added, removed := 0, 0
		for _, d := range docs {
			path := EdgeCasesDir + "/" + d.DecisionID + ".md"
			if d.Remove {
				if ok, err := snap.Exists(path); err != nil {
					return nil, err
				} else if ok {
					changes = append(changes, gitrepo.Change{Path: path, Delete: true})
					removed++
				}
				continue
			}
			changes = append(changes, gitrepo.Change{Path: path, Data: []byte(renderEdgeCase(d))})
			added++
		}
		if len(changes) == 0 {
			return nil, nil
		}
		return &gitrepo.CommitSpec{
			Message: fmt.Sprintf("Document %d edge case%s, drop %d", added, plural(added), removed),
			Changes: changes,
		}, nil
	})
	return err
}

func renderEdgeCase(d evaluator.EdgeCaseDoc) string {
	var b strings.Builder
	fmt.Fprintf(&b, "---\ndecision_id: %s\nagent: %s\ncluster_id: %s\ncluster_size: %d\ndistinct_reviewers: %d\ndistinct_epics: %d\ndecided_at: %s\n---\n\n",
		d.DecisionID, d.Agent, d.ClusterID, d.Stats.Size, d.Stats.DistinctReviewers, d.Stats.DistinctEpics, d.At.UTC().Format(time.RFC3339))
	fmt.Fprintf(&b, "# Edge case: %s\n\n%s\n\n## Reviewer comment\n\n%s\n", d.DecisionID, d.Rationale, quote(d.Comment))
	if d.Correction != "" {
		fmt.Fprintf(&b, "\n## Correction\n\n```diff\n%s\n```\n", d.Correction)
	}
	return b.String()
}

func quote(s string) string {
	if strings.TrimSpace(s) == "" {
		return "(none)"
	}
	return "> " + strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n> ")
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
