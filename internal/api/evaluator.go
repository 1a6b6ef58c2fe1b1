package api

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/evaluator"
	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
	"github.com/precept-dev/precept/gen/precept/v1/preceptv1connect"
	"github.com/precept-dev/precept/internal/api/convert"
	"github.com/precept-dev/precept/lesson"
)

// EvaluatorService implements preceptv1connect.EvaluatorServiceHandler,
// and serves FindSimilar and evaluation lookups for FeedbackService.
type EvaluatorService struct {
	Evaluator *evaluator.Service
	// Proposals links evaluations and clusters to the rule proposal
	// drafted from their cluster; nil leaves the link out.
	Proposals ProposalFinder
	// Corrections records curator corrections; nil refuses them.
	Corrections CorrectionRecorder
	// Lessons is the taxonomy the evaluator classifies with, a curator's
	// file included (ListCategories); nil serves the embedded taxonomy.
	Lessons *lesson.Source
	// ApplyWait bounds how long CorrectClusters waits for the evaluator
	// to apply a correction; default 5s.
	ApplyWait time.Duration
	Limits    precept.Limits
	Log       *slog.Logger
	Now       func() time.Time
}

// CorrectionRecorder records curator corrections where every replica
// reads them: the feedback repository (internal/app adapts the store).
type CorrectionRecorder interface {
	RecordCorrection(ctx context.Context, c evaluator.Correction) (evaluator.Correction, error)
}

// ProposalFinder finds the rule proposal drafted from a cluster;
// rules.Manager implements it.
type ProposalFinder interface {
	ProposalForCluster(ctx context.Context, clusterID string) (string, bool)
	// ProposalsForClusters answers for a page of clusters at once.
	ProposalsForClusters(ctx context.Context, clusterIDs []string) map[string]string
}

// proposalFor returns the proposal drafted from a cluster, "" when there
// is none.
func (s *EvaluatorService) proposalFor(ctx context.Context, clusterID string) string {
	if s.Proposals == nil || clusterID == "" {
		return ""
	}
	id, _ := s.Proposals.ProposalForCluster(ctx, clusterID)
	return id
}

// evaluation converts an evaluation, with the proposal its action led to.
func (s *EvaluatorService) evaluation(ctx context.Context, ev evaluator.Evaluation) *preceptv1.Evaluation {
	p := EvaluationToProto(ev)
	if a := p.GetProposedAction(); a != nil {
		a.ProposalId = s.proposalFor(ctx, ev.ClusterID)
	}
	return p
}

// cluster converts a cluster, with the proposal drafted from it.
func (s *EvaluatorService) cluster(ctx context.Context, c evaluator.ClusterView, members bool) *preceptv1.Cluster {
	p := ClusterToProto(c, members)
	p.ProposalId = s.proposalFor(ctx, c.ID)
	return p
}

var (
	_ preceptv1connect.EvaluatorServiceHandler = (*EvaluatorService)(nil)
	_ Similarity                               = (*EvaluatorService)(nil)
	_ EvaluationLookup                         = (*EvaluatorService)(nil)
)

func (s *EvaluatorService) fail(ctx context.Context, procedure string, err error) error {
	return toConnect(ctx, s.Log, procedure, err)
}

// Evaluate classifies a decision without storing it.
func (s *EvaluatorService) Evaluate(ctx context.Context, req *connect.Request[preceptv1.EvaluateRequest]) (*connect.Response[preceptv1.EvaluateResponse], error) {
	const proc = preceptv1connect.EvaluatorServiceEvaluateProcedure
	if req.Msg.GetDecision() == nil {
		return nil, s.fail(ctx, proc, invalid("decision", "required"))
	}
	d, err := convert.DecisionFromProto(req.Msg.GetDecision())
	if err != nil {
		return nil, s.fail(ctx, proc, err)
	}
	now := time.Now()
	if s.Now != nil {
		now = s.Now()
	}
	if err := d.Validate(s.Limits, now); err != nil {
		return nil, s.fail(ctx, proc, err)
	}
	ev, err := s.Evaluator.Evaluate(ctx, d)
	if err != nil {
		return nil, s.fail(ctx, proc, err)
	}
	return connect.NewResponse(&preceptv1.EvaluateResponse{Evaluation: s.evaluation(ctx, ev)}), nil
}

