package app

import (
	"context"
	"errors"
	"path/filepath"

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
	var lessons analytics.LessonLookup
	if a.Config.Evaluator.Enabled {
		lessons = a.lessonOf
	}
	a.Analytics, err = analytics.Open(a.Feedback, filepath.Join(nodeDir, "analytics.db"), analytics.Options{
		BatchSize: cfg.BatchSize, StepInterval: cfg.StepInterval, MaxRangeDays: cfg.MaxRangeDays, MaxSeries: cfg.MaxSeries,
		Lessons: lessons, Metrics: measured, Logger: a.Log.With("component", "analytics"),
	})
	if err != nil {
		return err
	}
	a.closers = append(a.closers, a.Analytics.Close)
	return nil
}

// lessonOf is the lesson category the evaluator gave a decision.
func (a *App) lessonOf(ctx context.Context, id string) (string, bool, error) {
	ev, _, err := a.Evaluator.Evaluation(ctx, id)
	if errors.Is(err, precept.ErrNotFound) {
		return "", false, nil
	}
	if err != nil || ev.Lesson == nil || ev.Lesson.Category == "" {
		return "", false, err
	}
	return ev.Lesson.Category, true, nil
}

// evaluated hands the lesson categories the evaluator just recorded to
// analytics (evaluator.Options.OnEvaluated), and records their spans
// when tracing is on.
func (a *App) evaluated(evs []evaluator.Evaluation) {
	if a.spans != nil {
		a.spans.evaluated(evs)
	}
	if a.Analytics == nil {
		return
	}
	out := make([]analytics.Evaluated, 0, len(evs))
	for _, ev := range evs {
		if ev.Lesson != nil && ev.Lesson.Category != "" {
			out = append(out, analytics.Evaluated{DecisionID: ev.DecisionID, Category: ev.Lesson.Category})
		}
	}
	a.Analytics.Evaluated(out)
}

// serveAnalytics serves AnalyticsService; with analytics off it answers
// FAILED_PRECONDITION.
func (a *App) serveAnalytics() {
	a.Handle(preceptv1connect.NewAnalyticsServiceHandler(&api.AnalyticsService{Analytics: a.Analytics, Log: a.Log}, a.ConnectOptions()...))
}
