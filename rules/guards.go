package rules

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/precept-dev/precept/lib/safetext"
	"github.com/precept-dev/precept/lib/text"
	"github.com/precept-dev/precept/rules/gitstore"
	"github.com/precept-dev/precept/rules/rulefmt"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/lib/embedding"
)

// Bounds on manual proposals.
const (
	maxAgents      = 20
	maxTags        = 20
	maxFeedbackIDs = 1000
)

func normalizeManual(mp ManualProposal) (ManualProposal, error) {
	mp.Agents = rulefmt.Distinct(mp.Agents)
	switch {
	case len(mp.Agents) == 0:
		return mp, precept.Errorf(precept.Invalid, "affected_agents: at least one agent is required")
	case len(mp.Agents) > maxAgents:
		return mp, precept.Errorf(precept.Invalid, "affected_agents: more than %d agents", maxAgents)
	}
	for _, a := range mp.Agents {
		if !rulefmt.ValidName(a) {
			return mp, precept.Errorf(precept.Invalid, "affected_agents: %q is not a valid agent name (letters, digits, '.', '_', '-')", text.ClipRunes(a, 64))
		}
	}
	if mp.Type == "" {
		mp.Type = rulefmt.Guideline
	}
	if !mp.Type.Valid() {
		return mp, precept.Errorf(precept.Invalid, "rule_type: %q is not a rule type", mp.Type)
	}
	if mp.InsertionPoint == "" {
		mp.InsertionPoint = rulefmt.DefaultInsertionPoint
	}
	if !rulefmt.ValidName(mp.InsertionPoint) {
		return mp, precept.Errorf(precept.Invalid, "insertion_point: %q is not a valid name", text.ClipRunes(mp.InsertionPoint, 64))
	}
	mp.Content = strings.TrimSpace(strings.ReplaceAll(mp.Content, "\r\n", "\n"))
	if utf8.RuneCountInString(mp.Rationale) > maxNoteRunes {
		return mp, precept.Errorf(precept.Invalid, "rationale: longer than %d characters", maxNoteRunes)
	}
	mp.FeedbackIDs = rulefmt.Distinct(mp.FeedbackIDs)
	if len(mp.FeedbackIDs) > maxFeedbackIDs {
		return mp, precept.Errorf(precept.Invalid, "feedback_ids: more than %d", maxFeedbackIDs)
	}
	for _, f := range mp.FeedbackIDs {
		if len(f) > 200 || strings.ContainsAny(f, " \t\r\n") {
			return mp, precept.Errorf(precept.Invalid, "feedback_ids: %q is not a decision id", text.ClipRunes(f, 64))
		}
	}
	mp.Tags = normalizeTags(mp.Tags)
	if len(mp.Tags) > maxTags {
		return mp, precept.Errorf(precept.Invalid, "tags: more than %d", maxTags)
	}
	return mp, nil
}

func normalizeTags(tags []string) []string {
	out := make([]string, 0, len(tags))
	for _, t := range tags {
		out = append(out, strings.ToLower(strings.TrimSpace(t)))
	}
	return rulefmt.Distinct(out)
}

// conflicts compares a candidate with the active rules and open
// proposals that share one of its agents.
func (pol policy) conflicts(ctx context.Context, st *gitstore.State, c Candidate) ([]rulefmt.ConflictReport, error) {
	var others []ruleText
	for _, t := range ruleTexts(st) {
		if _, ok := sharedAgent(c.Agents, t.Agents); ok {
			others = append(others, t)
		}
	}
	if len(others) == 0 {
		return nil, nil
	}
	texts := []string{c.Content}
	for _, o := range others {
		texts = append(texts, o.Content)
	}
	vecs, err := pol.vecs.vectors(ctx, texts)
	if err != nil {
		return nil, err
	}
	return classifyConflicts(c, vecs[0], others, vecs[1:], pol.opts.Thresholds), nil
}

