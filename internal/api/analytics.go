package api

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/precept-dev/precept/analytics"
	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
	"github.com/precept-dev/precept/gen/precept/v1/preceptv1connect"
)

// AnalyticsService implements preceptv1connect.AnalyticsServiceHandler
// (docs/analytics.md).
type AnalyticsService struct {
	// Analytics is nil when analytics.enabled is off.
	Analytics *analytics.Aggregate
	Log       *slog.Logger
}

var _ preceptv1connect.AnalyticsServiceHandler = (*AnalyticsService)(nil)

// GetAnalytics returns the figures over a range, per period.
func (s *AnalyticsService) GetAnalytics(ctx context.Context, req *connect.Request[preceptv1.GetAnalyticsRequest]) (*connect.Response[preceptv1.GetAnalyticsResponse], error) {
	const proc = preceptv1connect.AnalyticsServiceGetAnalyticsProcedure
	if s.Analytics == nil {
		return nil, connect.NewError(connect.CodeFailedPrecondition, errors.New("analytics are disabled (analytics.enabled)"))
	}
	m := req.Msg
	if m.GetTopSeries() < 0 {
		return nil, toConnect(ctx, s.Log, proc, invalid("top_series", "must not be negative"))
	}
	q := analytics.Query{Agents: m.GetAgents(), Gates: m.GetGates(), TotalsOnlyLists: m.GetTotalsOnlyLists(), Top: int(m.GetTopSeries())}
	var err error
	if q.From, err = optionalTime("from", m.GetFrom()); err != nil {
		return nil, toConnect(ctx, s.Log, proc, err)
	}
	if q.To, err = optionalTime("to", m.GetTo()); err != nil {
		return nil, toConnect(ctx, s.Log, proc, err)
	}
	switch m.GetGranularity() {
	case preceptv1.AnalyticsGranularity_ANALYTICS_GRANULARITY_UNSPECIFIED, preceptv1.AnalyticsGranularity_ANALYTICS_GRANULARITY_DAY:
		q.Granularity = analytics.Day
	case preceptv1.AnalyticsGranularity_ANALYTICS_GRANULARITY_WEEK:
		q.Granularity = analytics.Week
	case preceptv1.AnalyticsGranularity_ANALYTICS_GRANULARITY_MONTH:
		q.Granularity = analytics.Month
	default:
		return nil, toConnect(ctx, s.Log, proc, invalid("granularity", "unknown value %d; use day, week or month", m.GetGranularity()))
	}
	switch m.GetSplit() {
	case preceptv1.AnalyticsSplit_ANALYTICS_SPLIT_UNSPECIFIED:
	case preceptv1.AnalyticsSplit_ANALYTICS_SPLIT_AGENT:
		q.Split = analytics.SplitAgent
	case preceptv1.AnalyticsSplit_ANALYTICS_SPLIT_GATE:
		q.Split = analytics.SplitGate
	default:
		return nil, toConnect(ctx, s.Log, proc, invalid("split", "unknown value %d; use agent or gate", m.GetSplit()))
	}
	rep, err := s.Analytics.Query(q)
	if err != nil {
		return nil, toConnect(ctx, s.Log, proc, err)
	}
	return connect.NewResponse(AnalyticsToProto(rep)), nil
}

// optionalTime reads a timestamp that may be absent.
func optionalTime(field string, ts *timestamppb.Timestamp) (time.Time, error) {
	if ts == nil {
		return time.Time{}, nil
	}
	if err := ts.CheckValid(); err != nil {
		return time.Time{}, invalid(field, "not a valid timestamp")
	}
	return ts.AsTime(), nil
}

// AnalyticsToProto converts a report.
func AnalyticsToProto(r analytics.Report) *preceptv1.GetAnalyticsResponse {
	out := &preceptv1.GetAnalyticsResponse{
		From: timestamppb.New(r.From), To: timestamppb.New(r.To), Position: r.Position, SeriesTotal: int32(r.SeriesTotal),
		Totals: figuresToProto(r.Totals),
	}
	switch r.Granularity {
	case analytics.Week:
		out.Granularity = preceptv1.AnalyticsGranularity_ANALYTICS_GRANULARITY_WEEK
	case analytics.Month:
		out.Granularity = preceptv1.AnalyticsGranularity_ANALYTICS_GRANULARITY_MONTH
	default:
		out.Granularity = preceptv1.AnalyticsGranularity_ANALYTICS_GRANULARITY_DAY
	}
	for _, s := range r.Series {
		ps := &preceptv1.AnalyticsSeries{Agent: s.Agent, Gate: s.Gate, Totals: figuresToProto(s.Totals)}
		for _, b := range s.Buckets {
			ps.Buckets = append(ps.Buckets, &preceptv1.AnalyticsBucket{
				Start: timestamppb.New(b.Start), End: timestamppb.New(b.End), Figures: figuresToProto(b.Figures),
			})
		}
		out.Series = append(out.Series, ps)
	}
	return out
}

func figuresToProto(f analytics.Figures) *preceptv1.AnalyticsFigures {
	p := &preceptv1.AnalyticsFigures{
		Decisions: f.Decisions, Approved: f.Approved, Rejected: f.Rejected, ApprovedWithChanges: f.ApprovedWithChanges,
		FirstAttempts: f.FirstAttempts, FirstPassAccepted: f.FirstPassAccepted, FirstPassAcceptance: f.FirstPassAcceptance,
		EditDistanceCount: f.EditDistanceCount, EditDistanceMeanPercent: f.EditDistanceMeanPercent,
		CorrectionDiffs: f.CorrectionDiffs, LinesChanged: f.LinesChanged, LinesChangedMean: f.LinesChangedMean,
		ReviewDurations: f.ReviewDurations, ReviewDurationP50Seconds: f.ReviewP50Seconds, ReviewDurationP90Seconds: f.ReviewP90Seconds,
		Tags: labelCounts(f.Tags), ErrorCategories: labelCounts(f.ErrorCategories), LessonCategories: labelCounts(f.LessonCategories),
	}
	for _, q := range f.QualityScores {
		p.QualityScores = append(p.QualityScores, &preceptv1.QualityScoreMean{Name: q.Name, Count: q.Count, Mean: q.Mean})
	}
	p.Unclear = &preceptv1.UnclearFeedback{
		Unclear: f.Unclear, Resolved: f.UnclearResolved, NeedsReview: f.UnclearNeedsReview, Open: f.UnclearOpen,
		ResolutionRate: f.ResolutionRate, Promotions: f.Promotions,
		PromotionP50Seconds: f.PromotionP50Seconds, PromotionP90Seconds: f.PromotionP90Seconds,
	}
	p.RubricEvaluations = f.RubricEvaluations
	for _, r := range f.RubricFill {
		p.RubricFill = append(p.RubricFill, &preceptv1.RubricFill{Attribute: r.Name, Evaluations: r.Evaluations, Met: r.Met, Rate: r.Rate})
	}
	return p
}

func labelCounts(cs []analytics.Count) []*preceptv1.LabelCount {
	out := make([]*preceptv1.LabelCount, len(cs))
	for i, c := range cs {
		out[i] = &preceptv1.LabelCount{Name: c.Name, Count: c.Count}
	}
	return out
}
