package rules

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/precept-dev/precept/lib/gitrepo"
	"github.com/precept-dev/precept/rules/rulefmt"
)

// convertMerged turns proposals merged into main in git into rules.
// merges come from the remote's main when syncing; nil looks at the local
// main.
func (m *Manager) convertMerged(ctx context.Context, merges map[string]*gitApproval) error {
	if merges == nil {
		tip, err := m.store.tip(m.store.main)
		if err != nil {
			return err
		}
		if merges, err = m.store.findGitMerges(tip); err != nil {
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

func (m *Manager) convertOne(ctx context.Context, id string, g *gitApproval) error {
	var p rulefmt.Proposal
	var outcome string
	h, err := m.store.Commit(ctx, m.store.main, func(s *gitrepo.Snapshot) (*gitrepo.CommitSpec, error) {
		outcome = ""
		var ok bool
		var err error
		if p, ok, err = m.store.proposalAt(s, rulefmt.ProposalPath(id)); err != nil || !ok {
			return nil, err
		}
		stray := func(why string) (*gitrepo.CommitSpec, error) {
			outcome = why
			return &gitrepo.CommitSpec{
				Message:  fmt.Sprintf("Remove %s merged in git: %s", rulefmt.ProposalPath(id), why),
				Trailers: []gitrepo.Trailer{{Key: rulefmt.TrailerProposalID, Value: id}, {Key: rulefmt.TrailerMergeCommit, Value: g.commit.String()}},
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
		} else if ok, err := m.store.hasRule(s, p.RuleID); err != nil {
			return nil, err
		} else if ok {
			return stray("the proposal was approved before")
		} else if approved, err := m.store.approvedBefore(ctx, p.RuleID); err != nil {
			return nil, err
		} else if approved {
			return stray("its rule was approved and rolled back before")
		}
		if !p.ApprovedBy(g.approver()) {
			p.Approvals = append(p.Approvals, rulefmt.Approval{Approver: g.approver(), At: m.now(), Via: rulefmt.ViaGit})
		}
		p.Status = rulefmt.Approved
		p.Revision++
		p.UpdatedAt = m.now()
		spec, _, err := m.store.approvalSpec(s, p, m.policy.ruleFor(p, m.now()), g)
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
		m.log.Info("proposal approved by a merge in git", "proposal_id", id, "approver", g.approver(), "merge", g.commit.String(), "commit", h.String())
		c := rulefmt.Change{ProposalID: id, RuleID: p.RuleID, Agents: p.Agents, Commit: h.String(), Revision: p.Revision, Actor: g.approver(), Via: rulefmt.ViaGit, MainChanged: true}
		c.Kind = rulefmt.ProposalApproved
		m.emit(c)
		c.Kind = rulefmt.RuleMerged
		m.emit(c)
	case outcome != "":
		m.log.Warn("a proposal merged in git was already decided; its file was removed from main", "proposal_id", id, "why", outcome)
	}
	return nil
}

// approvalSpec is the commit that turns approved proposal p into its
// rule at snapshot s: the rule file in each agent's directory, the
// superseded rules removed, a tuning example per approval, and (for a
// merge made in git) the merged proposal file removed. It returns the
// rules it supersedes. r is the rule the policy made of p.
func (st *store) approvalSpec(s *gitrepo.Snapshot, p rulefmt.Proposal, r rulefmt.Rule, g *gitApproval) (*gitrepo.CommitSpec, []string, error) {
	if p.Kind.DecidesOnRule() {
		spec, err := st.lifecycleSpec(s, p, r.ActivatedAt, g)
		if spec == nil && err == nil && g != nil {
			// The rule changed since: only the merged proposal file goes.
			spec = &gitrepo.CommitSpec{
				Message:  fmt.Sprintf("Remove %s merged in git: rule %s is no longer %s", rulefmt.ProposalPath(p.ID), p.RuleID, rulefmt.RuleStatusFor(p.Kind)),
				Trailers: []gitrepo.Trailer{{Key: rulefmt.TrailerProposalID, Value: p.ID}, {Key: rulefmt.TrailerMergeCommit, Value: g.commit.String()}},
				Changes:  []gitrepo.Change{{Path: rulefmt.ProposalPath(p.ID), Delete: true}},
			}
		}
		return spec, nil, err
	}
	var changes []gitrepo.Change
	var superseded []string
	for _, old := range p.Supersedes {
		paths, err := st.ruleFiles(s, old)
		if err != nil {
			return nil, nil, err
		}
		if len(paths) > 0 {
			superseded = append(superseded, old)
		}
		for _, path := range paths {
			changes = append(changes, gitrepo.Change{Path: path, Delete: true})
		}
	}
	r.Supersedes = superseded
	data, err := r.Marshal()
	if err != nil {
		return nil, nil, err
	}
	for _, agent := range p.Agents {
		changes = append(changes, gitrepo.Change{Path: rulefmt.ActiveRulePath(agent, r.ID), Data: data})
		for _, a := range p.Approvals {
			ex, err := rulefmt.TuningExample(p, agent, "good", a.Approver, a.Note, a.Via, a.At)
			if err != nil {
				return nil, nil, err
			}
			changes = append(changes, gitrepo.Change{Path: rulefmt.TuningPath(agent, "good", p.ID, a.Approver), Data: ex})
		}
	}
	trailers := []gitrepo.Trailer{{Key: rulefmt.TrailerProposalID, Value: p.ID}, {Key: rulefmt.TrailerRuleID, Value: r.ID}}
	for _, a := range p.Approvals {
		v := a.Approver
		if g != nil && a.Via == rulefmt.ViaGit {
			v = g.signature()
		}
		trailers = append(trailers, gitrepo.Trailer{Key: rulefmt.TrailerApprovedBy, Value: v})
	}
	trailers = append(trailers, gitrepo.Trailer{Key: rulefmt.TrailerFeedbackIDs, Value: rulefmt.FeedbackTrailer(p.FeedbackIDs)})
	if len(superseded) > 0 {
		trailers = append(trailers, gitrepo.Trailer{Key: rulefmt.TrailerSupersedes, Value: strings.Join(superseded, " ")})
	}
	subject := fmt.Sprintf("Approve %s as rule %s for %s", p.ID, r.ID, strings.Join(p.Agents, ", "))
	if g != nil {
		if ok, err := s.Exists(rulefmt.ProposalPath(p.ID)); err != nil {
			return nil, nil, err
		} else if ok {
			changes = append(changes, gitrepo.Change{Path: rulefmt.ProposalPath(p.ID), Delete: true})
		}
		trailers = append(trailers, gitrepo.Trailer{Key: rulefmt.TrailerMergeCommit, Value: g.commit.String()})
		subject = fmt.Sprintf("Activate rule %s: %s merged %s in git", r.ID, g.approver(), rulefmt.ProposalBranch(p.ID))
	}
	return &gitrepo.CommitSpec{Message: subject, Trailers: trailers, Changes: changes}, superseded, nil
}
