package rules

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/lib/gitrepo"
	"github.com/precept-dev/precept/rules/gitstore"
	"github.com/precept-dev/precept/rules/rulefmt"
)

// Lifecycle acts on an approved rule from evidence: lifecycle proposals,
// moving idle rules to SHADOW, recording effects (docs/effects.md). It
// shares the Manager's repository and policy.
type Lifecycle struct{ m *Manager }

// Lifecycle returns the manager's lifecycle operations.
func (m *Manager) Lifecycle() *Lifecycle { return &Lifecycle{m: m} }

// LifecycleRequest asks people to decide on an existing rule: retire it
// (KindSunset), confirm it (KindReapprove) or bring it back from SHADOW
// (KindActivate), with the evidence that prompted the question.
type LifecycleRequest struct {
	Kind   rulefmt.Kind
	RuleID string
	// Evidence is the effect report in words; it becomes the proposal's
	// evidence summary.
	Evidence string
}

// OpenLifecycle returns the open lifecycle proposal about a rule, if any.
func (l *Lifecycle) OpenLifecycle(ctx context.Context, ruleID string) (rulefmt.Proposal, bool, error) {
	m := l.m
	st, err := m.store.State(ctx)
	if err != nil {
		return rulefmt.Proposal{}, false, err
	}
	p, ok := openLifecycle(st, ruleID)
	return p, ok, nil
}

