package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// ErrDiverged is a local branch holding commits its remote never took
// while the remote moved on: neither contains the other. An Upstream
// never creates one (it moves a branch only after the remote took the
// commit), so it comes from history made before the remote was set, or
// from a remote rewritten by hand. Nothing is reset or merged
// automatically; an operator decides (docs/decisions/0009-replicas.md).
var ErrDiverged = errors.New("the local branch and its remote have diverged")

// ErrBranchGone is a branch the remote lacks that an update never
// creates (UpstreamOptions.MustExist): another node deleted it (the
// branch of a proposal decided there), so an update of it cannot land,
// and the Upstream does not bring it back.
var ErrBranchGone = errors.New("the branch was deleted on the remote")

// ErrFenceMoved is a fenced update (UpdateFenced) whose fence branch the
// remote no longer holds where the update read it: what the update
// decided on changed on another node. It is an ErrRefChanged: the caller
// reads the branch again, as the remote has it, and decides again.
var ErrFenceMoved = fmt.Errorf("%w: the fenced branch moved on the remote", ErrRefChanged)

// ErrUntrusted is a remote tip the Upstream's Accept refused to follow.
var ErrUntrusted = errors.New("the remote's branch holds commits this node does not accept")

// The defaults of UpstreamOptions.
const (
	DefaultUpstreamAttempts = 8
	DefaultUpstreamBackoff  = 50 * time.Millisecond
)

// UpstreamOptions bound how an Upstream retries a refused push.
type UpstreamOptions struct {
	// Attempts is how many pushes one update tries before it fails;
	// default DefaultUpstreamAttempts.
	Attempts int
	// Backoff is the wait after the first refusal, doubled after each
	// further one and jittered by up to half; default
	// DefaultUpstreamBackoff.
	Backoff time.Duration
	// Accept, when set, is asked before a local branch is fast-forwarded
	// to the tip the remote holds; false leaves the branch where it is
	// and fails the update with ErrUntrusted. The rules repository checks
	// precept's signatures here (docs/decisions/0016-trust-model.md).
	Accept func(branch string, ours, theirs Hash) (bool, error)
	// MustExist names the branches an update never creates on the
	// remote (made only by Create): when the remote lacks one, another
	// node deleted it, and an update of it fails with ErrBranchGone.
	// Other branches missing on the remote are pushed as they are.
	MustExist func(branch string) bool
}

// A Fence makes an update conditional on a second branch: the push that
// lands the update also deletes Branch on the remote, in one atomic
// push, and the remote takes both only while it still holds Branch at
// At. A decision about a proposal consumes the proposal's branch this
// way, so no second decision about it can land beside it
// (docs/decisions/0009-replicas.md, "One decision per proposal").
type Fence struct {
	Branch string
	At     Hash
}

// Writer commits updates of a branch: a Repo on its own, an Upstream
// through a remote. A component that records on a branch of its own
// takes one, so that it writes through the remote when its deployment
// does.
type Writer interface {
	Update(ctx context.Context, branch string, fn func(*Snapshot) (*CommitSpec, error)) (Hash, error)
}

var (
	_ Writer = (*Repo)(nil)
	_ Writer = (*Upstream)(nil)
)

// Upstream writes branches of a repository through a remote git server,
// which serialises the writers: an update is a commit on the branch as
// the remote last held it, pushed as a fast-forward; only once the
// remote took it does the local branch move. When the remote refuses
// (another node pushed first), the remote is fetched and the same update
// function runs again on its new tip. A local branch written through an
// Upstream is therefore always one the remote has held, so nodes writing
// through one remote never diverge and never lose an update
// (docs/decisions/0009-replicas.md, "Writes through a git server").
type Upstream struct {
	repo   *Repo
	remote string
	auth   Auth
	opts   UpstreamOptions
}

// NewUpstream writes repo's branches through its configured remote
// (AddRemote) with auth.
func NewUpstream(repo *Repo, remote string, auth Auth, opts UpstreamOptions) *Upstream {
	if opts.Attempts <= 0 {
		opts.Attempts = DefaultUpstreamAttempts
	}
	if opts.Backoff <= 0 {
		opts.Backoff = DefaultUpstreamBackoff
	}
	return &Upstream{repo: repo, remote: remote, auth: auth, opts: opts}
}

// Remote is the name of the remote the Upstream writes through; its
// branches are read under refs/remotes/<Remote>/ (Repo.RemoteBranches).
func (u *Upstream) Remote() string { return u.remote }

// stagingBranch holds an update's commit while it is pushed; it is
// local, never pushed under its own name, and moved freely.
func stagingBranch(branch string) string { return "precept-upstream/" + branch }

// Update runs fn on the branch's snapshot and commits what it returns,
// like Repo.Update, and returns only once the remote holds the commit.
// fn may run several times, each time on a newer tip; it must compute
// its changes from the snapshot it is given. A nil spec commits nothing
// and returns the tip fn saw. The error of the last attempt is returned
// when every attempt was refused, or at once when the remote cannot be
// reached; the local branch has not moved then. The push carries the tip
// the update read as a lease, so a branch deleted on the remote meanwhile
// is ErrBranchGone, not created again.
func (u *Upstream) Update(ctx context.Context, branch string, fn func(*Snapshot) (*CommitSpec, error)) (Hash, error) {
	return u.UpdateFenced(ctx, branch, func(s *Snapshot) (*CommitSpec, *Fence, error) {
		spec, err := fn(s)
		return spec, nil, err
	})
}

