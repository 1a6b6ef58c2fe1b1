package rules

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/precept-dev/precept/lib/gitrepo"
	"github.com/precept-dev/precept/rules/gitstore"
	"github.com/precept-dev/precept/rules/rulefmt"
)

// maxSyncRounds bounds how often Sync fetches again after a push was
// refused because the remote moved meanwhile.
const maxSyncRounds = 4

// syncer keeps the repository in step with its remote; Manager.Sync
// says what a round does. Rounds are serialised: two at once would push
// and integrate the same refs.
type syncer struct {
	m     *Manager
	store *gitstore.Store
	r     *Remote
	mu    sync.Mutex
	// ok and failed count the syncs by outcome (SyncStats); lastOK is
	// when the last one that succeeded ended, in Unix nanoseconds.
	ok, failed atomic.Uint64
	lastOK     atomic.Int64
}

// branches are main and the other branches kept in step like it.
func (y *syncer) branches() []string {
	return append([]string{y.store.Main()}, y.r.Branches...)
}

// SyncStats counts the syncs with the remote a Manager made since it
// started (precept_rules_remote_syncs_total; docs/operations.md,
// "PreceptGitPushesFailing").
type SyncStats struct {
	// OK syncs fetched, applied and pushed everything; Failed syncs
	// returned an error: the fetch or the push failed (the remote
	// unreachable, credentials refused) or what was fetched could not
	// be applied. Syncs cancelled by their caller are not counted.
	OK, Failed uint64
	// LastOK is when the last successful sync ended; zero before one.
	// How long ago that was bounds how far this node may lag behind the
	// remote (precept_rules_remote_last_sync_timestamp_seconds).
	LastOK time.Time
}

// RemoteSyncs returns the counts of syncs with the remote so far; zero
// without a remote.
func (m *Manager) RemoteSyncs() SyncStats {
	if m.remote == nil {
		return SyncStats{}
	}
	st := SyncStats{OK: m.remote.ok.Load(), Failed: m.remote.failed.Load()}
	if ns := m.remote.lastOK.Load(); ns != 0 {
		st.LastOK = time.Unix(0, ns)
	}
	return st
}

func (y *syncer) syncAndLog(ctx context.Context) {
	if err := y.sync(ctx); err != nil && ctx.Err() == nil {
		y.m.log.Warn("sync the rules repository with its remote", "remote", y.r.Name, "err", err)
	}
}

func (y *syncer) sync(ctx context.Context) (err error) {
	y.mu.Lock()
	defer y.mu.Unlock()
	defer func() {
		switch {
		case err == nil:
			y.ok.Add(1)
			y.lastOK.Store(time.Now().UnixNano())
		case ctx.Err() == nil:
			y.failed.Add(1)
		}
	}()
	for round := 1; round <= maxSyncRounds; round++ {
		if err = y.round(ctx); !errors.Is(err, gitrepo.ErrRefChanged) {
			return err
		}
		y.m.log.Debug("the remote moved during sync; syncing again", "round", round)
	}
	return err
}

