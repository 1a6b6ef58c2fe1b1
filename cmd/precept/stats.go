package main

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/timestamppb"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
	"github.com/precept-dev/precept/gen/precept/v1/preceptv1connect"
)

func analyticsClient(c *cli) preceptv1connect.AnalyticsServiceClient {
	return preceptv1connect.NewAnalyticsServiceClient(c.httpClient(), c.addr, c.clientOptions()...)
}

// statsCmd shows the figures per agent, gate and period
// (docs/analytics.md) with a bar of first-pass acceptance per bucket. It
// and analyticsClient are functions, not methods: cli is at the method
// bound architecture_test.go sets.
func statsCmd(c *cli) *cobra.Command {
	var (
		agents, gates []string
		from, to, by  string
		split         string
		asJSON        bool
	)
	cmd := &cobra.Command{
		Use:   "stats",
		Short: "Show decisions, first-pass acceptance, edit distance, review times, error categories and unclear feedback per day",
		Long: `stats shows what the decisions at the HITL gates add up to over a range:
verdicts, first-pass acceptance (the first decision on a gate/epic/task
APPROVED), edit distance, lines changed, review-duration p50/p90, quality
scores, error categories and what became of unclear feedback (the
resolution rate, time to promotion, rubric fill rates), with one bar of first-pass acceptance per day,
week or month. --from and --to take dates (UTC, both included) or RFC 3339
times (to excluded); the default is the last 30 days.`,
		Args: exactArgs(0, "stats takes no arguments; filter with --agent and --gate"),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := &preceptv1.GetAnalyticsRequest{Agents: agents, Gates: gates}
			var err error
			if req.From, err = statsTime("--from", from, false); err != nil {
				return err
			}
			if req.To, err = statsTime("--to", to, true); err != nil {
				return err
			}
			switch strings.ToLower(by) {
			case "day":
				req.Granularity = preceptv1.AnalyticsGranularity_ANALYTICS_GRANULARITY_DAY
			case "week":
				req.Granularity = preceptv1.AnalyticsGranularity_ANALYTICS_GRANULARITY_WEEK
			case "month":
				req.Granularity = preceptv1.AnalyticsGranularity_ANALYTICS_GRANULARITY_MONTH
			default:
				return usagef("--by must be day, week or month, got %q", by)
			}
			switch strings.ToLower(split) {
			case "", "none":
			case "agent":
				req.Split = preceptv1.AnalyticsSplit_ANALYTICS_SPLIT_AGENT
			case "gate":
				req.Split = preceptv1.AnalyticsSplit_ANALYTICS_SPLIT_GATE
			default:
				return usagef("--split must be agent or gate, got %q", split)
			}
			if asJSON {
				c.output = "json"
			}
			// The text shows each bucket's first-pass bar and the
			// distributions of the totals only; JSON carries everything.
			req.TotalsOnlyLists = c.output != "json"
			ctx, cancel := c.ctx(cmd)
			defer cancel()
			resp, err := analyticsClient(c).GetAnalytics(ctx, connect.NewRequest(req))
			if err != nil {
				return err
			}
			return c.emit(resp.Msg, func(w io.Writer) { printStats(w, resp.Msg, agents, gates, by) })
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&agents, "agent", nil, "only these agents (repeat or comma-separate)")
	f.StringSliceVar(&gates, "gate", nil, "only these gates (repeat or comma-separate)")
	f.StringVar(&from, "from", "", "first day (YYYY-MM-DD) or time (RFC 3339); default 30 days before --to")
	f.StringVar(&to, "to", "", "last day, included (YYYY-MM-DD), or end time (RFC 3339); default today")
	f.StringVar(&by, "by", "day", "bucket: day, week or month")
	f.StringVar(&split, "split", "", "a series per agent or per gate")
	f.BoolVar(&asJSON, "json", false, "print JSON (same as -o json)")
	return cmd
}

// statsTime reads a --from or --to value: a date (a --to date counts its
// whole day) or an RFC 3339 time.
func statsTime(flag, v string, end bool) (*timestamppb.Timestamp, error) {
	if v == "" {
		return nil, nil
	}
	if d, err := time.Parse(time.DateOnly, v); err == nil {
		if end {
			d = d.AddDate(0, 0, 1)
		}
		return timestamppb.New(d), nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return nil, usagef("%s must be a date (2006-01-02) or an RFC 3339 time, got %q", flag, v)
	}
	return timestamppb.New(t), nil
}

func printStats(w io.Writer, r *preceptv1.GetAnalyticsResponse, agents, gates []string, by string) {
	to := r.GetTo().AsTime().AddDate(0, 0, -1)
	fmt.Fprintf(w, "%s .. %s by %s, agents %s, gates %s (position %d)\n\n", day(r.GetFrom()), to.Format(time.DateOnly),
		strings.ToLower(by), orAll(agents), orAll(gates), r.GetPosition())
	printFigures(w, r.GetTotals())
	for _, s := range r.GetSeries() {
		fmt.Fprintln(w)
		switch {
		case s.GetAgent() != "":
			fmt.Fprintf(w, "agent %s\n", line(s.GetAgent()))
		case s.GetGate() != "":
			fmt.Fprintf(w, "gate %s\n", line(s.GetGate()))
		}
		printChart(w, s.GetBuckets())
	}
}

func orAll(names []string) string {
	if len(names) == 0 {
		return "all"
	}
	return line(strings.Join(names, ","))
}

func day(t *timestamppb.Timestamp) string { return t.AsTime().UTC().Format(time.DateOnly) }

