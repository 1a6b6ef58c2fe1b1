package gitstore

import (
	"fmt"
	"strings"
	"time"

	"github.com/precept-dev/precept/lib/gitrepo"
	"github.com/precept-dev/precept/rules/rulefmt"
)

// LifecycleSpec is the commit that carries out an approved lifecycle
// proposal on main: a sunset removes the rule's files (its history keeps
// it, shown as SUNSET), a re-approval stamps reapproved_at, an activation
// makes a SHADOW rule ACTIVE. It returns nil when there is nothing left to
// do (the rule is gone, or already in the wanted state).
func (st *Store) LifecycleSpec(s *gitrepo.Snapshot, p rulefmt.Proposal, now time.Time, g *GitApproval) (*gitrepo.CommitSpec, error) {
	var changes []gitrepo.Change
	if p.Kind == rulefmt.KindSunset {
		paths, err := st.RuleFiles(s, p.RuleID)
		if err != nil {
			return nil, err
		}
		for _, path := range paths {
			changes = append(changes, gitrepo.Change{Path: path, Delete: true})
		}
	} else {
		var err error
		changes, _, err = st.EditRule(s, p.RuleID, func(cur *rulefmt.Rule) (rulefmt.Rule, bool) {
			if cur.Status != rulefmt.RuleStatusFor(p.Kind) {
				return rulefmt.Rule{}, false
			}
			next := cur.Clone()
			if p.Kind == rulefmt.KindReapprove {
				t := now
				next.ReapprovedAt = &t
			} else {
				next.Status, next.ActivatedAt, next.ShadowUntil, next.ShadowReason, next.ShadowedAt = rulefmt.Active, now, nil, "", nil
			}
			return next, true
		})
		if err != nil {
			return nil, err
		}
	}
	if len(changes) == 0 {
		return nil, nil
	}
	trailers := []gitrepo.Trailer{{Key: rulefmt.TrailerProposalID, Value: p.ID}, {Key: rulefmt.TrailerRuleID, Value: p.RuleID}}
	for _, a := range p.Approvals {
		v := a.Approver
		if g != nil && a.Via == rulefmt.ViaGit {
			v = g.signature()
		}
		trailers = append(trailers, gitrepo.Trailer{Key: rulefmt.TrailerApprovedBy, Value: v})
	}
	var subject string
	switch p.Kind {
	case rulefmt.KindSunset:
		trailers = append(trailers, gitrepo.Trailer{Key: rulefmt.TrailerSunsets, Value: p.RuleID}, gitrepo.Trailer{Key: rulefmt.TrailerReason, Value: "ineffective: " + rulefmt.FirstLine(p.EvidenceSummary)})
		subject = fmt.Sprintf("Sunset rule %s: %s approved", p.RuleID, p.ID)
	case rulefmt.KindReapprove:
		subject = fmt.Sprintf("Re-approve rule %s: %s approved", p.RuleID, p.ID)
	default:
		subject = fmt.Sprintf("Activate shadow rule %s: %s approved", p.RuleID, p.ID)
	}
	if g != nil {
		if ok, err := s.Exists(rulefmt.ProposalPath(p.ID)); err != nil {
			return nil, err
		} else if ok {
			changes = append(changes, gitrepo.Change{Path: rulefmt.ProposalPath(p.ID), Delete: true})
		}
		trailers = append(trailers, gitrepo.Trailer{Key: rulefmt.TrailerMergeCommit, Value: g.Commit.String()})
	}
	return &gitrepo.CommitSpec{Message: subject, Trailers: trailers, Changes: changes}, nil
}

// ApprovalSpec is the commit that turns approved proposal p into its
// rule at snapshot s: the rule file in each agent's directory, the
// superseded rules removed, a tuning example per approval, and (for a
// merge made in git) the merged proposal file removed. It returns the
// rules it supersedes. r is the rule the policy made of p.
func (st *Store) ApprovalSpec(s *gitrepo.Snapshot, p rulefmt.Proposal, r rulefmt.Rule, g *GitApproval) (*gitrepo.CommitSpec, []string, error) {
	if p.Kind.DecidesOnRule() {
		spec, err := st.LifecycleSpec(s, p, r.ActivatedAt, g)
		if spec == nil && err == nil && g != nil {
			// The rule changed since: only the merged proposal file goes.
			spec = &gitrepo.CommitSpec{
				Message:  fmt.Sprintf("Remove %s merged in git: rule %s is no longer %s", rulefmt.ProposalPath(p.ID), p.RuleID, rulefmt.RuleStatusFor(p.Kind)),
				Trailers: []gitrepo.Trailer{{Key: rulefmt.TrailerProposalID, Value: p.ID}, {Key: rulefmt.TrailerMergeCommit, Value: g.Commit.String()}},
				Changes:  []gitrepo.Change{{Path: rulefmt.ProposalPath(p.ID), Delete: true}},
			}
		}
		return spec, nil, err
	}
	var changes []gitrepo.Change
	var superseded []string
	for _, old := range p.Supersedes {
		paths, err := st.RuleFiles(s, old)
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
		trailers = append(trailers, gitrepo.Trailer{Key: rulefmt.TrailerMergeCommit, Value: g.Commit.String()})
		subject = fmt.Sprintf("Activate rule %s: %s merged %s in git", r.ID, g.Approver(), rulefmt.ProposalBranch(p.ID))
	}
	return &gitrepo.CommitSpec{Message: subject, Trailers: trailers, Changes: changes}, superseded, nil
}
