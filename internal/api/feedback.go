// Package api serves precept's Connect API: it translates between proto
// messages and domain types, authenticates callers and maps domain errors
// to Connect codes with client-safe messages. Domain packages never see
// Connect types.
package api

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/feedbackstore"
	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
	"github.com/precept-dev/precept/gen/precept/v1/preceptv1connect"
	"github.com/precept-dev/precept/internal/api/convert"
	"github.com/precept-dev/precept/internal/stream"
)

// FeedbackStore is what the feedback service needs of the store.
type FeedbackStore interface {
	Store(ctx context.Context, records []precept.Feedback) ([]bool, error)
	Get(ctx context.Context, id string) (feedbackstore.Record, error)
	ListForAgent(ctx context.Context, agent string, limit int, pageToken string) ([]feedbackstore.Record, string, error)
}

// DeadLetters lists, replays and drops dead-lettered stream entries;
// stream.Consumer implements it.
type DeadLetters interface {
	DeadLetters(ctx context.Context, pageSize int, pageToken string) ([]stream.DeadLetter, string, int64, error)
	ReplayDeadLetters(ctx context.Context, ids []string, by string) ([]stream.Outcome, error)
	DropDeadLetters(ctx context.Context, ids []string, by string) ([]stream.Outcome, error)
}

var _ DeadLetters = (*stream.Consumer)(nil)

// Similarity answers FindSimilar; it is provided by the evaluator.
type Similarity interface {
	FindSimilar(ctx context.Context, q SimilarQuery) ([]*preceptv1.SimilarFeedback, error)
}

// SimilarQuery is a FindSimilar request after validation.
type SimilarQuery struct {
	DecisionID string
	Text       string
	Agent      string
	Threshold  float64
	Limit      int
}

// EvaluationLookup attaches evaluator results to feedback responses.
type EvaluationLookup interface {
	EvaluationFor(ctx context.Context, decisionID string) (*preceptv1.Evaluation, string, error)
}

// FeedbackService implements preceptv1connect.FeedbackServiceHandler.
type FeedbackService struct {
	Store       FeedbackStore
	DeadLetters DeadLetters
	// Similarity and Evaluations are nil until the evaluator runs.
	Similarity  Similarity
	Evaluations EvaluationLookup
	Limits      precept.Limits
	Log         *slog.Logger
	Now         func() time.Time
}

var _ preceptv1connect.FeedbackServiceHandler = (*FeedbackService)(nil)

func (s *FeedbackService) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *FeedbackService) fail(ctx context.Context, procedure string, err error) error {
	return toConnect(ctx, s.Log, procedure, err)
}

// RecordFeedback validates a decision exactly as the stream does and
// stores it durably.
func (s *FeedbackService) RecordFeedback(ctx context.Context, req *connect.Request[preceptv1.RecordFeedbackRequest]) (*connect.Response[preceptv1.RecordFeedbackResponse], error) {
	const proc = preceptv1connect.FeedbackServiceRecordFeedbackProcedure
	if req.Msg.GetDecision() == nil {
		return nil, s.fail(ctx, proc, invalid("decision", "required"))
	}
	d, err := convert.DecisionFromProto(req.Msg.GetDecision())
	if err != nil {
		return nil, s.fail(ctx, proc, err)
	}
	now := s.now()
	if err := d.Validate(s.Limits, now); err != nil {
		return nil, s.fail(ctx, proc, err)
	}
	f := precept.NewFeedback(d, "api:"+caller(ctx).Name, now)
	f.Producer = f.Source
	created, err := s.Store.Store(ctx, []precept.Feedback{f})
	if err != nil {
		return nil, s.fail(ctx, proc, err)
	}
	rec, err := s.Store.Get(ctx, d.DecisionID)
	if err != nil {
		return nil, s.fail(ctx, proc, err)
	}
	return connect.NewResponse(&preceptv1.RecordFeedbackResponse{
		DecisionId: d.DecisionID,
		Created:    created[0],
		Feedback:   s.feedback(ctx, rec),
	}), nil
}

