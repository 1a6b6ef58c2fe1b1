package rules

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/precept-dev/precept/lib/safetext"
	"github.com/precept-dev/precept/lib/text"
	"github.com/precept-dev/precept/rules/rulefmt"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/lib/gitrepo"
)

// Approve records an approval of a proposal. Approving twice is a no-op.
// A proposer cannot approve their own manual proposal. Once the proposal
// has its required approvals it is APPROVED and, with auto-merge on,
// merged into main as its rule.
func (m *Manager) Approve(ctx context.Context, req ApproveRequest) (rulefmt.Proposal, error) {
	id := req.ProposalID
	// A pasted token is committed by its kind only (docs/lifecycle.md).
	req.Note = safetext.Redact(req.Note)
	if err := m.policy.checkDecision(id, req.By, req.Note, req.Via); err != nil {
		return rulefmt.Proposal{}, err
	}
	st, err := m.store.State(ctx, id)
	if err != nil {
		return rulefmt.Proposal{}, err
	}
	if err := decidable(st, id); err != nil {
		if ruleID, merged := st.ByProposal[id]; merged && slices.ContainsFunc(st.Rules[ruleID].Approvals, func(a rulefmt.Approval) bool { return a.Approver == req.By }) {
			return m.Get(ctx, id)
		}
		return rulefmt.Proposal{}, err
	}
	var recorded, completed bool
	var after rulefmt.Proposal
	h, err := m.store.Commit(ctx, rulefmt.ProposalBranch(id), func(s *gitrepo.Snapshot) (*gitrepo.CommitSpec, error) {
		recorded, completed = false, false
		p, ok, err := m.store.ProposalAt(s, rulefmt.ProposalPath(id))
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, precept.Errorf(precept.NotFound, "proposal %s not found", id)
		}
		after = p
		next, rec, done, err := approve(p, req, m.now())
		if err != nil || !rec {
			return nil, err
		}
		data, err := next.Marshal()
		if err != nil {
			return nil, err
		}
		after, recorded, completed = next, true, done
		return &gitrepo.CommitSpec{
			Message: fmt.Sprintf("Approve %s (%d of %d) by %s", id, len(next.Approvals), next.Required, req.By),
			Trailers: []gitrepo.Trailer{
				{Key: rulefmt.TrailerApprovedBy, Value: req.By},
				{Key: rulefmt.TrailerProposalID, Value: id},
				{Key: rulefmt.TrailerVia, Value: req.Via},
			},
			Changes: []gitrepo.Change{{Path: rulefmt.ProposalPath(id), Data: data}},
		}, nil
	})
	if err != nil {
		return rulefmt.Proposal{}, err
	}
	if recorded {
		m.log.Info("approval recorded", "proposal_id", id, "approver", req.By, "via", req.Via, "approvals", len(after.Approvals), "required", after.Required)
		m.emit(rulefmt.Change{Kind: rulefmt.ApprovalRecorded, ProposalID: id, Agents: after.Agents, Commit: h.String(), Revision: after.Revision, Actor: req.By, Via: req.Via})
	}
	if completed {
		m.emit(rulefmt.Change{Kind: rulefmt.ProposalApproved, ProposalID: id, RuleID: after.RuleID, Agents: after.Agents, Commit: h.String(), Revision: after.Revision, Actor: req.By, Via: req.Via})
	}
	if after.Status == rulefmt.Approved && m.features.AutoMerge {
		faultPoint("approval-committed")
		if err := m.mergeProposal(ctx, id); err != nil {
			// The approval is recorded; Maintain retries the merge.
			m.log.Warn("merge approved proposal", "proposal_id", id, "err", err)
		}
	}
	return m.Get(ctx, id)
}