// UpdateFenced is Update whose fn may also name a Fence: the branch it
// read its decision from, deleted on the remote in the same atomic push.
// When the remote moved or deleted the fence branch, the update fails
// with ErrFenceMoved, and nothing landed.
func (u *Upstream) UpdateFenced(ctx context.Context, branch string, fn func(*Snapshot) (*CommitSpec, *Fence, error)) (Hash, error) {
	if err := validBranch(branch); err != nil {
		return ZeroHash, err
	}
	unlock := u.repo.lockBranch(branch)
	defer unlock()
	staging := stagingBranch(branch)
	wait := u.opts.Backoff
	// fenceMoved is set once the remote moved the fence branch: fn runs
	// once more on the new tip, so that a decision another node landed
	// meanwhile is the error the caller sees; otherwise the update fails
	// with ErrFenceMoved.
	var fenceMoved error
	for attempt := 1; ; attempt++ {
		var fence *Fence
		snap, spec, err := runUpdate(ctx, u.repo, branch, func(s *Snapshot) (*CommitSpec, error) {
			spec, f, err := fn(s)
			fence = f
			return spec, err
		})
		if err != nil || spec == nil {
			return snap.Commit, err
		}
		if fenceMoved != nil {
			return ZeroHash, fenceMoved
		}
		old, err := tipOrZero(u.repo, staging)
		if err != nil {
			return ZeroHash, err
		}
		h, err := u.repo.Commit(staging, old, snap, *spec)
		if err != nil {
			return ZeroHash, err
		}
		if h == snap.Commit {
			// The changes leave the tree as it is: nothing to push. The
			// staging ref did not move and may hold an earlier attempt,
			// which must never be pushed in this write's name.
			return h, nil
		}
		base := snap.Commit
		// The lease is the tip the update read; a commit that merges
		// the tip the remote was last seen at (a record put over a push
		// this node did not take, rules' keepRecord) is a fast-forward
		// of that tip and is leased on it instead.
		expect := base
		if len(spec.MergeParents) > 0 {
			if seen, err := remoteTip(u.repo, u.remote, branch); err == nil && !seen.IsZero() && seen != base && slices.Contains(spec.MergeParents, seen) {
				expect = seen
			}
		}
		specs := []PushSpec{{Branch: staging, RemoteBranch: branch, Expect: &expect}}
		if fence != nil {
			at := fence.At
			specs = append(specs, PushSpec{RemoteBranch: fence.Branch, Delete: true, Expect: &at})
		}
		err = u.repo.Push(ctx, u.remote, u.auth, specs...)
		if err == nil {
			_ = u.repo.DeleteBranch(staging, h)
			return h, u.landed(branch, snap.Commit, h)
		}
		if !errors.Is(err, ErrRefChanged) {
			return ZeroHash, err
		}
		if attempt >= u.opts.Attempts {
			return ZeroHash, fmt.Errorf("update %s through %s: refused %d times: %w", branch, u.remote, attempt, err)
		}
		if err := sleepCtx(ctx, wait/2+rand.N(wait/2+1)); err != nil {
			return ZeroHash, err
		}
		wait *= 2
		if _, err := u.pull(ctx, branch); err != nil {
			return ZeroHash, err
		}
		if fence != nil {
			theirs, err := remoteTip(u.repo, u.remote, fence.Branch)
			if err != nil {
				return ZeroHash, err
			}
			if theirs != fence.At {
				fenceMoved = fmt.Errorf("%s read at %s, now %s on %s: %w", fence.Branch, short(fence.At), short(theirs), u.remote, ErrFenceMoved)
				// The next read of the fence branch is the remote's,
				// when this node accepts it; a deleted one stays.
				if !theirs.IsZero() {
					unlock := u.repo.lockBranch(fence.Branch)
					_, _ = u.pull(ctx, fence.Branch)
					unlock()
				}
			}
		}
	}
}

// landed moves the local branch to h, which the remote took on top of
// base. Another goroutine following the remote (a sync) may have moved
// it there, or past it, first: that is success too.
func (u *Upstream) landed(branch string, base, h Hash) error {
	err := u.repo.SetBranch(branch, base, h)
	if !errors.Is(err, ErrRefChanged) {
		return err
	}
	tip, terr := tipOrZero(u.repo, branch)
	if terr != nil {
		return terr
	}
	if tip == h {
		return nil
	}
	if ok, aerr := u.repo.IsAncestor(h, tip); aerr == nil && ok {
		return nil
	}
	return err
}

