package rules

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/gitrepo"
)

// Rollback reverts an active (or shadow) rule with a commit on main that
// records who and why (Rolled-back-by, Reason, Rule-Id). Every path the
// approval changed gets its pre-approval content back: the rule files
// disappear, rules it superseded return, and the approval's tuning
// examples go. For a rule approved by a merge in git, the merge's changes
// count as part of the approval. It returns the rule as it was, with
// status ROLLED_BACK, and the rollback commit.
func (m *Manager) Rollback(ctx context.Context, ruleID, by, reason string) (Rule, string, error) {
	reason = strings.TrimSpace(reason)
	switch {
	case !ValidRuleID(ruleID):
		return Rule{}, "", precept.Errorf(precept.Invalid, "rule_id: %q is not a rule id (r-…)", clipRunes(ruleID, 64))
	case reason == "":
		return Rule{}, "", precept.Errorf(precept.Invalid, "reason: a rollback needs a reason")
	case len([]rune(reason)) > maxNoteRunes:
		return Rule{}, "", precept.Errorf(precept.Invalid, "reason: longer than %d characters", maxNoteRunes)
	case by == "":
		return Rule{}, "", precept.Errorf(precept.PermissionDenied, "a rollback needs an identity")
	}
	st, err := m.load(ctx)
	if err != nil {
		return Rule{}, "", err
	}
	rule, ok := st.rules[ruleID]
	if !ok {
		if _, _, err := m.Rule(ctx, ruleID); err != nil {
			return Rule{}, "", err
		}
		return Rule{}, "", precept.Errorf(precept.FailedPrecondition, "rule %s is not active; it was already rolled back or retired", ruleID)
	}
	restore, approval, err := m.preApprovalContent(ctx, ruleID)
	if err != nil {
		return Rule{}, "", err
	}
	var done bool
	h, err := m.repo.Update(ctx, m.main, func(s *gitrepo.Snapshot) (*gitrepo.CommitSpec, error) {
		done = false
		if ok, err := m.hasRule(s, ruleID); err != nil || !ok {
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
			Message: fmt.Sprintf("Roll back rule %s: %s", ruleID, clipWords(oneLine(reason), 72)),
			Trailers: []gitrepo.Trailer{
				{Key: TrailerRolledBackBy, Value: by},
				{Key: TrailerReason, Value: clipWords(oneLine(reason), 500)},
				{Key: TrailerRuleID, Value: ruleID},
				{Key: TrailerProposalID, Value: rule.ProposalID},
				{Key: TrailerReverts, Value: approval.String()},
			},
			Changes: changes,
		}, nil
	})
	if err != nil {
		return Rule{}, "", err
	}
	out := rule.clone()
	out.Status, out.RollbackReason = RolledBack, reason
	if done {
		m.metrics.rollbacks.Inc()
		m.log.Info("rule rolled back", "rule_id", ruleID, "by", by, "commit", h.String())
		m.emit(Change{Kind: RuleRolledBack, ProposalID: rule.ProposalID, RuleID: ruleID, Agents: rule.Agents, Commit: h.String(), Actor: by, Via: ViaAPI, MainChanged: true})
	}
	return out, h.String(), nil
}

// preApprovalContent finds the commit that approved a rule and returns,
// for every path the approval changed, its content before the approval
// (nil: the path did not exist).
func (m *Manager) preApprovalContent(ctx context.Context, ruleID string) (map[string][]byte, gitrepo.Hash, error) {
	idx, err := m.history(ctx)
	if err != nil {
		return nil, gitrepo.ZeroHash, err
	}
	var approval *HistoryEntry
	for i := range idx.entries {
		if e := &idx.entries[i]; e.createsRule && e.Trailers[TrailerRuleID] == ruleID {
			approval = e
			break
		}
	}
	if approval == nil {
		return nil, gitrepo.ZeroHash, fmt.Errorf("rollback %s: the commit that approved it is not in main's history", ruleID)
	}
	restore := map[string][]byte{}
	if err := m.collectBefore(approval.hash, restore); err != nil {
		return nil, gitrepo.ZeroHash, err
	}
	if mc := approval.Trailers[TrailerMergeCommit]; mc != "" {
		// Approved by a merge in git: what the merge brought is part of
		// the approval, and its pre-merge state wins.
		merge, err := parseHash(mc)
		if err != nil {
			return nil, gitrepo.ZeroHash, err
		}
		if err := m.collectBefore(merge, restore); err != nil {
			return nil, gitrepo.ZeroHash, err
		}
	}
	return restore, approval.hash, nil
}

// collectBefore records, for each path commit c changed relative to its
// first parent, the parent's content.
func (m *Manager) collectBefore(c gitrepo.Hash, into map[string][]byte) error {
	ci, err := m.commitInfo(c)
	if err != nil {
		return err
	}
	var parent gitrepo.Hash
	if len(ci.Parents) > 0 {
		parent = ci.Parents[0]
	}
	changes, err := m.repo.Diff(parent, c, "")
	if err != nil {
		return err
	}
	var before *gitrepo.Snapshot
	if !parent.IsZero() {
		if before, err = m.repo.SnapshotAt(parent); err != nil {
			return err
		}
	}
	for _, ch := range changes {
		into[ch.Path] = nil
		if before == nil || ch.Kind == gitrepo.Added {
			continue
		}
		data, err := before.ReadFile(ch.Path)
		if err != nil {
			return err
		}
		into[ch.Path] = data
	}
	return nil
}

// parseHash reads a commit id written in a trailer.
func parseHash(s string) (gitrepo.Hash, error) {
	var h gitrepo.Hash
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(h) {
		return h, fmt.Errorf("malformed commit id %q", s)
	}
	copy(h[:], b)
	return h, nil
}
