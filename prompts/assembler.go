package prompts

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/lib/gitrepo"
)

// The defaults of Options. Configuration (internal/config) starts from
// these, so each is written once.
const (
	// DefaultBranch is the branch prompts come from.
	DefaultBranch = "main"
	// DefaultMaxRules bounds the learned rules in one prompt
	// (docs/thresholds.md).
	DefaultMaxRules = 20
	// DefaultPollInterval is how often changes pushed to the rules
	// repository from outside are looked for.
	DefaultPollInterval = 250 * time.Millisecond
	// DefaultCacheSize bounds the assembled prompts kept per commit.
	DefaultCacheSize = 4096
)

// Options configure an Assembler. The zero value means the defaults.
type Options struct {
	// Branch is the branch prompts come from; default DefaultBranch.
	Branch string
	// MaxRules bounds the learned rules in one prompt; default
	// DefaultMaxRules.
	MaxRules int
	// PollInterval is how often Run checks the branch for commits made
	// outside this process; default DefaultPollInterval. Notify makes Run
	// check at once.
	PollInterval time.Duration
	// CacheSize bounds the assembled prompts kept per commit; default
	// DefaultCacheSize.
	CacheSize int
	// Logger receives refresh failures and unusable files; default none.
	Logger *slog.Logger
	// Denylist adds phrases to the built-in denylist rules and _rules.md
	// files are checked against (rules.quality.denylist, as the quality
	// gate uses it).
	Denylist []string
	// OnAssembled sees every prompt assembled for a request that was not
	// answered from the cache, e.g. to record its version (Versions).
	OnAssembled func(Request, *Prompt)
}

func (o Options) withDefaults() Options {
	if o.Branch == "" {
		o.Branch = DefaultBranch
	}
	if o.MaxRules <= 0 {
		o.MaxRules = DefaultMaxRules
	}
	if o.PollInterval <= 0 {
		o.PollInterval = DefaultPollInterval
	}
	if o.CacheSize <= 0 {
		o.CacheSize = DefaultCacheSize
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Assembler builds prompts from the rules repository and keeps them
// current. Its methods are safe for concurrent use.
type Assembler struct {
	repo Repo
	opts Options
	log  *slog.Logger

	// state is the index of the commit prompts are built from.
	state atomic.Pointer[index]

	// refreshMu serialises refreshes; loader belongs to it.
	refreshMu sync.Mutex
	loader    loader

	notify   chan struct{}
	stopped  chan struct{}
	stopOnce sync.Once

	// rebuilt holds texts of past versions Rebuild assembled.
	rebuilt *textLRU

	hits, misses, rebuilds, refreshErrors atomic.Uint64
	watchers                              atomic.Int64
}

// New returns an Assembler serving the branch's current commit. Call Run
// to follow later commits.
func New(repo Repo, opts Options) (*Assembler, error) {
	opts = opts.withDefaults()
	a := &Assembler{
		repo:    repo,
		opts:    opts,
		log:     opts.Logger,
		notify:  make(chan struct{}, 1),
		stopped: make(chan struct{}),
		rebuilt: newTextLRU(rebuiltTexts),
	}
	a.loader = loader{repo: repo, cacheSize: opts.CacheSize, denylist: opts.Denylist, warn: func(path, problem string) {
		a.log.Warn("rules repository file left out of prompts", "path", path, "problem", problem)
	}}
	if _, err := a.Refresh(context.Background()); err != nil {
		return nil, fmt.Errorf("open prompts: %w", err)
	}
	return a, nil
}

// Build returns the prompt for a request. A repeated request is answered
// from memory without reading git or allocating.
func (a *Assembler) Build(ctx context.Context, req Request) (*Prompt, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	return a.build(a.state.Load(), req)
}

// build assembles (or finds in the cache) the prompt for a validated
// request from ix.
func (a *Assembler) build(ix *index, req Request) (*Prompt, error) {
	key := cacheKey{agent: req.Agent, stage: req.Stage, dir: scopeDir(req.ScopePath)}
	if req.BasePrompt != nil {
		key.base, key.hasBase = *req.BasePrompt, true
	}
	if e, ok := ix.cache.get(key); ok {
		a.hits.Add(1)
		return e.prompt, e.err
	}
	a.misses.Add(1)
	p, err := ix.assemble(req, key.dir, a.opts.MaxRules)
	if err == nil && a.opts.OnAssembled != nil {
		a.opts.OnAssembled(req, p)
	}
	if len(key.base) <= maxCachedBase {
		ix.cache.put(key, cacheEntry{prompt: p, err: err})
	}
	return p, err
}

// Notify asks Run to look at the branch now instead of at its next poll.
// The rule manager calls it after each commit, so approvals reach
// watchers at once. It never blocks.
func (a *Assembler) Notify() {
	select {
	case a.notify <- struct{}{}:
	default:
	}
}

// Refresh reads the branch tip and, when it moved, builds the index of
// the new commit (reading only changed files), swaps it in and wakes the
// watchers. It reports whether the tip moved.
func (a *Assembler) Refresh(ctx context.Context) (bool, error) {
	a.refreshMu.Lock()
	defer a.refreshMu.Unlock()
	if err := ctx.Err(); err != nil {
		return false, err
	}
	tip, err := a.repo.Tip(a.opts.Branch)
	if errors.Is(err, gitrepo.ErrNotFound) {
		tip, err = gitrepo.ZeroHash, nil
	}
	if err != nil {
		a.refreshErrors.Add(1)
		return false, fmt.Errorf("read %s: %w", a.opts.Branch, err)
	}
	old := a.state.Load()
	if old != nil && old.commit == tip {
		return false, nil
	}
	ix, err := a.loader.load(tip)
	if err != nil {
		a.refreshErrors.Add(1)
		return false, err
	}
	a.state.Store(ix)
	a.rebuilds.Add(1)
	if old != nil {
		close(old.changed)
	}
	a.log.Debug("prompts follow a new commit", "branch", a.opts.Branch, "commit", commitString(ix))
	return true, nil
}

// Run follows the branch until ctx is done: it refreshes every
// PollInterval and whenever Notify is called. When Run returns, watchers
// end with an Unavailable error so clients reconnect elsewhere.
func (a *Assembler) Run(ctx context.Context) error {
	defer a.stopOnce.Do(func() { close(a.stopped) })
	t := time.NewTicker(a.opts.PollInterval)
	defer t.Stop()
	failing := ""
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-a.notify:
		}
		_, err := a.Refresh(ctx)
		switch {
		case err != nil && ctx.Err() != nil:
			return nil
		case err != nil && err.Error() != failing:
			// Logged once per distinct failure: the poll would repeat
			// it every interval.
			a.log.Error("refresh prompts: serving the last good commit", "commit", commitString(a.state.Load()), "err", err)
			failing = err.Error()
		case err == nil && failing != "":
			a.log.Info("refresh prompts: recovered", "commit", commitString(a.state.Load()))
			failing = ""
		}
	}
}

