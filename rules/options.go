package rules

import (
	"errors"
	"log/slog"
	"time"

	"github.com/precept-dev/precept/lib/embedding"
	"github.com/precept-dev/precept/lib/gitrepo"
	"github.com/precept-dev/precept/rules/rulefmt"
)

// Options configure a Manager. The zero value means the defaults
// (docs/thresholds.md).
type Options struct {
	// RequiredApprovals is how many distinct approvers a proposal needs;
	// default 2. A proposal touching a protected tag needs one more.
	RequiredApprovals int
	// Approvers may approve and reject through the API and Slack; empty
	// means anyone the caller's role allows. Merges in git are accepted
	// from any committer: the git host's branch protection decides there.
	Approvers []string
	// ProtectedTags are never auto-proposed; default security,
	// correctness, compliance.
	ProtectedTags []string
	// MaxProposalsPerAgent drafted within ProposalWindow (the rate cap);
	// defaults 3 and 8h.
	MaxProposalsPerAgent int
	ProposalWindow       time.Duration
	// MaxActiveRulesPerAgent, beyond which a consolidation is proposed
	// instead of a new rule; default 20.
	MaxActiveRulesPerAgent int
	// Thresholds of the similarity guards.
	Thresholds Thresholds
	// Quality is the pre-commit quality gate.
	Quality Quality
	// ShadowPeriod keeps approved rules in SHADOW this long; 0 activates
	// them at once.
	ShadowPeriod time.Duration
	// ProposeInterval is how often Run drafts from evidence and does
	// maintenance; default 30s.
	ProposeInterval time.Duration
	// Features switch proposing and auto-merging off; nil means both on.
	Features *Features
	// Evidence supplies generalizable clusters; nil means only manual
	// proposals.
	Evidence rulefmt.EvidenceSource
	// LLM drafts rule text when set; otherwise drafts are extractive.
	LLM LLM
	// LLMTimeout bounds one drafting call; default 20s.
	LLMTimeout time.Duration
	// Embedder compares rule texts; default the local embedder.
	Embedder embedding.Embedder
	// Remote, when set, is pushed to and fetched from.
	Remote *Remote
	// MainBranch defaults to the repository's default branch.
	MainBranch string
	// Now is the clock; default time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// Features are the parts of the pipeline that can be switched off
// (docs/lifecycle.md). Off means the earlier behaviour; nothing is lost.
type Features struct {
	// Proposing drafts proposals from generalizable clusters. Off, the
	// clusters keep their evidence and are drafted once it is on again.
	Proposing bool
	// AutoMerge merges a proposal into main once it has its approvals.
	// Off, such a proposal is APPROVED and waits for a person to merge it
	// in git, or for a restart with the flag on.
	AutoMerge bool
}

// The defaults of Options. Configuration (internal/config) starts from
// these, so each is written once.
const (
	// DefaultRequiredApprovals: two distinct people agree before a rule
	// reaches a prompt.
	DefaultRequiredApprovals = 2
	// DefaultMaxProposalsPerAgent drafted within DefaultProposalWindow:
	// reviewers are not flooded with rule PRs for one agent.
	DefaultMaxProposalsPerAgent = 3
	DefaultProposalWindow       = 8 * time.Hour
	// DefaultMaxActiveRulesPerAgent bounds what a prompt carries.
	DefaultMaxActiveRulesPerAgent = 20
	DefaultProposeInterval        = 30 * time.Second
	DefaultLLMTimeout             = 20 * time.Second
)

// DefaultProtectedTags are the checks a learned rule must never weaken
// without an extra approval.
func DefaultProtectedTags() []string { return []string{"security", "correctness", "compliance"} }

func (o Options) withDefaults() Options {
	if o.RequiredApprovals <= 0 {
		o.RequiredApprovals = DefaultRequiredApprovals
	}
	if o.ProtectedTags == nil {
		o.ProtectedTags = DefaultProtectedTags()
	}
	if o.MaxProposalsPerAgent <= 0 {
		o.MaxProposalsPerAgent = DefaultMaxProposalsPerAgent
	}
	if o.ProposalWindow <= 0 {
		o.ProposalWindow = DefaultProposalWindow
	}
	if o.MaxActiveRulesPerAgent <= 0 {
		o.MaxActiveRulesPerAgent = DefaultMaxActiveRulesPerAgent
	}
	o.Thresholds = o.Thresholds.withDefaults()
	o.Quality = o.Quality.withDefaults()
	if o.ProposeInterval <= 0 {
		o.ProposeInterval = DefaultProposeInterval
	}
	if o.LLMTimeout <= 0 {
		o.LLMTimeout = DefaultLLMTimeout
	}
	if o.Embedder == nil {
		o.Embedder = embedding.NewLocal(embedding.LocalOptions{})
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Remote is the rules repository's remote: reviewers open PRs from the
// proposal branches precept pushes, and merges and branch deletions there
// are decisions.
type Remote struct {
	// Name defaults to "origin".
	Name string
	// URL is required.
	URL  string
	Auth gitrepo.Auth
	// WebURL is the repository's web page, for compare / PR links.
	WebURL string
	// FetchInterval defaults to 30s.
	FetchInterval time.Duration
	// Branches are further branches of the repository kept in step with
	// the remote like main (fetched, fast-forwarded or merged, pushed),
	// e.g. the Slack app's post records.
	Branches []string
	// WriteThrough makes every write of the Manager a push the remote
	// must take before the call returns: proposals, approvals, decisions,
	// rollbacks and lifecycle changes. A decision about a proposal lands
	// together with the deletion of the proposal's branch at the tip it
	// read, in one atomic push, so nodes sharing the remote never both
	// decide about one proposal. Without it commits are local first and
	// the remote is synced every FetchInterval (docs/decisions/0009-replicas.md).
	WriteThrough bool
	// Refetch, when set, asks Run to sync at once each time a value
	// arrives: a notice that another node moved the remote, so that its
	// decisions reach this node's prompts without waiting for the next
	// FetchInterval (docs/deploy.md, "How decisions reach every node").
	Refetch <-chan struct{}
}

func (r *Remote) validate() error {
	if r.URL == "" {
		return errors.New("rules remote: URL is required")
	}
	return nil
}

// DefaultFetchInterval is how often the remote is fetched by default.
const DefaultFetchInterval = 30 * time.Second

func (r *Remote) withDefaults() *Remote {
	c := *r
	if c.Name == "" {
		c.Name = "origin"
	}
	if c.FetchInterval <= 0 {
		c.FetchInterval = DefaultFetchInterval
	}
	return &c
}