// reconsolidate compares a proposal with the active rules and open
// proposals (docs/lifecycle.md, "The guards in order"). A duplicate is returned; otherwise
// overlapping and opposing ones are attached as conflicts and the active
// rules among them become Supersedes.
func (pol policy) reconsolidate(ctx context.Context, st *gitstore.State, p *rulefmt.Proposal) (*rulefmt.ConflictReport, error) {
	reports, err := pol.conflicts(ctx, st, Candidate{Agents: p.Agents, Content: p.Content, InsertionPoint: p.InsertionPoint, ProposalID: p.ID})
	if err != nil {
		return nil, err
	}
	for _, r := range reports {
		if r.Kind == rulefmt.ConflictDuplicate {
			p.Conflicts = []rulefmt.ConflictReport{r}
			p.Guards = append(p.Guards, rulefmt.GuardResult{Guard: rulefmt.GuardReconsolidation, Passed: false, Reason: r.Explanation})
			return &r, nil
		}
	}
	p.Conflicts = reports
	var overlapping, opposing []string
	for _, r := range reports {
		if st.Rules[r.OtherID] != nil {
			p.Supersedes = append(p.Supersedes, r.OtherID)
		}
		if r.Kind == rulefmt.ConflictOpposing {
			opposing = append(opposing, fmt.Sprintf("%s (%.2f)", r.OtherID, r.Similarity))
		} else {
			overlapping = append(overlapping, fmt.Sprintf("%s (%.2f)", r.OtherID, r.Similarity))
		}
	}
	reason := "no similar rule: a new rule"
	if len(overlapping) > 0 {
		reason = "overlaps " + strings.Join(overlapping, ", ")
	}
	if len(p.Supersedes) > 0 {
		reason += "; supersedes " + strings.Join(p.Supersedes, ", ") + " when approved"
	}
	p.Guards = append(p.Guards, rulefmt.GuardResult{Guard: rulefmt.GuardReconsolidation, Passed: true, Reason: reason})
	conflict := rulefmt.GuardResult{Guard: rulefmt.GuardConflict, Passed: true}
	if len(opposing) > 0 {
		conflict.Reason = "opposing guidance for the same agent and insertion point: " + strings.Join(opposing, ", ") + "; see the conflict report"
	}
	p.Guards = append(p.Guards, conflict)
	return nil, nil
}

// draftID is a drafted proposal's id: deterministic, so replicas drafting
// the same cluster collide on the branch name and only one proposes.
func draftID(clusterID string, generation int) string {
	sum := sha256.Sum256([]byte(clusterID + ":" + strconv.Itoa(generation)))
	return "p-" + hex.EncodeToString(sum[:])[:10]
}

func (pol policy) normalizeEvidence(ev rulefmt.Evidence) (rulefmt.Evidence, bool) {
	if ev.ClusterID == "" || ev.Class != rulefmt.ClassGeneralizableLow && ev.Class != rulefmt.ClassGeneralizableHigh {
		return ev, false
	}
	var agents []string
	for _, a := range rulefmt.Distinct(ev.Agents) {
		if rulefmt.ValidName(a) {
			agents = append(agents, a)
		} else {
			pol.log.Warn("evidence names an invalid agent; ignored", "cluster_id", ev.ClusterID, "agent", text.ClipRunes(a, 64))
		}
	}
	ev.Agents = agents
	ev.FeedbackIDs = rulefmt.Distinct(ev.FeedbackIDs)
	ev.Reviewers = rulefmt.Distinct(ev.Reviewers)
	ev.Epics = rulefmt.Distinct(ev.Epics)
	ev.Producers = rulefmt.Distinct(ev.Producers)
	ev.Tags = normalizeTags(ev.Tags)
	if ev.Size < len(ev.FeedbackIDs) {
		ev.Size = len(ev.FeedbackIDs)
	}
	return ev, len(ev.Agents) > 0
}

