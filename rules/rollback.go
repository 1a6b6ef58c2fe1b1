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

// Rollback reverts an active (or shadow) rule with a commit on main that
// records who and why (Rolled-back-by, Reason, Rule-Id). Every path the
// approval changed gets its pre-approval content back: the rule files
// disappear, rules it superseded return, and the approval's tuning
// examples go. For a rule approved by a merge in git, the merge's changes
// count as part of the approval. It returns the rule as it was, with
// status ROLLED_BACK, and the rollback commit.
func (m *Manager) Rollback(ctx context.Context, req RollbackRequest) (Rollback, error) {
	ruleID, by, reason := req.RuleID, req.By, safetext.Redact(strings.TrimSpace(req.Reason))
	switch {
	case !rulefmt.ValidRuleID(ruleID):
		return Rollback{}, precept.Errorf(precept.Invalid, "rule_id: %q is not a rule id (r-…)", text.ClipRunes(ruleID, 64))
	case reason == "":
		return Rollback{}, precept.Errorf(precept.Invalid, "reason: a rollback needs a reason")
	case len([]rune(reason)) > maxNoteRunes:
		return Rollback{}, precept.Errorf(precept.Invalid, "reason: longer than %d characters", maxNoteRunes)
	case by == "":
		return Rollback{}, precept.Errorf(precept.PermissionDenied, "a rollback needs an identity")
	}
	st, err := m.store.State(ctx)
	if err != nil {
		return Rollback{}, err
	}
	rule, ok := st.Rules[ruleID]
	if !ok {
		if _, _, err := m.Rule(ctx, ruleID); err != nil {
			return Rollback{}, err
		}
		return Rollback{}, precept.Errorf(precept.FailedPrecondition, "rule %s is not active; it was already rolled back or retired", ruleID)
	}
	restore, approval, err := m.store.PreApprovalContent(ctx, ruleID)
	if err != nil {
		return Rollback{}, err
	}
	var done bool
	h, err := m.store.Commit(ctx, m.store.Main(), func(s *gitrepo.Snapshot) (*gitrepo.CommitSpec, error) {
		done = false
		if ok, err := m.store.HasRule(s, ruleID); err != nil || !ok {
			return nil, errOr(err, precept.Errorf(precept.FailedPrecondition, "rule %s was rolled back meanwhile", ruleID))
		}
		var changes []gitrepo.Change
		for _, p := range slices.Sorted(maps.Keys(restore)) {
			want := restore[p]
			cur, err := s.ReadFile(p)
			switch {
			case errors.Is(err, gitrepo.ErrNotFound):
				if want != nil {
					changes = append(changes, gitrepo.Change{Path: p, Data: want})
				}
			case err != nil:
				return nil, err
			case want == nil:
				changes = append(changes, gitrepo.Change{Path: p, Delete: true})
			case string(cur) != string(want):
				changes = append(changes, gitrepo.Change{Path: p, Data: want})
			}
		}
		done = true
		return &gitrepo.CommitSpec{
			Message: fmt.Sprintf("Roll back rule %s: %s", ruleID, text.ClipWords(text.OneLine(reason), 72)),
			Trailers: []gitrepo.Trailer{
				{Key: rulefmt.TrailerRolledBackBy, Value: by},
				{Key: rulefmt.TrailerReason, Value: text.ClipWords(text.OneLine(reason), 500)},
				{Key: rulefmt.TrailerRuleID, Value: ruleID},
				{Key: rulefmt.TrailerProposalID, Value: rule.ProposalID},
				{Key: rulefmt.TrailerReverts, Value: approval.String()},
			},
			Changes: changes,
		}, nil
	})
	if err != nil {
		return Rollback{}, err
	}
	out := rule.Clone()
	out.Status, out.RollbackReason = rulefmt.RolledBack, reason
	if done {
		m.log.Info("rule rolled back", "rule_id", ruleID, "by", by, "commit", h.String())
		m.emit(rulefmt.Change{Kind: rulefmt.RuleRolledBack, ProposalID: rule.ProposalID, RuleID: ruleID, Agents: rule.Agents, Commit: h.String(), Actor: by, Via: rulefmt.ViaAPI, MainChanged: true})
	}
	return Rollback{Rule: out, Commit: h.String()}, nil
}