func (y *syncer) round(ctx context.Context) error {
	r := y.r
	before, err := y.store.RemoteTips(r.Name)
	if err != nil {
		return err
	}
	if _, err := y.store.Repo().Fetch(ctx, r.Name, r.Auth); err != nil {
		if !gitrepo.IsEmptyRemote(err) {
			return err
		}
		// A new, empty remote: there is nothing to apply; push.
		return y.push(ctx)
	}
	after, err := y.store.RemoteTips(r.Name)
	if err != nil {
		return err
	}
	changedMain := false
	var errs []error

	remoteMain := after[y.store.Main()]
	merges, err := y.store.FindGitMerges(remoteMain)
	if err != nil {
		return err
	}
	// A second listing: a branch another process is updating may be
	// missing from one listing, and a missing branch means a rejection.
	again, err := y.store.RemoteTips(r.Name)
	if err != nil {
		return err
	}
	for name, tip := range again {
		if _, ok := after[name]; !ok {
			after[name] = tip
		}
	}
	deleted, err := y.deletedUnmerged(ctx, before, after, remoteMain)
	if err != nil {
		return err
	}
	for _, b := range y.branches() {
		if tip, ok := after[b]; ok {
			moved, err := y.integrate(ctx, b, r.Name, tip)
			if err != nil {
				return err
			}
			changedMain = changedMain || moved && b == y.store.Main()
		}
	}
	if err := y.m.convertMerged(ctx, merges); err != nil {
		errs = append(errs, err)
	}
	for _, id := range deleted {
		reason := fmt.Sprintf("the proposal branch was deleted on %s without being merged", r.Name)
		// The branch is gone already: no fence to consume.
		if err := y.m.commitRejection(ctx, RejectRequest{ProposalID: id, By: rulefmt.ViaGit, Reason: reason, Via: rulefmt.ViaGit}, "", false); err != nil {
			errs = append(errs, fmt.Errorf("reject %s deleted on the remote: %w", id, err))
		}
	}
	if err := y.followProposalBranches(ctx, after); err != nil {
		errs = append(errs, err)
	}
	if changedMain {
		y.m.log.Info("remote changes brought into main", "remote", r.Name)
		tip, err := y.store.Tip(y.store.Main())
		if err != nil {
			errs = append(errs, err)
		}
		y.m.emit(rulefmt.Change{Kind: rulefmt.RemoteSynced, Commit: tip.String(), Actor: r.Name, Via: rulefmt.ViaGit, MainChanged: true})
	}
	if err := y.push(ctx); err != nil {
		if errors.Is(err, gitrepo.ErrRefChanged) {
			return err
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// deletedUnmerged lists the open proposals whose remote branch existed
// before the fetch and is gone now without having been merged into the
// remote's main.
func (y *syncer) deletedUnmerged(ctx context.Context, before, after map[string]gitrepo.Hash, remoteMain gitrepo.Hash) ([]string, error) {
	st, err := y.store.State(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, name := range slices.Sorted(maps.Keys(before)) {
		id, ok := strings.CutPrefix(name, rulefmt.BranchPrefix)
		if _, still := after[name]; !ok || still || !st.Open(id) {
			continue
		}
		if !remoteMain.IsZero() {
			merged, err := y.store.Repo().IsAncestor(before[name], remoteMain)
			if err != nil {
				return nil, err
			}
			decided, err := y.decidedAt(remoteMain, id)
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
func (y *syncer) decidedAt(tip gitrepo.Hash, id string) (bool, error) {
	s, err := y.store.Repo().SnapshotAt(tip)
	if err != nil {
		return false, err
	}
	for _, p := range []string{rulefmt.RejectedPath(id), rulefmt.ProposalPath(id)} {
		if ok, err := s.Exists(p); err != nil || ok {
			return ok, err
		}
	}
	return y.store.HasRule(s, rulefmt.RuleIDFor(id))
}

// integrate brings a remote branch's tip into the local branch: nothing
// when the local one contains it, a fast-forward when it descends from
// the local one, else a merge commit. It reports whether the local branch
// moved.
func (y *syncer) integrate(ctx context.Context, branch, remote string, theirs gitrepo.Hash) (bool, error) {
	for attempt := 0; attempt < 16; attempt++ {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		ours, err := y.store.Tip(branch)
		if err != nil {
			return false, err
		}
		if ours == theirs {
			return false, nil
		}
		if !ours.IsZero() {
			if ok, err := y.store.Repo().IsAncestor(theirs, ours); err != nil || ok {
				return false, err
			}
		}
		ff := ours.IsZero()
		if !ff {
			if ff, err = y.store.Repo().IsAncestor(ours, theirs); err != nil {
				return false, err
			}
		}
		if ff {
			err = y.store.Repo().SetBranch(branch, ours, theirs)
		} else {
			err = y.mergeRemote(branch, remote, ours, theirs)
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
func (y *syncer) mergeRemote(branch, remote string, ours, theirs gitrepo.Hash) error {
	res, err := y.store.Repo().MergeFiles(ours, theirs)
	if err != nil {
		return err
	}
	snap, err := y.store.Repo().SnapshotAt(ours)
	if err != nil {
		return err
	}
	msg := fmt.Sprintf("Merge %s/%s into %s", remote, branch, branch)
	if len(res.Conflicts) > 0 {
		msg += "\n\nConflicting files, resolved with the remote's version:\n  " + strings.Join(res.Conflicts, "\n  ")
		y.m.log.Warn("merge conflicts with the remote resolved with the remote's version", "branch", branch, "files", res.Conflicts)
	}
	_, err = y.store.Repo().Commit(branch, ours, snap, gitrepo.CommitSpec{
		Message:      msg,
		Trailers:     []gitrepo.Trailer{{Key: rulefmt.TrailerRemoteSync, Value: remote + "/" + branch}},
		Changes:      res.Changes,
		MergeParents: []gitrepo.Hash{theirs},
	})
	return err
}

// followProposalBranches creates local branches for proposals other
// replicas pushed, fast-forwards those they advanced, and reconciles those
// both advanced by joining their approvals.
func (y *syncer) followProposalBranches(ctx context.Context, remote map[string]gitrepo.Hash) error {
	st, err := y.store.State(ctx)
	if err != nil {
		return err
	}
	mainTip, err := y.store.Tip(y.store.Main())
	if err != nil {
		return err
	}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(remote)) {
		id, ok := strings.CutPrefix(name, rulefmt.BranchPrefix)
		if !ok || !rulefmt.ValidProposalID(id) || st.Rejected[id] != nil || st.ByProposal[id] != "" || st.Merged[id] {
			continue
		}
		theirs := remote[name]
		ours := st.Branches[id]
		if ours == theirs {
			continue
		}
		if !ours.IsZero() {
			if ahead, err := y.store.Repo().IsAncestor(theirs, ours); err != nil || ahead {
				if err != nil {
					errs = append(errs, fmt.Errorf("follow %s: %w", name, err))
				}
				continue
			}
		}
		// Only what precept signed is followed as it is (trust.go).
		if followed, err := y.checkTrust(ctx, id, ours, theirs, mainTip); err != nil || !followed {
			if err != nil && !errors.Is(err, gitrepo.ErrRefChanged) {
				errs = append(errs, fmt.Errorf("follow %s: %w", name, err))
			}
			continue
		}
		switch {
		case ours.IsZero():
			err = y.store.Repo().SetBranch(name, gitrepo.ZeroHash, theirs)
		default:
			var behind, ahead bool
			if behind, err = y.store.Repo().IsAncestor(ours, theirs); err == nil && behind {
				err = y.store.Repo().SetBranch(name, ours, theirs)
				break
			}
			if ahead, err = y.store.Repo().IsAncestor(theirs, ours); err == nil && !ahead {
				err = y.reconcileProposal(ctx, id, theirs)
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
func (y *syncer) reconcileProposal(ctx context.Context, id string, theirs gitrepo.Hash) error {
	remoteSnap, err := y.store.Repo().SnapshotAt(theirs)
	if err != nil {
		return err
	}
	other, ok, err := y.store.ProposalAt(remoteSnap, rulefmt.ProposalPath(id))
	if err != nil || !ok {
		return err
	}
	_, err = y.store.Repo().Update(ctx, rulefmt.ProposalBranch(id), func(s *gitrepo.Snapshot) (*gitrepo.CommitSpec, error) {
		p, ok, err := y.store.ProposalAt(s, rulefmt.ProposalPath(id))
		if err != nil || !ok {
			return nil, err
		}
		// The newer text wins (an edit on either replica); approvals
		// join, and only those of the text kept count.
		if other.ContentRevision > p.ContentRevision && !other.SameText(p) {
			p.Content, p.Agents, p.Type, p.InsertionPoint = other.Content, other.Agents, other.Type, other.InsertionPoint
			// What the evidence guard found goes with the text it checked.
			p.Clauses = other.Clauses
			p.Guards = append(slices.DeleteFunc(p.Guards, func(g rulefmt.GuardResult) bool { return g.Guard == rulefmt.GuardEvidence }),
				slices.DeleteFunc(slices.Clone(other.Guards), func(g rulefmt.GuardResult) bool { return g.Guard != rulefmt.GuardEvidence })...)
		}
		texts := !other.SameText(p)
		for _, a := range other.Approvals {
			if !p.ApprovedBy(a.Approver) {
				p.Approvals = append(p.Approvals, a)
			}
		}
		if texts {
			sum := p.TextSHA256()
			p.Approvals = slices.DeleteFunc(p.Approvals, func(a rulefmt.Approval) bool { return a.TextSHA256 != sum })
		}
		slices.SortStableFunc(p.Approvals, func(a, b rulefmt.Approval) int { return a.At.Compare(b.At) })
		p.Revision = max(p.Revision, other.Revision) + 1
		p.ContentRevision = max(p.ContentRevision, other.ContentRevision)
		if p.Status == rulefmt.Pending && len(p.ValidApprovals()) >= p.Required {
			p.Status = rulefmt.Approved
		}
		data, err := p.Marshal()
		if err != nil {
			return nil, err
		}
		return &gitrepo.CommitSpec{
			Message:      fmt.Sprintf("Join the approvals of %s recorded by another replica", id),
			Trailers:     []gitrepo.Trailer{{Key: rulefmt.TrailerProposalID, Value: id}, {Key: rulefmt.TrailerRemoteSync, Value: rulefmt.ProposalBranch(id)}},
			Changes:      []gitrepo.Change{{Path: rulefmt.ProposalPath(id), Data: data}},
			MergeParents: []gitrepo.Hash{theirs},
		}, nil
	})
	return err
}

// push sends main, Remote.Branches and the open proposal branches that
// differ from the remote, and deletes the remote branches of proposals
// that were rejected. A refused non-fast-forward update is ErrRefChanged.
func (y *syncer) push(ctx context.Context) error {
	r := y.r
	remote, err := y.store.RemoteTips(r.Name)
	if err != nil {
		return err
	}
	st, err := y.store.State(ctx)
	if err != nil {
		return err
	}
	// Writing through the remote, every write pushed its own refs; what
	// is left is history made before (the first commit of a new
	// repository), pushed to a remote that is empty or behind. A
	// branch the remote lacks while holding others may have been
	// deleted there by a decision, so it is not pushed again.
	through := y.r.WriteThrough
	var specs []gitrepo.PushSpec
	for _, b := range y.branches() {
		tip, err := y.store.Tip(b)
		if err != nil {
			return err
		}
		if tip.IsZero() || remote[b] == tip || through && remote[b].IsZero() && len(remote) > 0 {
			continue
		}
		// Only a fast-forward: the lease below would otherwise force a
		// push, and a local tip read a moment before a write through
		// the remote moved it would take the remote back.
		if theirs := remote[b]; !theirs.IsZero() {
			if ff, err := y.store.Repo().IsAncestor(theirs, tip); err != nil || !ff {
				continue
			}
		}
		specs = append(specs, gitrepo.PushSpec{Branch: b})
	}
	for _, id := range slices.Sorted(maps.Keys(st.Branches)) {
		name := rulefmt.ProposalBranch(id)
		if through || !st.Open(id) || remote[name] == st.Branches[id] {
			continue
		}
		// Only a fast-forward: a remote branch precept has not taken in
		// (trust.go) is left as it is, not fought over every round.
		if theirs := remote[name]; !theirs.IsZero() {
			if ff, err := y.store.Repo().IsAncestor(theirs, st.Branches[id]); err != nil || !ff {
				continue
			}
		}
		specs = append(specs, gitrepo.PushSpec{Branch: name})
	}
	for _, name := range slices.Sorted(maps.Keys(remote)) {
		if id, ok := strings.CutPrefix(name, rulefmt.BranchPrefix); ok && st.Rejected[id] != nil {
			specs = append(specs, gitrepo.PushSpec{RemoteBranch: name, Delete: true})
		}
	}
	if len(specs) == 0 {
		return nil
	}
	// Every ref is pushed with a lease at the tip this round read: a
	// ref another node or a write through the remote moved or deleted
	// since then (a decided proposal's branch) is refused, and the next
	// round starts from what the remote holds, instead of the push
	// bringing the branch back.
	for i := range specs {
		name := specs[i].RemoteBranch
		if name == "" {
			name = specs[i].Branch
		}
		at := remote[name]
		specs[i].Expect = &at
	}
	return y.store.Repo().Push(ctx, r.Name, r.Auth, specs...)
}