// guard applies the guards in order — safety floor, quality gate,
// rejected before, reconsolidation and conflicts, rule cap, rate cap —
// recording each result on p. It returns Pending when p may become a rule
// PR, Blocked or Deferred when a guard held it, and Merged with the
// duplicate it should add its evidence to.
func (pol policy) guard(ctx context.Context, st *gitstore.State, retired []gitstore.RetiredRule, p *rulefmt.Proposal, now time.Time) (rulefmt.ProposalStatus, *rulefmt.ConflictReport, error) {
	// Whatever the outcome, it is committed: a draft held for a secret
	// (or held before the quality gate saw it) never carries the secret
	// into the repository. The guard's reason names its kind only.
	defer func() {
		p.Content = safetext.Redact(p.Content)
		for i := range p.Clauses {
			p.Clauses[i].Text = safetext.Redact(p.Clauses[i].Text)
		}
	}()
	result := func(guard string, passed bool, reason string) {
		p.Guards = append(p.Guards, rulefmt.GuardResult{Guard: guard, Passed: passed, Reason: reason})
	}
	if tags := pol.protected(p.Tags); len(tags) > 0 {
		result(rulefmt.GuardSafetyFloor, false, fmt.Sprintf("touches protected %s %s: such rules are never proposed automatically; a person may propose it (it then needs %d approvals)",
			text.Plural(len(tags), "tag", "tags"), strings.Join(tags, ", "), pol.opts.RequiredApprovals+1))
		return rulefmt.Blocked, nil, nil
	}
	result(rulefmt.GuardSafetyFloor, true, "")
	if reason := pol.opts.Quality.Check(p.Content); reason != "" {
		result(rulefmt.GuardQuality, false, reason)
		return rulefmt.Blocked, nil, nil
	}
	result(rulefmt.GuardQuality, true, "")

	passed, reason, err := pol.rejectedBefore(ctx, st, retired, p)
	if err != nil {
		return "", nil, err
	}
	result(rulefmt.GuardRejectedBefore, passed, reason)
	if !passed {
		return rulefmt.Blocked, nil, nil
	}

	dup, err := pol.reconsolidate(ctx, st, p)
	if err != nil {
		return "", nil, err
	}
	if dup != nil {
		return rulefmt.Merged, dup, nil
	}

	for _, agent := range p.Agents {
		n := st.ActiveCount(agent) - st.SupersededOf(p.Supersedes, agent)
		if n < pol.opts.MaxActiveRulesPerAgent {
			continue
		}
		if len(p.Agents) > 1 {
			result(rulefmt.GuardRuleCap, false, fmt.Sprintf("%s has %d active rules, the cap; a rule for several agents cannot be consolidated into one of them", agent, n))
			return rulefmt.Blocked, nil, nil
		}
		nearest, err := pol.consolidate(ctx, st, p, agent, n)
		if err != nil {
			return "", nil, err
		}
		if nearest == "" {
			result(rulefmt.GuardRuleCap, false, fmt.Sprintf("%s has %d active rules, the cap, and none it alone holds to consolidate with", agent, n))
			return rulefmt.Blocked, nil, nil
		}
		if reason := pol.opts.Quality.Check(p.Content); reason != "" {
			result(rulefmt.GuardRuleCap, false, fmt.Sprintf("%s has %d active rules, the cap; the consolidation with %s fails the quality gate: %s", agent, n, nearest, reason))
			return rulefmt.Blocked, nil, nil
		}
		result(rulefmt.GuardRuleCap, true, fmt.Sprintf("%s has %d active rules, the cap: proposed as a consolidation replacing %s", agent, n, nearest))
		break
	}
	if p.Kind != rulefmt.KindConsolidation {
		result(rulefmt.GuardRuleCap, true, "")
	}

	for _, agent := range p.Agents {
		if n, next := pol.recentDrafts(st, agent, now); n >= pol.opts.MaxProposalsPerAgent {
			result(rulefmt.GuardRateCap, false, fmt.Sprintf("%d proposals were drafted for %s in the last %s (the cap is %d); the next slot opens at %s",
				n, agent, pol.opts.ProposalWindow, pol.opts.MaxProposalsPerAgent, next.Format(time.RFC3339)))
			return rulefmt.Deferred, nil, nil
		}
	}
	result(rulefmt.GuardRateCap, true, "")
	return rulefmt.Pending, nil, nil
}

