package gitstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/precept-dev/precept/lib/text"
	"github.com/precept-dev/precept/rules/rulefmt"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/lib/gitrepo"
)

// Store is the rules repository as the workflow reads and writes it: the
// bottom of the rules packages' layers (docs/architecture.md). It loads
// the state at the current ref tips and holds every cache of the
// package in one place, under one mutex: what git never changes (files
// parsed by blob, commit metadata, whether a commit added a rule) and
// what a new commit extends cheaply (the commits reachable from main,
// the history index, the last state). Writes are compare-and-swap
// commits (gitrepo.Repo.Update), so stores in several processes may
// share a repository.
type Store struct {
	repo *gitrepo.Repo
	main string
	log  *slog.Logger

	mu        sync.Mutex
	last      *State
	proposals map[gitrepo.Hash]*rulefmt.Proposal
	rules     map[gitrepo.Hash]*rulefmt.Rule
	commits   map[gitrepo.Hash]gitrepo.CommitInfo
	// creates says, per commit, whether it added the rule its Rule-Id
	// trailer names.
	creates map[gitrepo.Hash]bool
	// before caches ruleBefore by commit and rule id: what a commit's
	// parent held never changes.
	before map[string]rulefmt.Rule
	reach  *reachSet
	hist   *History
	// up, when set, is the remote every write goes through (Through).
	up *gitrepo.Upstream
}

// Bounds on the caches; a full cache is emptied and refilled.
const (
	maxParsed  = 100000
	maxCommits = 200000
)

func NewStore(repo *gitrepo.Repo, main string, log *slog.Logger) *Store {
	return &Store{
		repo: repo, main: main, log: log,
		proposals: map[gitrepo.Hash]*rulefmt.Proposal{},
		rules:     map[gitrepo.Hash]*rulefmt.Rule{},
		commits:   map[gitrepo.Hash]gitrepo.CommitInfo{},
		creates:   map[gitrepo.Hash]bool{},
		before:    map[string]rulefmt.Rule{},
	}
}

// Repo is the repository the store reads and writes. Its caches hold
// only what git never changes or what is keyed by the ref tips, so the
// workflow's own writes (fetches, merges and pushes with a remote) need
// no notice.
func (s *Store) Repo() *gitrepo.Repo { return s.repo }

// Main is the branch approved rules live on.
func (s *Store) Main() string { return s.main }

// parseCached returns the parsed content of a blob from cache, parsing
// and caching it on a miss: blobs never change. Callers must not modify
// what it returns.
func parseCached[T any](s *Store, cache map[gitrepo.Hash]*T, blob gitrepo.Hash, parse func([]byte) (T, error)) (*T, error) {
	s.mu.Lock()
	v, ok := cache[blob]
	s.mu.Unlock()
	if ok {
		return v, nil
	}
	data, err := s.repo.ReadBlob(blob)
	if err != nil {
		return nil, err
	}
	parsed, err := parse(data)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if len(cache) >= maxParsed {
		clear(cache)
	}
	cache[blob] = &parsed
	s.mu.Unlock()
	return &parsed, nil
}

func (s *Store) proposal(blob gitrepo.Hash) (*rulefmt.Proposal, error) {
	return parseCached(s, s.proposals, blob, rulefmt.ParseProposal)
}

func (s *Store) rule(blob gitrepo.Hash) (*rulefmt.Rule, error) {
	return parseCached(s, s.rules, blob, rulefmt.ParseRule)
}

// RuleFile reads the rule file stored as blob. The result is the
// caller's own copy.
func (s *Store) RuleFile(blob gitrepo.Hash) (rulefmt.Rule, error) {
	r, err := s.rule(blob)
	if err != nil {
		return rulefmt.Rule{}, err
	}
	return r.Clone(), nil
}

// ProposalAt reads a proposal file at a snapshot; ok is false when it is
// not there. The result is the caller's own copy.
func (s *Store) ProposalAt(snap *gitrepo.Snapshot, p string) (rulefmt.Proposal, bool, error) {
	if snap == nil || snap.Commit.IsZero() {
		return rulefmt.Proposal{}, false, nil
	}
	blob, err := snap.Stat(p)
	if errors.Is(err, gitrepo.ErrNotFound) {
		return rulefmt.Proposal{}, false, nil
	}
	if err != nil {
		return rulefmt.Proposal{}, false, err
	}
	pp, err := s.proposal(blob)
	if err != nil {
		return rulefmt.Proposal{}, false, fmt.Errorf("%s: %w", p, err)
	}
	return pp.Clone(), true, nil
}

