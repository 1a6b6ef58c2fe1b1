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

// Upkeep is what the learning loop does to approved rules
// (docs/effects.md, "Lifecycle from evidence"): it reads them, records
// their effects, moves idle rules to SHADOW, and makes and withdraws
// lifecycle proposals. It shares the Manager's recorder — the store, the
// clock, the log and the listeners — and knows the approvals a proposal
// needs; it holds no policy and runs no loop of its own.
type Upkeep struct {
	rec               recorder
	requiredApprovals int
}

// OpenProposal returns the open lifecycle proposal about a rule, if any.
func (u *Upkeep) OpenProposal(ctx context.Context, ruleID string) (rulefmt.Proposal, bool, error) {
	rc := &u.rec
	st, err := rc.store.State(ctx)
	if err != nil {
		return rulefmt.Proposal{}, false, err
	}
	p, ok := openLifecycleProposal(st, ruleID)
	return p, ok, nil
}

// DecidedProposals returns the decided lifecycle proposals of one kind
// about a rule, oldest first.
func (u *Upkeep) DecidedProposals(ctx context.Context, ruleID string, kind rulefmt.Kind) ([]rulefmt.Proposal, error) {
	rc := &u.rec
	st, err := rc.store.State(ctx)
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

// Propose commits a lifecycle proposal as a rule PR, like any
// other: its own branch, posted to Slack, decided by the same approvals.
// created is false when a lifecycle proposal about the rule is open
// already (it is returned instead). The proposal's id is derived from the
// kind, the rule and how many such proposals were decided before, so
// replicas proposing the same thing make the same branch.
func (u *Upkeep) Propose(ctx context.Context, req rulefmt.LifecycleRequest) (p rulefmt.Proposal, created bool, err error) {
	rc := &u.rec
	if !req.Kind.DecidesOnRule() {
		return rulefmt.Proposal{}, false, precept.Errorf(precept.Invalid, "kind: %s is not a lifecycle proposal", req.Kind)
	}
	st, err := rc.store.State(ctx)
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
	if open, ok := openLifecycleProposal(st, req.RuleID); ok {
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
	idx, err := rc.store.History(ctx)
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
	now := rc.now()
	required := u.requiredApprovals
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
	h, created, err := rc.store.CreateProposal(ctx, p)
	if err != nil {
		return rulefmt.Proposal{}, false, err
	}
	if !created {
		got, err := rc.proposal(ctx, p.ID)
		return got, false, err
	}
	rc.log.Info("lifecycle proposal made", "proposal_id", p.ID, "kind", p.Kind, "rule_id", r.ID)
	rc.emit(rulefmt.Change{Kind: rulefmt.ProposalCreated, ProposalID: p.ID, RuleID: r.ID, Agents: p.Agents, Commit: h.String(), Revision: p.Revision, Actor: rulefmt.SystemProposer, Via: "precept"})
	got, err := rc.proposal(ctx, p.ID)
	return got, true, err
}

// ShadowIdle moves an ACTIVE rule whose re-approval went unanswered to
// SHADOW and closes the re-approval proposal as rejected by precept: the
// rule leaves the prompt but is never silently deleted; an ACTIVATE
// proposal brings it back.
func (u *Upkeep) ShadowIdle(ctx context.Context, ruleID, proposalID, why string) error {
	rc := &u.rec
	if err := u.Withdraw(ctx, proposalID, "unanswered: "+why); err != nil {
		return fmt.Errorf("close re-approval %s: %w", proposalID, err)
	}
	var r *rulefmt.Rule
	h, err := rc.store.Commit(ctx, rc.store.Main(), func(s *gitrepo.Snapshot) (*gitrepo.CommitSpec, error) {
		var changes []gitrepo.Change
		var err error
		changes, r, err = rc.store.EditRule(s, ruleID, func(cur *rulefmt.Rule) (rulefmt.Rule, bool) {
			next := cur.Clone()
			at := rc.now()
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
	rc.log.Info("idle rule moved to shadow", "rule_id", ruleID, "proposal_id", proposalID, "commit", h.String())
	rc.emit(rulefmt.Change{Kind: rulefmt.RuleShadowed, ProposalID: proposalID, RuleID: ruleID, Agents: r.Agents, Commit: h.String(), Actor: rulefmt.SystemProposer, Via: "precept", MainChanged: true})
	return nil
}

// Withdraw closes an open lifecycle proposal that lost its reason
// (a re-approval request for a rule used again): rejected by precept with
// the reason, past the policy for people's decisions.
func (u *Upkeep) Withdraw(ctx context.Context, proposalID, reason string) error {
	rc := &u.rec
	st, err := rc.store.State(ctx, proposalID)
	if err != nil {
		return err
	}
	if p := st.OnBranch[proposalID]; p == nil || !p.Kind.DecidesOnRule() || !st.Open(proposalID) {
		return nil
	}
	return rc.commitRejection(ctx, RejectRequest{ProposalID: proposalID, By: rulefmt.SystemProposer, Reason: reason, Via: "precept"}, "", true)
}

// RecordEffects writes the updates into the rule files on main in one
// commit ("Record rule effects"), leaving rules that left main and files
// whose figures did not change alone. A change of importance reorders the
// agent's prompt, so the commit notifies prompt assembly.
func (u *Upkeep) RecordEffects(ctx context.Context, updates []rulefmt.EffectUpdate) (int, error) {
	rc := &u.rec
	byID := map[string]rulefmt.EffectUpdate{}
	for _, u := range updates {
		byID[u.RuleID] = u
	}
	changed := 0
	var agents []string
	h, err := rc.store.Commit(ctx, rc.store.Main(), func(s *gitrepo.Snapshot) (*gitrepo.CommitSpec, error) {
		changed, agents = 0, nil
		var changes []gitrepo.Change
		for _, id := range slices.Sorted(maps.Keys(byID)) {
			u := byID[id]
			edited, r, err := rc.store.EditRule(s, id, func(cur *rulefmt.Rule) (rulefmt.Rule, bool) {
				next := cur.Clone()
				eff := u.Effect
				if cur.Effect != nil && cur.Effect.RaisedTo == cur.Importance {
					eff.RaisedTo, eff.RaisedFrom = cur.Effect.RaisedTo, cur.Effect.RaisedFrom
				}
				switch {
				case u.Importance.Rank() > cur.Importance.Rank():
					// Raised when the validations cross a threshold; a
					// curator's lower setting stays until the next one.
					if eff.RaisedTo == "" {
						eff.RaisedFrom = cur.Importance
					}
					next.Importance, eff.RaisedTo = u.Importance, u.Importance
				case u.Lower != "" && eff.RaisedTo != "" && u.Lower.Rank() < cur.Importance.Rank():
					// Raised by precept on evidence that no longer holds
					// (docs/effects.md): back down.
					next.Importance, eff.RaisedTo = u.Lower, u.Lower
					if u.Lower.Rank() <= eff.RaisedFrom.Rank() {
						eff.RaisedTo, eff.RaisedFrom = "", ""
					}
				}
				next.Confidence = u.Confidence
				next.PositiveValidations, next.NegativeValidations = u.Validations, u.Recurrences
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
	rc.emit(rulefmt.Change{Kind: rulefmt.RuleEffectsRecorded, Agents: rulefmt.Distinct(agents), Commit: h.String(), Actor: rulefmt.SystemProposer, Via: "precept", MainChanged: true})
	return changed, nil
}

// RetiredRules lists the ids of the rules that left main — rolled back,
// sunset, or superseded — of an agent (every agent's when agent is
// empty), sorted. With no agent nothing is read beyond the history; an
// agent's are those whose last version names it.
func (u *Upkeep) RetiredRules(ctx context.Context, agent string) ([]string, error) {
	st, idx, err := u.rec.store.StateAndHistory(ctx)
	if err != nil {
		return nil, err
	}
	ids := gitstore.RetiredIDs(st, idx)
	if agent == "" {
		return ids, nil
	}
	var out []string
	for _, id := range ids {
		if r, _, err := u.rec.ruleAt(st, idx, id); err == nil && slices.Contains(r.Agents, agent) {
			out = append(out, id)
		}
	}
	return out, nil
}

// Retired lists the rules that left main of an agent (every agent's when
// agent is empty), by id, each as it was when it left, from one reading
// of the repository. A rule whose last version cannot be found is left
// out.
func (u *Upkeep) Retired(ctx context.Context, agent string) ([]rulefmt.Rule, error) {
	st, idx, err := u.rec.store.StateAndHistory(ctx)
	if err != nil {
		return nil, err
	}
	var out []rulefmt.Rule
	for _, id := range gitstore.RetiredIDs(st, idx) {
		r, _, err := u.rec.ruleAt(st, idx, id)
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

// Rule returns a rule with its provenance, as Manager.Rule does.
func (u *Upkeep) Rule(ctx context.Context, id string) (rulefmt.Rule, []rulefmt.HistoryEntry, error) {
	return u.rec.rule(ctx, id)
}

// ActiveRules returns the ACTIVE and SHADOW rules of an agent, as
// Manager.ActiveRules does.
func (u *Upkeep) ActiveRules(ctx context.Context, agent string) ([]rulefmt.Rule, error) {
	return u.rec.activeRules(ctx, agent)
}
