package api

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/precept-dev/precept/analytics"
	"github.com/precept-dev/precept/feedbackstore"
	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
)

// emptyFeed is a feedback store with nothing in it.
type emptyFeed struct{}

func (emptyFeed) Since(uint64, int) ([]feedbackstore.Record, error) { return nil, nil }
func (emptyFeed) LastSeq() (uint64, error)                          { return 0, nil }
func (emptyFeed) Changed() <-chan struct{}                          { return make(chan struct{}) }

func TestGetAnalyticsRefusesBadRequestsWithTheirReason(t *testing.T) {
	agg, err := analytics.Open(emptyFeed{}, filepath.Join(t.TempDir(), "analytics.db"), analytics.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer agg.Close()
	s := &AnalyticsService{Analytics: agg, Log: slog.New(slog.DiscardHandler)}
	day := time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		req  *preceptv1.GetAnalyticsRequest
		code connect.Code
		want string
	}{
		{"from after to", &preceptv1.GetAnalyticsRequest{From: timestamppb.New(day), To: timestamppb.New(day.AddDate(0, 0, -1))}, connect.CodeInvalidArgument, "must be before to"},
		{"unknown granularity", &preceptv1.GetAnalyticsRequest{Granularity: 9}, connect.CodeInvalidArgument, "granularity: unknown value 9"},
		{"unknown split", &preceptv1.GetAnalyticsRequest{Split: 7}, connect.CodeInvalidArgument, "split: unknown value 7"},
		{"negative top", &preceptv1.GetAnalyticsRequest{Split: preceptv1.AnalyticsSplit_ANALYTICS_SPLIT_AGENT, TopSeries: -1}, connect.CodeInvalidArgument, "top_series: must not be negative"},
		{"huge range", &preceptv1.GetAnalyticsRequest{From: timestamppb.New(day.AddDate(-10, 0, 0)), To: timestamppb.New(day)}, connect.CodeInvalidArgument, "longer than the limit of 731 days"},
		{"invalid timestamp", &preceptv1.GetAnalyticsRequest{From: &timestamppb.Timestamp{Seconds: 1, Nanos: -5}}, connect.CodeInvalidArgument, "from: not a valid timestamp"},
	} {
		_, err := s.GetAnalytics(context.Background(), connect.NewRequest(tc.req))
		var ce *connect.Error
		if !errors.As(err, &ce) || ce.Code() != tc.code || !strings.Contains(ce.Message(), tc.want) {
			t.Errorf("%s: err = %v, want %s containing %q", tc.name, err, tc.code, tc.want)
		}
	}
	resp, err := s.GetAnalytics(context.Background(), connect.NewRequest(&preceptv1.GetAnalyticsRequest{
		From: timestamppb.New(day), To: timestamppb.New(day.AddDate(0, 0, 14)), Granularity: preceptv1.AnalyticsGranularity_ANALYTICS_GRANULARITY_WEEK,
	}))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(resp.Msg.GetSeries()); n != 1 || len(resp.Msg.GetSeries()[0].GetBuckets()) != 2 || resp.Msg.GetTotals().GetDecisions() != 0 {
		t.Errorf("two empty weeks: %v", resp.Msg)
	}

	off := &AnalyticsService{Log: slog.New(slog.DiscardHandler)}
	_, err = off.GetAnalytics(context.Background(), connect.NewRequest(&preceptv1.GetAnalyticsRequest{}))
	if connect.CodeOf(err) != connect.CodeFailedPrecondition || !strings.Contains(err.Error(), "analytics.enabled") {
		t.Errorf("analytics off: err = %v", err)
	}
}