// GetEvaluation returns a stored decision's evaluation.
func (s *EvaluatorService) GetEvaluation(ctx context.Context, req *connect.Request[preceptv1.GetEvaluationRequest]) (*connect.Response[preceptv1.GetEvaluationResponse], error) {
	const proc = preceptv1connect.EvaluatorServiceGetEvaluationProcedure
	if req.Msg.GetDecisionId() == "" {
		return nil, s.fail(ctx, proc, invalid("decision_id", "required"))
	}
	ev, pending, err := s.Evaluator.Evaluation(ctx, req.Msg.GetDecisionId())
	if errors.Is(err, precept.ErrNotFound) && pending != "" {
		return nil, connect.NewError(connect.CodeUnavailable, errors.New("evaluation pending, will be retried: "+pending))
	}
	if err != nil {
		return nil, s.fail(ctx, proc, err)
	}
	return connect.NewResponse(&preceptv1.GetEvaluationResponse{Evaluation: s.evaluation(ctx, ev)}), nil
}

// ListClusters lists clusters, largest first.
func (s *EvaluatorService) ListClusters(ctx context.Context, req *connect.Request[preceptv1.ListClustersRequest]) (*connect.Response[preceptv1.ListClustersResponse], error) {
	const proc = preceptv1connect.EvaluatorServiceListClustersProcedure
	n, err := pageSize(req.Msg.GetPageSize(), 100, 1000)
	if err != nil {
		return nil, s.fail(ctx, proc, err)
	}
	minSize := int(req.Msg.GetMinSize())
	if minSize < 0 {
		return nil, s.fail(ctx, proc, invalid("min_size", "must not be negative"))
	}
	if minSize == 0 {
		minSize = 2
	}
	offset, err := offsetToken(req.Msg.GetPageToken())
	if err != nil {
		return nil, s.fail(ctx, proc, err)
	}
	page, total, err := s.Evaluator.Clusters(ctx, evaluator.ClusterQuery{Agent: req.Msg.GetAgent(), MinSize: minSize, Offset: offset, Limit: n})
	if err != nil {
		return nil, s.fail(ctx, proc, err)
	}
	resp := &preceptv1.ListClustersResponse{}
	var ids []string
	for _, c := range page {
		resp.Clusters = append(resp.Clusters, ClusterToProto(c, false))
		ids = append(ids, c.ID)
	}
	if s.Proposals != nil && len(ids) > 0 {
		proposals := s.Proposals.ProposalsForClusters(ctx, ids)
		for _, c := range resp.Clusters {
			c.ProposalId = proposals[c.GetId()]
		}
	}
	if offset < total && n < total-offset {
		resp.NextPageToken = strconv.Itoa(offset + n)
	}
	return connect.NewResponse(resp), nil
}

// offsetToken reads the page tokens of listings that page by position.
func offsetToken(t string) (int, error) {
	if t == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(t)
	if err != nil || n < 0 {
		return 0, invalid("page_token", "is not a token this listing issued")
	}
	return n, nil
}

// GetCluster returns one cluster with its members.
func (s *EvaluatorService) GetCluster(ctx context.Context, req *connect.Request[preceptv1.GetClusterRequest]) (*connect.Response[preceptv1.GetClusterResponse], error) {
	const proc = preceptv1connect.EvaluatorServiceGetClusterProcedure
	if req.Msg.GetId() == "" {
		return nil, s.fail(ctx, proc, invalid("id", "required"))
	}
	offset, limit := req.Msg.GetMemberOffset(), req.Msg.GetMemberLimit()
	if offset < 0 {
		return nil, s.fail(ctx, proc, invalid("member_offset", "must not be negative"))
	}
	if limit < 0 {
		return nil, s.fail(ctx, proc, invalid("member_limit", "must not be negative"))
	}
	c, err := s.Evaluator.ClusterPage(ctx, req.Msg.GetId(), int(offset), int(limit))
	if err != nil {
		return nil, s.fail(ctx, proc, err)
	}
	return connect.NewResponse(&preceptv1.GetClusterResponse{Cluster: s.cluster(ctx, c, true)}), nil
}