// RuleFiles lists the files of rule id at a snapshot, one per agent.
func (s *Store) RuleFiles(snap *gitrepo.Snapshot, ruleID string) ([]string, error) {
	if snap == nil || snap.Commit.IsZero() {
		return nil, nil
	}
	agents, err := snap.List(rulefmt.ActiveDir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, a := range agents {
		if !a.IsDir {
			continue
		}
		p := rulefmt.ActiveRulePath(a.Name, ruleID)
		if ok, err := snap.Exists(p); err != nil {
			return nil, err
		} else if ok {
			out = append(out, p)
		}
	}
	return out, nil
}

// EditRule rewrites the files of rule id at snap: edit gets each file's
// rule and returns the new content, or false to leave that file alone. It
// returns the changes and the last rule written (nil when none was).
func (s *Store) EditRule(snap *gitrepo.Snapshot, ruleID string, edit func(cur *rulefmt.Rule) (rulefmt.Rule, bool)) ([]gitrepo.Change, *rulefmt.Rule, error) {
	paths, err := s.RuleFiles(snap, ruleID)
	if err != nil {
		return nil, nil, err
	}
	var changes []gitrepo.Change
	var last *rulefmt.Rule
	for _, p := range paths {
		blob, err := snap.Stat(p)
		if err != nil {
			return nil, nil, err
		}
		cur, err := s.rule(blob)
		if err != nil {
			return nil, nil, err
		}
		next, ok := edit(cur)
		if !ok {
			continue
		}
		data, err := next.Marshal()
		if err != nil {
			return nil, nil, err
		}
		changes = append(changes, gitrepo.Change{Path: p, Data: data})
		last = &next
	}
	return changes, last, nil
}

// HasRule reports whether any agent's directory holds rule id at snap.
func (s *Store) HasRule(snap *gitrepo.Snapshot, ruleID string) (bool, error) {
	paths, err := s.RuleFiles(snap, ruleID)
	return len(paths) > 0, err
}

// Tip returns a branch's tip, or ZeroHash when it does not exist.
func (s *Store) Tip(branch string) (gitrepo.Hash, error) {
	h, err := s.repo.Tip(branch)
	if errors.Is(err, gitrepo.ErrNotFound) {
		return gitrepo.ZeroHash, nil
	}
	return h, err
}

// Through makes every write a push the remote must take before it
// counts: Commit, Decide and CreateProposal return only once the remote
// holds their commit (docs/decisions/0009-replicas.md, "Writes through a
// git server"). Set it before the Store is used.
func (s *Store) Through(u *gitrepo.Upstream) { s.up = u }

// Commit commits what fn makes of branch's tip, compare-and-swap: fn
// runs again on the new tip when another writer moved the branch
// meanwhile, so it must not keep state between calls. A nil spec commits
// nothing.
func (s *Store) Commit(ctx context.Context, branch string, fn func(*gitrepo.Snapshot) (*gitrepo.CommitSpec, error)) (gitrepo.Hash, error) {
	if s.up == nil {
		return s.repo.Update(ctx, branch, fn)
	}
	h, err := s.up.Update(ctx, branch, fn)
	return h, remoteError(branch, err)
}

// Decide commits a decision about a proposal on main, like Commit. fn
// also returns the fence: the proposal branch at the tip the decision
// read. Through a remote, the remote takes the decision only together
// with the deletion of that branch at that tip, in one atomic push, so
// two nodes can never both decide about one proposal; without one the
// repository's own compare-and-swap on main orders the decisions and the
// branch is kept.
func (s *Store) Decide(ctx context.Context, fn func(*gitrepo.Snapshot) (*gitrepo.CommitSpec, *gitrepo.Fence, error)) (gitrepo.Hash, error) {
	if s.up == nil {
		return s.repo.Update(ctx, s.main, func(snap *gitrepo.Snapshot) (*gitrepo.CommitSpec, error) {
			spec, _, err := fn(snap)
			return spec, err
		})
	}
	h, err := s.up.UpdateFenced(ctx, s.main, fn)
	return h, remoteError(s.main, err)
}

// remoteError gives the refusals a caller can act on a code and a
// message; others are returned as they are.
func remoteError(branch string, err error) error {
	switch {
	case errors.Is(err, gitrepo.ErrBranchGone):
		return &precept.Error{Code: precept.FailedPrecondition, Message: fmt.Sprintf("%s was decided on another node meanwhile: its branch is gone from the remote", branch), Err: err}
	case errors.Is(err, gitrepo.ErrFenceMoved):
		return &precept.Error{Code: precept.Conflict, Message: "the proposal changed on another node meanwhile; read it again and decide again", Err: err}
	}
	return err
}

// createBranch commits spec on a new branch forked from main's tip.
// created is false when the branch exists already: another writer made
// it first.
func (s *Store) createBranch(ctx context.Context, branch string, spec gitrepo.CommitSpec) (gitrepo.Hash, bool, error) {
	base, err := s.repo.Snapshot(s.main)
	if err != nil {
		return gitrepo.ZeroHash, false, err
	}
	if s.up != nil {
		return s.up.Create(ctx, branch, base, spec)
	}
	h, err := s.repo.Commit(branch, gitrepo.ZeroHash, base, spec)
	if errors.Is(err, gitrepo.ErrRefChanged) {
		return gitrepo.ZeroHash, false, nil
	}
	if err != nil {
		return gitrepo.ZeroHash, false, err
	}
	return h, true, nil
}

// CreateProposal commits a proposal on its new branch, forked from
// main. created is false when the branch exists already: another replica
// drafted the same cluster first.
func (s *Store) CreateProposal(ctx context.Context, p rulefmt.Proposal) (gitrepo.Hash, bool, error) {
	data, err := p.Marshal()
	if err != nil {
		return gitrepo.ZeroHash, false, err
	}
	trailers := []gitrepo.Trailer{{Key: rulefmt.TrailerProposalID, Value: p.ID}}
	if p.ClusterID != "" {
		trailers = append(trailers, gitrepo.Trailer{Key: rulefmt.TrailerClusterID, Value: p.ClusterID})
	}
	if len(p.FeedbackIDs) > 0 {
		trailers = append(trailers, gitrepo.Trailer{Key: rulefmt.TrailerFeedbackIDs, Value: rulefmt.FeedbackTrailer(p.FeedbackIDs)})
	}
	if p.Kind.DecidesOnRule() {
		trailers = append(trailers, gitrepo.Trailer{Key: rulefmt.TrailerRuleID, Value: p.RuleID}, gitrepo.Trailer{Key: rulefmt.TrailerLifecycle, Value: string(p.Kind)})
	}
	return s.createBranch(ctx, rulefmt.ProposalBranch(p.ID), gitrepo.CommitSpec{
		Message:  fmt.Sprintf("Propose %s for %s: %s", p.ID, strings.Join(p.Agents, ", "), text.ClipWords(text.OneLine(rulefmt.FirstSentence(p.Content)), 60)),
		Trailers: trailers,
		Changes:  []gitrepo.Change{{Path: rulefmt.ProposalPath(p.ID), Data: data}},
	})
}

// commitInfo reads a commit's metadata, cached: commits never change.
func (s *Store) commitInfo(h gitrepo.Hash) (gitrepo.CommitInfo, error) {
	s.mu.Lock()
	ci, ok := s.commits[h]
	s.mu.Unlock()
	if ok {
		return ci, nil
	}
	ci, err := s.repo.CommitInfo(h)
	if err != nil {
		return gitrepo.CommitInfo{}, err
	}
	s.mu.Lock()
	if len(s.commits) >= maxCommits {
		clear(s.commits)
	}
	s.commits[h] = ci
	s.mu.Unlock()
	return ci, nil
}

// reachSet is the set of commits reachable from one main tip.
type reachSet struct {
	tip gitrepo.Hash
	set map[gitrepo.Hash]bool
}

// reachable returns the commits reachable from tip. It extends the set of
// the previous tip when tip descends from it, so a new commit costs a
// walk over the new commits only.
func (s *Store) reachable(tip gitrepo.Hash) (map[gitrepo.Hash]bool, error) {
	s.mu.Lock()
	prev := s.reach
	s.mu.Unlock()
	if tip.IsZero() {
		return map[gitrepo.Hash]bool{}, nil
	}
	if prev != nil && prev.tip == tip {
		return prev.set, nil
	}
	base := map[gitrepo.Hash]bool{}
	if prev != nil && !prev.tip.IsZero() {
		if ok, err := s.repo.IsAncestor(prev.tip, tip); err != nil {
			return nil, err
		} else if ok {
			base = prev.set
		}
	}
	set := make(map[gitrepo.Hash]bool, len(base)+16)
	for h := range base {
		set[h] = true
	}
	stack := []gitrepo.Hash{tip}
	for len(stack) > 0 {
		h := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if set[h] {
			continue
		}
		set[h] = true
		ci, err := s.commitInfo(h)
		if err != nil {
			return nil, err
		}
		stack = append(stack, ci.Parents...)
	}
	s.mu.Lock()
	s.reach = &reachSet{tip: tip, set: set}
	s.mu.Unlock()
	return set, nil
}

// Reaches reports whether commit c is reachable from tip.
func (s *Store) Reaches(tip, c gitrepo.Hash) (bool, error) {
	set, err := s.reachable(tip)
	if err != nil {
		return false, err
	}
	return set[c], nil
}

// RemoteTips returns a remote's tracking branches by name.
func (s *Store) RemoteTips(remote string) (map[string]gitrepo.Hash, error) {
	branches, err := s.repo.RemoteBranches(remote, "")
	if err != nil {
		return nil, err
	}
	out := make(map[string]gitrepo.Hash, len(branches))
	for _, b := range branches {
		out[b.Name] = b.Tip
	}
	return out, nil
}
