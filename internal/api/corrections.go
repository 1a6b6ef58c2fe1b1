package api

import (
	"context"
	"errors"
	"time"

	"connectrpc.com/connect"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/evaluator"
	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
	"github.com/precept-dev/precept/gen/precept/v1/preceptv1connect"
	"github.com/precept-dev/precept/lesson"
	"github.com/precept-dev/precept/lib/safetext"
)

var correctionKinds = map[preceptv1.CorrectionKind]evaluator.CorrectionKind{
	preceptv1.CorrectionKind_CORRECTION_KIND_MERGE:         evaluator.CorrectMerge,
	preceptv1.CorrectionKind_CORRECTION_KIND_SPLIT:         evaluator.CorrectSplit,
	preceptv1.CorrectionKind_CORRECTION_KIND_MOVE:          evaluator.CorrectMove,
	preceptv1.CorrectionKind_CORRECTION_KIND_SET_CATEGORY:  evaluator.CorrectCategory,
	preceptv1.CorrectionKind_CORRECTION_KIND_NOT_A_PATTERN: evaluator.CorrectNotAPattern,
	preceptv1.CorrectionKind_CORRECTION_KIND_KEEP_APART:    evaluator.CorrectKeepApart,
}

// CorrectClusters checks a curator's correction against the evaluator's
// current clusters, records it in the feedback repository with who made
// it, and waits briefly for this replica to apply it.
func (s *EvaluatorService) CorrectClusters(ctx context.Context, req *connect.Request[preceptv1.CorrectClustersRequest]) (*connect.Response[preceptv1.CorrectClustersResponse], error) {
	const proc = preceptv1connect.EvaluatorServiceCorrectClustersProcedure
	if s.Corrections == nil {
		return nil, s.fail(ctx, proc, precept.Errorf(precept.FailedPrecondition, "corrections are not served here"))
	}
	kind, ok := correctionKinds[req.Msg.GetKind()]
	if !ok {
		return nil, s.fail(ctx, proc, invalid("kind", "required: merge, split, move, set_category, not_a_pattern or keep_apart"))
	}
	why := req.Msg.GetWhy()
	if r, _, bad := safetext.Control(why); bad {
		return nil, s.fail(ctx, proc, invalid("why", safetext.ControlReason(r)))
	}
	id, _ := precept.IdentityFrom(ctx)
	c := evaluator.Correction{
		Kind: kind, Clusters: req.Msg.GetClusterIds(), Decisions: req.Msg.GetDecisionIds(), Category: req.Msg.GetCategory(),
		By: id.Name, Why: safetext.Redact(why),
	}
	if c.By == "" {
		c.By = "anonymous"
	}
	c, err := s.Evaluator.CheckCorrection(ctx, c)
	if err != nil {
		return nil, s.fail(ctx, proc, err)
	}
	rec, err := s.Corrections.RecordCorrection(ctx, c)
	if err != nil {
		return nil, s.fail(ctx, proc, err)
	}
	wait := s.ApplyWait
	if wait <= 0 {
		wait = 5 * time.Second
	}
	applied := false
	deadline := time.Now().Add(wait)
	for !applied && time.Now().Before(deadline) && ctx.Err() == nil {
		if applied, err = s.Evaluator.CorrectionApplied(rec.ID); err != nil {
			return nil, s.fail(ctx, proc, err)
		}
		if !applied {
			time.Sleep(50 * time.Millisecond)
		}
	}
	return connect.NewResponse(&preceptv1.CorrectClustersResponse{CorrectionId: rec.ID, Applied: applied}), nil
}

// SuggestMerges lists pairs of clusters that read like one problem.
func (s *EvaluatorService) SuggestMerges(ctx context.Context, req *connect.Request[preceptv1.SuggestMergesRequest]) (*connect.Response[preceptv1.SuggestMergesResponse], error) {
	const proc = preceptv1connect.EvaluatorServiceSuggestMergesProcedure
	n, err := pageSize(req.Msg.GetLimit(), 20, 100)
	if err != nil {
		return nil, s.fail(ctx, proc, err)
	}
	sgs, err := s.Evaluator.SuggestMerges(ctx, n)
	if err != nil {
		return nil, s.fail(ctx, proc, err)
	}
	out := &preceptv1.SuggestMergesResponse{}
	for _, sg := range sgs {
		out.Suggestions = append(out.Suggestions, &preceptv1.MergeSuggestion{ClusterA: sg.A, ClusterB: sg.B, Agent: sg.Agent,
			CategoryA: sg.Categories[0], CategoryB: sg.Categories[1], Similarity: sg.Similarity, Why: sg.Why})
	}
	return connect.NewResponse(out), nil
}

// Recluster runs a re-clustering round now.
func (s *EvaluatorService) Recluster(ctx context.Context, _ *connect.Request[preceptv1.ReclusterRequest]) (*connect.Response[preceptv1.ReclusterResponse], error) {
	const proc = preceptv1connect.EvaluatorServiceReclusterProcedure
	rep, err := s.Evaluator.Recluster(ctx)
	if err != nil && !errors.Is(err, context.Canceled) {
		return nil, s.fail(ctx, proc, err)
	}
	return connect.NewResponse(&preceptv1.ReclusterResponse{Groups: int32(rep.Groups), Decisions: int32(rep.Members),
		Moved: int32(rep.Moved), Reclassified: int32(rep.Reclassified), TookMs: rep.Took.Milliseconds()}), nil
}

// GetLearnedTaxonomy returns what curators' corrections taught, as a
// taxonomy file; secrets in the reviewers' sentences are redacted.
func (s *EvaluatorService) GetLearnedTaxonomy(ctx context.Context, _ *connect.Request[preceptv1.GetLearnedTaxonomyRequest]) (*connect.Response[preceptv1.GetLearnedTaxonomyResponse], error) {
	const proc = preceptv1connect.EvaluatorServiceGetLearnedTaxonomyProcedure
	learned, err := s.Evaluator.Learned(ctx)
	if err != nil {
		return nil, s.fail(ctx, proc, err)
	}
	n := 0
	for id, ps := range learned {
		for i, p := range ps {
			ps[i] = safetext.Redact(safetext.StripControls(p))
		}
		learned[id] = ps
		n += len(ps)
	}
	return connect.NewResponse(&preceptv1.GetLearnedTaxonomyResponse{Yaml: string(learned.YAML()), Phrasings: int32(n)}), nil
}

// ListCategories lists the lesson categories of the taxonomy the
// evaluator classifies with now: the embedded ones and a curator's own,
// read again when the curator's file changed.
func (s *EvaluatorService) ListCategories(ctx context.Context, _ *connect.Request[preceptv1.ListCategoriesRequest]) (*connect.Response[preceptv1.ListCategoriesResponse], error) {
	src := s.Lessons
	if src == nil {
		src = lesson.DefaultSource()
	}
	t := src.Classifier().Taxonomy()
	out := &preceptv1.ListCategoriesResponse{Taxonomy: t.Version, Categories: make([]*preceptv1.TaxonomyCategory, 0, len(t.Categories))}
	for _, c := range t.Categories {
		out.Categories = append(out.Categories, &preceptv1.TaxonomyCategory{Id: c.ID, Group: c.Group, Name: c.Name, Description: c.Description, Protected: c.Protected})
	}
	return connect.NewResponse(out), nil
}