// ListNeedsReview lists ambiguous decisions with their missing rubric
// attributes.
func (s *EvaluatorService) ListNeedsReview(ctx context.Context, req *connect.Request[preceptv1.ListNeedsReviewRequest]) (*connect.Response[preceptv1.ListNeedsReviewResponse], error) {
	const proc = preceptv1connect.EvaluatorServiceListNeedsReviewProcedure
	n, err := pageSize(req.Msg.GetPageSize(), 100, 1000)
	if err != nil {
		return nil, s.fail(ctx, proc, err)
	}
	offset, err := offsetToken(req.Msg.GetPageToken())
	if err != nil {
		return nil, s.fail(ctx, proc, err)
	}
	items, total, err := s.Evaluator.NeedsReview(ctx, evaluator.ReviewQuery{Agent: req.Msg.GetAgent(), Offset: offset, Limit: n})
	if err != nil {
		return nil, s.fail(ctx, proc, err)
	}
	resp := &preceptv1.ListNeedsReviewResponse{Total: int32(total)}
	for _, r := range items {
		resp.Items = append(resp.Items, &preceptv1.NeedsReview{
			DecisionId: r.DecisionID, Agent: r.Agent, ReviewerId: r.ReviewerID, ReviewerComment: r.Comment,
			MissingAttributes: r.Missing, Status: r.Status, Attempts: int32(r.Attempts), UpdatedAt: timestamppb.New(r.UpdatedAt),
			Replies: r.Replies,
		})
	}
	if offset < total && n < total-offset {
		resp.NextPageToken = strconv.Itoa(offset + n)
	}
	return connect.NewResponse(resp), nil
}

// FindSimilar searches the clustered feedback.
func (s *EvaluatorService) FindSimilar(ctx context.Context, q SimilarQuery) ([]*preceptv1.SimilarFeedback, error) {
	hits, err := s.Evaluator.FindSimilar(ctx, evaluator.SimilarQuery{
		DecisionID: q.DecisionID, Text: q.Text, Agent: q.Agent, Threshold: q.Threshold, Limit: q.Limit,
	})
	if err != nil {
		return nil, err
	}
	out := make([]*preceptv1.SimilarFeedback, len(hits))
	for i, h := range hits {
		out[i] = &preceptv1.SimilarFeedback{
			DecisionId: h.DecisionID, Similarity: h.Similarity, Agent: h.Agent, ReviewerId: h.ReviewerID,
			EpicId: h.EpicID, Text: h.Text, ClusterId: h.ClusterID,
		}
	}
	return out, nil
}

// EvaluationFor returns a decision's evaluation for feedback responses,
// or why it is still pending.
func (s *EvaluatorService) EvaluationFor(ctx context.Context, id string) (*preceptv1.Evaluation, string, error) {
	ev, pending, err := s.Evaluator.Evaluation(ctx, id)
	if errors.Is(err, precept.ErrNotFound) {
		return nil, pending, nil
	}
	if err != nil {
		return nil, "", err
	}
	return s.evaluation(ctx, ev), "", nil
}

var classToProto = map[evaluator.Class]preceptv1.Classification{
	evaluator.Positive:          preceptv1.Classification_CLASSIFICATION_POSITIVE,
	evaluator.Ambiguous:         preceptv1.Classification_CLASSIFICATION_AMBIGUOUS,
	evaluator.EdgeCase:          preceptv1.Classification_CLASSIFICATION_EDGE_CASE,
	evaluator.GeneralizableLow:  preceptv1.Classification_CLASSIFICATION_GENERALIZABLE_LOW,
	evaluator.GeneralizableHigh: preceptv1.Classification_CLASSIFICATION_GENERALIZABLE_HIGH,
}

