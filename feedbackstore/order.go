package feedbackstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/lib/gitrepo"
)

// NodeBranchPrefix is where nodes keep their own decision branches on a
// git server: nodes/<node> (Options.NodeBranch).
const NodeBranchPrefix = "nodes/"

// The ordering rule of decisions stored on per-node branches
// (docs/decisions/0009-replicas.md, "Per-node branches"):
//
//   - a node commits the decisions it stores to its own branch,
//     nodes/<node>, forked from Branch, and acknowledges them once the
//     git server holds that branch; no other node writes it, so no push
//     is refused for another's;
//   - the order of decisions is Branch's first-parent history, as
//     without node branches. Any node merges into Branch the commits
//     the node branches gained: one merge commit takes every node
//     branch that moved, in the order of their names, and adds their
//     new decision files to Branch's tree; it lands only as a
//     fast-forward of the tip it read (a push leased on it), so two
//     nodes merging at once land one merge, and the other merges what is
//     left on top of it;
//   - within one merge commit decisions are numbered by receive time,
//     then id (readCommit), like the decisions of any commit;
//   - a decision Branch already holds (two nodes stored it, the second
//     after claiming a stream entry the first had not acknowledged) is
//     not added again: the first merged stays.
//
// Every node reads the same merge commits, so every node numbers the
// decisions alike, and a node branch arriving late (a node cut from the
// server) is ordered when it arrives, after what was merged before.

// orderer merges node branches into Branch through the remote. It is
// used by one goroutine (orderLoop).
type orderer struct {
	repo   *gitrepo.Repo
	up     *gitrepo.Upstream
	remote string
	// scanned is the tip of Branch read into onMain and merged so far:
	// Branch's first-parent commits, and the node commits its merges
	// took. A node branch's commits not yet ordered are those after the
	// last of them that either holds; finding them walks only those.
	scanned gitrepo.Hash
	onMain  map[gitrepo.Hash]bool
	merged  map[gitrepo.Hash]bool
}

func newOrderer(repo *gitrepo.Repo, up *gitrepo.Upstream) *orderer {
	return &orderer{repo: repo, up: up, remote: up.Remote(), onMain: map[gitrepo.Hash]bool{}, merged: map[gitrepo.Hash]bool{}}
}

// scan reads Branch's first-parent history up to tip.
func (o *orderer) scan(tip gitrepo.Hash) error {
	if tip == o.scanned {
		return nil
	}
	commits, err := o.repo.FirstParentRange(o.scanned, tip)
	if errors.Is(err, gitrepo.ErrNotAncestor) {
		clear(o.onMain)
		clear(o.merged)
		commits, err = o.repo.FirstParentRange(gitrepo.ZeroHash, tip)
	}
	if err != nil {
		return err
	}
	for _, c := range commits {
		o.onMain[c.Hash] = true
		for _, p := range c.Parents[min(1, len(c.Parents)):] {
			o.merged[p] = true
		}
	}
	o.scanned = tip
	return nil
}

// ordered returns the newest commit of a node branch's first-parent
// chain that Branch already holds, ZeroHash when none is.
func (o *orderer) ordered(tip gitrepo.Hash) (gitrepo.Hash, error) {
	for h := tip; ; {
		if o.merged[h] || o.onMain[h] {
			return h, nil
		}
		c, err := o.repo.CommitInfo(h)
		if err != nil {
			return gitrepo.ZeroHash, err
		}
		if len(c.Parents) == 0 {
			return gitrepo.ZeroHash, nil
		}
		h = c.Parents[0]
	}
}

// order fetches, merges what the node branches gained into Branch, and
// reports how many decisions the merge it landed added (0 when another
// node's merge took them, or none were new).
func (o *orderer) order(ctx context.Context) (int, error) {
	if _, err := o.up.Pull(ctx, Branch); err != nil {
		return 0, err
	}
	var added int
	_, err := o.up.Update(ctx, Branch, func(snap *gitrepo.Snapshot) (spec *gitrepo.CommitSpec, err error) {
		spec, added, err = o.merge(snap)
		return spec, err
	})
	return added, err
}

