package config

import (
	"fmt"
	"github.com/precept-dev/precept/lib/gitrepo"
	"time"

	"github.com/precept-dev/precept/rules"
)

// Rules configures proposals, their guards and meta-approval
// (docs/lifecycle.md).
type Rules struct {
	// RequiredApprovals is how many distinct approvers a proposal needs.
	RequiredApprovals int `yaml:"required_approvals"`
	// Approvers are the identities (API token names, mapped Slack users,
	// git committer emails) allowed to approve or reject. Empty: every
	// caller with the approver role.
	Approvers []string `yaml:"approvers"`
	// ProtectedTags are never auto-proposed and need one extra approval.
	ProtectedTags []string `yaml:"protected_tags"`
	// MaxProposalsPerAgent within ProposalWindow (the rate cap).
	MaxProposalsPerAgent int           `yaml:"max_proposals_per_agent"`
	ProposalWindow       time.Duration `yaml:"proposal_window"`
	// MaxActiveRulesPerAgent; beyond it a consolidation is proposed.
	MaxActiveRulesPerAgent int `yaml:"max_active_rules_per_agent"`
	// Reconsolidation thresholds (docs/thresholds.md) on rule-text similarity.
	DuplicateThreshold float64 `yaml:"duplicate_threshold"`
	ConflictThreshold  float64 `yaml:"conflict_threshold"`
	// RejectedSimilarity: a draft this similar to a rejected proposal is
	// not re-proposed unless its support doubled.
	RejectedSimilarity float64 `yaml:"rejected_similarity"`
	// ShadowPeriod keeps approved rules in the shadow prompt this long; 0
	// activates them at once.
	ShadowPeriod time.Duration `yaml:"shadow_period"`
	// ApprovalSLA is how long a pending proposal may wait for its
	// approvals: past it the proposal is overdue, reminded in its Slack
	// thread again one period after each reminder, and counted by
	// precept_rules_proposals_overdue (docs/lifecycle.md, "Approval
	// deadlines"). 0 turns deadlines off.
	ApprovalSLA time.Duration `yaml:"approval_sla"`
	// ProposeInterval is how often the batched proposer drafts.
	ProposeInterval time.Duration `yaml:"propose_interval"`
	Quality         Quality       `yaml:"quality"`
	Git             RulesGit      `yaml:"git"`
}

// Quality is the pre-commit quality gate (docs/thresholds.md).
type Quality struct {
	MinLength        int     `yaml:"min_length"`
	MaxLength        int     `yaml:"max_length"`
	MinSignalDensity float64 `yaml:"min_signal_density"`
	// Denylist adds phrases to the built-in denylist.
	Denylist []string `yaml:"denylist"`
}

// RulesGit configures the rules repository's remote.
type RulesGit struct {
	// RemoteURL, when set, is pushed to and fetched from.
	RemoteURL string `yaml:"remote_url"`
	// Username and Password (or token) for HTTPS; env
	// PRECEPT_GIT_PASSWORD overrides Password.
	Username string `yaml:"username"`
	Password string `yaml:"password"`
	SSHKey   string `yaml:"ssh_key"`
	// WebURL is the repository's web page, for PR / compare links
	// (e.g. https://github.com/org/rules).
	WebURL        string        `yaml:"web_url"`
	FetchInterval time.Duration `yaml:"fetch_interval"`
	// WriteThrough makes every write to the rules repository a push the
	// remote must take before the call that made it returns; a decision
	// about a proposal lands with the deletion of its branch in one
	// atomic push. Required when several nodes share the remote
	// (docs/deploy.md); without it commits are local first and synced
	// every FetchInterval.
	WriteThrough bool `yaml:"write_through"`
	// SigningKey signs every commit precept makes to the rules
	// repository, so that what a remote claims can be told from what
	// precept recorded (docs/decisions/0016-trust-model.md). At least 32
	// characters; env PRECEPT_RULES_SIGNING_KEY overrides it. Empty: a key
	// kept in <data_dir>/rules-signing.key, made at first start; replicas
	// that share no volume must be given the same key.
	SigningKey string `yaml:"signing_key"`
}

