package app

import (
	"cmp"
	"context"
	"errors"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/clarification"
	"github.com/precept-dev/precept/evaluator"
	"github.com/precept-dev/precept/internal/config"
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
		Roles:         slackRoles(a.Config),
		Reviewers:     cfg.Reviewers,
		MaxSkew:       cfg.MaxSkew,
		PostRetry:     cfg.PostRetry,
		SuggestEvery:  cmp.Or(cfg.SuggestEvery, -1), // 0 in the config: post none
		SuggestMax:    cfg.SuggestMax,
		ScanInterval:  cfg.Clarification.ScanInterval,
		ApprovalSLA:   cmp.Or(a.Config.Rules.ApprovalSLA, -1), // 0 in the config: no reminders
		Approvers:     a.Config.Rules.Approvers,
		Features:      &slackapp.Features{Posting: features.Posting, Clarification: features.Clarification},
		Impact:        impactSummaries(a.Impact),
		Logger:        a.Log.With("component", "slack"),
		Registerer:    a.Registry,
	})
	if err != nil {
		return err
	}
	a.Slack = svc
	// Merge suggestions come from the evaluator's clusters, so they are
	// posted and answered only where the evaluator runs.
	if a.Evaluator != nil && a.Config.Evaluator.Enabled {
		svc.SetCuration(curation{ev: a.Evaluator, rec: correctionRecorder{record: a.Feedback.RecordCorrection}})
	}
	a.Handle("/slack/interactions", svc.Interactions())
	a.Handle("/slack/events", svc.Events())
	a.Rules.OnChange(svc.RuleChanged)
	a.OnEvaluatorChange(svc.EvaluatorChanged)

	a.warnSlackNonApprovers()
	a.Log.Info("slack app ready", "channel", cfg.Channel, "posting", features.Posting, "clarification", features.Clarification,
		"mapped_users", len(cfg.Users), "interactions", "/slack/interactions", "events", "/slack/events")
	return nil
}

// slackRoles gives each identity slack.users maps to the role the API
// would give it (docs/lifecycle.md, "Slack"): the role of its token in
// auth.tokens, none without one. Without any tokens every API caller is
// the local admin, but Slack users are not local callers: only the
// identities rules.approvers names explicitly are approvers then.
func slackRoles(cfg config.Config) map[string]precept.Role {
	roles := map[string]precept.Role{}
	if len(cfg.Auth.Tokens) == 0 {
		for _, name := range cfg.Rules.Approvers {
			roles[name] = precept.RoleApprover
		}
		return roles
	}
	for _, t := range cfg.Auth.Tokens {
		if r, err := precept.ParseRole(t.Role); err == nil {
			roles[t.Name] = r
		}
	}
	return roles
}

// warnSlackNonApprovers warns about each Slack user whose decisions will
// be refused: mapped to an identity without the approver role, or not on
// rules.approvers.
func (a *App) warnSlackNonApprovers() {
	cfg := a.Config
	roles := slackRoles(cfg)
	for _, user := range slices.Sorted(maps.Keys(cfg.Slack.Users)) {
		identity := cfg.Slack.Users[user]
		id := precept.Identity{Name: identity, Role: roles[identity]}
		switch {
		case id.Allows(slackapp.DecisionRole) && len(cfg.Rules.Approvers) > 0 && !slices.Contains(cfg.Rules.Approvers, identity):
			a.Log.Warn("a Slack user is mapped to an identity that is not on rules.approvers: their decisions will be refused",
				"slack_user", user, "identity", identity)
		case id.Allows(slackapp.DecisionRole):
		case len(cfg.Auth.Tokens) == 0:
			a.Log.Warn("Slack user mapped to an identity that may not approve: without auth.tokens only identities on rules.approvers decide in Slack",
				"slack_user", user, "identity", identity)
		default:
			a.Log.Warn("Slack user mapped to an identity that may not approve: its token in auth.tokens lacks the approver role, so its decisions will be refused",
				"slack_user", user, "identity", identity, "role", id.Role.String())
		}
	}
}

// runSlack runs the Slack app's loops (posting with retries, the
// clarification scheduler) until ctx is done; without Slack it returns.
func (a *App) runSlack(ctx context.Context) error {
	if a.Slack == nil {
		return nil
	}
	return a.Slack.Run(ctx)
}

// curation is what the Slack app needs of the evaluator to suggest
// merges and record the answers: a correction is checked and recorded
// exactly as CorrectClusters does over the API.
type curation struct {
	ev  *evaluator.Service
	rec correctionRecorder
}

func (c curation) SuggestMerges(ctx context.Context, limit int) ([]evaluator.Suggestion, error) {
	return c.ev.SuggestMerges(ctx, limit)
}

func (c curation) Cluster(ctx context.Context, id string) (evaluator.ClusterView, error) {
	return c.ev.Cluster(ctx, id)
}

func (c curation) Correct(ctx context.Context, corr evaluator.Correction) (evaluator.Correction, error) {
	resolved, err := c.ev.CheckCorrection(ctx, corr)
	if err != nil {
		return evaluator.Correction{}, err
	}
	return c.rec.RecordCorrection(ctx, resolved)
}
