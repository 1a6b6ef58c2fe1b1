package rules

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/lib/gitrepo"
)

// Lifecycle reports whether proposals of this kind decide on an existing
// rule (its RuleID) rather than create one: SUNSET, REAPPROVE, ACTIVATE
// (docs/effects.md, "Lifecycle from evidence").
func (k Kind) Lifecycle() bool {
	return k == KindSunset || k == KindReapprove || k == KindActivate
}

// The lifecycle proposal kinds besides KindSunset.
const (
	// KindReapprove asks people to confirm a rule nothing exercised for
	// a long time; unanswered, the rule goes to SHADOW.
	KindReapprove Kind = "REAPPROVE"
	// KindActivate brings a SHADOW rule back into the prompt.
	KindActivate Kind = "ACTIVATE"
)

// TrailerSunsets names the rule a sunset approval retired; TrailerLifecycle
// the kind of a lifecycle proposal, on the commit that proposes it.
const (
	TrailerSunsets   = "Sunsets"
	TrailerLifecycle = "Lifecycle"
)

// EffectSummary is what the evidence said about a rule when it was last
// recorded in the rule file's front matter (docs/effects.md). It is
// written periodically, not per decision.
type EffectSummary struct {
	// Category is the lesson category whose recurrences count; kept so
	// the pattern is known after its source cluster merged away.
	Category string `yaml:"category,omitempty"`
	// BaseConfidence is the confidence the rule was approved with, which
	// recurrences lower.
	BaseConfidence float64 `yaml:"base_confidence"`
	// FirstActivatedAt is the rule's first activation: the baseline is
	// taken before it, so a re-activated rule is never compared with its
	// own earlier exposures.
	FirstActivatedAt  time.Time `yaml:"first_activated_at"`
	Attribution       string    `yaml:"attribution"`
	Exposures         int64     `yaml:"exposures"`
	Recurrences       int64     `yaml:"recurrences"`
	RateAfter         float64   `yaml:"rate_after"`
	RateAfterInterval []float64 `yaml:"rate_after_interval,flow"`
	BeforeDecisions   int64     `yaml:"before_decisions"`
	RateBefore        float64   `yaml:"rate_before"`
	ChangeInterval    []float64 `yaml:"change_interval,flow"`
	Validations       int64     `yaml:"validations"`
	Verdict           string    `yaml:"verdict"`
	Method            string    `yaml:"method"`
	ComputedAt        time.Time `yaml:"computed_at"`
}

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
	Kind   Kind
	RuleID string
	// Evidence is the effect report in words; it becomes the proposal's
	// evidence summary.
	Evidence string
}

// lifecycleStatus is the rule status each lifecycle kind applies to.
func lifecycleStatus(k Kind) Status {
	if k == KindActivate {
		return Shadow
	}
	return Active
}

// OpenLifecycle returns the open lifecycle proposal about a rule, if any.
func (l *Lifecycle) OpenLifecycle(ctx context.Context, ruleID string) (Proposal, bool, error) {
	m := l.m
	st, err := m.store.State(ctx)
	if err != nil {
		return Proposal{}, false, err
	}
	p, ok := openLifecycle(st, ruleID)
	return p, ok, nil
}

func openLifecycle(st *state, ruleID string) (Proposal, bool) {
	for _, id := range st.ids() {
		if !st.open(id) {
			continue
		}
		if p := st.onBranch[id]; p.Kind.Lifecycle() && p.RuleID == ruleID {
			out, _ := st.proposal(id)
			return out, true
		}
	}
	return Proposal{}, false
}

