package app

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/precept-dev/precept/clarification"
	"github.com/precept-dev/precept/internal/slackapp"
)

// slackAPITimeout bounds one call to Slack's Web API.
const slackAPITimeout = 15 * time.Second

// slackKeyPrefix is where the Slack app keeps what replicas share in
// Redis and may lose: signatures and events seen, claims, where
// proposals were posted.
const slackKeyPrefix = "precept:slack:"

// openSlack builds the Slack app when slack is configured (bot token,
// signing secret, channel): it mounts Slack's interactivity and Events
// API endpoints on the API port, follows the rule manager's changes (so
// decisions made anywhere update the messages) and the evaluator's (so
// ambiguous decisions are asked about, through the clarification domain
// over the feedback store). Run runs its loops (runSlack).
func (a *App) openSlack() error {
	cfg := a.Config.Slack
	if !cfg.Enabled() {
		return nil
	}
	if a.Rules == nil {
		return errors.New("slack: the rule manager must be opened first")
	}
	opts := []slack.Option{slack.OptionHTTPClient(&http.Client{Timeout: slackAPITimeout})}
	if cfg.APIURL != "" {
		opts = append(opts, slack.OptionAPIURL(strings.TrimSuffix(cfg.APIURL, "/")+"/"))
	}
	// Clarification applies replies through the evaluator, so it runs
	// only where the evaluator does.
	var clar slackapp.Clarifications
	if a.Evaluator != nil && a.Config.Evaluator.Enabled {
		clar = clarification.New(a.Feedback, a.Evaluator, clarification.Options{
			MaxAttempts: cfg.Clarification.MaxAttempts,
			StaleAfter:  cfg.Clarification.StaleAfter,
			RepostGuard: cfg.Clarification.RepostGuard,
		}, a.Log.With("component", "clarification"))
	}
	features := a.Config.Features
	svc, err := slackapp.New(slack.New(cfg.BotToken, opts...), a.Rules, a.Posts, clar, slackapp.NewRedisStore(a.Redis, slackKeyPrefix), slackapp.Options{
		Channel:       cfg.Channel,
		SigningSecret: cfg.SigningSecret,
		Users:         cfg.Users,
		Reviewers:     cfg.Reviewers,
		MaxSkew:       cfg.MaxSkew,
		PostRetry:     cfg.PostRetry,
		ScanInterval:  cfg.Clarification.ScanInterval,
		Features:      &slackapp.Features{Posting: features.Posting, Clarification: features.Clarification},
		Logger:        a.Log.With("component", "slack"),
		Registerer:    a.Registry,
	})
	if err != nil {
		return err
	}
	a.Slack = svc
	a.Handle("/slack/interactions", svc.Interactions())
	a.Handle("/slack/events", svc.Events())
	a.Rules.OnChange(svc.RuleChanged)
	a.OnEvaluatorChange(svc.EvaluatorChanged)
	if approvers := a.Config.Rules.Approvers; len(approvers) > 0 {
		for user, identity := range cfg.Users {
			if !slices.Contains(approvers, identity) {
				a.Log.Warn("a Slack user is mapped to an identity that is not on rules.approvers: their decisions will be refused",
					"slack_user", user, "identity", identity)
			}
		}
	}
	a.Log.Info("slack app ready", "channel", cfg.Channel, "posting", features.Posting, "clarification", features.Clarification,
		"mapped_users", len(cfg.Users), "interactions", "/slack/interactions", "events", "/slack/events")
	return nil
}

// runSlack runs the Slack app's loops (posting with retries, the
// clarification scheduler) until ctx is done; without Slack it returns.
func (a *App) runSlack(ctx context.Context) error {
	if a.Slack == nil {
		return nil
	}
	return a.Slack.Run(ctx)
}