// Reject rejects a proposal; one rejection decides. The rejected
// proposal is archived on main as rules/rejected/<id>.md and its branch
// is deleted on the remote. Rejecting again by the same person is a
// no-op.
func (m *Manager) Reject(ctx context.Context, req RejectRequest) (rulefmt.Proposal, error) {
	id := req.ProposalID
	req.Reason = safetext.Redact(strings.TrimSpace(req.Reason))
	if req.Reason == "" {
		return rulefmt.Proposal{}, precept.Errorf(precept.Invalid, "reason: a rejection needs a reason")
	}
	if err := m.policy.checkDecision(id, req.By, req.Reason, req.Via); err != nil {
		return rulefmt.Proposal{}, err
	}
	st, err := m.store.State(ctx, id)
	if err != nil {
		return rulefmt.Proposal{}, err
	}
	if p := st.Rejected[id]; p != nil && p.Rejection != nil && p.Rejection.Rejector == req.By {
		return m.Get(ctx, id)
	}
	if err := decidable(st, id); err != nil {
		return rulefmt.Proposal{}, err
	}
	if err := m.commitRejection(ctx, req, "", true); err != nil {
		return rulefmt.Proposal{}, err
	}
	return m.Get(ctx, id)
}

// commitRejection commits a rejection on main. signature is the rejector
// as a git trailer value when it differs from the name (e.g. with an
// email). fenced consumes the proposal's branch at the tip read
// (Store.Decide); a rejection because the branch was deleted on the
// remote has none left to consume.
func (rc *recorder) commitRejection(ctx context.Context, req RejectRequest, signature string, fenced bool) error {
	id := req.ProposalID
	if signature == "" {
		signature = req.By
	}
	var after rulefmt.Proposal
	var done bool
	h, err := rc.store.Decide(ctx, func(s *gitrepo.Snapshot) (*gitrepo.CommitSpec, *gitrepo.Fence, error) {
		done = false
		if prev, ok, err := rc.store.ProposalAt(s, rulefmt.RejectedPath(id)); err != nil {
			return nil, nil, err
		} else if ok {
			if prev.Rejection != nil && prev.Rejection.Rejector == req.By {
				return nil, nil, nil
			}
			return nil, nil, precept.Errorf(precept.FailedPrecondition, "proposal %s was already rejected", id)
		}
		if ok, err := rc.store.HasRule(s, rulefmt.RuleIDFor(id)); err != nil || ok {
			return nil, nil, errOr(err, precept.Errorf(precept.FailedPrecondition, "proposal %s was already approved as rule %s; roll the rule back instead", id, rulefmt.RuleIDFor(id)))
		}
		branch, err := rc.store.Repo().Snapshot(rulefmt.ProposalBranch(id))
		if err != nil {
			return nil, nil, err
		}
		p, ok, err := rc.store.ProposalAt(branch, rulefmt.ProposalPath(id))
		if err != nil {
			return nil, nil, err
		}
		if !ok {
			return nil, nil, precept.Errorf(precept.NotFound, "proposal %s not found", id)
		}
		if merged, err := rc.store.Reaches(s.Commit, branch.Commit); err != nil || merged {
			return nil, nil, errOr(err, precept.Errorf(precept.FailedPrecondition, "proposal %s was already merged into %s", id, rc.store.Main()))
		}
		now := rc.now()
		p, err = reject(p, req, now)
		if err != nil {
			return nil, nil, err
		}
		data, err := p.Marshal()
		if err != nil {
			return nil, nil, err
		}
		changes := []gitrepo.Change{{Path: rulefmt.RejectedPath(id), Data: data}}
		// A rejected lifecycle proposal keeps a rule people want: its text
		// is no bad example.
		for _, agent := range rulefmt.ExampleAgents(p) {
			ex, err := rulefmt.TuningExample(p, agent, "bad", req.By, req.Reason, req.Via, now)
			if err != nil {
				return nil, nil, err
			}
			changes = append(changes, gitrepo.Change{Path: rulefmt.TuningPath(agent, "bad", id, req.By), Data: ex})
		}
		after, done = p, true
		// The rejection consumes the branch it read (Store.Decide).
		var fence *gitrepo.Fence
		if fenced {
			fence = &gitrepo.Fence{Branch: rulefmt.ProposalBranch(id), At: branch.Commit}
		}
		return &gitrepo.CommitSpec{
			Message: fmt.Sprintf("Reject %s by %s: %s", id, req.By, text.ClipWords(text.OneLine(req.Reason), 72)),
			Trailers: []gitrepo.Trailer{
				{Key: rulefmt.TrailerRejectedBy, Value: signature},
				{Key: rulefmt.TrailerReason, Value: text.ClipWords(text.OneLine(req.Reason), 500)},
				{Key: rulefmt.TrailerProposalID, Value: id},
				{Key: rulefmt.TrailerFeedbackIDs, Value: rulefmt.FeedbackTrailer(p.FeedbackIDs)},
				{Key: rulefmt.TrailerVia, Value: req.Via},
			},
			Changes: changes,
		}, fence, nil
	})
	if err != nil {
		return err
	}
	if done {
		rc.log.Info("proposal rejected", "proposal_id", id, "rejector", req.By, "via", req.Via)
		rc.emit(rulefmt.Change{Kind: rulefmt.ProposalRejected, ProposalID: id, Agents: after.Agents, Commit: h.String(), Revision: after.Revision, Actor: req.By, Via: req.Via, MainChanged: true})
	}
	return nil
}

