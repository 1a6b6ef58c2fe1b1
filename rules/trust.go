package rules

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/precept-dev/precept/lib/gitrepo"
	"github.com/precept-dev/precept/lib/text"
	"github.com/precept-dev/precept/rules/rulefmt"
)

// What a remote says is input, never a record of who approved what
// (docs/decisions/0016-trust-model.md). precept signs every commit it
// makes (gitrepo.Signer); a proposal branch on the remote is followed as
// it is only while every commit precept does not have yet carries that
// signature. Otherwise:
//
//   - a branch precept never made is ignored;
//   - an edit of the proposal's text is taken, with its approvals reset
//     and the quality gate run again, in a commit precept signs;
//   - anything else the unsigned commits say — approvals, a status, the
//     approvals required — is ignored, and precept's record is put back
//     on top of them.
//
// Each ignored change is logged once, counted
// (precept_rules_remote_changes_ignored_total) and listed by Ignored.

// maxTrustWalk bounds how many new commits of a remote branch are
// checked; a longer history is not followed.
const maxTrustWalk = 256

// maxBaseWalk bounds how far under an unsigned push precept looks for
// what other replicas signed: each step walks the history below it.
const maxBaseWalk = 32

// maxIgnored bounds the list of ignored changes kept for the API.
const maxIgnored = 200

// IgnoredChange is a change fetched from the remote that precept did not
// record and so did not take.
type IgnoredChange struct {
	ProposalID string
	Branch     string
	// Commit is the first commit precept could not verify, and its author.
	Commit, Author string
	// Kind is one of rulefmt's Ignored* kinds; Reason says what was
	// ignored, in words.
	Kind, Reason string
}

// ignoredLog remembers the ignored changes, each remote tip once.
type ignoredLog struct {
	mu      sync.Mutex
	seen    map[string]bool // branch + tip
	entries []IgnoredChange
}

// add records c and reports whether it is new.
func (l *ignoredLog) add(c IgnoredChange, tip gitrepo.Hash) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	key := c.Branch + " " + tip.String() + " " + c.Kind
	if l.seen == nil {
		l.seen = map[string]bool{}
	}
	if l.seen[key] {
		return false
	}
	l.seen[key] = true
	l.entries = append(l.entries, c)
	if len(l.entries) > maxIgnored {
		l.entries = slices.Delete(l.entries, 0, len(l.entries)-maxIgnored)
	}
	if len(l.seen) > 8*maxIgnored {
		// Bounded: a flood of pushes may be reported again, never grow it.
		clear(l.seen)
	}
	return true
}

func (l *ignoredLog) list() []IgnoredChange {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.entries)
}

// unverified returns the first commit reachable from theirs, and from
// neither ours nor main, that precept did not sign for this proposal: a
// commit without precept's signature, or a signed one that does not name
// the proposal (Proposal-Id), such as a signed merge of another branch
// pushed here. nil when there is none. Under a commit by which precept
// overruled a push (keepRecord, trailer Overrules) only its first parent
// is walked: precept's record took nothing from the overruled side but a
// text it checked.
func (y *syncer) unverified(id string, theirs, ours, main gitrepo.Hash) (*gitrepo.CommitInfo, error) {
	bad, _, err := y.walkTrust(id, theirs, ours, main)
	return bad, err
}

// walkTrust is unverified, also returning the remote commits precept's
// record overruled on the way (the second parents of Overrules commits).
func (y *syncer) walkTrust(id string, theirs, ours, main gitrepo.Hash) (*gitrepo.CommitInfo, []gitrepo.Hash, error) {
	var overruled []gitrepo.Hash
	repo := y.store.Repo()
	seen := map[gitrepo.Hash]bool{}
	queue := []gitrepo.Hash{theirs}
	for n := 0; len(queue) > 0; n++ {
		h := queue[0]
		queue = queue[1:]
		if seen[h] {
			continue
		}
		seen[h] = true
		known := false
		for _, base := range []gitrepo.Hash{ours, main} {
			if base.IsZero() || known {
				continue
			}
			ok, err := repo.IsAncestor(h, base)
			if err != nil {
				return nil, nil, err
			}
			known = ok
		}
		if known {
			continue
		}
		info, err := repo.CommitInfo(h)
		if err != nil {
			return nil, nil, err
		}
		if n >= maxTrustWalk || repo.VerifyCommit(h) != nil || info.Trailer(rulefmt.TrailerProposalID) != id {
			return &info, overruled, nil
		}
		parents := info.Parents
		if len(parents) == 2 && info.Trailer(rulefmt.TrailerOverrules) == parents[1].String() {
			overruled = append(overruled, parents[1])
			parents = parents[:1]
		}
		queue = append(queue, parents...)
	}
	return nil, overruled, nil
}