func printFigures(w io.Writer, f *preceptv1.AnalyticsFigures) {
	fields(w,
		"decisions", fmt.Sprintf("%d: %d approved, %d approved with changes, %d rejected", f.GetDecisions(), f.GetApproved(), f.GetApprovedWithChanges(), f.GetRejected()),
		"first pass", rate(f.GetFirstPassAccepted(), f.GetFirstAttempts()),
		"edit distance", meanOf(f.GetEditDistanceCount(), fmt.Sprintf("%.1f%% of characters", f.GetEditDistanceMeanPercent()), "decisions with both outputs"),
		"lines changed", meanOf(f.GetCorrectionDiffs(), fmt.Sprintf("%.1f per diff (%d in all)", f.GetLinesChangedMean(), f.GetLinesChanged()), "correction diffs"),
		"review time", meanOf(f.GetReviewDurations(), fmt.Sprintf("p50 %s, p90 %s", seconds(f.GetReviewDurationP50Seconds()), seconds(f.GetReviewDurationP90Seconds())), "decisions"),
		"quality", qualities(f.GetQualityScores()),
		"tags", labels(f.GetTags()),
		"error categories", labels(f.GetErrorCategories()),
		"lessons", labels(f.GetLessonCategories()),
		"unclear feedback", unclear(f.GetUnclear()),
		"resolution rate", resolution(f.GetUnclear()),
		"time to promotion", meanOf(f.GetUnclear().GetPromotions(), fmt.Sprintf("p50 %s, p90 %s",
			seconds(f.GetUnclear().GetPromotionP50Seconds()), seconds(f.GetUnclear().GetPromotionP90Seconds())), "promoted decisions"),
		"rubric fill", fills(f.GetRubricFill(), f.GetRubricEvaluations()),
	)
}

// unclear shows what became of the unclear decisions.
func unclear(u *preceptv1.UnclearFeedback) string {
	if u.GetUnclear() == 0 {
		return "-"
	}
	return fmt.Sprintf("%d: %d resolved by clarification, %d needs review, %d still open", u.GetUnclear(), u.GetResolved(), u.GetNeedsReview(), u.GetOpen())
}

// resolution shows the resolution rate: of the unclear decisions whose
// clarification ended, the share that ended resolved, whether or not
// they were left for needs-review first (docs/analytics.md, "Unclear
// feedback").
func resolution(u *preceptv1.UnclearFeedback) string {
	ended := u.GetResolved() + u.GetNeedsReview()
	if ended == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f%% (%d of %d resolved or left for review)", 100*u.GetResolutionRate(), u.GetResolved(), ended)
}

// fills shows how often each rubric attribute was met.
func fills(fs []*preceptv1.RubricFill, evaluations int64) string {
	if len(fs) == 0 {
		return ""
	}
	parts := make([]string, 0, len(fs))
	for _, f := range fs {
		parts = append(parts, fmt.Sprintf("%s %.0f%%", clip(f.GetAttribute(), 40), 100*f.GetRate()))
	}
	return fmt.Sprintf("%s (over %d evaluations)", strings.Join(parts, ", "), evaluations)
}

func rate(n, of int64) string {
	if of == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f%% (%d of %d first attempts approved)", 100*float64(n)/float64(of), n, of)
}

func meanOf(n int64, figure, what string) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprintf("%s over %d %s", figure, n, what)
}

// seconds shows a duration in seconds rounded to the second.
func seconds(s float64) string {
	return (time.Duration(math.Round(s)) * time.Second).String()
}

// maxLabels bounds the labels shown per distribution in text.
const maxLabels = 8

func labels(cs []*preceptv1.LabelCount) string {
	if len(cs) == 0 {
		return ""
	}
	parts := make([]string, 0, min(len(cs), maxLabels)+1)
	for i, c := range cs {
		if i == maxLabels {
			parts = append(parts, fmt.Sprintf("and %d more", len(cs)-maxLabels))
			break
		}
		parts = append(parts, fmt.Sprintf("%s %d", clip(c.GetName(), 40), c.GetCount()))
	}
	return strings.Join(parts, ", ")
}

func qualities(qs []*preceptv1.QualityScoreMean) string {
	parts := make([]string, 0, len(qs))
	for _, q := range qs {
		parts = append(parts, fmt.Sprintf("%s %.1f (%d)", clip(q.GetName(), 40), q.GetMean(), q.GetCount()))
	}
	return strings.Join(parts, ", ")
}

// barWidth is the width of a full bar (100%) in the chart.
const barWidth = 20

// printChart draws one line per bucket: the decisions, a bar of
// first-pass acceptance ('#' accepted, '.' the rest of the scale) and the
// figures it stands for. Buckets without first attempts show no bar.
func printChart(w io.Writer, buckets []*preceptv1.AnalyticsBucket) {
	rows := make([][]string, 0, len(buckets))
	for _, b := range buckets {
		f := b.GetFigures()
		bar, pct := strings.Repeat(" ", barWidth), "-"
		if n := f.GetFirstAttempts(); n > 0 {
			share := float64(f.GetFirstPassAccepted()) / float64(n)
			full := int(math.Round(share * barWidth))
			bar = strings.Repeat("#", full) + strings.Repeat(".", barWidth-full)
			pct = fmt.Sprintf("%3.0f%% %d/%d", 100*share, f.GetFirstPassAccepted(), n)
		}
		p50 := "-"
		if f.GetReviewDurations() > 0 {
			p50 = seconds(f.GetReviewDurationP50Seconds())
		}
		rows = append(rows, []string{day(b.GetStart()), fmt.Sprint(f.GetDecisions()), "|" + bar + "|", pct, p50})
	}
	table(w, []string{"FROM", "DECISIONS", "FIRST-PASS ACCEPTANCE", "", "REVIEW P50"}, rows)
}