// LifecycleHistory returns the decided lifecycle proposals of one kind
// about a rule, oldest first.
func (l *Lifecycle) LifecycleHistory(ctx context.Context, ruleID string, kind Kind) ([]Proposal, error) {
	m := l.m
	st, err := m.store.State(ctx)
	if err != nil {
		return nil, err
	}
	var out []Proposal
	for _, id := range st.ids() {
		p, ok := st.proposal(id)
		if ok && p.Kind == kind && p.RuleID == ruleID && !st.open(id) {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b Proposal) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out, nil
}

// ProposeLifecycle commits a lifecycle proposal as a rule PR, like any
// other: its own branch, posted to Slack, decided by the same approvals.
// created is false when a lifecycle proposal about the rule is open
// already (it is returned instead). The proposal's id is derived from the
// kind, the rule and how many such proposals were decided before, so
// replicas proposing the same thing make the same branch.
func (l *Lifecycle) ProposeLifecycle(ctx context.Context, req LifecycleRequest) (p Proposal, created bool, err error) {
	m := l.m
	if !req.Kind.Lifecycle() {
		return Proposal{}, false, precept.Errorf(precept.Invalid, "kind: %s is not a lifecycle proposal", req.Kind)
	}
	st, err := m.store.State(ctx)
	if err != nil {
		return Proposal{}, false, err
	}
	r := st.rules[req.RuleID]
	if r == nil {
		return Proposal{}, false, precept.Errorf(precept.NotFound, "rule %s is not on main", req.RuleID)
	}
	if want := lifecycleStatus(req.Kind); r.Status != want {
		return Proposal{}, false, precept.Errorf(precept.FailedPrecondition, "rule %s is %s; a %s proposal needs it %s", req.RuleID, r.Status, req.Kind, want)
	}
	if open, ok := openLifecycle(st, req.RuleID); ok {
		return open, false, nil
	}
	// Count every earlier proposal of this kind about the rule: those the
	// state still holds, and those only history remembers (a merged
	// proposal whose branch the git host deleted).
	earlier := map[string]bool{}
	for _, id := range st.ids() {
		if q, ok := st.proposal(id); ok && q.Kind == req.Kind && q.RuleID == req.RuleID {
			earlier[id] = true
		}
	}
	idx, err := m.store.history(ctx)
	if err != nil {
		return Proposal{}, false, err
	}
	for _, e := range idx.entries {
		if e.Trailers[TrailerLifecycle] == string(req.Kind) && e.Trailers[TrailerRuleID] == req.RuleID {
			earlier[e.Trailers[TrailerProposalID]] = true
		}
	}
	generation := len(earlier)
	sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%s\x00%d", req.Kind, req.RuleID, generation))
	now := m.now()
	required := m.opts.RequiredApprovals
	if r.Protected {
		required++
	}
	p = Proposal{
		ID: "p-" + hex.EncodeToString(sum[:10]), Kind: req.Kind, Status: Pending, Revision: 1, ContentRevision: 1,
		FeedbackIDs: slices.Clone(r.FeedbackIDs), Confidence: r.Confidence, Agents: slices.Clone(r.Agents),
		Type: r.Type, InsertionPoint: r.InsertionPoint, EvidenceSummary: req.Evidence,
		CreatedAt: now, UpdatedAt: now, ProposedBy: SystemProposer, ClusterID: r.ClusterID,
		Tags: slices.Clone(r.Tags), Protected: r.Protected, Required: required, RuleID: r.ID,
		Generation: generation, Content: r.Content, Support: len(r.FeedbackIDs),
	}
	h, created, err := m.store.createProposal(p)
	if err != nil {
		return Proposal{}, false, err
	}
	if !created {
		got, err := m.Get(ctx, p.ID)
		return got, false, err
	}
	m.log.Info("lifecycle proposal made", "proposal_id", p.ID, "kind", p.Kind, "rule_id", r.ID)
	m.emit(Change{Kind: ProposalCreated, ProposalID: p.ID, RuleID: r.ID, Agents: p.Agents, Commit: h.String(), Revision: p.Revision, Actor: SystemProposer, Via: "precept"})
	got, err := m.Get(ctx, p.ID)
	return got, true, err
}

// lifecycleSpec is the commit that carries out an approved lifecycle
// proposal on main: a sunset removes the rule's files (its history keeps
// it, shown as SUNSET), a re-approval stamps reapproved_at, an activation
// makes a SHADOW rule ACTIVE. It returns nil when there is nothing left to
// do (the rule is gone, or already in the wanted state).
func (st *store) lifecycleSpec(s *gitrepo.Snapshot, p Proposal, now time.Time, g *gitApproval) (*gitrepo.CommitSpec, error) {
	var changes []gitrepo.Change
	if p.Kind == KindSunset {
		paths, err := st.ruleFiles(s, p.RuleID)
		if err != nil {
			return nil, err
		}
		for _, path := range paths {
			changes = append(changes, gitrepo.Change{Path: path, Delete: true})
		}
	} else {
		var err error
		changes, _, err = st.editRule(s, p.RuleID, func(cur *Rule) (Rule, bool) {
			if cur.Status != lifecycleStatus(p.Kind) {
				return Rule{}, false
			}
			next := cur.clone()
			if p.Kind == KindReapprove {
				t := now
				next.ReapprovedAt = &t
			} else {
				next.Status, next.ActivatedAt, next.ShadowUntil, next.ShadowReason, next.ShadowedAt = Active, now, nil, "", nil
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
	trailers := []gitrepo.Trailer{{Key: TrailerProposalID, Value: p.ID}, {Key: TrailerRuleID, Value: p.RuleID}}
	for _, a := range p.Approvals {
		v := a.Approver
		if g != nil && a.Via == ViaGit {
			v = g.signature()
		}
		trailers = append(trailers, gitrepo.Trailer{Key: TrailerApprovedBy, Value: v})
	}
	var subject string
	switch p.Kind {
	case KindSunset:
		trailers = append(trailers, gitrepo.Trailer{Key: TrailerSunsets, Value: p.RuleID}, gitrepo.Trailer{Key: TrailerReason, Value: "ineffective: " + firstLine(p.EvidenceSummary)})
		subject = fmt.Sprintf("Sunset rule %s: %s approved", p.RuleID, p.ID)
	case KindReapprove:
		subject = fmt.Sprintf("Re-approve rule %s: %s approved", p.RuleID, p.ID)
	default:
		subject = fmt.Sprintf("Activate shadow rule %s: %s approved", p.RuleID, p.ID)
	}
	if g != nil {
		if ok, err := s.Exists(ProposalPath(p.ID)); err != nil {
			return nil, err
		} else if ok {
			changes = append(changes, gitrepo.Change{Path: ProposalPath(p.ID), Delete: true})
		}
		trailers = append(trailers, gitrepo.Trailer{Key: TrailerMergeCommit, Value: g.commit.String()})
	}
	return &gitrepo.CommitSpec{Message: subject, Trailers: trailers, Changes: changes}, nil
}

// lifecycleless returns the agents whose tuning examples a decision on
// p writes: none for a lifecycle proposal.
func lifecycleless(p Proposal) []string {
	if p.Kind.Lifecycle() {
		return nil
	}
	return p.Agents
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
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
	var r *Rule
	h, err := m.store.Commit(ctx, m.store.main, func(s *gitrepo.Snapshot) (*gitrepo.CommitSpec, error) {
		var changes []gitrepo.Change
		var err error
		changes, r, err = m.store.editRule(s, ruleID, func(cur *Rule) (Rule, bool) {
			next := cur.clone()
			at := m.now()
			next.Status, next.ShadowUntil, next.ShadowReason, next.ShadowedAt = Shadow, nil, why, &at
			return next, cur.Status == Active
		})
		if err != nil {
			return nil, err
		}
		if len(changes) == 0 {
			return nil, nil
		}
		return &gitrepo.CommitSpec{
			Message:  fmt.Sprintf("Move idle rule %s to SHADOW: re-approval %s unanswered", ruleID, proposalID),
			Trailers: []gitrepo.Trailer{{Key: TrailerRuleID, Value: ruleID}, {Key: TrailerProposalID, Value: proposalID}, {Key: TrailerReason, Value: why}},
			Changes:  changes,
		}, nil
	})
	if err != nil || r == nil {
		return err
	}
	m.log.Info("idle rule moved to shadow", "rule_id", ruleID, "proposal_id", proposalID, "commit", h.String())
	m.emit(Change{Kind: RuleShadowed, ProposalID: proposalID, RuleID: ruleID, Agents: r.Agents, Commit: h.String(), Actor: SystemProposer, Via: "precept", MainChanged: true})
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
	if p := st.onBranch[proposalID]; p == nil || !p.Kind.Lifecycle() || !st.open(proposalID) {
		return nil
	}
	return m.commitRejection(ctx, RejectRequest{ProposalID: proposalID, By: SystemProposer, Reason: reason, Via: "precept"}, "")
}

// EffectUpdate is what the learning loop concluded about one rule:
// its importance and confidence, and the figures behind them.
type EffectUpdate struct {
	RuleID string
	// Importance is the level the validations crossed into since the
	// last recording ("" when none); a rule is raised to it, never
	// lowered.
	Importance Importance
	Confidence float64
	// Validations and Recurrences go to positive_validations and
	// negative_validations.
	Validations int
	Recurrences int
	Effect      EffectSummary
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
	h, err := m.store.Commit(ctx, m.store.main, func(s *gitrepo.Snapshot) (*gitrepo.CommitSpec, error) {
		changed, agents = 0, nil
		var changes []gitrepo.Change
		for _, id := range slices.Sorted(maps.Keys(byID)) {
			u := byID[id]
			edited, r, err := m.store.editRule(s, id, func(cur *Rule) (Rule, bool) {
				next := cur.clone()
				// Raised, never lowered: a curator's lower setting stays
				// until the validations cross the next threshold.
				if u.Importance.Rank() > cur.Importance.Rank() {
					next.Importance = u.Importance
				}
				next.Confidence = u.Confidence
				next.PositiveValidations, next.NegativeValidations = u.Validations, u.Recurrences
				eff := u.Effect
				next.Effect = &eff
				return next, !cur.sameEffect(next)
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
	m.emit(Change{Kind: RuleEffectsRecorded, Agents: distinct(agents), Commit: h.String(), Actor: SystemProposer, Via: "precept", MainChanged: true})
	return changed, nil
}

// sameEffect reports whether next records nothing new: the same
// importance, confidence and figures (the computation time aside).
func (r Rule) sameEffect(next Rule) bool {
	if r.Importance != next.Importance || r.Confidence != next.Confidence ||
		r.PositiveValidations != next.PositiveValidations || r.NegativeValidations != next.NegativeValidations {
		return false
	}
	if r.Effect == nil || next.Effect == nil {
		return r.Effect == next.Effect
	}
	a, b := *r.Effect, *next.Effect
	a.ComputedAt, b.ComputedAt = time.Time{}, time.Time{}
	return a.Attribution == b.Attribution && a.Exposures == b.Exposures && a.Recurrences == b.Recurrences &&
		a.BeforeDecisions == b.BeforeDecisions && a.Validations == b.Validations && a.Verdict == b.Verdict &&
		a.RateBefore == b.RateBefore && a.Method == b.Method && a.Category == b.Category &&
		a.BaseConfidence == b.BaseConfidence && a.FirstActivatedAt.Equal(b.FirstActivatedAt)
}

// RetiredRules lists the ids of the rules that left main — rolled back,
// sunset, or superseded — of an agent (every agent's when agent is
// empty), sorted. With no agent nothing is read beyond the history; an
// agent's are those whose last version names it.
func (l *Lifecycle) RetiredRules(ctx context.Context, agent string) ([]string, error) {
	st, idx, err := l.m.store.stateAndHistory(ctx)
	if err != nil {
		return nil, err
	}
	ids := retiredIDs(st, idx)
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
func (l *Lifecycle) Retired(ctx context.Context, agent string) ([]Rule, error) {
	st, idx, err := l.m.store.stateAndHistory(ctx)
	if err != nil {
		return nil, err
	}
	var out []Rule
	for _, id := range retiredIDs(st, idx) {
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

// retiredIDs are the ids of the rules the history retired that are not
// on main, sorted.
func retiredIDs(st *state, idx *historyIndex) []string {
	seen := map[string]bool{}
	for _, e := range idx.entries {
		var ids []string
		switch {
		case e.Trailers[TrailerSunsets] != "":
			ids = []string{e.Trailers[TrailerSunsets]}
		case e.Trailers[TrailerRolledBackBy] != "":
			ids = []string{e.Trailers[TrailerRuleID]}
		case e.Trailers[TrailerSupersedes] != "":
			ids = strings.Fields(strings.ReplaceAll(e.Trailers[TrailerSupersedes], ",", " "))
		}
		for _, id := range ids {
			if ValidRuleID(id) && st.rules[id] == nil {
				seen[id] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(seen))
}