// signedBase is the newest commit on theirs' first-parent line that
// precept signed for this proposal all the way down to ours or main
// (zero when there is none): what other replicas recorded under an
// unsigned push, which must not be lost when precept's record is put
// back on top.
func (y *syncer) signedBase(id string, theirs, ours, main gitrepo.Hash) (gitrepo.Hash, error) {
	repo := y.store.Repo()
	for c, n := theirs, 0; !c.IsZero() && n < maxBaseWalk; n++ {
		for _, known := range []gitrepo.Hash{ours, main} {
			if known.IsZero() {
				continue
			}
			if ok, err := repo.IsAncestor(c, known); err != nil || ok {
				return gitrepo.ZeroHash, err
			}
		}
		bad, err := y.unverified(id, c, ours, main)
		if err != nil {
			return gitrepo.ZeroHash, err
		}
		if bad == nil {
			return c, nil
		}
		info, err := repo.CommitInfo(c)
		if err != nil || len(info.Parents) == 0 {
			return gitrepo.ZeroHash, err
		}
		c = info.Parents[0]
	}
	return gitrepo.ZeroHash, nil
}

// checkTrust decides whether the remote's tip of a proposal branch is
// followed as it is: it is when every commit precept does not have yet is
// one precept signed for this proposal (unverified). Otherwise untrusted
// handles it.
func (y *syncer) checkTrust(ctx context.Context, id string, ours, theirs, main gitrepo.Hash) (bool, error) {
	bad, overruled, err := y.walkTrust(id, theirs, ours, main)
	if err != nil {
		return false, err
	}
	if bad != nil {
		return false, y.untrusted(ctx, id, ours, theirs, main, *bad)
	}
	// Overruled by another replica already: reported here too.
	for _, h := range overruled {
		if info, err := y.store.Repo().CommitInfo(h); err == nil {
			y.m.ignore(IgnoredChange{ProposalID: id, Branch: rulefmt.ProposalBranch(id), Commit: h.String(), Author: info.AuthorEmail,
				Kind: rulefmt.IgnoredClaim, Reason: "a commit precept did not make; precept's record, signed in " + theirs.String()[:12] + ", overrules it"}, h)
		}
	}
	return true, nil
}

// acceptTip says whether a write through the remote may fast-forward a
// local branch to the remote's tip before it runs again: a proposal
// branch only while every commit it adds is one precept signed for it
// (the rest is left to the sync, which overrules or ignores it); main
// and the other branches as the sync takes them.
func (y *syncer) acceptTip(branch string, ours, theirs gitrepo.Hash) (bool, error) {
	id, ok := strings.CutPrefix(branch, rulefmt.BranchPrefix)
	if !ok {
		return true, nil
	}
	main, err := y.store.Tip(y.store.Main())
	if err != nil {
		return false, err
	}
	bad, _, err := y.walkTrust(id, theirs, ours, main)
	return bad == nil && err == nil, err
}

