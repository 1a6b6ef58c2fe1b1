package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
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
}

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

// stagingBranch holds an update's commit while it is pushed; it is
// local, never pushed under its own name, and moved freely.
func stagingBranch(branch string) string { return "precept-upstream/" + branch }

// Update runs fn on the branch's snapshot and commits what it returns,
// like Repo.Update, and returns only once the remote holds the commit.
// fn may run several times, each time on a newer tip; it must compute
// its changes from the snapshot it is given. A nil spec commits nothing
// and returns the tip fn saw. The error of the last attempt is returned
// when every attempt was refused, or at once when the remote cannot be
// reached; the local branch has not moved then.
func (u *Upstream) Update(ctx context.Context, branch string, fn func(*Snapshot) (*CommitSpec, error)) (Hash, error) {
	if err := validBranch(branch); err != nil {
		return ZeroHash, err
	}
	unlock := u.repo.lockBranch(branch)
	defer unlock()
	staging := stagingBranch(branch)
	wait := u.opts.Backoff
	for attempt := 1; ; attempt++ {
		snap, spec, err := runUpdate(ctx, u.repo, branch, fn)
		if err != nil || spec == nil {
			return snap.Commit, err
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
		err = u.repo.Push(ctx, u.remote, u.auth, PushSpec{Branch: staging, RemoteBranch: branch})
		if err == nil {
			// Only this process moves the branch while the lock is
			// held, and other processes write through the remote too.
			return h, u.repo.SetBranch(branch, snap.Commit, h)
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
	}
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
	if _, err := u.repo.Fetch(ctx, u.remote, u.auth); err != nil && !IsEmptyRemote(err) {
		return false, err
	}
	theirs, err := remoteTip(u.repo, u.remote, branch)
	if err != nil {
		return false, err
	}
	ours, err := tipOrZero(u.repo, branch)
	if err != nil {
		return false, err
	}
	switch {
	case theirs == ours:
		return false, nil
	case ours == ZeroHash:
		return true, u.repo.SetBranch(branch, ZeroHash, theirs)
	case theirs == ZeroHash:
		return false, u.repo.Push(ctx, u.remote, u.auth, PushSpec{Branch: branch})
	}
	behind, err := u.repo.IsAncestor(ours, theirs)
	if err != nil {
		return false, err
	}
	if behind {
		return true, u.repo.SetBranch(branch, ours, theirs)
	}
	ahead, err := u.repo.IsAncestor(theirs, ours)
	if err != nil {
		return false, err
	}
	if ahead {
		return false, u.repo.Push(ctx, u.remote, u.auth, PushSpec{Branch: branch})
	}
	return false, fmt.Errorf("%s at %s, %s/%s at %s: %w", branch, short(ours), u.remote, branch, short(theirs), ErrDiverged)
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
