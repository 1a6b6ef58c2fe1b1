package gitstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/lib/gitrepo"
	"github.com/precept-dev/precept/lib/text"
	"github.com/precept-dev/precept/rules/rulefmt"
)

// writer is the Store's write path: compare-and-swap commits on the
// local repository or, once Through is set, pushes the remote must take
// (docs/decisions/0009-replicas.md). It holds nothing of the Store's
// reads and caches, which notice new tips by themselves.
type writer struct {
	repo *gitrepo.Repo
	main string
	// up, when set, is the remote every write goes through.
	up *gitrepo.Upstream
}

// Through makes every write a push the remote must take before it
// counts: Commit, Decide and CreateProposal return only once the remote
// holds their commit (docs/decisions/0009-replicas.md, "Writes through a
// git server"). Set it before the Store is used.
func (w *writer) Through(u *gitrepo.Upstream) { w.up = u }

// Commit commits what fn makes of branch's tip, compare-and-swap: fn
// runs again on the new tip when another writer moved the branch
// meanwhile, so it must not keep state between calls. A nil spec commits
// nothing.
func (w *writer) Commit(ctx context.Context, branch string, fn func(*gitrepo.Snapshot) (*gitrepo.CommitSpec, error)) (gitrepo.Hash, error) {
	if w.up == nil {
		return w.repo.Update(ctx, branch, fn)
	}
	h, err := w.up.Update(ctx, branch, fn)
	return h, remoteError(branch, err)
}

// Decide commits a decision about a proposal on main, like Commit. fn
// also returns the fence: the proposal branch at the tip the decision
// read. Through a remote, the remote takes the decision only together
// with the deletion of that branch at that tip, in one atomic push, so
// two nodes can never both decide about one proposal; without one the
// repository's own compare-and-swap on main orders the decisions and the
// branch is kept.
func (w *writer) Decide(ctx context.Context, fn func(*gitrepo.Snapshot) (*gitrepo.CommitSpec, *gitrepo.Fence, error)) (gitrepo.Hash, error) {
	if w.up == nil {
		return w.repo.Update(ctx, w.main, func(snap *gitrepo.Snapshot) (*gitrepo.CommitSpec, error) {
			spec, _, err := fn(snap)
			return spec, err
		})
	}
	h, err := w.up.UpdateFenced(ctx, w.main, fn)
	return h, remoteError(w.main, err)
}

// remoteError gives the refusals a caller can act on a code and a
// message; others are returned as they are.
func remoteError(branch string, err error) error {
	switch {
	case errors.Is(err, gitrepo.ErrBranchGone):
		return &precept.Error{Code: precept.FailedPrecondition, Message: fmt.Sprintf("%s was decided on another node meanwhile: its branch is gone from the remote", branch), Err: err}
	case errors.Is(err, gitrepo.ErrUntrusted):
		return &precept.Error{Code: precept.FailedPrecondition, Message: fmt.Sprintf("%s on the remote holds commits precept did not sign; the next sync overrules or ignores them", branch), Err: err}
	case errors.Is(err, gitrepo.ErrFenceMoved):
		return &precept.Error{Code: precept.Conflict, Message: "the proposal changed on another node meanwhile; read it again and decide again", Err: err}
	}
	return err
}

// createBranch commits spec on a new branch forked from main's tip.
// created is false when the branch exists already: another writer made
// it first.
func (w *writer) createBranch(ctx context.Context, branch string, spec gitrepo.CommitSpec) (gitrepo.Hash, bool, error) {
	base, err := w.repo.Snapshot(w.main)
	if err != nil {
		return gitrepo.ZeroHash, false, err
	}
	if w.up != nil {
		return w.up.Create(ctx, branch, base, spec)
	}
	h, err := w.repo.Commit(branch, gitrepo.ZeroHash, base, spec)
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
func (w *writer) CreateProposal(ctx context.Context, p rulefmt.Proposal) (gitrepo.Hash, bool, error) {
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
	return w.createBranch(ctx, rulefmt.ProposalBranch(p.ID), gitrepo.CommitSpec{
		Message:  fmt.Sprintf("Propose %s for %s: %s", p.ID, strings.Join(p.Agents, ", "), text.ClipWords(text.OneLine(rulefmt.FirstSentence(p.Content)), 60)),
		Trailers: trailers,
		Changes:  []gitrepo.Change{{Path: rulefmt.ProposalPath(p.ID), Data: data}},
	})
}
