package config

import (
	"fmt"
	"time"
)

// Slack configures meta-approval in Slack and the clarification loop
// (DESIGN.md §6). With no bot token Slack is off.
type Slack struct {
	// BotToken (xoxb-...); env PRECEPT_SLACK_BOT_TOKEN overrides it.
	BotToken string `yaml:"bot_token"`
	// SigningSecret verifies requests from Slack; env
	// PRECEPT_SLACK_SIGNING_SECRET overrides it.
	SigningSecret string `yaml:"signing_secret"`
	// Channel where proposals are posted (id or name).
	Channel string `yaml:"channel"`
	// APIURL overrides Slack's API base URL (tests use slacktest).
	APIURL string `yaml:"api_url"`
	// Users maps Slack user ids to precept identities; only mapped users
	// who are approvers may act.
	Users map[string]string `yaml:"users"`
	// Reviewers maps reviewer_id values in decisions to Slack user ids,
	// for clarification questions.
	Reviewers map[string]string `yaml:"reviewers"`
	// MaxSkew is the largest accepted age of a signed request.
	MaxSkew time.Duration `yaml:"max_skew"`
	// PostRetry bounds the backoff between post attempts.
	PostRetry     time.Duration `yaml:"post_retry"`
	Clarification Clarification `yaml:"clarification"`
}

// Clarification configures the loop that asks reviewers of ambiguous
// feedback for what the clarity rubric missed (seed 000).
type Clarification struct {
	MaxAttempts  int           `yaml:"max_attempts"`
	StaleAfter   time.Duration `yaml:"stale_after"`
	RepostGuard  time.Duration `yaml:"repost_guard"`
	ScanInterval time.Duration `yaml:"scan_interval"`
}

// Enabled reports whether Slack is configured.
func (s Slack) Enabled() bool { return s.BotToken != "" }

func defaultSlack() Slack {
	return Slack{
		MaxSkew:   5 * time.Minute,
		PostRetry: time.Minute,
		Clarification: Clarification{
			MaxAttempts: 3, StaleAfter: 30 * time.Minute, RepostGuard: 24 * time.Hour, ScanInterval: 5 * time.Minute,
		},
	}
}

func (s *Slack) validate() error {
	bad := func(key, format string, args ...any) error {
		return fmt.Errorf("config: slack.%s: %s", key, fmt.Sprintf(format, args...))
	}
	if !s.Enabled() {
		return nil
	}
	if s.SigningSecret == "" {
		return bad("signing_secret", "required with a bot token (env PRECEPT_SLACK_SIGNING_SECRET)")
	}
	if s.Channel == "" {
		return bad("channel", "required with a bot token")
	}
	if s.MaxSkew <= 0 || s.PostRetry <= 0 {
		return bad("max_skew", "max_skew and post_retry must be positive durations")
	}
	c := s.Clarification
	if c.MaxAttempts < 1 || c.StaleAfter <= 0 || c.RepostGuard <= 0 || c.ScanInterval <= 0 {
		return bad("clarification", "max_attempts must be at least 1 and every interval positive")
	}
	return nil
}