// merge is the merge commit of every node branch that gained commits
// since Branch at snap last took it, or nil when none did.
func (o *orderer) merge(snap *gitrepo.Snapshot) (*gitrepo.CommitSpec, int, error) {
	branches, err := o.repo.RemoteBranches(o.remote, NodeBranchPrefix)
	if err != nil {
		return nil, 0, err
	}
	slices.SortFunc(branches, func(a, b gitrepo.Branch) int { return strings.Compare(a.Name, b.Name) })
	var (
		parents []gitrepo.Hash
		names   []string
		changes []gitrepo.Change
		taken   = map[string]bool{}
	)
	if err := o.scan(snap.Commit); err != nil {
		return nil, 0, err
	}
	for _, b := range branches {
		base, err := o.ordered(b.Tip)
		if err != nil {
			return nil, 0, fmt.Errorf("read %s: %w", b.Name, err)
		}
		if base == b.Tip {
			continue
		}
		diff, err := o.repo.Diff(base, b.Tip, DecisionsDir)
		if err != nil {
			return nil, 0, fmt.Errorf("read %s: %w", b.Name, err)
		}
		for _, ch := range diff {
			// A node branch only adds decision files; anything else on
			// it is not a decision this node orders.
			if ch.Kind != gitrepo.Added || taken[ch.Path] {
				continue
			}
			if ok, err := snap.Exists(ch.Path); err != nil {
				return nil, 0, err
			} else if ok {
				continue
			}
			taken[ch.Path] = true
			changes = append(changes, gitrepo.Change{Path: ch.Path, Blob: ch.Blob})
		}
		parents = append(parents, b.Tip)
		names = append(names, strings.TrimPrefix(b.Name, NodeBranchPrefix))
	}
	if len(parents) == 0 {
		return nil, 0, nil
	}
	return &gitrepo.CommitSpec{
		Message:      fmt.Sprintf("Order %d decision(s) of %s", len(changes), strings.Join(names, ", ")),
		Trailers:     []gitrepo.Trailer{{Key: "Decision-Count", Value: fmt.Sprint(len(changes))}},
		Changes:      changes,
		MergeParents: parents,
		AllowEmpty:   true,
	}, len(changes), nil
}

// orderLoop orders and indexes whenever kicked (after this node stored
// decisions on its branch, and at every follow tick) until the store
// closes.
func (s *Store) orderLoop() {
	defer close(s.orderDone)
	for {
		select {
		case <-s.stop:
			return
		case <-s.orderKick:
		}
		ctx, cancel := context.WithTimeout(context.Background(), RemoteTimeout)
		n, err := s.ord.order(ctx)
		cancel()
		s.opts.Metrics.ObserveOrder(n, err)
		if err != nil {
			s.opts.Logger.Warn("order the nodes' decisions on the feedback remote failed; will retry", "err", err)
		} else if n > 0 {
			s.opts.Logger.Debug("ordered decisions of the node branches", "decisions", n)
		}
		if _, err := s.CatchUp(context.Background()); err != nil {
			s.opts.Logger.Warn("feedback index catch-up failed; will retry", "err", err)
		}
	}
}

// kickOrder asks orderLoop for a round; kicks while one runs make one
// more.
func (s *Store) kickOrder() {
	select {
	case s.orderKick <- struct{}{}:
	default:
	}
}

// nodeBranch makes sure this node's branch exists: the server's when it
// holds one (the node restarted from an empty data directory), else a
// fork of Branch, which gets its first commit (the layout) when the
// server has none.
func (s *Store) nodeBranch(ctx context.Context) error {
	nb := s.opts.NodeBranch
	if _, err := s.repo.Tip(nb); err == nil || !errors.Is(err, gitrepo.ErrNotFound) {
		return err
	}
	if _, err := s.opts.Upstream.Pull(ctx, nb); err != nil {
		return err
	}
	if _, err := s.repo.Tip(nb); err == nil || !errors.Is(err, gitrepo.ErrNotFound) {
		return err
	}
	if _, err := s.update(ctx, func(snap *gitrepo.Snapshot) (*gitrepo.CommitSpec, error) {
		_, marker, err := readLayout(snap)
		if err != nil || marker == nil {
			return nil, err
		}
		return &gitrepo.CommitSpec{Message: "Start the feedback repository", Changes: []gitrepo.Change{*marker}}, nil
	}); err != nil {
		return err
	}
	tip, err := s.repo.Tip(Branch)
	if err != nil {
		return err
	}
	return s.repo.SetBranch(nb, gitrepo.ZeroHash, tip)
}

// unordered reads a decision from this node's branch; notFound is the
// answer when the branch lacks it too.
func (s *Store) unordered(id string, notFound error) (precept.Decision, error) {
	snap, err := s.repo.Snapshot(s.opts.NodeBranch)
	if errors.Is(err, gitrepo.ErrNotFound) {
		return precept.Decision{}, notFound
	}
	if err != nil {
		return precept.Decision{}, err
	}
	layout, _, err := readLayout(snap)
	if err != nil {
		return precept.Decision{}, err
	}
	b, err := snap.ReadFile(layout.DecisionPath(id))
	if errors.Is(err, gitrepo.ErrNotFound) {
		return precept.Decision{}, notFound
	}
	if err != nil {
		return precept.Decision{}, err
	}
	var f precept.Feedback
	if err := json.Unmarshal(b, &f); err != nil {
		return precept.Decision{}, fmt.Errorf("decision %s on %s: %w", id, s.opts.NodeBranch, err)
	}
	return f.Decision, nil
}