// untrusted handles a remote proposal branch that carries commits precept
// did not sign (see the top of this file).
func (y *syncer) untrusted(ctx context.Context, id string, ours, theirs, main gitrepo.Hash, bad gitrepo.CommitInfo) error {
	branch := rulefmt.ProposalBranch(id)
	report := func(kind, reason string) {
		y.m.ignore(IgnoredChange{ProposalID: id, Branch: branch, Commit: bad.Hash.String(), Author: bad.AuthorEmail, Kind: kind, Reason: reason}, theirs)
	}
	// What other replicas signed under the push is taken first.
	base, err := y.signedBase(id, theirs, ours, main)
	if err != nil {
		return err
	}
	switch {
	case !base.IsZero() && ours.IsZero():
		if err := y.store.Repo().SetBranch(rulefmt.ProposalBranch(id), gitrepo.ZeroHash, base); err != nil {
			return err
		}
		ours = base
	case !base.IsZero():
		if ours, err = y.takeSigned(ctx, id, ours, base); err != nil {
			return err
		}
	case ours.IsZero():
		report(rulefmt.IgnoredUnknownBranch, "a proposal branch precept did not make: its proposal, approvals and status are not taken")
		return nil
	}
	repo := y.store.Repo()
	theirSnap, err := repo.SnapshotAt(theirs)
	if err != nil {
		return err
	}
	theirsP, ok, err := y.store.ProposalAt(theirSnap, rulefmt.ProposalPath(id))
	if err != nil || !ok {
		why := "the proposal file is missing"
		if err != nil {
			why = "the proposal file does not parse: " + text.Truncate(err.Error(), 200)
		}
		report(rulefmt.IgnoredUnreadable, why+"; precept's record is put back, and a readable edit is followed again")
		return y.keepRecord(ctx, id, ours, theirs, bad, nil)
	}
	ourSnap, err := repo.SnapshotAt(ours)
	if err != nil {
		return err
	}
	oursP, ok, err := y.store.ProposalAt(ourSnap, rulefmt.ProposalPath(id))
	if err != nil || !ok {
		return err
	}
	if claims := claimed(oursP, theirsP); claims != "" {
		report(rulefmt.IgnoredClaim, claims)
	}
	if oursP.SameText(theirsP) || oursP.Status != rulefmt.Pending && oursP.Status != rulefmt.Approved {
		return y.keepRecord(ctx, id, ours, theirs, bad, nil)
	}
	if reason := y.m.policy.opts.Quality.Check(theirsP.Content); reason != "" {
		report(rulefmt.IgnoredEditRefused, "the edited text fails the quality gate: "+reason)
		return y.keepRecord(ctx, id, ours, theirs, bad, nil)
	}
	// The edited text is checked against the evidence like a draft;
	// what the file claims about its clauses is not taken.
	theirsP.Clauses, theirsP.Guards = y.m.checkEdit(ctx, oursP, theirsP.Content, y.r.Name)
	return y.keepRecord(ctx, id, ours, theirs, bad, &theirsP)
}

// claimed says what the remote's version of a proposal claims beyond its
// text, compared with precept's record; "" when nothing.
func claimed(ours, theirs rulefmt.Proposal) string {
	var what []string
	names := func(as []rulefmt.Approval) []string {
		var out []string
		for _, a := range as {
			out = append(out, a.Approver)
		}
		return out
	}
	if !slices.Equal(names(ours.Approvals), names(theirs.Approvals)) {
		what = append(what, fmt.Sprintf("approvals by %v (precept recorded %v)", names(theirs.Approvals), names(ours.Approvals)))
	}
	if ours.Status != theirs.Status {
		what = append(what, fmt.Sprintf("status %s (precept recorded %s)", theirs.Status, ours.Status))
	}
	if ours.Required != theirs.Required {
		what = append(what, fmt.Sprintf("%d approvals required (precept requires %d)", theirs.Required, ours.Required))
	}
	if len(what) == 0 {
		return ""
	}
	return "claims " + strings.Join(what, "; ") + ", which precept did not record"
}