// mergeProposal merges an APPROVED proposal's branch into main as its
// rule. It does nothing when the branch was merged before.
func (m *Manager) mergeProposal(ctx context.Context, id string) error {
	tip, err := m.store.Tip(rulefmt.ProposalBranch(id))
	if err != nil || tip.IsZero() {
		return err
	}
	branch, err := m.store.Repo().SnapshotAt(tip)
	if err != nil {
		return err
	}
	p, ok, err := m.store.ProposalAt(branch, rulefmt.ProposalPath(id))
	if err != nil || !ok || p.Status != rulefmt.Approved {
		return err
	}
	// The status is not enough: the approvals must be of this text, and
	// a new rule's text must pass the quality gate now.
	if reason := m.policy.mergeable(p); reason != "" {
		m.ignore(IgnoredChange{ProposalID: id, Branch: rulefmt.ProposalBranch(id), Commit: tip.String(), Kind: rulefmt.IgnoredMerge, Reason: reason}, tip)
		return nil
	}
	var done bool
	var superseded []string
	h, err := m.store.Decide(ctx, func(s *gitrepo.Snapshot) (*gitrepo.CommitSpec, *gitrepo.Fence, error) {
		// The merge consumes the branch at the tip that carried the
		// approvals (Store.Decide).
		fence := &gitrepo.Fence{Branch: rulefmt.ProposalBranch(id), At: tip}
		done = false
		if ok, err := s.Exists(rulefmt.RejectedPath(id)); err != nil || ok {
			return nil, nil, errOr(err, precept.Errorf(precept.FailedPrecondition, "proposal %s was rejected", id))
		}
		if ok, err := m.store.HasRule(s, p.RuleID); err != nil || ok && !p.Kind.DecidesOnRule() {
			return nil, nil, err
		}
		// Merged before (and perhaps rolled back since): never again.
		if merged, err := m.store.Reaches(s.Commit, tip); err != nil || merged {
			return nil, nil, err
		}
		if p.Kind.DecidesOnRule() {
			spec, err := m.store.LifecycleSpec(s, p, m.now(), nil)
			if err != nil {
				return nil, nil, err
			}
			if spec == nil {
				// The rule changed since (rolled back, or no longer in the
				// state the proposal asks about): record the decision with
				// nothing to do, so the proposal does not stay APPROVED.
				spec = &gitrepo.CommitSpec{
					Message:    fmt.Sprintf("Close %s: rule %s is no longer %s, nothing to do", p.ID, p.RuleID, rulefmt.RuleStatusFor(p.Kind)),
					Trailers:   []gitrepo.Trailer{{Key: rulefmt.TrailerProposalID, Value: p.ID}},
					AllowEmpty: true,
				}
			}
			spec.MergeParents = []gitrepo.Hash{tip}
			done = true
			return spec, fence, nil
		}
		spec, sup, err := m.store.ApprovalSpec(s, p, m.policy.ruleFor(p, m.now()), nil)
		if err != nil {
			return nil, nil, err
		}
		spec.MergeParents = []gitrepo.Hash{tip}
		done, superseded = true, sup
		return spec, fence, nil
	})
	if err != nil {
		return err
	}
	if done {
		m.log.Info("rule merged into main", "proposal_id", id, "rule_id", p.RuleID, "commit", h.String(), "supersedes", superseded)
		m.emit(rulefmt.Change{Kind: rulefmt.RuleMerged, ProposalID: id, RuleID: p.RuleID, Agents: p.Agents, Commit: h.String(), Revision: p.Revision, Actor: rulefmt.SystemProposer, Via: "precept", MainChanged: true})
	}
	return nil
}

