package rules

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/precept-dev/precept/lib/gitrepo"
	"github.com/precept-dev/precept/rules/gitstore"
	"github.com/precept-dev/precept/rules/rulefmt"
)

// Manager runs the rule lifecycle on the rules repository: it drafts and
// guards proposals, records approvals and rejections, merges approved
// rules, rolls them back and keeps the repository in step with its
// remote. It is the top of the rules packages' layers
// (docs/architecture.md): each of its operations reads the state from
// the store, asks the policy, and commits the outcome through the store
// (gitstore.Store).
// Every write is a compare-and-swap commit, so several Managers (in one
// process or several sharing the data directory) may work on one
// repository at once.
type Manager struct {
	recorder
	policy   policy
	opts     Options
	features Features
	// remote syncs with the remote; nil without one.
	remote *syncer
	// upkeep shares the recorder: the learning loop's operations.
	upkeep *Upkeep

	// wake asks Run to draft soon: new evidence arrived.
	wake chan struct{}
	// ignored are the remote changes precept did not take (trust.go).
	ignored *ignoredLog
}

// New returns a Manager for the rules repository.
func New(repo *gitrepo.Repo, opts Options) (*Manager, error) {
	opts = opts.withDefaults()
	pol, err := newPolicy(opts)
	if err != nil {
		return nil, err
	}
	main := opts.MainBranch
	if main == "" {
		main = repo.DefaultBranch()
	}
	notify := &notifier{}
	if opts.Remote != nil {
		// kick asks Run to push soon after a local commit.
		notify.kick = make(chan struct{}, 1)
	}
	m := &Manager{
		recorder: recorder{
			store: gitstore.NewStore(repo, main, opts.Logger), remoteOpts: opts.Remote,
			clock: opts.Now, log: opts.Logger, notify: notify,
		},
		policy:   pol,
		opts:     opts,
		features: Features{Proposing: true, AutoMerge: true},
		wake:     make(chan struct{}, 1),
		ignored:  &ignoredLog{},
	}
	if opts.Features != nil {
		m.features = *opts.Features
	}
	if r := opts.Remote; r != nil {
		if err := r.validate(); err != nil {
			return nil, err
		}
		r = r.withDefaults()
		m.opts.Remote, m.remoteOpts = r, r
		if err := repo.AddRemote(r.Name, r.URL); err != nil {
			return nil, err
		}
		m.remote = &syncer{m: m, store: m.store, r: r}
		if r.WriteThrough {
			m.store.Through(gitrepo.NewUpstream(repo, r.Name, r.Auth, gitrepo.UpstreamOptions{
				Accept: m.remote.acceptTip,
				// A proposal branch is made by Create; one the remote
				// lacks was consumed by a decision.
				MustExist: func(b string) bool { return strings.HasPrefix(b, rulefmt.BranchPrefix) },
			}))
		}
	}
	m.upkeep = &Upkeep{rec: m.recorder, requiredApprovals: m.opts.RequiredApprovals}
	return m, nil
}

// Features returns the feature switches the Manager runs with.
func (m *Manager) Features() Features { return m.features }

// OnChange registers fn to be called after every committed transition,
// in the goroutine that committed it. fn must return quickly.
func (m *Manager) OnChange(fn func(rulefmt.Change)) { m.notify.add(fn) }

// Upkeep returns the operations of the learning loop on approved rules,
// sharing the Manager's store and listeners.
func (m *Manager) Upkeep() *Upkeep { return m.upkeep }

// Run drafts proposals from evidence and does maintenance every
// ProposeInterval, and with a remote syncs every fetch interval and soon
// after each local commit, until ctx is done. Failures are logged and
// retried on the next round; Run returns nil when ctx ends.
func (m *Manager) Run(ctx context.Context) error {
	propose := time.NewTicker(m.opts.ProposeInterval)
	defer propose.Stop()
	var fetch <-chan time.Time
	var refetch <-chan struct{}
	if m.remote != nil {
		t := time.NewTicker(m.remote.r.FetchInterval)
		defer t.Stop()
		fetch, refetch = t.C, m.remote.r.Refetch
		m.remote.syncAndLog(ctx)
	}
	took := m.timedRound(ctx)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-propose.C:
			took = m.timedRound(ctx)
		case <-m.wake:
			// While decisions keep arriving every round wakes the next: a
			// pause as long as the last round keeps drafting to half the
			// time, leaving the rest to ingestion and evaluation.
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(max(took, minWakeGap)):
			}
			took = m.timedRound(ctx)
		case <-fetch:
			m.remote.syncAndLog(ctx)
		case <-refetch:
			m.remote.syncAndLog(ctx)
		case <-m.notify.kick:
			m.remote.syncAndLog(ctx)
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

// minWakeGap is the least pause before a round a wake asked for.
const minWakeGap = 100 * time.Millisecond

// timedRound runs a round and returns how long it took.
func (m *Manager) timedRound(ctx context.Context) time.Duration {
	start := time.Now()
	m.round(ctx)
	return time.Since(start)
}

func (m *Manager) round(ctx context.Context) {
	if _, err := m.ProposeFromEvidence(ctx); err != nil && ctx.Err() == nil {
		m.log.Warn("draft rule proposals", "err", err)
	}
	if err := m.Maintain(ctx); err != nil && ctx.Err() == nil {
		m.log.Warn("rule maintenance", "err", err)
	}
}

// Maintain finishes transitions that wait for something: proposals merged
// into main in git are turned into rules, approved proposals are merged
// when auto-merge is on (also after a crash between approval and merge),
// and shadow rules whose period ended are activated.
func (m *Manager) Maintain(ctx context.Context) error {
	var errs []error
	if err := m.convertMerged(ctx, nil); err != nil {
		errs = append(errs, err)
	}
	if m.features.AutoMerge {
		if err := m.mergeApproved(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if err := m.activateShadowRules(ctx); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Sync brings the local repository and its remote in step
// (docs/lifecycle.md): it applies what people did on the remote — a
// proposal merged into the remote's main is approved by the merge's
// committer and becomes a rule, a proposal branch deleted without being
// merged is rejected — brings the remote's main (e.g. a curator's
// _rules.md) into the local one, follows proposal branches created or
// advanced by other replicas, and pushes main, Remote.Branches and the
// open proposal branches, deleting the remote branches of rejected
// proposals. Without a remote it does nothing.
func (m *Manager) Sync(ctx context.Context) error {
	if m.remote == nil {
		return nil
	}
	return m.remote.sync(ctx)
}

func errOr(err, otherwise error) error {
	if err != nil {
		return err
	}
	return otherwise
}