// keepRecord commits precept's record of a proposal on top of the
// remote's unsigned commits, as a merge of them (so the next push is a
// fast-forward): the proposal file as precept recorded it, or, with an
// edit to take, the edit's text with the approvals reset.
func (y *syncer) keepRecord(ctx context.Context, id string, ours, theirs gitrepo.Hash, bad gitrepo.CommitInfo, edit *rulefmt.Proposal) error {
	remote := y.r.Name
	var after rulefmt.Proposal
	h, err := y.store.Commit(ctx, rulefmt.ProposalBranch(id), func(s *gitrepo.Snapshot) (*gitrepo.CommitSpec, error) {
		if s.Commit != ours {
			return nil, gitrepo.ErrRefChanged
		}
		p, ok, err := y.store.ProposalAt(s, rulefmt.ProposalPath(id))
		if err != nil || !ok {
			return nil, err
		}
		msg := fmt.Sprintf("Keep precept's record of %s over %s on %s\n\n%s by %s was not made by precept: its approvals and status are not taken.",
			id, bad.Hash.String()[:12], remote, bad.Hash.String()[:12], bad.AuthorEmail)
		var changes []gitrepo.Change
		if edit != nil {
			p.Content, p.Agents, p.Type, p.InsertionPoint = edit.Content, edit.Agents, edit.Type, edit.InsertionPoint
			p.Approvals, p.Status = nil, rulefmt.Pending
			p.Revision++
			p.ContentRevision = p.Revision
			p.UpdatedAt = y.m.now()
			p.Guards = append(slices.DeleteFunc(slices.Clone(p.Guards), func(g rulefmt.GuardResult) bool {
				return g.Guard == rulefmt.GuardQuality || g.Guard == rulefmt.GuardEvidence
			}), rulefmt.GuardResult{Guard: rulefmt.GuardQuality, Passed: true, Reason: "run again on the text edited on " + remote})
			p.Guards = append(p.Guards, edit.Guards...)
			p.Clauses = edit.Clauses
			msg = fmt.Sprintf("Take the edit of %s from %s on %s: approvals reset\n\n%s by %s changed the rule text; every approval is of the old text, so they are reset and the quality gate ran again. Approvals and status in it are not taken.",
				id, bad.Hash.String()[:12], remote, bad.Hash.String()[:12], bad.AuthorEmail)
		}
		data, err := p.Marshal()
		if err != nil {
			return nil, err
		}
		changes = append(changes, gitrepo.Change{Path: rulefmt.ProposalPath(id), Data: data})
		after = p
		return &gitrepo.CommitSpec{
			Message: msg,
			Trailers: []gitrepo.Trailer{{Key: rulefmt.TrailerProposalID, Value: id}, {Key: rulefmt.TrailerRemoteSync, Value: remote + "/" + rulefmt.ProposalBranch(id)},
				{Key: rulefmt.TrailerOverrules, Value: theirs.String()}},
			Changes:      changes,
			MergeParents: []gitrepo.Hash{theirs},
			AllowEmpty:   true,
		}, nil
	})
	if err != nil {
		return err
	}
	if edit != nil {
		y.m.log.Warn("a proposal's text was edited on the remote: its approvals are reset", "proposal_id", id, "commit", bad.Hash.String(), "author", bad.AuthorEmail)
		y.m.emit(rulefmt.Change{Kind: rulefmt.ProposalEdited, ProposalID: id, Agents: after.Agents, Commit: h.String(), Revision: after.Revision, Actor: bad.AuthorEmail, Via: rulefmt.ViaGit})
	}
	return nil
}

// ignore logs, counts and lists a remote change precept did not take,
// once per remote tip.
func (m *Manager) ignore(c IgnoredChange, tip gitrepo.Hash) {
	if !m.ignored.add(c, tip) {
		return
	}
	m.log.Warn("ignored a change on the rules remote that precept did not record", "proposal_id", c.ProposalID, "branch", c.Branch,
		"commit", c.Commit, "author", c.Author, "kind", c.Kind, "reason", c.Reason)
	m.emit(rulefmt.Change{Kind: rulefmt.RemoteChangeIgnored, ProposalID: c.ProposalID, Commit: c.Commit, Actor: c.Author, Via: rulefmt.ViaGit, Detail: c.Kind})
}

// Ignored lists the latest changes fetched from the remote that precept
// did not take, oldest first.
func (m *Manager) Ignored() []IgnoredChange { return m.ignored.list() }

// takeSigned brings a commit precept signed for the proposal into the
// local branch: a fast-forward, or the reconciliation of two replicas'
// records. It returns the local branch's new tip.
func (y *syncer) takeSigned(ctx context.Context, id string, ours, signed gitrepo.Hash) (gitrepo.Hash, error) {
	repo := y.store.Repo()
	if ahead, err := repo.IsAncestor(signed, ours); err != nil || ahead {
		return ours, err
	}
	if behind, err := repo.IsAncestor(ours, signed); err != nil {
		return ours, err
	} else if behind {
		if err := repo.SetBranch(rulefmt.ProposalBranch(id), ours, signed); err != nil {
			return ours, err
		}
		return signed, nil
	}
	if err := y.reconcileProposal(ctx, id, signed); err != nil {
		return ours, err
	}
	return y.store.Tip(rulefmt.ProposalBranch(id))
}