func (s *FeedbackService) feedback(ctx context.Context, rec feedbackstore.Record) *preceptv1.Feedback {
	p := FeedbackToProto(rec)
	if s.Evaluations != nil {
		ev, evalErr, err := s.Evaluations.EvaluationFor(ctx, rec.DecisionID)
		if err != nil {
			s.Log.WarnContext(ctx, "look up evaluation", "decision_id", rec.DecisionID, "err", err)
		}
		p.Evaluation = ev
		p.EvaluationError = evalErr
	}
	return p
}

// GetFeedback returns one stored decision.
func (s *FeedbackService) GetFeedback(ctx context.Context, req *connect.Request[preceptv1.GetFeedbackRequest]) (*connect.Response[preceptv1.GetFeedbackResponse], error) {
	const proc = preceptv1connect.FeedbackServiceGetFeedbackProcedure
	id := req.Msg.GetDecisionId()
	if id == "" {
		return nil, s.fail(ctx, proc, invalid("decision_id", "required"))
	}
	rec, err := s.Store.Get(ctx, id)
	if err != nil {
		return nil, s.fail(ctx, proc, err)
	}
	return connect.NewResponse(&preceptv1.GetFeedbackResponse{Feedback: s.feedback(ctx, rec)}), nil
}

// ListFeedbackForAgent lists an agent's decisions newest first.
func (s *FeedbackService) ListFeedbackForAgent(ctx context.Context, req *connect.Request[preceptv1.ListFeedbackForAgentRequest]) (*connect.Response[preceptv1.ListFeedbackForAgentResponse], error) {
	const proc = preceptv1connect.FeedbackServiceListFeedbackForAgentProcedure
	if req.Msg.GetAgent() == "" {
		return nil, s.fail(ctx, proc, invalid("agent", "required"))
	}
	n, err := pageSize(req.Msg.GetPageSize(), 100, 1000)
	if err != nil {
		return nil, s.fail(ctx, proc, err)
	}
	recs, next, err := s.Store.ListForAgent(ctx, req.Msg.GetAgent(), n, req.Msg.GetPageToken())
	if err != nil {
		return nil, s.fail(ctx, proc, err)
	}
	resp := &preceptv1.ListFeedbackForAgentResponse{NextPageToken: next}
	for _, r := range recs {
		resp.Feedback = append(resp.Feedback, s.feedback(ctx, r))
	}
	return connect.NewResponse(resp), nil
}

// ListDeadLetters lists stream entries that could not be accepted, newest
// first.
func (s *FeedbackService) ListDeadLetters(ctx context.Context, req *connect.Request[preceptv1.ListDeadLettersRequest]) (*connect.Response[preceptv1.ListDeadLettersResponse], error) {
	const proc = preceptv1connect.FeedbackServiceListDeadLettersProcedure
	n, err := pageSize(req.Msg.GetPageSize(), 100, 1000)
	if err != nil {
		return nil, s.fail(ctx, proc, err)
	}
	if s.DeadLetters == nil {
		return nil, connect.NewError(connect.CodeUnavailable, errors.New("the decision stream is not configured"))
	}
	letters, next, total, err := s.DeadLetters.DeadLetters(ctx, n, req.Msg.GetPageToken())
	if err != nil {
		return nil, s.fail(ctx, proc, err)
	}
	resp := &preceptv1.ListDeadLettersResponse{NextPageToken: next, Total: total}
	for _, l := range letters {
		dl := &preceptv1.DeadLetter{
			Id: l.ID, OriginalId: l.OriginalID, Reason: l.Reason, Consumer: l.Consumer, Deliveries: l.Deliveries,
			Truncated: l.Truncated, Whole: l.Whole, OriginalBytes: l.OriginalBytes, OriginalFields: int32(l.OriginalFields), OriginalSha256: l.OriginalSHA256,
		}
		if !l.FailedAt.IsZero() {
			dl.FailedAt = timestamppb.New(l.FailedAt)
		}
		for _, f := range l.Fields {
			dl.Fields = append(dl.Fields, &preceptv1.RawField{Name: f.Name, Value: f.Value})
		}
		resp.DeadLetters = append(resp.DeadLetters, dl)
	}
	return connect.NewResponse(resp), nil
}