// mergeApproved merges every APPROVED proposal still waiting on its
// branch (auto-merge was off, or the process stopped after the approval).
func (m *Manager) mergeApproved(ctx context.Context) error {
	st, err := m.store.State(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, id := range st.IDs() {
		if st.Open(id) && st.OnBranch[id].Status == rulefmt.Approved && st.OnMain[id] == nil {
			if err := m.mergeProposal(ctx, id); err != nil {
				errs = append(errs, fmt.Errorf("merge %s: %w", id, err))
			}
		}
	}
	return errors.Join(errs...)
}

// activateShadowRules commits SHADOW → ACTIVE for rules whose shadow
// period ended.
func (m *Manager) activateShadowRules(ctx context.Context) error {
	st, err := m.store.State(ctx)
	if err != nil {
		return err
	}
	now := m.now()
	var errs []error
	for _, id := range slices.Sorted(maps.Keys(st.Rules)) {
		r := st.Rules[id]
		if r.Status != rulefmt.Shadow || r.ShadowUntil == nil || r.ShadowUntil.After(now) {
			continue
		}
		if err := m.activate(ctx, id); err != nil {
			errs = append(errs, fmt.Errorf("activate %s: %w", id, err))
		}
	}
	return errors.Join(errs...)
}

func (m *Manager) activate(ctx context.Context, ruleID string) error {
	var r *rulefmt.Rule
	h, err := m.store.Commit(ctx, m.store.Main(), func(s *gitrepo.Snapshot) (*gitrepo.CommitSpec, error) {
		var changes []gitrepo.Change
		var err error
		changes, r, err = m.store.EditRule(s, ruleID, func(cur *rulefmt.Rule) (rulefmt.Rule, bool) {
			next := cur.Clone()
			next.Status, next.ActivatedAt = rulefmt.Active, m.now()
			return next, cur.Status == rulefmt.Shadow
		})
		if err != nil {
			return nil, err
		}
		if len(changes) == 0 {
			return nil, nil
		}
		return &gitrepo.CommitSpec{
			Message:  fmt.Sprintf("Activate rule %s after its shadow period", ruleID),
			Trailers: []gitrepo.Trailer{{Key: rulefmt.TrailerRuleID, Value: ruleID}, {Key: rulefmt.TrailerProposalID, Value: r.ProposalID}},
			Changes:  changes,
		}, nil
	})
	if err != nil || r == nil {
		return err
	}
	m.log.Info("shadow rule activated", "rule_id", ruleID, "commit", h.String())
	m.emit(rulefmt.Change{Kind: rulefmt.RuleActivated, ProposalID: r.ProposalID, RuleID: ruleID, Agents: r.Agents, Commit: h.String(), Actor: rulefmt.SystemProposer, Via: "precept", MainChanged: true})
	return nil
}