// LifecycleHistory returns the decided lifecycle proposals of one kind
// about a rule, oldest first.
func (l *Lifecycle) LifecycleHistory(ctx context.Context, ruleID string, kind rulefmt.Kind) ([]rulefmt.Proposal, error) {
	m := l.m
	st, err := m.store.State(ctx)
	if err != nil {
		return nil, err
	}
	var out []rulefmt.Proposal
	for _, id := range st.IDs() {
		p, ok := st.Proposal(id)
		if ok && p.Kind == kind && p.RuleID == ruleID && !st.Open(id) {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b rulefmt.Proposal) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out, nil
}

// ProposeLifecycle commits a lifecycle proposal as a rule PR, like any
// other: its own branch, posted to Slack, decided by the same approvals.
// created is false when a lifecycle proposal about the rule is open
// already (it is returned instead). The proposal's id is derived from the
// kind, the rule and how many such proposals were decided before, so
// replicas proposing the same thing make the same branch.
func (l *Lifecycle) ProposeLifecycle(ctx context.Context, req LifecycleRequest) (p rulefmt.Proposal, created bool, err error) {
	m := l.m
	if !req.Kind.DecidesOnRule() {
		return rulefmt.Proposal{}, false, precept.Errorf(precept.Invalid, "kind: %s is not a lifecycle proposal", req.Kind)
	}
	st, err := m.store.State(ctx)
	if err != nil {
		return rulefmt.Proposal{}, false, err
	}
	r := st.Rules[req.RuleID]
	if r == nil {
		return rulefmt.Proposal{}, false, precept.Errorf(precept.NotFound, "rule %s is not on main", req.RuleID)
	}
	if want := rulefmt.RuleStatusFor(req.Kind); r.Status != want {
		return rulefmt.Proposal{}, false, precept.Errorf(precept.FailedPrecondition, "rule %s is %s; a %s proposal needs it %s", req.RuleID, r.Status, req.Kind, want)
	}
	if open, ok := openLifecycle(st, req.RuleID); ok {
		return open, false, nil
	}
	// Count every earlier proposal of this kind about the rule: those the
	// state still holds, and those only history remembers (a merged
	// proposal whose branch the git host deleted).
	earlier := map[string]bool{}
	for _, id := range st.IDs() {
		if q, ok := st.Proposal(id); ok && q.Kind == req.Kind && q.RuleID == req.RuleID {
			earlier[id] = true
		}
	}
	idx, err := m.store.History(ctx)
	if err != nil {
		return rulefmt.Proposal{}, false, err
	}
	for _, e := range idx.Entries() {
		if e.Trailers[rulefmt.TrailerLifecycle] == string(req.Kind) && e.Trailers[rulefmt.TrailerRuleID] == req.RuleID {
			earlier[e.Trailers[rulefmt.TrailerProposalID]] = true
		}
	}
	generation := len(earlier)
	sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%s\x00%d", req.Kind, req.RuleID, generation))
	now := m.now()
	required := m.opts.RequiredApprovals
	if r.Protected {
		required++
	}
	p = rulefmt.Proposal{
		ID: "p-" + hex.EncodeToString(sum[:10]), Kind: req.Kind, Status: rulefmt.Pending, Revision: 1, ContentRevision: 1,
		FeedbackIDs: slices.Clone(r.FeedbackIDs), Confidence: r.Confidence, Agents: slices.Clone(r.Agents),
		Type: r.Type, InsertionPoint: r.InsertionPoint, EvidenceSummary: req.Evidence,
		CreatedAt: now, UpdatedAt: now, ProposedBy: rulefmt.SystemProposer, ClusterID: r.ClusterID,
		Tags: slices.Clone(r.Tags), Protected: r.Protected, Required: required, RuleID: r.ID,
		Generation: generation, Content: r.Content, Support: len(r.FeedbackIDs),
	}
	h, created, err := m.store.CreateProposal(p)
	if err != nil {
		return rulefmt.Proposal{}, false, err
	}
	if !created {
		got, err := m.Get(ctx, p.ID)
		return got, false, err
	}
	m.log.Info("lifecycle proposal made", "proposal_id", p.ID, "kind", p.Kind, "rule_id", r.ID)
	m.emit(rulefmt.Change{Kind: rulefmt.ProposalCreated, ProposalID: p.ID, RuleID: r.ID, Agents: p.Agents, Commit: h.String(), Revision: p.Revision, Actor: rulefmt.SystemProposer, Via: "precept"})
	got, err := m.Get(ctx, p.ID)
	return got, true, err
}

// ShadowIdle moves an ACTIVE rule whose re-approval went unanswered to
// SHADOW and closes the re-approval proposal as rejected by precept: the
// rule leaves the prompt but is never silently deleted; an ACTIVATE
// proposal brings it back.
func (l *Lifecycle) ShadowIdle(ctx context.Context, ruleID, proposalID, why string) error {
	m := l.m
	if err := l.CloseLifecycle(ctx, proposalID, "unanswered: "+why); err != nil {
		return fmt.Errorf("close re-approval %s: %w", proposalID, err)
	}
	var r *rulefmt.Rule
	h, err := m.store.Commit(ctx, m.store.Main(), func(s *gitrepo.Snapshot) (*gitrepo.CommitSpec, error) {
		var changes []gitrepo.Change
		var err error
		changes, r, err = m.store.EditRule(s, ruleID, func(cur *rulefmt.Rule) (rulefmt.Rule, bool) {
			next := cur.Clone()
			at := m.now()
			next.Status, next.ShadowUntil, next.ShadowReason, next.ShadowedAt = rulefmt.Shadow, nil, why, &at
			return next, cur.Status == rulefmt.Active
		})
		if err != nil {
			return nil, err
		}
		if len(changes) == 0 {
			return nil, nil
		}
		return &gitrepo.CommitSpec{
			Message:  fmt.Sprintf("Move idle rule %s to SHADOW: re-approval %s unanswered", ruleID, proposalID),
			Trailers: []gitrepo.Trailer{{Key: rulefmt.TrailerRuleID, Value: ruleID}, {Key: rulefmt.TrailerProposalID, Value: proposalID}, {Key: rulefmt.TrailerReason, Value: why}},
			Changes:  changes,
		}, nil
	})
	if err != nil || r == nil {
		return err
	}
	m.log.Info("idle rule moved to shadow", "rule_id", ruleID, "proposal_id", proposalID, "commit", h.String())
	m.emit(rulefmt.Change{Kind: rulefmt.RuleShadowed, ProposalID: proposalID, RuleID: ruleID, Agents: r.Agents, Commit: h.String(), Actor: rulefmt.SystemProposer, Via: "precept", MainChanged: true})
	return nil
}

// CloseLifecycle closes an open lifecycle proposal that lost its reason
// (a re-approval request for a rule used again): rejected by precept with
// the reason, past the policy for people's decisions.
func (l *Lifecycle) CloseLifecycle(ctx context.Context, proposalID, reason string) error {
	m := l.m
	st, err := m.store.State(ctx, proposalID)
	if err != nil {
		return err
	}
	if p := st.OnBranch[proposalID]; p == nil || !p.Kind.DecidesOnRule() || !st.Open(proposalID) {
		return nil
	}
	return m.commitRejection(ctx, RejectRequest{ProposalID: proposalID, By: rulefmt.SystemProposer, Reason: reason, Via: "precept"}, "")
}

// EffectUpdate is what the learning loop concluded about one rule:
// its importance and confidence, and the figures behind them.
type EffectUpdate struct {
	RuleID string
	// Importance is the level the validations crossed into since the
	// last recording ("" when none); a rule is raised to it, never
	// lowered.
	Importance rulefmt.Importance
	Confidence float64
	// Validations and Recurrences go to positive_validations and
	// negative_validations.
	Validations int
	Recurrences int
	Effect      rulefmt.EffectSummary
}

// RecordEffects writes the updates into the rule files on main in one
// commit ("Record rule effects"), leaving rules that left main and files
// whose figures did not change alone. A change of importance reorders the
// agent's prompt, so the commit notifies prompt assembly.
func (l *Lifecycle) RecordEffects(ctx context.Context, updates []EffectUpdate) (int, error) {
	m := l.m
	byID := map[string]EffectUpdate{}
	for _, u := range updates {
		byID[u.RuleID] = u
	}
	changed := 0
	var agents []string
	h, err := m.store.Commit(ctx, m.store.Main(), func(s *gitrepo.Snapshot) (*gitrepo.CommitSpec, error) {
		changed, agents = 0, nil
		var changes []gitrepo.Change
		for _, id := range slices.Sorted(maps.Keys(byID)) {
			u := byID[id]
			edited, r, err := m.store.EditRule(s, id, func(cur *rulefmt.Rule) (rulefmt.Rule, bool) {
				next := cur.Clone()
				// Raised, never lowered: a curator's lower setting stays
				// until the validations cross the next threshold.
				if u.Importance.Rank() > cur.Importance.Rank() {
					next.Importance = u.Importance
				}
				next.Confidence = u.Confidence
				next.PositiveValidations, next.NegativeValidations = u.Validations, u.Recurrences
				eff := u.Effect
				next.Effect = &eff
				return next, !cur.SameEffect(next)
			})
			if err != nil {
				return nil, err
			}
			if r != nil {
				changes = append(changes, edited...)
				agents = append(agents, r.Agents...)
				changed++
			}
		}
		if len(changes) == 0 {
			return nil, nil
		}
		return &gitrepo.CommitSpec{Message: fmt.Sprintf("Record rule effects: %d rule(s)", changed), Changes: changes}, nil
	})
	if err != nil || changed == 0 {
		return 0, err
	}
	m.emit(rulefmt.Change{Kind: rulefmt.RuleEffectsRecorded, Agents: rulefmt.Distinct(agents), Commit: h.String(), Actor: rulefmt.SystemProposer, Via: "precept", MainChanged: true})
	return changed, nil
}

// sunset, or superseded — of an agent (every agent's when agent is
// empty), sorted. With no agent nothing is read beyond the history; an
// agent's are those whose last version names it.
func (l *Lifecycle) RetiredRules(ctx context.Context, agent string) ([]string, error) {
	st, idx, err := l.m.store.StateAndHistory(ctx)
	if err != nil {
		return nil, err
	}
	ids := gitstore.RetiredIDs(st, idx)
	if agent == "" {
		return ids, nil
	}
	var out []string
	for _, id := range ids {
		if r, _, err := l.m.ruleAt(st, idx, id); err == nil && slices.Contains(r.Agents, agent) {
			out = append(out, id)
		}
	}
	return out, nil
}

// Retired lists the rules that left main of an agent (every agent's when
// agent is empty), by id, each as it was when it left, from one reading
// of the repository. A rule whose last version cannot be found is left
// out.
func (l *Lifecycle) Retired(ctx context.Context, agent string) ([]rulefmt.Rule, error) {
	st, idx, err := l.m.store.StateAndHistory(ctx)
	if err != nil {
		return nil, err
	}
	var out []rulefmt.Rule
	for _, id := range gitstore.RetiredIDs(st, idx) {
		r, _, err := l.m.ruleAt(st, idx, id)
		if precept.ErrorCode(err) == precept.NotFound {
			continue
		}
		if err != nil {
			return nil, err
		}
		if agent == "" || slices.Contains(r.Agents, agent) {
			out = append(out, r)
		}
	}
	return out, nil
}