// rejectedBefore blocks a draft similar to a rejected proposal unless its
// support at least doubled; the rejection reason is shown either way.
func (pol policy) rejectedBefore(ctx context.Context, st *gitstore.State, retired []gitstore.RetiredRule, p *rulefmt.Proposal) (bool, string, error) {
	var others []*rulefmt.Proposal
	for _, id := range slices.Sorted(maps.Keys(st.Rejected)) {
		r := st.Rejected[id]
		if r.Kind.DecidesOnRule() {
			// A rejected sunset or re-approval says the rule is wanted,
			// not that its text was refused.
			continue
		}
		if _, ok := sharedAgent(p.Agents, r.Agents); ok && id != p.ID {
			others = append(others, r)
		}
	}
	// A rolled-back rule counts as rejected: its reason is the rollback's.
	for _, rr := range retired {
		if _, ok := sharedAgent(p.Agents, rr.Rule.Agents); ok {
			others = append(others, &rulefmt.Proposal{
				ID: rr.Rule.ID, Agents: rr.Rule.Agents, Content: rr.Rule.Content, Support: len(rr.Rule.FeedbackIDs),
				Rejection: &rulefmt.Rejection{Rejector: rr.By, Reason: "rolled back: " + rr.Reason},
			})
		}
	}
	if len(others) == 0 {
		return true, "", nil
	}
	texts := []string{p.Content}
	for _, o := range others {
		texts = append(texts, o.Content)
	}
	vecs, err := pol.vecs.vectors(ctx, texts)
	if err != nil {
		return false, "", err
	}
	var best *rulefmt.Proposal
	bestSim := 0.0
	for i, o := range others {
		if s := embedding.Cosine(vecs[0], vecs[i+1]); s > pol.opts.Thresholds.Rejected && s > bestSim {
			best, bestSim = o, s
		}
	}
	if best == nil {
		return true, "", nil
	}
	who, why := "", ""
	if best.Rejection != nil {
		who, why = best.Rejection.Rejector, best.Rejection.Reason
	}
	need := 2 * max(best.Support, 1)
	if p.Support >= need {
		return true, fmt.Sprintf("similar (%.2f) to %s, rejected by %s: %q; proposed again because its support doubled (%d → %d)",
			bestSim, best.ID, who, why, best.Support, p.Support), nil
	}
	return false, fmt.Sprintf("similar (%.2f) to %s, rejected by %s: %q; proposed again only once its support doubles (%d now, %d needed)",
		bestSim, best.ID, who, why, p.Support, need), nil
}

// consolidate turns p into a consolidation with the agent's most similar
// rule that only it holds, and returns that rule's id ("" when there is
// none).
func (pol policy) consolidate(ctx context.Context, st *gitstore.State, p *rulefmt.Proposal, agent string, count int) (string, error) {
	var candidates []*rulefmt.Rule
	for _, id := range slices.Sorted(maps.Keys(st.Rules)) {
		r := st.Rules[id]
		if len(r.Agents) == 1 && r.Agents[0] == agent && (r.Status == rulefmt.Active || r.Status == rulefmt.Shadow) && !slices.Contains(p.Supersedes, id) {
			candidates = append(candidates, r)
		}
	}
	if len(candidates) == 0 {
		return "", nil
	}
	texts := []string{p.Content}
	for _, c := range candidates {
		texts = append(texts, c.Content)
	}
	vecs, err := pol.vecs.vectors(ctx, texts)
	if err != nil {
		return "", err
	}
	best, bestSim := candidates[0], -2.0
	for i, c := range candidates {
		if s := embedding.Cosine(vecs[0], vecs[i+1]); s > bestSim {
			best, bestSim = c, s
		}
	}
	p.Kind = rulefmt.KindConsolidation
	p.Supersedes = append(p.Supersedes, best.ID)
	p.Content = strings.TrimSpace(p.Content) + "\n\n" + strings.TrimSpace(best.Content)
	p.EvidenceSummary = fmt.Sprintf("%s has %d active rules, the cap: this consolidation replaces %s with one rule that also carries the new guidance. %s",
		agent, count, best.ID, p.EvidenceSummary)
	return best.ID, nil
}

// rateCapAllows reports whether every agent has a free proposal slot.
func (pol policy) rateCapAllows(st *gitstore.State, agents []string, now time.Time) bool {
	for _, a := range agents {
		if n, _ := pol.recentDrafts(st, a, now); n >= pol.opts.MaxProposalsPerAgent {
			return false
		}
	}
	return true
}

// recentDrafts counts the drafted rule PRs for an agent within the window
// and says when the oldest of them leaves it.
func (pol policy) recentDrafts(st *gitstore.State, agent string, now time.Time) (int, time.Time) {
	since := now.Add(-pol.opts.ProposalWindow)
	created := st.SystemDrafts(agent)
	// The first draft created after since: the oldest in the window.
	i, _ := slices.BinarySearchFunc(created, since, func(t, since time.Time) int {
		if t.After(since) {
			return 1
		}
		return -1
	})
	if i == len(created) {
		return 0, now.Add(pol.opts.ProposalWindow)
	}
	oldest := created[i]
	if oldest.After(now) {
		oldest = now
	}
	return len(created) - i, oldest.Add(pol.opts.ProposalWindow)
}

// draftPlan is what drafting a cluster comes to before any text is
// written: the proposal id and generation, and the text of a held draft
// to propose again as it was.
type draftPlan struct {
	id         string
	generation int
	reuse      draft
}

