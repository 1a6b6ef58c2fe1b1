package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/precept-dev/precept/evaluator"
	"github.com/precept-dev/precept/feedbackstore"
	"github.com/precept-dev/precept/gen/precept/v1/preceptv1connect"
	"github.com/precept-dev/precept/internal/api"
	"github.com/precept-dev/precept/internal/config"
	"github.com/precept-dev/precept/internal/metrics"
	"github.com/precept-dev/precept/internal/slackapp"
	"github.com/precept-dev/precept/lib/gitcli"
	"github.com/precept-dev/precept/lib/gitrepo"
	"github.com/precept-dev/precept/prompts"
	"github.com/precept-dev/precept/rules"
	"github.com/precept-dev/precept/rules/rulefmt"
)

// openRules starts the rule manager on the rules repository and serves
// RuleService. The evaluator's generalizable clusters are its evidence
// (and wake it when they change), the configured LLM drafts rule text,
// and every commit to main notifies prompt assembly at once. Run runs it
// (App.Rules.Run).
func (a *App) openRules(ctx context.Context) error {
	cfg := a.Config.Rules
	opts := rules.Options{
		RequiredApprovals:      cfg.RequiredApprovals,
		Approvers:              cfg.Approvers,
		ProtectedTags:          cfg.ProtectedTags,
		MaxProposalsPerAgent:   cfg.MaxProposalsPerAgent,
		ProposalWindow:         cfg.ProposalWindow,
		MaxActiveRulesPerAgent: cfg.MaxActiveRulesPerAgent,
		Thresholds:             a.ruleThresholds(),
		Quality: rules.Quality{
			MinLength: cfg.Quality.MinLength, MaxLength: cfg.Quality.MaxLength,
			MinSignalDensity: cfg.Quality.MinSignalDensity, Denylist: cfg.Quality.Denylist,
		},
		ShadowPeriod:    cfg.ShadowPeriod,
		ProposeInterval: cfg.ProposeInterval,
		Features:        &rules.Features{Proposing: a.Config.Features.Proposing, AutoMerge: a.Config.Features.AutoMerge},
		LLMTimeout:      a.Config.Evaluator.LLM.Timeout,
		Embedder:        a.Embedder,
		MainBranch:      a.RulesRepo.DefaultBranch(),
		Logger:          a.Log.With("component", "rules"),
	}
	if a.Evaluator != nil {
		ev := a.Evaluator
		opts.Evidence = rulefmt.EvidenceFuncs{
			All: func(ctx context.Context) ([]rulefmt.Evidence, error) { return ev.Evidence(ctx) },
			One: func(ctx context.Context, id string) (rulefmt.Evidence, bool, error) {
				evs, err := ev.Evidence(ctx, id)
				if err != nil || len(evs) == 0 {
					return rulefmt.Evidence{}, false, err
				}
				return evs[0], true, nil
			},
			List: func(context.Context) ([]rulefmt.ClusterRef, error) { return evaluator.GeneralizableClusters(ev), nil },
			Some: func(ctx context.Context, ids []string) ([]rulefmt.Evidence, error) { return ev.Evidence(ctx, ids...) },
		}
	}
	if a.LLM != nil {
		opts.LLM = a.LLM
	}
	if g := cfg.Git; g.RemoteURL != "" {
		opts.Remote = &rules.Remote{
			Name:          rulesRemote,
			URL:           g.RemoteURL,
			Auth:          rulesAuth(g),
			WebURL:        g.WebURL,
			FetchInterval: g.FetchInterval,
			// The Slack app's post records travel with the rules.
			Branches:     []string{slackapp.PostBranch, prompts.VersionBranch},
			WriteThrough: g.WriteThrough,
		}
		if g.WriteThrough {
			a.rulesNotice = newRulesNotice(a.Redis, a.Config.Redis.Stream, a.Log.With("component", "rules"))
			opts.Remote.Refetch = a.rulesNotice.refetch
		}
	}
	m, err := rules.New(a.RulesRepo, opts)
	if err != nil {
		return fmt.Errorf("rules: %w", err)
	}
	if opts.Remote != nil {
		if err := checkAtomicPush(ctx, opts.Remote, a.Log); err != nil {
			return err
		}
	}
	a.Rules = m
	if err := metrics.Rules(a.Registry, m, a.Log); err != nil {
		return fmt.Errorf("rules metrics: %w", err)
	}
	if err := metrics.RemoteSyncs(a.Registry, m); err != nil {
		return fmt.Errorf("rules metrics: %w", err)
	}
	if err := metrics.ApprovalDeadline(a.Registry, m, cfg.ApprovalSLA, nil, a.Log); err != nil {
		return fmt.Errorf("rules metrics: %w", err)
	}
	m.OnChange(func(c rulefmt.Change) {
		if c.MainChanged && a.Prompts != nil {
			a.Prompts.Notify()
		}
	})
	if a.rulesNotice != nil {
		m.OnChange(a.rulesNotice.changed)
	}
	if a.Evaluator != nil {
		a.OnEvaluatorChange(func(c evaluator.Change) {
			if len(c.GeneralizableClusters) > 0 {
				m.Wake()
			}
		})
	}
	a.Posts = slackapp.NewPosts(a.RulesRepo, m, nil, a.Log.With("component", "slack"))
	if up := rulesUpstream(a.RulesRepo, a.Config.Rules.Git); up != nil {
		a.Posts.WriteThrough(up)
	}
	svc := &api.RuleService{Rules: m, Posts: a.Posts, Retired: m.Upkeep().Retired, Log: a.Log}
	if err := a.openImpact(svc); err != nil {
		return fmt.Errorf("impact: %w", err)
	}
	a.Handle(preceptv1connect.NewRuleServiceHandler(svc, a.ConnectOptions()...))
	return nil
}