var actionToProto = map[evaluator.ActionType]preceptv1.ActionType{
	evaluator.CreateRule:   preceptv1.ActionType_ACTION_TYPE_CREATE_RULE,
	evaluator.RefinePrompt: preceptv1.ActionType_ACTION_TYPE_REFINE_PROMPT,
	evaluator.UpdateSkill:  preceptv1.ActionType_ACTION_TYPE_UPDATE_SKILL,
	evaluator.DocumentOnly: preceptv1.ActionType_ACTION_TYPE_DOCUMENT_ONLY,
}

// EvaluationToProto converts an evaluation for the API.
func EvaluationToProto(ev evaluator.Evaluation) *preceptv1.Evaluation {
	p := &preceptv1.Evaluation{
		DecisionId:         ev.DecisionID,
		Classification:     classToProto[ev.Class],
		Confidence:         ev.Confidence,
		Rationale:          ev.Rationale,
		SimilarFeedbackIds: ev.SimilarIDs,
		ClusterId:          ev.ClusterID,
		Evaluator:          ev.Evaluator,
		NeedsReview:        ev.NeedsReview,
		Revision:           int32(ev.Revision),
	}
	if !ev.EvaluatedAt.IsZero() {
		p.EvaluatedAt = timestamppb.New(ev.EvaluatedAt)
	}
	if a := ev.Action; a != nil {
		p.ProposedAction = &preceptv1.ProposedAction{Type: actionToProto[a.Type], TargetAgent: a.TargetAgent, Priority: a.Priority}
	}
	if r := ev.Rubric; r != nil {
		pr := &preceptv1.RubricResult{Met: int32(r.Met), Required: int32(r.Required), Confidence: r.Confidence,
			MinConfidence: r.MinConfidence, Passed: r.Passed, Missing: r.Missing}
		for _, a := range r.Attributes {
			pr.Attributes = append(pr.Attributes, &preceptv1.RubricAttribute{Name: a.Name, Description: a.Description, Present: a.Present, Evidence: a.Evidence})
		}
		p.Rubric = pr
	}
	if st := ev.Stats; st != nil {
		p.ClusterStats = statsToProto(*st)
	}
	if l := ev.Lesson; l != nil {
		pl := &preceptv1.Lesson{Category: l.Category, Confidence: l.Confidence, Problem: l.Problem, Desired: l.Desired,
			Said: l.Said, Asked: l.Asked, Taxonomy: l.Taxonomy, By: l.By, Protected: l.Protected}
		for _, e := range l.Evidence {
			pl.Evidence = append(pl.Evidence, &preceptv1.LessonEvidence{Kind: e.Kind, Text: e.Text})
		}
		p.Lesson = pl
	}
	return p
}

func statsToProto(s evaluator.Stats) *preceptv1.ClusterStats {
	p := &preceptv1.ClusterStats{Size: int32(s.Size), DistinctReviewers: int32(s.DistinctReviewers), DistinctEpics: int32(s.DistinctEpics), Agents: s.Agents,
		DistinctProducers: int32(s.DistinctProducers), Producers: s.Producers}
	if !s.FirstSeen.IsZero() {
		p.FirstSeen, p.LastSeen = timestamppb.New(s.FirstSeen), timestamppb.New(s.LastSeen)
	}
	return p
}

// ClusterToProto converts a cluster; members only when asked, as a
// listing would otherwise carry every member of every cluster.
func ClusterToProto(c evaluator.ClusterView, members bool) *preceptv1.Cluster {
	p := &preceptv1.Cluster{Id: c.ID, Stats: statsToProto(c.Stats), Classification: classToProto[c.Class], Tags: c.Tags,
		Agent: c.Agent, Category: c.Category, NotAPattern: c.NotAPattern}
	for _, r := range c.Representatives {
		p.Representatives = append(p.Representatives, &preceptv1.RepresentativeComment{DecisionId: r.DecisionID, ReviewerId: r.ReviewerID, Text: r.Text, Centrality: r.Centrality})
	}
	if members {
		for _, m := range c.Members {
			p.MemberIds = append(p.MemberIds, m.DecisionID)
		}
	}
	return p
}
