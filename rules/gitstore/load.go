package gitstore

import (
	"context"
	"errors"
	"slices"
	"sort"
	"strings"

	"github.com/precept-dev/precept/lib/gitrepo"
	"github.com/precept-dev/precept/rules/rulefmt"
)

// State returns the state at the current ref tips, rebuilding it only
// when a tip moved. want names proposals the caller is about to act on:
// their branches are looked up directly, not only through the ref
// listing.
func (s *Store) State(ctx context.Context, want ...string) (*State, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	mainTip, err := s.Tip(s.main)
	if err != nil {
		return nil, err
	}
	branches, err := s.proposalBranches(want)
	if err != nil {
		return nil, err
	}
	sort.Slice(branches, func(i, j int) bool { return branches[i].Name < branches[j].Name })
	var key strings.Builder
	key.WriteString(mainTip.String())
	for _, b := range branches {
		key.WriteString(b.Name + b.Tip.String())
	}
	s.mu.Lock()
	if c := s.last; c != nil && c.key == key.String() {
		s.mu.Unlock()
		return c, nil
	}
	s.mu.Unlock()

	st, err := s.build(key.String(), mainTip, branches)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.last = st
	s.mu.Unlock()
	return st, nil
}

// proposalBranches lists the proposal branches. A directory listing that
// runs while another writer renames a ref's lock file over the ref may
// miss the ref (readdir during a rename is unspecified), so the branches
// the last state had, and those in want, are read directly when the
// listing lacks them.
func (s *Store) proposalBranches(want []string) ([]gitrepo.Branch, error) {
	listed, err := s.repo.Branches(rulefmt.BranchPrefix)
	if err != nil {
		return nil, err
	}
	seen := make(map[string]bool, len(listed))
	for _, b := range listed {
		seen[b.Name] = true
	}
	check := slices.Clone(want)
	s.mu.Lock()
	if prev := s.last; prev != nil {
		for id := range prev.Branches {
			check = append(check, id)
		}
	}
	s.mu.Unlock()
	for _, id := range check {
		name := rulefmt.ProposalBranch(id)
		if seen[name] || !rulefmt.ValidProposalID(id) {
			continue
		}
		seen[name] = true
		tip, err := s.Tip(name)
		if err != nil {
			return nil, err
		}
		if !tip.IsZero() {
			listed = append(listed, gitrepo.Branch{Name: name, Tip: tip})
		}
	}
	return listed, nil
}

func (s *Store) build(key string, mainTip gitrepo.Hash, branches []gitrepo.Branch) (*State, error) {
	st := NewState()
	st.key, st.main = key, mainTip
	var err error
	if mainTip.IsZero() {
		st.snap = &gitrepo.Snapshot{}
	} else if st.snap, err = s.repo.SnapshotAt(mainTip); err != nil {
		return nil, err
	}
	if err := s.loadBranches(st, branches); err != nil {
		return nil, err
	}
	reach, err := s.reachable(mainTip)
	if err != nil {
		return nil, err
	}
	for id, tip := range st.Branches {
		st.Merged[id] = reach[tip]
	}
	if !mainTip.IsZero() {
		for dir, into := range map[string]map[string]*rulefmt.Proposal{rulefmt.RejectedDir: st.Rejected, rulefmt.DraftsDir: st.Drafts, rulefmt.ProposalsDir: st.OnMain} {
			if err := s.loadProposalDir(st.snap, dir, into); err != nil {
				return nil, err
			}
		}
		if err := s.loadRules(st); err != nil {
			return nil, err
		}
	}
	for _, id := range st.IDs() {
		if p, ok := st.Proposal(id); ok && p.ClusterID != "" {
			st.ByCluster[p.ClusterID] = append(st.ByCluster[p.ClusterID], id)
		}
	}
	return st, nil
}

// loadBranches reads each proposal branch's proposal file; a branch
// without a readable one is logged and left out.
func (s *Store) loadBranches(st *State, branches []gitrepo.Branch) error {
	for _, b := range branches {
		id := strings.TrimPrefix(b.Name, rulefmt.BranchPrefix)
		if !rulefmt.ValidProposalID(id) {
			continue
		}
		snap, err := s.repo.SnapshotAt(b.Tip)
		if err != nil {
			return err
		}
		blob, err := snap.Stat(rulefmt.ProposalPath(id))
		if errors.Is(err, gitrepo.ErrNotFound) {
			s.log.Warn("proposal branch without its proposal file; ignored", "branch", b.Name)
			continue
		}
		if err != nil {
			return err
		}
		p, err := s.proposal(blob)
		if err != nil {
			s.log.Warn("unreadable proposal file; ignored", "branch", b.Name, "err", err)
			continue
		}
		st.Branches[id] = b.Tip
		st.OnBranch[id] = p
	}
	return nil
}

func (s *Store) loadProposalDir(snap *gitrepo.Snapshot, dir string, into map[string]*rulefmt.Proposal) error {
	entries, err := snap.List(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name, ".md")
		if e.IsDir || !ok || !rulefmt.ValidProposalID(id) {
			continue
		}
		p, err := s.proposal(e.Hash)
		if err != nil {
			s.log.Warn("unreadable proposal record; ignored", "path", e.Path, "err", err)
			continue
		}
		into[id] = p
	}
	return nil
}

func (s *Store) loadRules(st *State) error {
	return st.snap.Walk(rulefmt.ActiveDir, func(p string, blob gitrepo.Hash) error {
		rel := strings.TrimPrefix(p, rulefmt.ActiveDir+"/")
		agent, file, ok := strings.Cut(rel, "/")
		if !ok || strings.Contains(file, "/") || !strings.HasSuffix(file, ".md") {
			return nil
		}
		r, err := s.rule(blob)
		if err != nil {
			s.log.Warn("unreadable rule file; ignored", "path", p, "err", err)
			return nil
		}
		if !rulefmt.ValidRuleID(r.ID) || !rulefmt.ValidName(agent) {
			s.log.Warn("rule file with an invalid rule id or agent directory; ignored", "path", p)
			return nil
		}
		st.AddRule(*r, agent, p)
		return nil
	})
}
