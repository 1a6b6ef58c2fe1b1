package console

import (
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
)

// syntheticAnalytics is a response of n daily buckets for each of the
// series named (one unnamed series when none is).
func syntheticAnalytics(days int, agents ...string) *preceptv1.GetAnalyticsResponse {
	start := time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC)
	if len(agents) == 0 {
		agents = []string{""}
	}
	resp := &preceptv1.GetAnalyticsResponse{Totals: &preceptv1.AnalyticsFigures{}}
	for a, name := range agents {
		s := &preceptv1.AnalyticsSeries{Agent: name, Totals: &preceptv1.AnalyticsFigures{Decisions: int64(100 - a)}}
		for d := range days {
			f := &preceptv1.AnalyticsFigures{
				Decisions: 20, Approved: 10, Rejected: 6, ApprovedWithChanges: 4,
				FirstAttempts: 12, FirstPassAccepted: int64(3 + (d+a)%7), FirstPassAcceptance: float64(3+(d+a)%7) / 12,
				EditDistanceCount: 4, EditDistanceMeanPercent: float64(5 + (d*a)%30),
				ReviewDurations: 20, ReviewDurationP50Seconds: float64(60 + d%50), ReviewDurationP90Seconds: float64(300 + d%90),
			}
			day := start.AddDate(0, 0, d)
			s.Buckets = append(s.Buckets, &preceptv1.AnalyticsBucket{Start: timestamppb.New(day), End: timestamppb.New(day.AddDate(0, 0, 1)), Figures: f})
		}
		resp.Series = append(resp.Series, s)
	}
	for i := range 12 {
		resp.Totals.ErrorCategories = append(resp.Totals.ErrorCategories, &preceptv1.LabelCount{Name: fmt.Sprintf("category-%d", i), Count: int64(100 - i)})
		resp.Totals.LessonCategories = append(resp.Totals.LessonCategories, &preceptv1.LabelCount{Name: fmt.Sprintf("lesson-%d", i), Count: int64(50 - i)})
	}
	return resp
}

// BenchmarkAnalyticsFigures draws the analytics page's six charts over 90
// days, split per agent with 10 agents (7 lines drawn): the page's cost
// beside its two RPCs.
func BenchmarkAnalyticsFigures(b *testing.B) {
	agents := make([]string, 10)
	for i := range agents {
		agents[i] = fmt.Sprintf("agent-%d", i)
	}
	in := &analyticsInput{
		filters: analyticsFilters{From: "2026-09-01", To: "2026-11-29", By: "day", Split: "agent"},
		all:     syntheticAnalytics(90),
		split:   syntheticAnalytics(90, agents...),
	}
	for b.Loop() {
		for _, ch := range analyticsCharts {
			if _, err := ch.build(in); err != nil {
				b.Fatal(err)
			}
		}
	}
}