// planDraft decides whether a cluster is drafted now, and as which
// proposal. A cluster with an open proposal, an active rule, a merge in
// git waiting, or whose evidence went to an existing rule is not
// drafted. Every decided proposal of the cluster (approved, rejected,
// rolled back) starts a new generation with a new id, so replicas
// drafting the same cluster collide on the branch name. A held draft of
// the current generation is retried only when its rate-cap slot opened
// (deferred; its text is kept) or its support grew (blocked).
func (pol policy) planDraft(st *gitstore.State, retired []gitstore.RetiredRule, ev rulefmt.Evidence, now time.Time) (draftPlan, bool) {
	decided, held, settled := standing(st, retired, ev.ClusterID)
	if settled {
		return draftPlan{}, false
	}
	plan := draftPlan{id: draftID(ev.ClusterID, decided), generation: decided}
	if held != nil && held.ID == plan.id {
		switch {
		case held.Status == rulefmt.Deferred && !pol.rateCapAllows(st, held.Agents, now):
			return draftPlan{}, false
		case held.Status == rulefmt.Deferred:
			// The clauses are recomputed from the evidence: the file on
			// main says only where each came from, never which decisions
			// ask for it.
			plan.reuse = draft{Type: held.Type, Content: held.Content, By: held.DraftedBy,
				Clauses: attribute(held.Content, ev, held.Clauses, sourceFor(held.DraftedBy))}
		case ev.Support() <= held.Support:
			return draftPlan{}, false
		}
	}
	return plan, true
}

// standing is where a cluster stands in st: how many of its proposals
// were decided (its next draft's generation), the held draft of its
// proposals if any, and settled when one of them is open, merged, on
// main or an active rule, so that it is not drafted again.
func standing(st *gitstore.State, retired []gitstore.RetiredRule, clusterID string) (decided int, held *rulefmt.Proposal, settled bool) {
	for _, rr := range retired {
		// Rolled back with its branch gone: still a generation.
		if rr.Rule.ClusterID == clusterID && !slices.Contains(st.ByCluster[clusterID], rr.Rule.ProposalID) {
			decided++
		}
	}
	for _, id := range st.ByCluster[clusterID] {
		p, _ := st.Proposal(id)
		_, ruleActive := st.ByProposal[id]
		switch {
		case st.Open(id), ruleActive, p.Status == rulefmt.Merged, st.OnMain[id] != nil:
			return 0, nil, true
		case p.Status == rulefmt.Approved, p.Status == rulefmt.Rejected:
			decided++
		case p.Status == rulefmt.Blocked, p.Status == rulefmt.Deferred:
			held = &p
		}
	}
	return decided, held, false
}

// mayDraft reports whether planDraft may draft the cluster ref names,
// whatever its evidence, as long as that evidence's support is at most
// ref.Size: false only where planDraft certainly says no. The proposer
// reads the evidence of the others only.
func (pol policy) mayDraft(st *gitstore.State, retired []gitstore.RetiredRule, ref rulefmt.ClusterRef, now time.Time) bool {
	decided, held, settled := standing(st, retired, ref.ID)
	if settled {
		return false
	}
	if held != nil && held.ID == draftID(ref.ID, decided) {
		switch {
		case held.Status == rulefmt.Deferred:
			return pol.rateCapAllows(st, held.Agents, now)
		case ref.Size <= held.Support:
			return false
		}
	}
	return true
}

// drafted is the proposal a drafted text makes of a cluster, before the
// guards record their results on it.
func (pol policy) drafted(ev rulefmt.Evidence, plan draftPlan, d draft, now time.Time) rulefmt.Proposal {
	summary := evidenceSummary(ev)
	if len(d.Left) > 0 {
		// The curator sees what the drafter chose not to say.
		summary += " Left out of the category's guidance, as no comment asked for it: “" + strings.Join(d.Left, "”; “") + "”."
	}
	clauses := d.Clauses
	if clauses == nil {
		clauses = attribute(d.Content, ev, nil, sourceFor(d.By))
	}
	return rulefmt.Proposal{
		ID: plan.id, Kind: rulefmt.KindNewRule, Status: rulefmt.Pending, Revision: 1, ContentRevision: 1,
		FeedbackIDs: ev.FeedbackIDs, Confidence: ev.Confidence, Agents: ev.Agents, Type: d.Type,
		InsertionPoint: rulefmt.DefaultInsertionPoint, EvidenceSummary: summary, CreatedAt: now, UpdatedAt: now,
		ProposedBy: rulefmt.SystemProposer, ClusterID: ev.ClusterID, Generation: plan.generation, Class: ev.Class, Priority: ev.Priority(),
		Support: ev.Support(), Reviewers: ev.Reviewers, Epics: ev.Epics, Producers: ev.Producers, Tags: ev.Tags, DraftedBy: d.By,
		Required: pol.opts.RequiredApprovals, RuleID: rulefmt.RuleIDFor(plan.id), Content: d.Content,
		// The evidence guard comes first and never holds the draft: it
		// shows the curator what goes beyond the evidence.
		Clauses: clauses, Guards: []rulefmt.GuardResult{evidenceGuard(clauses)},
	}
}

