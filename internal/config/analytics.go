package config

import (
	"fmt"
	"time"

	"github.com/precept-dev/precept/analytics"
)

// Analytics configures the figures per agent, gate and day
// (docs/analytics.md).
type Analytics struct {
	// Enabled follows the feedback store and serves GetAnalytics.
	Enabled bool `yaml:"enabled"`
	// BatchSize is how many decisions one step adds and saves together.
	BatchSize int `yaml:"batch_size"`
	// StepInterval is how long a change waits before the step that
	// counts it, so that one transaction takes in what arrives meanwhile.
	StepInterval time.Duration `yaml:"step_interval"`
	// MaxRangeDays bounds a query's range.
	MaxRangeDays int `yaml:"max_range_days"`
	// MaxSeries bounds the series of a split query.
	MaxSeries int `yaml:"max_series"`
	// MetricsMaxAgents and MetricsMaxGates bound the Prometheus label
	// values: agents and gates beyond them are counted as "other".
	MetricsMaxAgents int `yaml:"metrics_max_agents"`
	MetricsMaxGates  int `yaml:"metrics_max_gates"`
}

func defaultAnalytics() Analytics {
	return Analytics{
		Enabled: true, BatchSize: analytics.DefaultBatchSize, StepInterval: analytics.DefaultStepInterval, MaxRangeDays: analytics.DefaultMaxRangeDays,
		MaxSeries: analytics.DefaultMaxSeries, MetricsMaxAgents: analytics.DefaultMetricsMaxAgents,
		MetricsMaxGates: analytics.DefaultMetricsMaxGates,
	}
}

func (a Analytics) validate() error {
	if a.StepInterval <= 0 || a.StepInterval > time.Minute {
		return fmt.Errorf("config: analytics.step_interval: %s is outside (0, 1m]", a.StepInterval)
	}
	for _, v := range []struct {
		key      string
		val, max int
	}{
		{"batch_size", a.BatchSize, 100_000},
		{"max_range_days", a.MaxRangeDays, 36_600},
		{"max_series", a.MaxSeries, 10_000},
		{"metrics_max_agents", a.MetricsMaxAgents, 1000},
		{"metrics_max_gates", a.MetricsMaxGates, 1000},
	} {
		if v.val < 1 || v.val > v.max {
			return fmt.Errorf("config: analytics.%s: %d is outside 1..%d", v.key, v.val, v.max)
		}
	}
	return nil
}
