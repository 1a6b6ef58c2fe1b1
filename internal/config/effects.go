package config

import (
	"fmt"
	"time"

	"github.com/precept-dev/precept/effect"
)

// Effects configures the learning loop: rule effects and the lifecycle
// they drive (docs/effects.md; defaults and reasons in docs/thresholds.md).
type Effects struct {
	// Enabled ties decisions to the rules in their prompts and reports
	// each rule's effect; off, nothing is attributed or measured.
	Enabled bool `yaml:"enabled"`
	// Lifecycle acts on the evidence: importance and confidence in the
	// rule files, sunset, re-approval and activation proposals.
	Lifecycle bool `yaml:"lifecycle"`
	// Interval is how often effects are recorded and acted on.
	Interval time.Duration `yaml:"interval"`
	// MinExposures before a rule's effect is judged.
	MinExposures int `yaml:"min_exposures"`
	// MinImprovement is the smallest drop of the recurrence rate that
	// counts as an improvement (0.05 = 5 points).
	MinImprovement float64 `yaml:"min_improvement"`
	// ImportantAt and CriticalAt are the validations that raise a rule's
	// importance.
	ImportantAt int `yaml:"important_at"`
	CriticalAt  int `yaml:"critical_at"`
	// ConfidenceFactor multiplies confidence per recurrence, down to
	// ConfidenceFloor.
	ConfidenceFactor float64 `yaml:"confidence_factor"`
	ConfidenceFloor  float64 `yaml:"confidence_floor"`
	// IdlePeriod without exposures or validations earns a rule a
	// re-approval request; GracePeriod unanswered sends it to SHADOW.
	IdlePeriod  time.Duration `yaml:"idle_period"`
	GracePeriod time.Duration `yaml:"grace_period"`
	// VersionFlush is how often newly served prompt versions are committed.
	VersionFlush time.Duration `yaml:"version_flush"`
}

func defaultEffects() Effects {
	return Effects{
		Enabled: true, Lifecycle: true, Interval: effect.DefaultInterval,
		MinExposures: effect.DefaultMinExposures, MinImprovement: effect.DefaultMinImprovement,
		ImportantAt: effect.DefaultImportantAt, CriticalAt: effect.DefaultCriticalAt,
		ConfidenceFactor: effect.DefaultConfidenceFactor, ConfidenceFloor: effect.DefaultConfidenceFloor,
		IdlePeriod: effect.DefaultIdlePeriod, GracePeriod: effect.DefaultGracePeriod,
		VersionFlush: time.Second,
	}
}

func (e Effects) validate() error {
	switch {
	case e.Interval <= 0:
		return fmt.Errorf("config: effects.interval: must be a positive duration")
	case e.MinExposures < 1:
		return fmt.Errorf("config: effects.min_exposures: must be at least 1")
	case e.MinImprovement <= 0 || e.MinImprovement >= 1:
		return fmt.Errorf("config: effects.min_improvement: %v is outside (0, 1)", e.MinImprovement)
	case e.ImportantAt < 1 || e.CriticalAt <= e.ImportantAt:
		return fmt.Errorf("config: effects.important_at (%d) must be at least 1 and below effects.critical_at (%d)", e.ImportantAt, e.CriticalAt)
	case e.ConfidenceFactor <= 0 || e.ConfidenceFactor > 1:
		return fmt.Errorf("config: effects.confidence_factor: %v is outside (0, 1]", e.ConfidenceFactor)
	case e.ConfidenceFloor <= 0 || e.ConfidenceFloor >= 1:
		return fmt.Errorf("config: effects.confidence_floor: %v is outside (0, 1)", e.ConfidenceFloor)
	case e.IdlePeriod <= 0 || e.GracePeriod <= 0:
		return fmt.Errorf("config: effects.idle_period and effects.grace_period must be positive durations")
	case e.VersionFlush <= 0:
		return fmt.Errorf("config: effects.version_flush: must be a positive duration")
	}
	return nil
}

// Options returns the tracker options the configuration gives.
func (e Effects) Options() effect.Options {
	return effect.Options{
		Interval: e.Interval, MinExposures: e.MinExposures, MinImprovement: e.MinImprovement,
		ImportantAt: e.ImportantAt, CriticalAt: e.CriticalAt,
		ConfidenceFactor: e.ConfidenceFactor, ConfidenceFloor: e.ConfidenceFloor,
		IdlePeriod: e.IdlePeriod, GracePeriod: e.GracePeriod, Lifecycle: e.Lifecycle,
	}
}
