package rules

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/precept-dev/precept/lib/gitrepo"
	"github.com/precept-dev/precept/rules/gitstore"
	"github.com/precept-dev/precept/rules/rulefmt"
)

// convertMerged turns proposals merged into main in git into rules.
// merges come from the remote's main when syncing; nil looks at the local
// main.
func (m *Manager) convertMerged(ctx context.Context, merges map[string]*gitstore.GitApproval) error {
	if merges == nil {
		tip, err := m.store.Tip(m.store.Main())
		if err != nil {
			return err
		}
		if merges, err = m.store.FindGitMerges(tip); err != nil {
			return err
		}
	}
	var errs []error
	for _, id := range slices.Sorted(maps.Keys(merges)) {
		if err := m.convertOne(ctx, id, merges[id]); err != nil {
			errs = append(errs, fmt.Errorf("convert %s merged in git: %w", id, err))
		}
	}
	return errors.Join(errs...)
}

func (m *Manager) convertOne(ctx context.Context, id string, g *gitstore.GitApproval) error {
	var p rulefmt.Proposal
	var outcome string
	h, err := m.store.Commit(ctx, m.store.Main(), func(s *gitrepo.Snapshot) (*gitrepo.CommitSpec, error) {
		outcome = ""
		var ok bool
		var err error
		if p, ok, err = m.store.ProposalAt(s, rulefmt.ProposalPath(id)); err != nil || !ok {
			return nil, err
		}
		stray := func(why string) (*gitrepo.CommitSpec, error) {
			outcome = why
			return &gitrepo.CommitSpec{
				Message:  fmt.Sprintf("Remove %s merged in git: %s", rulefmt.ProposalPath(id), why),
				Trailers: []gitrepo.Trailer{{Key: rulefmt.TrailerProposalID, Value: id}, {Key: rulefmt.TrailerMergeCommit, Value: g.Commit.String()}},
				Changes:  []gitrepo.Change{{Path: rulefmt.ProposalPath(id), Delete: true}},
			}, nil
		}
		if ok, err := s.Exists(rulefmt.RejectedPath(id)); err != nil {
			return nil, err
		} else if ok {
			return stray("the proposal was rejected before")
		}
		if p.Kind.DecidesOnRule() {
			// Decides on an existing rule: nothing to compare with.
		} else if ok, err := m.store.HasRule(s, p.RuleID); err != nil {
			return nil, err
		} else if ok {
			return stray("the proposal was approved before")
		} else if approved, err := m.store.ApprovedBefore(ctx, p.RuleID); err != nil {
			return nil, err
		} else if approved {
			return stray("its rule was approved and rolled back before")
		}
		// The merge is the git host's decision about the text it merged;
		// who else approved, and everything else about the proposal, is
		// precept's record, not what the merged file says
		// (docs/decisions/0016-trust-model.md).
		if p, err = m.recordOf(id, p); err != nil {
			return nil, err
		}
		if !p.ApprovedBy(g.Approver()) {
			p.Approvals = append(p.Approvals, rulefmt.Approval{Approver: g.Approver(), At: m.now(), Via: rulefmt.ViaGit, TextSHA256: p.TextSHA256()})
		}
		p.Status = rulefmt.Approved
		p.Revision++
		p.UpdatedAt = m.now()
		spec, _, err := m.store.ApprovalSpec(s, p, m.policy.ruleFor(p, m.now()), g)
		if err != nil {
			return nil, err
		}
		outcome = "approved"
		return spec, nil
	})
	switch {
	case err != nil:
		return err
	case outcome == "approved":
		m.log.Info("proposal approved by a merge in git", "proposal_id", id, "approver", g.Approver(), "merge", g.Commit.String(), "commit", h.String())
		c := rulefmt.Change{ProposalID: id, RuleID: p.RuleID, Agents: p.Agents, Commit: h.String(), Revision: p.Revision, Actor: g.Approver(), Via: rulefmt.ViaGit, MainChanged: true}
		c.Kind = rulefmt.ProposalApproved
		m.emit(c)
		c.Kind = rulefmt.RuleMerged
		m.emit(c)
	case outcome != "":
		m.log.Warn("a proposal merged in git was already decided; its file was removed from main", "proposal_id", id, "why", outcome)
	}
	return nil
}

// recordOf is precept's record of a proposal merged in git: the proposal
// on its local branch with the merged text, keeping only the approvals of
// that text. Without a local branch, no approval but the merger's counts.
func (m *Manager) recordOf(id string, merged rulefmt.Proposal) (rulefmt.Proposal, error) {
	tip, err := m.store.Tip(rulefmt.ProposalBranch(id))
	if err != nil || tip.IsZero() {
		merged.Approvals = nil
		return merged, nil
	}
	snap, err := m.store.Repo().SnapshotAt(tip)
	if err != nil {
		return merged, err
	}
	rec, ok, err := m.store.ProposalAt(snap, rulefmt.ProposalPath(id))
	if err != nil || !ok {
		merged.Approvals = nil
		return merged, err
	}
	rec.Content, rec.Agents, rec.Type, rec.InsertionPoint = merged.Content, merged.Agents, merged.Type, merged.InsertionPoint
	rec.Approvals = rec.ValidApprovals()
	return rec, nil
}