// Features switch parts of the pipeline off (docs/lifecycle.md); off means the
// earlier behaviour, nothing is lost. A key left out of the file keeps its
// default: every feature is on except Clarification.
type Features struct {
	// Proposing drafts rule proposals from generalizable clusters.
	Proposing bool `yaml:"proposing"`
	// Posting posts proposals to Slack.
	Posting bool `yaml:"posting"`
	// AutoMerge merges a proposal into main once it has its approvals.
	AutoMerge bool `yaml:"auto_merge"`
	// Clarification asks reviewers of ambiguous feedback in Slack threads.
	Clarification bool `yaml:"clarification"`
}

func defaultFeatures() Features {
	return Features{Proposing: true, Posting: true, AutoMerge: true, Clarification: false}
}

func defaultRules() Rules {
	t, q := rules.DefaultThresholds(), rules.DefaultQuality()
	return Rules{
		RequiredApprovals:      rules.DefaultRequiredApprovals,
		ProtectedTags:          rules.DefaultProtectedTags(),
		MaxProposalsPerAgent:   rules.DefaultMaxProposalsPerAgent,
		ProposalWindow:         rules.DefaultProposalWindow,
		MaxActiveRulesPerAgent: rules.DefaultMaxActiveRulesPerAgent,
		DuplicateThreshold:     t.Duplicate,
		ConflictThreshold:      t.Conflict,
		RejectedSimilarity:     t.Rejected,
		ApprovalSLA:            rules.DefaultApprovalSLA,
		ProposeInterval:        rules.DefaultProposeInterval,
		Quality:                Quality{MinLength: q.MinLength, MaxLength: q.MaxLength, MinSignalDensity: q.MinSignalDensity},
		Git:                    RulesGit{FetchInterval: rules.DefaultFetchInterval},
	}
}

func (r Rules) validate() error {
	bad := func(key, format string, args ...any) error {
		return fmt.Errorf("config: rules.%s: %s", key, fmt.Sprintf(format, args...))
	}
	if r.RequiredApprovals < 1 || r.RequiredApprovals > 10 {
		return bad("required_approvals", "%d is outside 1..10", r.RequiredApprovals)
	}
	if r.MaxProposalsPerAgent < 1 {
		return bad("max_proposals_per_agent", "must be at least 1")
	}
	if r.ProposalWindow <= 0 {
		return bad("proposal_window", "must be a positive duration")
	}
	if r.MaxActiveRulesPerAgent < 1 || r.MaxActiveRulesPerAgent > 200 {
		return bad("max_active_rules_per_agent", "%d is outside 1..200", r.MaxActiveRulesPerAgent)
	}
	if !(0 < r.ConflictThreshold && r.ConflictThreshold < r.DuplicateThreshold && r.DuplicateThreshold <= 1) {
		return bad("duplicate_threshold", "need 0 < conflict_threshold (%v) < duplicate_threshold (%v) <= 1", r.ConflictThreshold, r.DuplicateThreshold)
	}
	if r.RejectedSimilarity <= 0 || r.RejectedSimilarity > 1 {
		return bad("rejected_similarity", "%v is outside (0, 1]", r.RejectedSimilarity)
	}
	if r.ShadowPeriod < 0 {
		return bad("shadow_period", "must not be negative")
	}
	if k := r.Git.SigningKey; k != "" && len(k) < gitrepo.MinSigningKey {
		// The key itself is never echoed.
		return bad("git.signing_key", "%d characters, need at least %d", len(k), gitrepo.MinSigningKey)
	}
	if r.ApprovalSLA < 0 || (r.ApprovalSLA > 0 && r.ApprovalSLA < time.Minute) {
		return bad("approval_sla", "%v: use 0 (no deadline) or at least 1m", r.ApprovalSLA)
	}
	if r.ProposeInterval <= 0 {
		return bad("propose_interval", "must be a positive duration")
	}
	q := r.Quality
	if q.MinLength < 1 || q.MaxLength < q.MinLength {
		return bad("quality", "need 1 <= min_length <= max_length")
	}
	if q.MinSignalDensity < 0 || q.MinSignalDensity > 1 {
		return bad("quality.min_signal_density", "%v is outside [0, 1]", q.MinSignalDensity)
	}
	if r.Git.RemoteURL != "" && r.Git.FetchInterval <= 0 {
		return bad("git.fetch_interval", "must be a positive duration")
	}
	if r.Git.WriteThrough && r.Git.RemoteURL == "" {
		return bad("git.write_through", "needs rules.git.remote_url: the writes go through that remote")
	}
	return nil
}
