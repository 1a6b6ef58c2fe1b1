package config

import (
	"fmt"
	"time"

	"github.com/precept-dev/precept/prompts"
)

// Prompts configures stage-prompt assembly (docs/architecture.md).
type Prompts struct {
	// MaxRules bounds the learned rules in one prompt (docs/thresholds.md).
	MaxRules int `yaml:"max_rules"`
	// WatchPoll is how often the rules repository is checked for changes
	// made outside precept (git pushes); precept's own changes are seen
	// at once.
	WatchPoll time.Duration `yaml:"watch_poll"`
	// CacheSize bounds the assembled prompts kept in memory.
	CacheSize int `yaml:"cache_size"`
}

func defaultPrompts() Prompts {
	return Prompts{MaxRules: prompts.DefaultMaxRules, WatchPoll: prompts.DefaultPollInterval, CacheSize: prompts.DefaultCacheSize}
}

func (p Prompts) validate() error {
	if p.MaxRules < 1 || p.MaxRules > 200 {
		return fmt.Errorf("config: prompts.max_rules: %d is outside 1..200", p.MaxRules)
	}
	if p.WatchPoll <= 0 {
		return fmt.Errorf("config: prompts.watch_poll: must be a positive duration")
	}
	if p.CacheSize < 1 {
		return fmt.Errorf("config: prompts.cache_size: must be at least 1")
	}
	return nil
}
