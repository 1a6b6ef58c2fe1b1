package effect

import (
	"log/slog"
	"time"
)

// The defaults of Options (docs/thresholds.md, "Rule effects"). The
// promotion counts and the confidence floor are the seeds': five
// validations make a rule important, ten critical; a recurrence
// multiplies confidence by a factor, never below 0.3.
const (
	DefaultInterval         = 10 * time.Minute
	DefaultMinExposures     = 50
	DefaultMinImprovement   = 0.05
	DefaultImportantAt      = 5
	DefaultCriticalAt       = 10
	DefaultConfidenceFactor = 0.95
	DefaultConfidenceFloor  = 0.3
	DefaultIdlePeriod       = 90 * 24 * time.Hour
	DefaultGracePeriod      = 14 * 24 * time.Hour
)

// Options configure a Tracker. The zero value means the defaults.
type Options struct {
	// Interval is how often effects are recorded and acted on.
	Interval time.Duration
	// MinExposures is how many exposures a rule needs before its effect
	// is judged (and a sunset proposed), and how many shadow decisions
	// an activation proposal needs.
	MinExposures int
	// MinImprovement is the smallest drop of the recurrence rate (in
	// absolute terms, 0.05 = 5 points) that counts as an improvement.
	MinImprovement float64
	// ImportantAt and CriticalAt are the validations that raise a rule's
	// importance.
	ImportantAt, CriticalAt int
	// Diversity is how many distinct reviewers, epics and producers the
	// validations that raise a rule, and the recurrences that lower its
	// confidence, must come from; zero means DefaultDiversity.
	Diversity Diversity
	// ConfidenceFactor multiplies a rule's confidence per recurrence,
	// down to ConfidenceFloor.
	ConfidenceFactor, ConfidenceFloor float64
	// IdlePeriod without exposures or validations earns a rule a
	// re-approval request; GracePeriod unanswered sends it to SHADOW.
	IdlePeriod, GracePeriod time.Duration
	// Lifecycle acts on the evidence (sunset, re-approval, activation
	// proposals; importance and confidence); off, effects are only
	// reported.
	Lifecycle bool
	Metrics   Metrics
	Logger    *slog.Logger
	Now       func() time.Time
}

func (o Options) withDefaults() Options {
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.MinExposures <= 0 {
		o.MinExposures = DefaultMinExposures
	}
	if o.MinImprovement <= 0 {
		o.MinImprovement = DefaultMinImprovement
	}
	if o.ImportantAt <= 0 {
		o.ImportantAt = DefaultImportantAt
	}
	if o.CriticalAt <= 0 {
		o.CriticalAt = DefaultCriticalAt
	}
	if o.Diversity == (Diversity{}) {
		o.Diversity = DefaultDiversity()
	}
	if o.ConfidenceFactor <= 0 || o.ConfidenceFactor > 1 {
		o.ConfidenceFactor = DefaultConfidenceFactor
	}
	if o.ConfidenceFloor <= 0 {
		o.ConfidenceFloor = DefaultConfidenceFloor
	}
	if o.IdlePeriod <= 0 {
		o.IdlePeriod = DefaultIdlePeriod
	}
	if o.GracePeriod <= 0 {
		o.GracePeriod = DefaultGracePeriod
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}
