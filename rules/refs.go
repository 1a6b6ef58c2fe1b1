package rules

import (
	"slices"

	"github.com/precept-dev/precept/gitrepo"
)

// branches lists local branches starting with prefix.
func (m *Manager) branches(prefix string) ([]gitrepo.Branch, error) {
	return m.repo.Branches(prefix)
}

// remoteBranches lists a remote's tracking branches.
func (m *Manager) remoteBranches(remote string) ([]gitrepo.Branch, error) {
	return m.repo.RemoteBranches(remote, "")
}

// proposalBranches lists the proposal branches. A directory listing that
// runs while another writer renames a ref's lock file over the ref may
// miss the ref (readdir during a rename is unspecified), so the branches
// the last state had, and those in want, are read directly when the
// listing lacks them.
func (m *Manager) proposalBranches(want []string) ([]gitrepo.Branch, error) {
	listed, err := m.branches(BranchPrefix)
	if err != nil {
		return nil, err
	}
	seen := make(map[string]bool, len(listed))
	for _, b := range listed {
		seen[b.Name] = true
	}
	check := slices.Clone(want)
	m.mu.Lock()
	if prev := m.cached; prev != nil {
		for id := range prev.branches {
			check = append(check, id)
		}
	}
	m.mu.Unlock()
	for _, id := range check {
		name := ProposalBranch(id)
		if seen[name] || !ValidProposalID(id) {
			continue
		}
		seen[name] = true
		tip, err := m.tipOrZero(name)
		if err != nil {
			return nil, err
		}
		if !tip.IsZero() {
			listed = append(listed, gitrepo.Branch{Name: name, Tip: tip})
		}
	}
	return listed, nil
}
