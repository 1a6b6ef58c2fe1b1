package app

import (
	"context"
	"errors"
	"path/filepath"
	"time"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/analytics"
	"github.com/precept-dev/precept/evaluator"
	"github.com/precept-dev/precept/gen/precept/v1/preceptv1connect"
	"github.com/precept-dev/precept/internal/api"
	"github.com/precept-dev/precept/internal/metrics"
)

// openAnalytics opens the figures per agent, gate and day
// (docs/analytics.md) unless analytics.enabled is off. It runs before the
// evaluator opens, so the evaluator's OnEvaluated hook finds it.
func (a *App) openAnalytics(nodeDir string) error {
	cfg := a.Config.Analytics
	if !cfg.Enabled {
		return nil
	}
	measured, err := metrics.NewAnalytics(a.Registry, cfg.MetricsMaxAgents, cfg.MetricsMaxGates)
	if err != nil {
		return err
	}
	var lookup analytics.Lookup
	if a.Config.Evaluator.Enabled {
		lookup = a.factsOf
	}
	a.Analytics, err = analytics.Open(a.Feedback, filepath.Join(nodeDir, "analytics.db"), analytics.Options{
		BatchSize: cfg.BatchSize, StepInterval: cfg.StepInterval, MaxRangeDays: cfg.MaxRangeDays, MaxSeries: cfg.MaxSeries,
		Evaluations: lookup, Metrics: measured, Logger: a.Log.With("component", "analytics"),
	})
	if err != nil {
		return err
	}
	a.closers = append(a.closers, a.Analytics.Close)
	return nil
}

// factsOf is what the evaluator recorded about a decision that
// analytics counts: its evaluation's lesson category and rubric, and
// where its clarification stands when it was unclear.
func (a *App) factsOf(ctx context.Context, id string) (analytics.Facts, bool, error) {
	ev, _, err := a.Evaluator.Evaluation(ctx, id)
	if errors.Is(err, precept.ErrNotFound) {
		return analytics.Facts{}, false, nil
	}
	if err != nil {
		return analytics.Facts{}, false, err
	}
	f := analytics.Facts{Rubric: rubricOf(ev)}
	if ev.Lesson != nil {
		f.Category = ev.Lesson.Category
	}
	r, err := a.Evaluator.Review(ctx, id)
	switch {
	case err == nil:
		f.Review, f.ResolvedAt = reviewOf(r)
	case !errors.Is(err, precept.ErrNotFound):
		return analytics.Facts{}, false, err
	}
	return f, true, nil
}

// rubricOf is the clarity rubric as an evaluation applied it, nil when
// it applied none.
func rubricOf(ev evaluator.Evaluation) []analytics.Attribute {
	if ev.Rubric == nil {
		return nil
	}
	out := make([]analytics.Attribute, 0, len(ev.Rubric.Attributes))
	for _, at := range ev.Rubric.Attributes {
		out = append(out, analytics.Attribute{Name: at.Name, Met: at.Present})
	}
	return out
}

// reviewOf is where a needs-review record's clarification stands, and
// when the reply that resolved it was recorded.
func reviewOf(r evaluator.NeedsReview) (analytics.Review, time.Time) {
	switch r.Status {
	case evaluator.Resolved:
		return analytics.Resolved, r.UpdatedAt
	case evaluator.NeedsHumanReview:
		return analytics.NeedsHumanReview, time.Time{}
	}
	return analytics.Clarifying, time.Time{}
}

// evaluated hands what the evaluator just recorded — lesson categories
// and rubrics — to analytics (evaluator.Options.OnEvaluated), and
// records their spans when tracing is on. Each report carries the
// decision's whole state, its needs-review record included (read back:
// the commit wrote it before the hook), so analytics replaces what it
// counted: a decision found clear again stops counting as unclear.
func (a *App) evaluated(evs []evaluator.Evaluation) {
	if a.spans != nil {
		a.spans.evaluated(evs)
	}
	if a.Analytics == nil {
		return
	}
	out := make([]analytics.Evaluated, 0, len(evs))
	for _, ev := range evs {
		e := analytics.Evaluated{DecisionID: ev.DecisionID, Evaluation: true, Rubric: rubricOf(ev)}
		if ev.Lesson != nil {
			e.Category = ev.Lesson.Category
		}
		if a.Evaluator == nil || ev.Class == evaluator.Positive && e.Category == "" && e.Rubric == nil {
			// An approval never has facts to count or to take back (and
			// no report comes before the evaluator is open).
			continue
		}
		r, err := a.Evaluator.Review(context.Background(), ev.DecisionID)
		switch {
		case err == nil:
			e.Review, e.ResolvedAt = reviewOf(r)
		case !errors.Is(err, precept.ErrNotFound):
			// Leave the decision to its next report or a rebuild rather
			// than count it as never unclear.
			a.Log.Warn("analytics: read the needs-review record", "decision_id", ev.DecisionID, "err", err)
			continue
		}
		out = append(out, e)
	}
	a.Analytics.Evaluated(out)
}

// reviewed hands analytics where the clarification of unclear decisions
// stands (evaluator.Options.OnReviewed).
func (a *App) reviewed(rs []evaluator.NeedsReview) {
	if a.Analytics == nil {
		return
	}
	out := make([]analytics.Evaluated, 0, len(rs))
	for _, r := range rs {
		e := analytics.Evaluated{DecisionID: r.DecisionID}
		e.Review, e.ResolvedAt = reviewOf(r)
		out = append(out, e)
	}
	a.Analytics.Evaluated(out)
}

// serveAnalytics serves AnalyticsService; with analytics off it answers
// FAILED_PRECONDITION.
func (a *App) serveAnalytics() {
	a.Handle(preceptv1connect.NewAnalyticsServiceHandler(&api.AnalyticsService{Analytics: a.Analytics, Log: a.Log}, a.ConnectOptions()...))
}