// Create commits spec on a new branch forked from base (an empty
// snapshot: a root commit) and returns once the remote holds it. created
// is false when the remote had the branch already (another node made it
// first); the local branch is then left alone.
func (u *Upstream) Create(ctx context.Context, branch string, base *Snapshot, spec CommitSpec) (_ Hash, created bool, _ error) {
	if err := validBranch(branch); err != nil {
		return ZeroHash, false, err
	}
	unlock := u.repo.lockBranch(branch)
	defer unlock()
	staging := stagingBranch(branch)
	old, err := tipOrZero(u.repo, staging)
	if err != nil {
		return ZeroHash, false, err
	}
	h, err := u.repo.Commit(staging, old, base, spec)
	if err != nil {
		return ZeroHash, false, err
	}
	none := ZeroHash
	err = u.repo.Push(ctx, u.remote, u.auth, PushSpec{Branch: staging, RemoteBranch: branch, Expect: &none})
	if errors.Is(err, ErrRefChanged) {
		// Only a branch the remote now holds was made by another node;
		// any other refusal is this write's failure.
		if _, ferr := u.repo.Fetch(ctx, u.remote, u.auth); ferr != nil {
			return ZeroHash, false, errors.Join(err, ferr)
		}
		if theirs, terr := remoteTip(u.repo, u.remote, branch); terr != nil || theirs.IsZero() {
			return ZeroHash, false, errors.Join(err, terr)
		}
		return ZeroHash, false, nil
	}
	if err != nil {
		return ZeroHash, false, err
	}
	_ = u.repo.DeleteBranch(staging, h)
	if err := u.landed(branch, ZeroHash, h); err != nil {
		return ZeroHash, false, err
	}
	return h, true, nil
}

// Pull fetches the remote and brings the local branch to the remote's
// tip: a fast-forward when the remote moved on. When the local branch is
// ahead (history written before the remote was set, or a remote still
// empty) it is pushed. It reports whether the local branch moved; a
// branch and remote that diverged are ErrDiverged, and nothing moves.
func (u *Upstream) Pull(ctx context.Context, branch string) (bool, error) {
	if err := validBranch(branch); err != nil {
		return false, err
	}
	unlock := u.repo.lockBranch(branch)
	defer unlock()
	return u.pull(ctx, branch)
}

// pull is Pull with the branch's lock held.
func (u *Upstream) pull(ctx context.Context, branch string) (bool, error) {
	_, err := u.repo.Fetch(ctx, u.remote, u.auth)
	empty := IsEmptyRemote(err)
	if err != nil && !empty {
		return false, err
	}
	theirs := ZeroHash
	if !empty {
		// An empty remote prunes nothing: its tracking refs are stale.
		if theirs, err = remoteTip(u.repo, u.remote, branch); err != nil {
			return false, err
		}
	}
	ours, err := tipOrZero(u.repo, branch)
	if err != nil {
		return false, err
	}
	none := ZeroHash
	switch {
	case theirs == ours:
		return false, nil
	case ours == ZeroHash:
		return true, u.follow(branch, ZeroHash, theirs)
	case theirs == ZeroHash && u.opts.MustExist != nil && u.opts.MustExist(branch):
		return false, fmt.Errorf("%s/%s: %w", u.remote, branch, ErrBranchGone)
	case theirs == ZeroHash:
		return false, u.repo.Push(ctx, u.remote, u.auth, PushSpec{Branch: branch, Expect: &none})
	}
	behind, err := u.repo.IsAncestor(ours, theirs)
	if err != nil {
		return false, err
	}
	if behind {
		return true, u.follow(branch, ours, theirs)
	}
	ahead, err := u.repo.IsAncestor(theirs, ours)
	if err != nil {
		return false, err
	}
	if ahead {
		return false, u.repo.Push(ctx, u.remote, u.auth, PushSpec{Branch: branch, Expect: &theirs})
	}
	return false, fmt.Errorf("%s at %s, %s/%s at %s: %w", branch, short(ours), u.remote, branch, short(theirs), ErrDiverged)
}

// follow moves the local branch to the remote's tip, once Accept agrees.
func (u *Upstream) follow(branch string, ours, theirs Hash) error {
	if u.opts.Accept != nil {
		ok, err := u.opts.Accept(branch, ours, theirs)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%s/%s at %s: %w", u.remote, branch, short(theirs), ErrUntrusted)
		}
	}
	return u.repo.SetBranch(branch, ours, theirs)
}

// remoteTip is the remote-tracking tip of branch, ZeroHash when the
// remote has no such branch.
func remoteTip(r *Repo, remote, branch string) (Hash, error) {
	branches, err := r.RemoteBranches(remote, branch)
	if err != nil {
		return ZeroHash, err
	}
	for _, b := range branches {
		if b.Name == branch {
			return b.Tip, nil
		}
	}
	return ZeroHash, nil
}

// tipOrZero is the branch's tip, ZeroHash when it does not exist.
func tipOrZero(r *Repo, branch string) (Hash, error) {
	h, err := r.Tip(branch)
	if errors.Is(err, ErrNotFound) {
		return ZeroHash, nil
	}
	return h, err
}

// IsEmptyRemote reports whether a Fetch failed only because the remote
// holds no branch yet. Fetch reports transport errors as text (with
// credentials redacted), so the text is what can be checked.
func IsEmptyRemote(err error) bool {
	return err != nil && strings.Contains(err.Error(), "remote repository is empty")
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
