package rules

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/precept-dev/precept/gitrepo"
)

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

// maxSyncRounds bounds how often Sync fetches again after a push was
// refused because the remote moved meanwhile.
const maxSyncRounds = 4

// Sync brings the local repository and its remote in step. It fetches;
// applies what people did on the remote — a proposal merged into the
// remote's main is approved by the merge's committer and becomes a rule
// with a precept commit, a proposal branch deleted without being merged
// is rejected; brings the remote's main (e.g. a curator's _rules.md) into
// the local one, by fast-forward or by a merge commit whose file-level
// conflicts prefer the remote's version; follows proposal branches
// created or advanced by other replicas; and pushes main, the Slack
// records and the open proposal branches, deleting the remote branches
// of rejected proposals. Without a remote it does nothing.
func (m *Manager) Sync(ctx context.Context) error {
	r := m.opts.Remote
	if r == nil {
		return nil
	}
	m.syncMu.Lock()
	defer m.syncMu.Unlock()
	var err error
	for round := 1; round <= maxSyncRounds; round++ {
		if err = m.syncRound(ctx, r); !errors.Is(err, gitrepo.ErrRefChanged) {
			return err
		}
		m.log.Debug("the remote moved during sync; syncing again", "round", round)
	}
	return err
}

func (m *Manager) syncRound(ctx context.Context, r *Remote) error {
	before, err := m.remoteTips(r.Name)
	if err != nil {
		return err
	}
	if _, err := m.repo.Fetch(ctx, r.Name, r.Auth); err != nil {
		if !isEmptyRemote(err) {
			return err
		}
		// A new, empty remote: there is nothing to apply; push.
		return m.push(ctx, r)
	}
	after, err := m.remoteTips(r.Name)
	if err != nil {
		return err
	}
	changedMain := false
	var errs []error

	remoteMain := after[m.main]
	merges, err := m.findGitMerges(remoteMain)
	if err != nil {
		return err
	}
	// A second listing: a branch another process is updating may be
	// missing from one listing, and a missing branch means a rejection.
	again, err := m.remoteTips(r.Name)
	if err != nil {
		return err
	}
	for name, tip := range again {
		if _, ok := after[name]; !ok {
			after[name] = tip
		}
	}
	deleted, err := m.deletedUnmerged(ctx, before, after, remoteMain)
	if err != nil {
		return err
	}
	for _, b := range []string{m.main, SlackBranch} {
		if tip, ok := after[b]; ok {
			moved, err := m.integrate(ctx, b, r.Name, tip)
			if err != nil {
				return err
			}
			changedMain = changedMain || moved && b == m.main
		}
	}
	if err := m.convertMerged(ctx, m.main, merges); err != nil {
		errs = append(errs, err)
	}
	for _, id := range deleted {
		reason := fmt.Sprintf("the proposal branch was deleted on %s without being merged", r.Name)
		if err := m.reject(ctx, id, ViaGit, "", reason, 0, ViaGit); err != nil {
			errs = append(errs, fmt.Errorf("reject %s deleted on the remote: %w", id, err))
		}
	}
	if err := m.followProposalBranches(ctx, after); err != nil {
		errs = append(errs, err)
	}
	if changedMain {
		m.log.Info("remote changes brought into main", "remote", r.Name)
		tip, _ := m.tipOrZero(m.main)
		m.emit(Change{Kind: RemoteSynced, Commit: tip.String(), Actor: r.Name, Via: ViaGit, MainChanged: true})
	}
	if err := m.push(ctx, r); err != nil {
		if errors.Is(err, gitrepo.ErrRefChanged) {
			return err
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// isEmptyRemote reports whether a fetch failed because the remote has no
// branches yet. gitrepo.Fetch reports transport errors as text (with
// credentials redacted), so the text is what can be checked.
func isEmptyRemote(err error) bool {
	return strings.Contains(err.Error(), "remote repository is empty")
}

func (m *Manager) remoteTips(remote string) (map[string]gitrepo.Hash, error) {
	branches, err := m.remoteBranches(remote)
	if err != nil {
		return nil, err
	}
	out := make(map[string]gitrepo.Hash, len(branches))
	for _, b := range branches {
		out[b.Name] = b.Tip
	}
	return out, nil
}

// deletedUnmerged lists the open proposals whose remote branch existed
// before the fetch and is gone now without having been merged into the
// remote's main.
func (m *Manager) deletedUnmerged(ctx context.Context, before, after map[string]gitrepo.Hash, remoteMain gitrepo.Hash) ([]string, error) {
	st, err := m.load(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, name := range slices.Sorted(maps.Keys(before)) {
		id, ok := strings.CutPrefix(name, BranchPrefix)
		if _, still := after[name]; !ok || still || !st.open(id) {
			continue
		}
		if !remoteMain.IsZero() {
			merged, err := m.repo.IsAncestor(before[name], remoteMain)
			if err != nil {
				return nil, err
			}
			decided, err := m.decidedAt(remoteMain, id)
			if err != nil {
				return nil, err
			}
			if merged || decided {
				continue
			}
		}
		out = append(out, id)
	}
	return out, nil
}

// decidedAt reports whether the snapshot at tip holds a decision about a
// proposal: its rejection, its rule, or its merged file.
func (m *Manager) decidedAt(tip gitrepo.Hash, id string) (bool, error) {
	s, err := m.repo.SnapshotAt(tip)
	if err != nil {
		return false, err
	}
	for _, p := range []string{RejectedPath(id), ProposalPath(id)} {
		if ok, err := s.Exists(p); err != nil || ok {
			return ok, err
		}
	}
	return m.hasRule(s, RuleIDFor(id))
}

// integrate brings a remote branch's tip into the local branch: nothing
// when the local one contains it, a fast-forward when it descends from
// the local one, else a merge commit. It reports whether the local branch
// moved.
func (m *Manager) integrate(ctx context.Context, branch, remote string, theirs gitrepo.Hash) (bool, error) {
	for attempt := 0; attempt < 16; attempt++ {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		ours, err := m.tipOrZero(branch)
		if err != nil {
			return false, err
		}
		if ours == theirs {
			return false, nil
		}
		if !ours.IsZero() {
			if ok, err := m.repo.IsAncestor(theirs, ours); err != nil || ok {
				return false, err
			}
		}
		ff := ours.IsZero()
		if !ff {
			if ff, err = m.repo.IsAncestor(ours, theirs); err != nil {
				return false, err
			}
		}
		if ff {
			err = m.repo.SetBranch(branch, ours, theirs)
		} else {
			err = m.mergeRemote(branch, remote, ours, theirs)
		}
		if errors.Is(err, gitrepo.ErrRefChanged) {
			continue
		}
		return err == nil, err
	}
	return false, fmt.Errorf("integrate %s/%s: %w", remote, branch, gitrepo.ErrRefChanged)
}

// mergeRemote commits the merge of the remote's tip into a diverged local
// branch. On a true conflict the remote's version of the file wins; the
// conflicts are logged and named in the commit.
func (m *Manager) mergeRemote(branch, remote string, ours, theirs gitrepo.Hash) error {
	res, err := m.repo.MergeFiles(ours, theirs)
	if err != nil {
		return err
	}
	snap, err := m.repo.SnapshotAt(ours)
	if err != nil {
		return err
	}
	msg := fmt.Sprintf("Merge %s/%s into %s", remote, branch, branch)
	if len(res.Conflicts) > 0 {
		msg += "\n\nConflicting files, resolved with the remote's version:\n  " + strings.Join(res.Conflicts, "\n  ")
		m.log.Warn("merge conflicts with the remote resolved with the remote's version", "branch", branch, "files", res.Conflicts)
	}
	_, err = m.repo.Commit(branch, ours, snap, gitrepo.CommitSpec{
		Message:      msg,
		Trailers:     []gitrepo.Trailer{{Key: TrailerRemoteSync, Value: remote + "/" + branch}},
		Changes:      res.Changes,
		MergeParents: []gitrepo.Hash{theirs},
	})
	return err
}

// followProposalBranches creates local branches for proposals other
// replicas pushed, fast-forwards those they advanced, and reconciles those
// both advanced by joining their approvals.
func (m *Manager) followProposalBranches(ctx context.Context, remote map[string]gitrepo.Hash) error {
	st, err := m.load(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(remote)) {
		id, ok := strings.CutPrefix(name, BranchPrefix)
		if !ok || !ValidProposalID(id) || st.rejected[id] != nil || st.byProposal[id] != "" || st.merged[id] {
			continue
		}
		theirs := remote[name]
		ours := st.branches[id]
		switch {
		case ours == theirs:
			continue
		case ours.IsZero():
			err = m.repo.SetBranch(name, gitrepo.ZeroHash, theirs)
		default:
			var behind, ahead bool
			if behind, err = m.repo.IsAncestor(ours, theirs); err == nil && behind {
				err = m.repo.SetBranch(name, ours, theirs)
				break
			}
			if ahead, err = m.repo.IsAncestor(theirs, ours); err == nil && !ahead {
				err = m.reconcileProposal(ctx, id, theirs)
			}
		}
		if err != nil && !errors.Is(err, gitrepo.ErrRefChanged) {
			errs = append(errs, fmt.Errorf("follow %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// reconcileProposal merges a proposal branch that two replicas advanced
// independently: the approvals of both are kept, so none is lost.
func (m *Manager) reconcileProposal(ctx context.Context, id string, theirs gitrepo.Hash) error {
	remoteSnap, err := m.repo.SnapshotAt(theirs)
	if err != nil {
		return err
	}
	other, ok, err := m.readProposal(remoteSnap, ProposalPath(id))
	if err != nil || !ok {
		return err
	}
	_, err = m.repo.Update(ctx, ProposalBranch(id), func(s *gitrepo.Snapshot) (*gitrepo.CommitSpec, error) {
		p, ok, err := m.readProposal(s, ProposalPath(id))
		if err != nil || !ok {
			return nil, err
		}
		for _, a := range other.Approvals {
			if !p.ApprovedBy(a.Approver) {
				p.Approvals = append(p.Approvals, a)
			}
		}
		slices.SortStableFunc(p.Approvals, func(a, b Approval) int { return a.At.Compare(b.At) })
		p.Revision = max(p.Revision, other.Revision) + 1
		p.ContentRevision = max(p.ContentRevision, other.ContentRevision)
		if p.Status == Pending && len(p.Approvals) >= p.Required {
			p.Status = Approved
		}
		data, err := p.Marshal()
		if err != nil {
			return nil, err
		}
		return &gitrepo.CommitSpec{
			Message:      fmt.Sprintf("Join the approvals of %s recorded by another replica", id),
			Trailers:     []gitrepo.Trailer{{Key: TrailerProposalID, Value: id}, {Key: TrailerRemoteSync, Value: ProposalBranch(id)}},
			Changes:      []gitrepo.Change{{Path: ProposalPath(id), Data: data}},
			MergeParents: []gitrepo.Hash{theirs},
		}, nil
	})
	return err
}

// push sends main, the Slack records and the open proposal branches that
// differ from the remote, and deletes the remote branches of proposals
// that were rejected. A refused non-fast-forward update is ErrRefChanged.
func (m *Manager) push(ctx context.Context, r *Remote) error {
	remote, err := m.remoteTips(r.Name)
	if err != nil {
		return err
	}
	st, err := m.load(ctx)
	if err != nil {
		return err
	}
	var specs []gitrepo.PushSpec
	for _, b := range []string{m.main, SlackBranch} {
		if tip, err := m.tipOrZero(b); err != nil {
			return err
		} else if !tip.IsZero() && remote[b] != tip {
			specs = append(specs, gitrepo.PushSpec{Branch: b})
		}
	}
	for _, id := range slices.Sorted(maps.Keys(st.branches)) {
		name := ProposalBranch(id)
		if st.open(id) && remote[name] != st.branches[id] {
			specs = append(specs, gitrepo.PushSpec{Branch: name})
		}
	}
	for _, name := range slices.Sorted(maps.Keys(remote)) {
		if id, ok := strings.CutPrefix(name, BranchPrefix); ok && st.rejected[id] != nil {
			specs = append(specs, gitrepo.PushSpec{RemoteBranch: name, Delete: true})
		}
	}
	if len(specs) == 0 {
		return nil
	}
	return m.repo.Push(ctx, r.Name, r.Auth, specs...)
}
