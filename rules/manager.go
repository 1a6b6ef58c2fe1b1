package rules

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"text/template"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/embedding"
	"github.com/precept-dev/precept/gitrepo"
)

// Options configure a Manager. The zero value means the defaults of
// DESIGN.md §5.
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
	Evidence EvidenceSource
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
	Now        func() time.Time
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// Features are the parts of the pipeline that can be switched off (seed
// 000 R29). Off means the earlier behaviour; nothing is lost.
type Features struct {
	// Proposing drafts proposals from generalizable clusters. Off, the
	// clusters keep their evidence and are drafted once it is on again.
	Proposing bool
	// AutoMerge merges a proposal into main once it has its approvals.
	// Off, such a proposal is APPROVED and waits for a person to merge it
	// in git, or for the flag to be turned on.
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

// ChangeKind says what a committed transition did.
type ChangeKind string

// The transitions OnChange reports.
const (
	ProposalCreated  ChangeKind = "proposal_created"
	ApprovalRecorded ChangeKind = "approval_recorded"
	// ProposalApproved: the proposal has its approvals (merged or not).
	ProposalApproved ChangeKind = "proposal_approved"
	// RuleMerged: the approved rule is on main.
	RuleMerged       ChangeKind = "rule_merged"
	ProposalRejected ChangeKind = "proposal_rejected"
	RuleRolledBack   ChangeKind = "rule_rolled_back"
	// RuleActivated: a SHADOW rule became ACTIVE.
	RuleActivated ChangeKind = "rule_activated"
	// EvidenceAdded: a duplicate draft's evidence went to an existing rule
	// or proposal.
	EvidenceAdded ChangeKind = "evidence_added"
	// DraftHeld: a draft was blocked by a guard or deferred by the rate cap.
	DraftHeld ChangeKind = "draft_held"
	// RemoteSynced: commits from the remote were brought into main, or
	// remote merges and branch deletions were applied.
	RemoteSynced ChangeKind = "remote_synced"
)

// Change is one committed transition.
type Change struct {
	Kind       ChangeKind
	ProposalID string
	RuleID     string
	Agents     []string
	// Commit is the commit that recorded it.
	Commit string
	// Revision is the proposal's revision after the change.
	Revision int
	// Actor is who caused it; Via is api, slack, git or precept.
	Actor string
	Via   string
	// MainChanged says whether main (and so the prompts) changed.
	MainChanged bool
}

// Manager runs the rule lifecycle on the rules repository: it drafts and
// guards proposals, records approvals and rejections, merges approved
// rules, rolls them back and keeps the repository in step with its
// remote. Every write is a compare-and-swap commit, so several Managers
// (in one process or several sharing the data directory) may work on one
// repository at once.
type Manager struct {
	repo    *gitrepo.Repo
	opts    Options
	main    string
	vecs    *vectorCache
	tmpl    *template.Template
	log     *slog.Logger
	metrics *metrics

	featMu   sync.RWMutex
	features Features

	hookMu sync.RWMutex
	hooks  []func(Change)

	mu      sync.Mutex
	cached  *state
	parsed  map[parsedKey]any
	commits map[gitrepo.Hash]gitrepo.CommitInfo
	hist    *historyIndex
	reach   *reachSet
	// creates caches, per commit, whether it added the rule it names.
	creates map[gitrepo.Hash]bool

	syncMu sync.Mutex
	// kick asks Run to push soon after a local commit.
	kick chan struct{}
	// wake asks Run to draft soon: new evidence arrived.
	wake chan struct{}
}

// New returns a Manager for the rules repository.
func New(repo *gitrepo.Repo, opts Options) (*Manager, error) {
	opts = opts.withDefaults()
	tmpl, err := parseDraftTemplate()
	if err != nil {
		return nil, err
	}
	m := &Manager{
		repo:    repo,
		opts:    opts,
		main:    opts.MainBranch,
		vecs:    newVectorCache(opts.Embedder),
		tmpl:    tmpl,
		log:     opts.Logger,
		parsed:  map[parsedKey]any{},
		commits: map[gitrepo.Hash]gitrepo.CommitInfo{},
		creates: map[gitrepo.Hash]bool{},
		kick:    make(chan struct{}, 1),
		wake:    make(chan struct{}, 1),
	}
	if m.main == "" {
		m.main = repo.DefaultBranch()
	}
	m.features = Features{Proposing: true, AutoMerge: true}
	if opts.Features != nil {
		m.features = *opts.Features
	}
	if m.metrics, err = newMetrics(opts.Registerer); err != nil {
		return nil, err
	}
	if r := opts.Remote; r != nil {
		if err := r.validate(); err != nil {
			return nil, err
		}
		m.opts.Remote = r.withDefaults()
		if err := repo.AddRemote(m.opts.Remote.Name, m.opts.Remote.URL); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// SetFeatures switches features at run time. Turning AutoMerge on makes
// the next maintenance merge every approved proposal still waiting.
func (m *Manager) SetFeatures(f Features) {
	m.featMu.Lock()
	m.features = f
	m.featMu.Unlock()
}

// Features returns the current feature switches.
func (m *Manager) Features() Features {
	m.featMu.RLock()
	defer m.featMu.RUnlock()
	return m.features
}

// OnChange registers fn to be called after every committed transition,
// in the goroutine that committed it. fn must return quickly.
func (m *Manager) OnChange(fn func(Change)) {
	m.hookMu.Lock()
	m.hooks = append(m.hooks, fn)
	m.hookMu.Unlock()
}

func (m *Manager) emit(c Change) {
	m.hookMu.RLock()
	hooks := slices.Clone(m.hooks)
	m.hookMu.RUnlock()
	for _, fn := range hooks {
		fn(c)
	}
	if m.opts.Remote != nil {
		select {
		case m.kick <- struct{}{}:
		default:
		}
	}
}

func (m *Manager) now() time.Time { return m.opts.Now().UTC().Truncate(time.Second) }

// Run drafts proposals from evidence and does maintenance every
// ProposeInterval, and with a remote syncs every fetch interval and soon
// after each local commit, until ctx is done. Failures are logged and
// retried on the next round; Run returns nil when ctx ends.
func (m *Manager) Run(ctx context.Context) error {
	propose := time.NewTicker(m.opts.ProposeInterval)
	defer propose.Stop()
	var fetch <-chan time.Time
	if r := m.opts.Remote; r != nil {
		t := time.NewTicker(r.FetchInterval)
		defer t.Stop()
		fetch = t.C
		m.syncAndLog(ctx)
	}
	m.round(ctx)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-propose.C:
			m.round(ctx)
		case <-m.wake:
			m.round(ctx)
		case <-fetch:
			m.syncAndLog(ctx)
		case <-m.kick:
			m.syncAndLog(ctx)
		}
	}
}

// Wake asks Run to draft and maintain now rather than at the next
// interval, e.g. when the evaluator found a cluster generalizable. Calls
// while a round is pending are merged into it.
func (m *Manager) Wake() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

func (m *Manager) round(ctx context.Context) {
	if _, err := m.ProposeFromEvidence(ctx); err != nil && ctx.Err() == nil {
		m.log.Warn("draft rule proposals", "err", err)
	}
	if err := m.Maintain(ctx); err != nil && ctx.Err() == nil {
		m.log.Warn("rule maintenance", "err", err)
	}
}

func (m *Manager) syncAndLog(ctx context.Context) {
	if err := m.Sync(ctx); err != nil && ctx.Err() == nil {
		m.log.Warn("sync the rules repository with its remote", "remote", m.opts.Remote.Name, "err", err)
	}
}

// Maintain finishes transitions that wait for something: proposals merged
// into main in git are turned into rules, approved proposals are merged
// when auto-merge is on (also after a crash between approval and merge),
// and shadow rules whose period ended are activated.
func (m *Manager) Maintain(ctx context.Context) error {
	var errs []error
	if err := m.convertMerged(ctx, m.main, nil); err != nil {
		errs = append(errs, err)
	}
	if m.Features().AutoMerge {
		if err := m.mergeApproved(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if err := m.activateShadowRules(ctx); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// mayDecide reports whether who may approve or reject through the API or
// Slack.
func (m *Manager) mayDecide(who string) error {
	if who == "" {
		return precept.Errorf(precept.PermissionDenied, "an approver identity is required")
	}
	if len(m.opts.Approvers) > 0 && !slices.Contains(m.opts.Approvers, who) {
		return precept.Errorf(precept.PermissionDenied, "%s is not on the approver list (rules.approvers)", who)
	}
	return nil
}

func checkProposalID(id string) error {
	if !ValidProposalID(id) {
		return precept.Errorf(precept.Invalid, "proposal_id: %q is not a proposal id (p-…)", clipRunes(id, 64))
	}
	return nil
}
