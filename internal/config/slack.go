package config

import (
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"time"

	"github.com/precept-dev/precept/clarification"
	"github.com/precept-dev/precept/internal/slackapp"
)

// Slack configures meta-approval in Slack and the clarification loop
// (docs/lifecycle.md, "Slack"). With no bot token Slack is off.
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
	// whose identity has the approver role (its token's role in
	// auth.tokens; without tokens, being on rules.approvers) may act.
	Users map[string]string `yaml:"users"`
	// Reviewers maps reviewer_id values in decisions to Slack user ids,
	// for clarification questions.
	Reviewers map[string]string `yaml:"reviewers"`
	// MaxSkew is the largest accepted age of a signed request.
	MaxSkew time.Duration `yaml:"max_skew"`
	// PostRetry bounds the backoff between post attempts.
	PostRetry time.Duration `yaml:"post_retry"`
	// SuggestEvery is how often merge suggestions are looked for and
	// posted (at most SuggestMax new ones each time); 0 turns them off.
	SuggestEvery  time.Duration `yaml:"suggest_every"`
	SuggestMax    int           `yaml:"suggest_max"`
	Clarification Clarification `yaml:"clarification"`
}

// Clarification configures the loop that asks reviewers of ambiguous
// feedback for what the clarity rubric missed (docs/clarification.md).
type Clarification struct {
	// MaxAttempts is how many questions are asked before a decision is
	// left for human review.
	MaxAttempts int `yaml:"max_attempts"`
	// StaleAfter is how long an item may go without activity before the
	// scheduler looks at it again.
	StaleAfter time.Duration `yaml:"stale_after"`
	// RepostGuard is the least time between two questions the scheduler
	// posts about one item.
	RepostGuard time.Duration `yaml:"repost_guard"`
	// ScanInterval is how often the scheduler scans.
	ScanInterval time.Duration `yaml:"scan_interval"`
}

// slackIDPattern matches Slack ids: users (U…, W…), channels (C…, G…).
var slackIDPattern = regexp.MustCompile(`^[A-Z0-9]{2,32}$`)

// Enabled reports whether Slack is configured.
func (s Slack) Enabled() bool { return s.BotToken != "" }

func defaultSlack() Slack {
	return Slack{
		MaxSkew:      slackapp.DefaultMaxSkew,
		PostRetry:    slackapp.DefaultPostRetry,
		SuggestEvery: slackapp.DefaultSuggestEvery,
		SuggestMax:   slackapp.DefaultSuggestMax,
		Clarification: Clarification{
			MaxAttempts:  clarification.DefaultMaxAttempts,
			StaleAfter:   clarification.DefaultStaleAfter,
			RepostGuard:  clarification.DefaultRepostGuard,
			ScanInterval: clarification.DefaultScanInterval,
		},
	}
}

func (s Slack) validate() error {
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
	if s.SuggestEvery < 0 || (s.SuggestEvery > 0 && s.SuggestEvery < time.Minute) || s.SuggestMax < 1 || s.SuggestMax > 50 {
		return bad("suggest_every", "suggest_every must be 0 (off) or at least 1m, and suggest_max 1 to 50")
	}
	c := s.Clarification
	if c.MaxAttempts < 1 || c.StaleAfter <= 0 || c.RepostGuard <= 0 || c.ScanInterval <= 0 {
		return bad("clarification", "max_attempts must be at least 1 and every interval positive")
	}
	if s.APIURL != "" {
		if u, err := url.Parse(s.APIURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return bad("api_url", "%q is not an http(s) URL", s.APIURL)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(s.Users)) {
		if !slackIDPattern.MatchString(id) {
			return bad("users", "%q is not a Slack user id (e.g. U012AB3CD)", id)
		}
		if s.Users[id] == "" {
			return bad("users."+id, "names no precept identity")
		}
	}
	for _, reviewer := range slices.Sorted(maps.Keys(s.Reviewers)) {
		if reviewer == "" || !slackIDPattern.MatchString(s.Reviewers[reviewer]) {
			return bad("reviewers", "%q must map a reviewer_id to a Slack user id (e.g. U012AB3CD)", reviewer)
		}
	}
	return nil
}
