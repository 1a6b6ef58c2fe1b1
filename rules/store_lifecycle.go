package rules

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/precept-dev/precept/lib/gitrepo"
	"github.com/precept-dev/precept/rules/rulefmt"
)

// lifecycleSpec is the commit that carries out an approved lifecycle
// proposal on main: a sunset removes the rule's files (its history keeps
// it, shown as SUNSET), a re-approval stamps reapproved_at, an activation
// makes a SHADOW rule ACTIVE. It returns nil when there is nothing left to
// do (the rule is gone, or already in the wanted state).
func (st *store) lifecycleSpec(s *gitrepo.Snapshot, p rulefmt.Proposal, now time.Time, g *gitApproval) (*gitrepo.CommitSpec, error) {
	var changes []gitrepo.Change
	if p.Kind == rulefmt.KindSunset {
		paths, err := st.ruleFiles(s, p.RuleID)
		if err != nil {
			return nil, err
		}
		for _, path := range paths {
			changes = append(changes, gitrepo.Change{Path: path, Delete: true})
		}
	} else {
		var err error
		changes, _, err = st.editRule(s, p.RuleID, func(cur *rulefmt.Rule) (rulefmt.Rule, bool) {
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
		trailers = append(trailers, gitrepo.Trailer{Key: rulefmt.TrailerMergeCommit, Value: g.commit.String()})
	}
	return &gitrepo.CommitSpec{Message: subject, Trailers: trailers, Changes: changes}, nil
}

// retiredIDs are the ids of the rules the history retired that are not
// on main, sorted.
func retiredIDs(st *state, idx *historyIndex) []string {
	seen := map[string]bool{}
	for _, e := range idx.entries {
		var ids []string
		switch {
		case e.Trailers[rulefmt.TrailerSunsets] != "":
			ids = []string{e.Trailers[rulefmt.TrailerSunsets]}
		case e.Trailers[rulefmt.TrailerRolledBackBy] != "":
			ids = []string{e.Trailers[rulefmt.TrailerRuleID]}
		case e.Trailers[rulefmt.TrailerSupersedes] != "":
			ids = strings.Fields(strings.ReplaceAll(e.Trailers[rulefmt.TrailerSupersedes], ",", " "))
		}
		for _, id := range ids {
			if rulefmt.ValidRuleID(id) && st.rules[id] == nil {
				seen[id] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(seen))
}
