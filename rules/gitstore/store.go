package gitstore

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/precept-dev/precept/rules/rulefmt"

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
	// writer is the write path, local or through the remote.
	*writer
}

// Bounds on the caches; a full cache is emptied and refilled.
const (
	maxParsed  = 100000
	maxCommits = 200000
)

func NewStore(repo *gitrepo.Repo, main string, log *slog.Logger) *Store {
	return &Store{
		repo: repo, main: main, log: log, writer: &writer{repo: repo, main: main},
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