// ruleThresholds are the configured similarity bands.
func (a *App) ruleThresholds() rules.Thresholds {
	cfg := a.Config.Rules
	return rules.Thresholds{Duplicate: cfg.DuplicateThreshold, Conflict: cfg.ConflictThreshold, Rejected: cfg.RejectedSimilarity}
}

// atomicCheckTimeout bounds the start's question to the rules remote.
const atomicCheckTimeout = 15 * time.Second

// checkAtomicPush refuses a rules remote that does not offer atomic
// pushes: a decision moves main and its proposal branch together, and
// only an atomic push lets exactly one of two racing nodes land it
// (docs/decisions/0009-replicas.md). A remote that cannot be reached at
// start does not stop it, as prompts are served from what the node has;
// every push of several refs asks again first.
func checkAtomicPush(ctx context.Context, r *rules.Remote, log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, atomicCheckTimeout)
	defer cancel()
	err := gitrepo.CheckAtomicPush(ctx, r.URL, r.Auth)
	switch {
	case errors.Is(err, gitrepo.ErrNoAtomicPush):
		return fmt.Errorf("rules.git.remote_url: %w; precept needs it so that a decision moving main and a proposal branch lands whole or not at all", err)
	case err != nil:
		log.Warn("rules remote not reachable at start; its atomic push capability is asked before each push", "remote", gitcli.RedactURL(r.URL), "err", err)
	}
	return nil
}

// rulesUpstream is the remote the records kept on their own branches of
// the rules repository (Slack posts, prompt versions) are written through
// with rules.git.write_through, nil otherwise. The rule manager writes its
// own branches through the remote itself (rules.Remote.WriteThrough).
func rulesUpstream(repo *gitrepo.Repo, g config.RulesGit) *gitrepo.Upstream {
	if g.RemoteURL == "" || !g.WriteThrough {
		return nil
	}
	return gitrepo.NewUpstream(repo, rulesRemote, rulesAuth(g), gitrepo.UpstreamOptions{})
}

// rulesRemote is the name the rules repository knows its remote by.
const rulesRemote = "origin"

// rulesAuth is the rules remote's credentials.
func rulesAuth(g config.RulesGit) gitrepo.Auth {
	return gitrepo.Auth{Username: g.Username, Password: g.Password, SSHKeyPath: g.SSHKey}
}

// feedbackRemote is the name the feedback repository knows its remote by.
const feedbackRemote = "origin"

// nodeBranch is the branch this node stores its decisions on, empty when
// it stores them on main (no remote, or feedback.git.branch_per_node
// off).
func nodeBranch(cfg config.Config) string {
	if cfg.Feedback.Git.RemoteURL == "" || !cfg.Feedback.Git.BranchPerNode {
		return ""
	}
	return feedbackstore.NodeBranchPrefix + cfg.NodeName()
}

// feedbackUpstream is the remote every write to the feedback repository
// goes through, nil without feedback.git.remote_url.
func feedbackUpstream(repo *gitrepo.Repo, g config.FeedbackGit) (*gitrepo.Upstream, error) {
	if g.RemoteURL == "" {
		return nil, nil
	}
	if err := repo.AddRemote(feedbackRemote, g.RemoteURL); err != nil {
		return nil, fmt.Errorf("feedback.git.remote_url: %w", err)
	}
	auth := gitrepo.Auth{Username: g.Username, Password: g.Password, SSHKeyPath: g.SSHKey}
	return gitrepo.NewUpstream(repo, feedbackRemote, auth, gitrepo.UpstreamOptions{}), nil
}