// ReplayDeadLetters re-queues dead letters onto the decision stream in the
// caller's name; the stream consumer audits each.
func (s *FeedbackService) ReplayDeadLetters(ctx context.Context, req *connect.Request[preceptv1.ReplayDeadLettersRequest]) (*connect.Response[preceptv1.ReplayDeadLettersResponse], error) {
	const proc = preceptv1connect.FeedbackServiceReplayDeadLettersProcedure
	if s.DeadLetters == nil {
		return nil, connect.NewError(connect.CodeUnavailable, errors.New("the decision stream is not configured"))
	}
	out, err := s.DeadLetters.ReplayDeadLetters(ctx, req.Msg.GetIds(), caller(ctx).Name)
	if err != nil {
		return nil, s.fail(ctx, proc, err)
	}
	return connect.NewResponse(&preceptv1.ReplayDeadLettersResponse{Outcomes: outcomesToProto(out)}), nil
}

// DropDeadLetters removes dead letters in the caller's name; the stream
// consumer audits each.
func (s *FeedbackService) DropDeadLetters(ctx context.Context, req *connect.Request[preceptv1.DropDeadLettersRequest]) (*connect.Response[preceptv1.DropDeadLettersResponse], error) {
	const proc = preceptv1connect.FeedbackServiceDropDeadLettersProcedure
	if s.DeadLetters == nil {
		return nil, connect.NewError(connect.CodeUnavailable, errors.New("the decision stream is not configured"))
	}
	out, err := s.DeadLetters.DropDeadLetters(ctx, req.Msg.GetIds(), caller(ctx).Name)
	if err != nil {
		return nil, s.fail(ctx, proc, err)
	}
	return connect.NewResponse(&preceptv1.DropDeadLettersResponse{Outcomes: outcomesToProto(out)}), nil
}

func outcomesToProto(out []stream.Outcome) []*preceptv1.DeadLetterOutcome {
	res := make([]*preceptv1.DeadLetterOutcome, len(out))
	for i, o := range out {
		res[i] = &preceptv1.DeadLetterOutcome{Id: o.ID, Done: o.Err == nil, StreamId: o.StreamID}
		if o.Err != nil {
			res[i].Error = precept.ErrorMessage(o.Err)
		}
	}
	return res
}

// FindSimilar searches stored feedback similar to a decision or a text.
func (s *FeedbackService) FindSimilar(ctx context.Context, req *connect.Request[preceptv1.FindSimilarRequest]) (*connect.Response[preceptv1.FindSimilarResponse], error) {
	const proc = preceptv1connect.FeedbackServiceFindSimilarProcedure
	if s.Similarity == nil {
		return nil, connect.NewError(connect.CodeUnavailable, errors.New("the similarity index is not running"))
	}
	q := SimilarQuery{DecisionID: req.Msg.GetDecisionId(), Text: req.Msg.GetText(), Agent: req.Msg.GetAgent(), Threshold: req.Msg.GetThreshold()}
	if q.DecisionID == "" && q.Text == "" {
		return nil, s.fail(ctx, proc, invalid("query", "set decision_id or text"))
	}
	if len(q.Text) > s.Limits.MaxCommentBytes && s.Limits.MaxCommentBytes > 0 {
		return nil, s.fail(ctx, proc, invalid("text", "longer than %d bytes", s.Limits.MaxCommentBytes))
	}
	if q.Threshold < 0 || q.Threshold > 1 {
		return nil, s.fail(ctx, proc, invalid("threshold", "must be in [0, 1]"))
	}
	n, err := pageSize(req.Msg.GetLimit(), 10, 100)
	if err != nil {
		return nil, s.fail(ctx, proc, invalid("limit", "must be 0-100"))
	}
	q.Limit = n
	results, err := s.Similarity.FindSimilar(ctx, q)
	if err != nil {
		return nil, s.fail(ctx, proc, err)
	}
	return connect.NewResponse(&preceptv1.FindSimilarResponse{Results: results}), nil
}

// PingService implements preceptv1connect.PingServiceHandler.
type PingService struct{}

var _ preceptv1connect.PingServiceHandler = PingService{}

// Ping echoes the message with the caller's identity.
func (PingService) Ping(ctx context.Context, req *connect.Request[preceptv1.PingRequest]) (*connect.Response[preceptv1.PingResponse], error) {
	id := caller(ctx)
	return connect.NewResponse(&preceptv1.PingResponse{Message: req.Msg.GetMessage(), Identity: id.Name, Role: id.Role.String()}), nil
}