// manual makes the proposal a person proposes (mp, normalized) and
// guards it like a drafted one, except that a person may propose what
// touches a protected tag (it then needs one approval more) and that a
// refusal is an error rather than a held draft: a duplicate of an
// existing rule or proposal, or an agent at its rule cap.
func (pol policy) manual(ctx context.Context, st *gitstore.State, mp ManualProposal, proposer, id string, now time.Time) (rulefmt.Proposal, error) {
	summary := safetext.Redact(strings.TrimSpace(mp.Rationale))
	if summary == "" {
		summary = "Proposed by " + proposer + " without a rationale."
	}
	if n := len(mp.FeedbackIDs); n > 0 {
		summary += fmt.Sprintf(" Cites %d %s.", n, text.Plural(n, "decision", "decisions"))
	}
	p := rulefmt.Proposal{
		ID: id, Kind: rulefmt.KindNewRule, Status: rulefmt.Pending, Revision: 1, ContentRevision: 1,
		FeedbackIDs: mp.FeedbackIDs, Confidence: 1, Agents: mp.Agents, Type: mp.Type, InsertionPoint: mp.InsertionPoint,
		EvidenceSummary: summary, CreatedAt: now, UpdatedAt: now, ProposedBy: proposer, Support: len(mp.FeedbackIDs),
		Tags: mp.Tags, DraftedBy: "manual", Required: pol.opts.RequiredApprovals, RuleID: rulefmt.RuleIDFor(id), Content: mp.Content,
	}
	p.Guards = append(p.Guards, rulefmt.GuardResult{Guard: rulefmt.GuardQuality, Passed: true})
	dup, err := pol.reconsolidate(ctx, st, &p)
	if err != nil {
		return rulefmt.Proposal{}, err
	}
	if dup != nil {
		return rulefmt.Proposal{}, precept.Errorf(precept.Conflict, "rule_content duplicates %s (similarity %.2f): %q; no new proposal is needed",
			dup.OtherID, dup.Similarity, text.ClipWords(dup.OtherContent, 120))
	}
	for _, agent := range p.Agents {
		if n := st.ActiveCount(agent) - st.SupersededOf(p.Supersedes, agent); n >= pol.opts.MaxActiveRulesPerAgent {
			return rulefmt.Proposal{}, precept.Errorf(precept.FailedPrecondition, "%s already has %d active rules (rules.max_active_rules_per_agent); roll one back or consolidate first", agent, n)
		}
	}
	p.Guards = append(p.Guards, rulefmt.GuardResult{Guard: rulefmt.GuardRuleCap, Passed: true})
	if tags := pol.protected(p.Tags); len(tags) > 0 {
		p.Protected = true
		p.Required++
		p.Guards = append(p.Guards, rulefmt.GuardResult{Guard: rulefmt.GuardSafetyFloor, Passed: true,
			Reason: fmt.Sprintf("touches protected %s %s: needs %d approvals", text.Plural(len(tags), "tag", "tags"), strings.Join(tags, ", "), p.Required)})
	}
	return p, nil
}

// ruleTexts returns the active rules and open proposals the guards
// compare drafts with, in a stable order.
func ruleTexts(st *gitstore.State) []ruleText {
	var out []ruleText
	ids := make([]string, 0, len(st.Rules))
	for id := range st.Rules {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		r := st.Rules[id]
		if !r.Live() {
			continue
		}
		out = append(out, ruleText{ID: id, Agents: r.Agents, InsertionPoint: r.InsertionPoint, Content: r.Content, IsRule: true})
	}
	for _, id := range st.IDs() {
		if !st.Open(id) {
			continue
		}
		p := st.OnBranch[id]
		if p.Kind.DecidesOnRule() {
			// Its text is its rule's, listed above.
			continue
		}
		out = append(out, ruleText{ID: id, Agents: p.Agents, InsertionPoint: p.InsertionPoint, Content: p.Content})
	}
	return out
}