// UpdateReason says why a watcher receives a prompt.
type UpdateReason string

// The reasons of watch updates.
const (
	// Initial: the first prompt of a watch, when it is the version the
	// client last saw or the client named none.
	Initial UpdateReason = "initial"
	// Changed: the prompt differs from the one the client last saw.
	Changed UpdateReason = "changed"
)

// Update is one prompt sent to a watcher.
type Update struct {
	Prompt *Prompt
	Reason UpdateReason
}

// Watch sends the current prompt for req, then a new one each time its
// version or shadow version changes, until ctx is done (nil) or send
// fails. The first update is always sent: its reason is Changed when
// lastVersion names another version (the client missed an update while
// disconnected), Initial otherwise. A watcher that sends slowly only
// delays itself; versions that come and go while it sends are skipped,
// and it always catches up with the latest.
func (a *Assembler) Watch(ctx context.Context, req Request, lastVersion string, send func(Update) error) error {
	if err := req.Validate(); err != nil {
		return err
	}
	a.watchers.Add(1)
	defer a.watchers.Add(-1)

	ix := a.state.Load()
	p, err := a.build(ix, req)
	if err != nil {
		return err
	}
	reason := Initial
	if lastVersion != "" && lastVersion != p.Version {
		reason = Changed
	}
	if err := send(Update{Prompt: p, Reason: reason}); err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-a.stopped:
			return precept.Errorf(precept.Unavailable, "the prompt service is shutting down; reconnect with last_version %s", p.Version)
		case <-ix.changed:
		}
		ix = a.state.Load()
		next, err := a.build(ix, req)
		if err != nil {
			return err
		}
		if next.Version == p.Version && next.ShadowVersion == p.ShadowVersion {
			continue
		}
		p = next
		if err := send(Update{Prompt: p, Reason: Changed}); err != nil {
			return err
		}
	}
}

// Explain says which base prompt, _rules.md files and rules apply to a
// request, and why each of the agent's rules (and every other agent's)
// is in or out. A missing base prompt is explained, not an error.
func (a *Assembler) Explain(ctx context.Context, req Request) (*Explanation, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	ix := a.state.Load()
	p, err := a.build(ix, req)
	if err != nil && precept.ErrorCode(err) != precept.FailedPrecondition {
		return nil, err
	}
	return ix.explain(req, scopeDir(req.ScopePath), a.opts.MaxRules, p, err), nil
}

// Stats are counters for metrics.
type Stats struct {
	// Commit is the commit prompts are built from ("" before main exists).
	Commit string
	// CacheHits and CacheMisses count Build, Watch and Explain lookups.
	CacheHits, CacheMisses uint64
	// CachedPrompts is the number of prompts cached for Commit.
	CachedPrompts int
	// Rebuilds counts indexes built (one per commit followed).
	Rebuilds uint64
	// RefreshErrors counts failed refreshes.
	RefreshErrors uint64
	// Watchers is the number of open watches.
	Watchers int64
}

// Stats returns the current counters.
func (a *Assembler) Stats() Stats {
	ix := a.state.Load()
	return Stats{
		Commit:        commitString(ix),
		CacheHits:     a.hits.Load(),
		CacheMisses:   a.misses.Load(),
		CachedPrompts: ix.cache.len(),
		Rebuilds:      a.rebuilds.Load(),
		RefreshErrors: a.refreshErrors.Load(),
		Watchers:      a.watchers.Load(),
	}
}
