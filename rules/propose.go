package rules

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/oklog/ulid/v2"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/embedding"
	"github.com/precept-dev/precept/gitrepo"
)

// ManualProposal is a rule a person proposes through the API.
type ManualProposal struct {
	Agents []string
	// Type defaults to GUIDELINE.
	Type    Type
	Content string
	// InsertionPoint defaults to DefaultInsertionPoint.
	InsertionPoint string
	// Rationale says why the rule is needed; it becomes the evidence
	// summary.
	Rationale   string
	FeedbackIDs []string
	Tags        []string
}

// Bounds on manual proposals.
const (
	maxAgents      = 20
	maxTags        = 20
	maxFeedbackIDs = 1000
)

// Propose commits a manual proposal as a rule PR. It passes the quality
// gate and reconsolidation like a drafted one: a duplicate of an existing
// rule or proposal is refused, overlapping and opposing ones are reported
// and superseded on approval. A proposal touching a protected tag needs
// one approval more; its proposer cannot approve it.
func (m *Manager) Propose(ctx context.Context, mp ManualProposal, proposer precept.Identity) (Proposal, error) {
	if proposer.Name == "" {
		return Proposal{}, precept.Errorf(precept.PermissionDenied, "a proposal needs an identity")
	}
	mp, err := normalizeManual(mp)
	if err != nil {
		return Proposal{}, err
	}
	if reason := m.opts.Quality.Check(mp.Content); reason != "" {
		return Proposal{}, precept.Errorf(precept.Invalid, "rule_content: blocked by the quality gate: %s", reason)
	}
	if err := m.ensureMain(ctx); err != nil {
		return Proposal{}, err
	}
	st, err := m.load(ctx)
	if err != nil {
		return Proposal{}, err
	}
	now := m.now()
	id := "p-" + strings.ToLower(ulid.Make().String())
	summary := strings.TrimSpace(mp.Rationale)
	if summary == "" {
		summary = "Proposed by " + proposer.Name + " without a rationale."
	}
	if n := len(mp.FeedbackIDs); n > 0 {
		summary += fmt.Sprintf(" Cites %d %s.", n, plural(n, "decision", "decisions"))
	}
	p := Proposal{
		ID: id, Kind: KindNewRule, Status: Pending, Revision: 1, ContentRevision: 1,
		FeedbackIDs: mp.FeedbackIDs, Confidence: 1, Agents: mp.Agents, Type: mp.Type, InsertionPoint: mp.InsertionPoint,
		EvidenceSummary: summary, CreatedAt: now, UpdatedAt: now, ProposedBy: proposer.Name, Support: len(mp.FeedbackIDs),
		Tags: mp.Tags, DraftedBy: "manual", Required: m.opts.RequiredApprovals, RuleID: RuleIDFor(id), Content: mp.Content,
	}
	p.Guards = append(p.Guards, GuardResult{Guard: GuardQuality, Passed: true})
	dup, err := m.reconsolidate(ctx, st, &p)
	if err != nil {
		return Proposal{}, err
	}
	if dup != nil {
		return Proposal{}, precept.Errorf(precept.Conflict, "rule_content duplicates %s (similarity %.2f): %q; no new proposal is needed",
			dup.OtherID, dup.Similarity, clipWords(dup.OtherContent, 120))
	}
	for _, agent := range p.Agents {
		if n := st.activeCount(agent) - supersededOf(st, p.Supersedes, agent); n >= m.opts.MaxActiveRulesPerAgent {
			return Proposal{}, precept.Errorf(precept.FailedPrecondition, "%s already has %d active rules (rules.max_active_rules_per_agent); roll one back or consolidate first", agent, n)
		}
	}
	p.Guards = append(p.Guards, GuardResult{Guard: GuardRuleCap, Passed: true})
	if tags := m.protected(p.Tags); len(tags) > 0 {
		p.Protected = true
		p.Required++
		p.Guards = append(p.Guards, GuardResult{Guard: GuardSafetyFloor, Passed: true,
			Reason: fmt.Sprintf("touches protected %s %s: needs %d approvals", plural(len(tags), "tag", "tags"), strings.Join(tags, ", "), p.Required)})
	}
	h, created, err := m.createProposalBranch(p)
	if err != nil {
		return Proposal{}, err
	}
	if !created {
		return Proposal{}, fmt.Errorf("propose %s: its branch exists already", id)
	}
	m.log.Info("rule proposed", "proposal_id", id, "by", proposer.Name, "agents", p.Agents)
	m.emit(Change{Kind: ProposalCreated, ProposalID: id, RuleID: p.RuleID, Agents: p.Agents, Commit: h.String(), Revision: p.Revision, Actor: proposer.Name, Via: ViaAPI})
	return m.Get(ctx, id)
}

func normalizeManual(mp ManualProposal) (ManualProposal, error) {
	mp.Agents = distinct(mp.Agents)
	switch {
	case len(mp.Agents) == 0:
		return mp, precept.Errorf(precept.Invalid, "affected_agents: at least one agent is required")
	case len(mp.Agents) > maxAgents:
		return mp, precept.Errorf(precept.Invalid, "affected_agents: more than %d agents", maxAgents)
	}
	for _, a := range mp.Agents {
		if !ValidName(a) {
			return mp, precept.Errorf(precept.Invalid, "affected_agents: %q is not a valid agent name (letters, digits, '.', '_', '-')", clipRunes(a, 64))
		}
	}
	if mp.Type == "" {
		mp.Type = Guideline
	}
	if !mp.Type.Valid() {
		return mp, precept.Errorf(precept.Invalid, "rule_type: %q is not a rule type", mp.Type)
	}
	if mp.InsertionPoint == "" {
		mp.InsertionPoint = DefaultInsertionPoint
	}
	if !ValidName(mp.InsertionPoint) {
		return mp, precept.Errorf(precept.Invalid, "insertion_point: %q is not a valid name", clipRunes(mp.InsertionPoint, 64))
	}
	mp.Content = strings.TrimSpace(strings.ReplaceAll(mp.Content, "\r\n", "\n"))
	if utf8.RuneCountInString(mp.Rationale) > maxNoteRunes {
		return mp, precept.Errorf(precept.Invalid, "rationale: longer than %d characters", maxNoteRunes)
	}
	mp.FeedbackIDs = distinct(mp.FeedbackIDs)
	if len(mp.FeedbackIDs) > maxFeedbackIDs {
		return mp, precept.Errorf(precept.Invalid, "feedback_ids: more than %d", maxFeedbackIDs)
	}
	for _, f := range mp.FeedbackIDs {
		if len(f) > 200 || strings.ContainsAny(f, " \t\r\n") {
			return mp, precept.Errorf(precept.Invalid, "feedback_ids: %q is not a decision id", clipRunes(f, 64))
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
	return distinct(out)
}

// protected returns the protected tags among tags.
func (m *Manager) protected(tags []string) []string {
	var out []string
	for _, t := range tags {
		if slices.Contains(m.opts.ProtectedTags, t) {
			out = append(out, t)
		}
	}
	return out
}

// supersededOf counts the rules in ids that belong to agent.
func supersededOf(st *state, ids []string, agent string) int {
	n := 0
	for _, id := range ids {
		if r := st.rules[id]; r != nil && slices.Contains(r.Agents, agent) {
			n++
		}
	}
	return n
}

// CheckConflicts reports the active rules and open proposals that
// duplicate, overlap or oppose a candidate rule for the same agents.
func (m *Manager) CheckConflicts(ctx context.Context, c Candidate) ([]ConflictReport, error) {
	c.Agents = distinct(c.Agents)
	if len(c.Agents) == 0 {
		return nil, precept.Errorf(precept.Invalid, "agents: at least one agent is required")
	}
	if strings.TrimSpace(c.Content) == "" {
		return nil, precept.Errorf(precept.Invalid, "content: required")
	}
	if utf8.RuneCountInString(c.Content) > 4*m.opts.Quality.MaxLength {
		return nil, precept.Errorf(precept.Invalid, "content: longer than %d characters", 4*m.opts.Quality.MaxLength)
	}
	if c.InsertionPoint == "" {
		c.InsertionPoint = DefaultInsertionPoint
	}
	st, err := m.load(ctx)
	if err != nil {
		return nil, err
	}
	return m.conflictsFor(ctx, st, c)
}

func (m *Manager) conflictsFor(ctx context.Context, st *state, c Candidate) ([]ConflictReport, error) {
	var others []ruleText
	for _, t := range st.texts() {
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
	vecs, err := m.vecs.vectors(ctx, texts)
	if err != nil {
		return nil, err
	}
	return classifyConflicts(c, vecs[0], others, vecs[1:], m.opts.Thresholds), nil
}

// reconsolidate compares a proposal with the active rules and open
// proposals (seed 001 TM-06). A duplicate is returned; otherwise
// overlapping and opposing ones are attached as conflicts and the active
// rules among them become Supersedes.
func (m *Manager) reconsolidate(ctx context.Context, st *state, p *Proposal) (*ConflictReport, error) {
	reports, err := m.conflictsFor(ctx, st, Candidate{Agents: p.Agents, Content: p.Content, InsertionPoint: p.InsertionPoint, ProposalID: p.ID})
	if err != nil {
		return nil, err
	}
	for _, r := range reports {
		if r.Kind == ConflictDuplicate {
			p.Conflicts = []ConflictReport{r}
			p.Guards = append(p.Guards, GuardResult{Guard: GuardReconsolidation, Passed: false, Reason: r.Explanation})
			return &r, nil
		}
	}
	p.Conflicts = reports
	var overlapping, opposing []string
	for _, r := range reports {
		if st.rules[r.OtherID] != nil {
			p.Supersedes = append(p.Supersedes, r.OtherID)
		}
		if r.Kind == ConflictOpposing {
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
	p.Guards = append(p.Guards, GuardResult{Guard: GuardReconsolidation, Passed: true, Reason: reason})
	conflict := GuardResult{Guard: GuardConflict, Passed: true}
	if len(opposing) > 0 {
		conflict.Reason = "opposing guidance for the same agent and insertion point: " + strings.Join(opposing, ", ") + "; see the conflict report"
	}
	p.Guards = append(p.Guards, conflict)
	return nil, nil
}

// createProposalBranch commits a proposal on its new branch, forked from
// main. created is false when the branch exists already: another replica
// drafted the same cluster first.
func (m *Manager) createProposalBranch(p Proposal) (gitrepo.Hash, bool, error) {
	base, err := m.repo.Snapshot(m.main)
	if err != nil {
		return gitrepo.ZeroHash, false, err
	}
	data, err := p.Marshal()
	if err != nil {
		return gitrepo.ZeroHash, false, err
	}
	trailers := []gitrepo.Trailer{{Key: TrailerProposalID, Value: p.ID}}
	if p.ClusterID != "" {
		trailers = append(trailers, gitrepo.Trailer{Key: TrailerClusterID, Value: p.ClusterID})
	}
	if len(p.FeedbackIDs) > 0 {
		trailers = append(trailers, gitrepo.Trailer{Key: TrailerFeedbackIDs, Value: feedbackTrailer(p.FeedbackIDs)})
	}
	h, err := m.repo.Commit(ProposalBranch(p.ID), gitrepo.ZeroHash, base, gitrepo.CommitSpec{
		Message:  fmt.Sprintf("Propose %s for %s: %s", p.ID, strings.Join(p.Agents, ", "), clipWords(oneLine(firstSentence(p.Content)), 60)),
		Trailers: trailers,
		Changes:  []gitrepo.Change{{Path: ProposalPath(p.ID), Data: data}},
	})
	if errors.Is(err, gitrepo.ErrRefChanged) {
		return gitrepo.ZeroHash, false, nil
	}
	if err != nil {
		return gitrepo.ZeroHash, false, err
	}
	return h, true, nil
}

// readmeText starts a rules repository that has no main yet.
const readmeText = `# Rules repository

Managed by precept (DESIGN.md §5). On main:

- rules/active/<agent>/<rule_id>.md — approved rules
- rules/rejected/<proposal_id>.md — rejected proposals, with the reason
- rules/drafts/<proposal_id>.md — drafts a guard blocked or deferred, or merged into a rule
- prompts/<stage>.md and prompts/**/_rules.md — stage prompts and directory-scoped rules
- tuning/examples/<agent>/<good|bad>/ — approve / reject notes

Each proposal is a branch proposal/<proposal_id> holding rules/proposals/<proposal_id>.md.
`

// ensureMain gives a repository without a main branch its first commit,
// after looking for one on the remote, so that rule PRs fork from main.
func (m *Manager) ensureMain(ctx context.Context) error {
	if tip, err := m.tipOrZero(m.main); err != nil || !tip.IsZero() {
		return err
	}
	if m.opts.Remote != nil {
		if err := m.Sync(ctx); err != nil {
			m.log.Warn("sync before creating main", "err", err)
		}
	}
	_, err := m.repo.Update(ctx, m.main, func(s *gitrepo.Snapshot) (*gitrepo.CommitSpec, error) {
		if !s.Commit.IsZero() {
			return nil, nil
		}
		return &gitrepo.CommitSpec{Message: "Initialize the rules repository", Changes: []gitrepo.Change{{Path: "rules/README.md", Data: []byte(readmeText)}}}, nil
	})
	return err
}

// ProposeFromEvidence drafts a proposal for each generalizable cluster
// without a live one, applies the guards and commits the outcome: a rule
// PR, a held draft (blocked or deferred, under rules/drafts/), or the
// evidence added to the rule or proposal it duplicates. It returns what
// it committed. With proposing switched off, or without an evidence
// source, it does nothing and the clusters keep their evidence.
func (m *Manager) ProposeFromEvidence(ctx context.Context) ([]Proposal, error) {
	if m.opts.Evidence == nil || !m.Features().Proposing {
		return nil, nil
	}
	evs, err := m.opts.Evidence.Generalizable(ctx)
	if err != nil {
		return nil, fmt.Errorf("read generalizable clusters: %w", err)
	}
	sort.SliceStable(evs, func(i, j int) bool {
		a, b := evs[i], evs[j]
		if (a.Class == ClassGeneralizableHigh) != (b.Class == ClassGeneralizableHigh) {
			return a.Class == ClassGeneralizableHigh
		}
		if a.support() != b.support() {
			return a.support() > b.support()
		}
		return a.ClusterID < b.ClusterID
	})
	if len(evs) > 0 {
		if err := m.ensureMain(ctx); err != nil {
			return nil, err
		}
	}
	var out []Proposal
	var errs []error
	for _, ev := range evs {
		p, err := m.proposeCluster(ctx, ev)
		if err != nil {
			if ctx.Err() != nil {
				return out, ctx.Err()
			}
			errs = append(errs, fmt.Errorf("cluster %s: %w", ev.ClusterID, err))
			continue
		}
		if p != nil {
			out = append(out, *p)
		}
	}
	return out, errors.Join(errs...)
}

// draftID is a drafted proposal's id: deterministic, so replicas drafting
// the same cluster collide on the branch name and only one proposes.
func draftID(clusterID string, generation int) string {
	sum := sha256.Sum256([]byte(clusterID + ":" + strconv.Itoa(generation)))
	return "p-" + hex.EncodeToString(sum[:])[:10]
}

func (m *Manager) normalizeEvidence(ev Evidence) (Evidence, bool) {
	if ev.ClusterID == "" || ev.Class != ClassGeneralizableLow && ev.Class != ClassGeneralizableHigh {
		return ev, false
	}
	var agents []string
	for _, a := range distinct(ev.Agents) {
		if ValidName(a) {
			agents = append(agents, a)
		} else {
			m.log.Warn("evidence names an invalid agent; ignored", "cluster_id", ev.ClusterID, "agent", clipRunes(a, 64))
		}
	}
	ev.Agents = agents
	ev.FeedbackIDs = distinct(ev.FeedbackIDs)
	ev.Reviewers = distinct(ev.Reviewers)
	ev.Epics = distinct(ev.Epics)
	ev.Tags = normalizeTags(ev.Tags)
	if ev.Size < len(ev.FeedbackIDs) {
		ev.Size = len(ev.FeedbackIDs)
	}
	return ev, len(ev.Agents) > 0
}

// proposeCluster handles one cluster; it returns nil when nothing was
// committed.
func (m *Manager) proposeCluster(ctx context.Context, ev Evidence) (*Proposal, error) {
	ev, ok := m.normalizeEvidence(ev)
	if !ok {
		return nil, nil
	}
	st, err := m.load(ctx)
	if err != nil {
		return nil, err
	}
	decided := 0
	var held *Proposal
	idx, err := m.history(ctx)
	if err != nil {
		return nil, err
	}
	for _, rr := range idx.retired {
		// Rolled back with its branch gone: still a generation.
		if rr.rule.ClusterID == ev.ClusterID && !slices.Contains(st.byCluster[ev.ClusterID], rr.rule.ProposalID) {
			decided++
		}
	}
	for _, id := range st.byCluster[ev.ClusterID] {
		p, _ := st.proposal(id)
		_, ruleActive := st.byProposal[id]
		switch {
		case st.open(id), ruleActive, p.Status == Merged, st.onMain[id] != nil:
			return nil, nil
		case p.Status == Approved, p.Status == Rejected:
			decided++
		case p.Status == Blocked, p.Status == Deferred:
			held = &p
		}
	}
	id := draftID(ev.ClusterID, decided)
	now := m.now()
	var d draft
	if held != nil && held.ID == id {
		switch {
		case held.Status == Deferred && !m.rateCapAllows(st, held.Agents, now):
			return nil, nil
		case held.Status == Deferred:
			d = draft{Type: held.Type, Content: held.Content, By: held.DraftedBy}
		case ev.support() <= held.Support:
			return nil, nil
		}
	}
	if d.Content == "" {
		d = m.draft(ctx, ev)
	}
	p := Proposal{
		ID: id, Kind: KindNewRule, Status: Pending, Revision: 1, ContentRevision: 1,
		FeedbackIDs: ev.FeedbackIDs, Confidence: ev.Confidence, Agents: ev.Agents, Type: d.Type,
		InsertionPoint: DefaultInsertionPoint, EvidenceSummary: evidenceSummary(ev), CreatedAt: now, UpdatedAt: now,
		ProposedBy: SystemProposer, ClusterID: ev.ClusterID, Generation: decided, Class: ev.Class, Priority: ev.priority(),
		Support: ev.support(), Reviewers: ev.Reviewers, Epics: ev.Epics, Tags: ev.Tags, DraftedBy: d.By,
		Required: m.opts.RequiredApprovals, RuleID: RuleIDFor(id), Content: d.Content,
	}
	status, dup, err := m.guard(ctx, st, &p, now)
	if err != nil {
		return nil, err
	}
	p.Status = status
	switch status {
	case Pending:
		return m.commitDrafted(ctx, st, p)
	case Merged:
		return m.mergeEvidence(ctx, st, p, *dup)
	default:
		return m.holdDraft(ctx, p)
	}
}

// draft writes the rule text: with the LLM when one is configured and its
// answer is valid, else extractively.
func (m *Manager) draft(ctx context.Context, ev Evidence) draft {
	if m.opts.LLM == nil {
		return extractiveDraft(ev)
	}
	prompt, err := renderDraftPrompt(m.tmpl, ev, m.opts.Quality)
	if err == nil {
		cctx, cancel := context.WithTimeout(ctx, m.opts.LLMTimeout)
		var answer string
		answer, err = m.opts.LLM.Complete(cctx, prompt)
		cancel()
		if err == nil {
			var d draft
			if d, err = parseLLMDraft(answer, m.opts.Quality); err == nil {
				d.By = "llm:" + m.opts.LLM.Model()
				return d
			}
		}
	}
	m.log.Warn("LLM draft failed; using the extractive draft", "cluster_id", ev.ClusterID, "model", m.opts.LLM.Model(), "err", err)
	return extractiveDraft(ev)
}

// guard applies the guards in order — safety floor, quality gate,
// rejected before, reconsolidation and conflicts, rule cap, rate cap —
// recording each result on p. It returns Pending when p may become a rule
// PR, Blocked or Deferred when a guard held it, and Merged with the
// duplicate it should add its evidence to.
func (m *Manager) guard(ctx context.Context, st *state, p *Proposal, now time.Time) (ProposalStatus, *ConflictReport, error) {
	result := func(guard string, passed bool, reason string) {
		p.Guards = append(p.Guards, GuardResult{Guard: guard, Passed: passed, Reason: reason})
	}
	if tags := m.protected(p.Tags); len(tags) > 0 {
		result(GuardSafetyFloor, false, fmt.Sprintf("touches protected %s %s: such rules are never proposed automatically; a person may propose it (it then needs %d approvals)",
			plural(len(tags), "tag", "tags"), strings.Join(tags, ", "), m.opts.RequiredApprovals+1))
		return Blocked, nil, nil
	}
	result(GuardSafetyFloor, true, "")
	if reason := m.opts.Quality.Check(p.Content); reason != "" {
		result(GuardQuality, false, reason)
		return Blocked, nil, nil
	}
	result(GuardQuality, true, "")

	passed, reason, err := m.rejectedBefore(ctx, st, p)
	if err != nil {
		return "", nil, err
	}
	result(GuardRejectedBefore, passed, reason)
	if !passed {
		return Blocked, nil, nil
	}

	dup, err := m.reconsolidate(ctx, st, p)
	if err != nil {
		return "", nil, err
	}
	if dup != nil {
		return Merged, dup, nil
	}

	for _, agent := range p.Agents {
		n := st.activeCount(agent) - supersededOf(st, p.Supersedes, agent)
		if n < m.opts.MaxActiveRulesPerAgent {
			continue
		}
		if len(p.Agents) > 1 {
			result(GuardRuleCap, false, fmt.Sprintf("%s has %d active rules, the cap; a rule for several agents cannot be consolidated into one of them", agent, n))
			return Blocked, nil, nil
		}
		nearest, err := m.consolidate(ctx, st, p, agent, n)
		if err != nil {
			return "", nil, err
		}
		if nearest == "" {
			result(GuardRuleCap, false, fmt.Sprintf("%s has %d active rules, the cap, and none it alone holds to consolidate with", agent, n))
			return Blocked, nil, nil
		}
		if reason := m.opts.Quality.Check(p.Content); reason != "" {
			result(GuardRuleCap, false, fmt.Sprintf("%s has %d active rules, the cap; the consolidation with %s fails the quality gate: %s", agent, n, nearest, reason))
			return Blocked, nil, nil
		}
		result(GuardRuleCap, true, fmt.Sprintf("%s has %d active rules, the cap: proposed as a consolidation replacing %s", agent, n, nearest))
		break
	}
	if p.Kind != KindConsolidation {
		result(GuardRuleCap, true, "")
	}

	for _, agent := range p.Agents {
		if n, next := m.recentDrafts(st, agent, now); n >= m.opts.MaxProposalsPerAgent {
			result(GuardRateCap, false, fmt.Sprintf("%d proposals were drafted for %s in the last %s (the cap is %d); the next slot opens at %s",
				n, agent, m.opts.ProposalWindow, m.opts.MaxProposalsPerAgent, next.Format(time.RFC3339)))
			return Deferred, nil, nil
		}
	}
	result(GuardRateCap, true, "")
	return Pending, nil, nil
}

// rejectedBefore blocks a draft similar to a rejected proposal unless its
// support at least doubled; the rejection reason is shown either way.
func (m *Manager) rejectedBefore(ctx context.Context, st *state, p *Proposal) (bool, string, error) {
	var others []*Proposal
	for _, id := range slices.Sorted(maps.Keys(st.rejected)) {
		r := st.rejected[id]
		if _, ok := sharedAgent(p.Agents, r.Agents); ok && id != p.ID {
			others = append(others, r)
		}
	}
	// A rolled-back rule counts as rejected: its reason is the rollback's.
	idx, err := m.history(ctx)
	if err != nil {
		return false, "", err
	}
	for _, rr := range idx.retired {
		if _, ok := sharedAgent(p.Agents, rr.rule.Agents); ok {
			others = append(others, &Proposal{
				ID: rr.rule.ID, Agents: rr.rule.Agents, Content: rr.rule.Content, Support: len(rr.rule.FeedbackIDs),
				Rejection: &Rejection{Rejector: rr.by, Reason: "rolled back: " + rr.reason},
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
	vecs, err := m.vecs.vectors(ctx, texts)
	if err != nil {
		return false, "", err
	}
	var best *Proposal
	bestSim := 0.0
	for i, o := range others {
		if s := embedding.Cosine(vecs[0], vecs[i+1]); s > m.opts.Thresholds.Rejected && s > bestSim {
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
func (m *Manager) consolidate(ctx context.Context, st *state, p *Proposal, agent string, count int) (string, error) {
	var candidates []*Rule
	for _, id := range slices.Sorted(maps.Keys(st.rules)) {
		r := st.rules[id]
		if len(r.Agents) == 1 && r.Agents[0] == agent && (r.Status == Active || r.Status == Shadow) && !slices.Contains(p.Supersedes, id) {
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
	vecs, err := m.vecs.vectors(ctx, texts)
	if err != nil {
		return "", err
	}
	best, bestSim := candidates[0], -2.0
	for i, c := range candidates {
		if s := embedding.Cosine(vecs[0], vecs[i+1]); s > bestSim {
			best, bestSim = c, s
		}
	}
	p.Kind = KindConsolidation
	p.Supersedes = append(p.Supersedes, best.ID)
	p.Content = strings.TrimSpace(p.Content) + "\n\n" + strings.TrimSpace(best.Content)
	p.EvidenceSummary = fmt.Sprintf("%s has %d active rules, the cap: this consolidation replaces %s with one rule that also carries the new guidance. %s",
		agent, count, best.ID, p.EvidenceSummary)
	return best.ID, nil
}

// rateCapAllows reports whether every agent has a free proposal slot.
func (m *Manager) rateCapAllows(st *state, agents []string, now time.Time) bool {
	for _, a := range agents {
		if n, _ := m.recentDrafts(st, a, now); n >= m.opts.MaxProposalsPerAgent {
			return false
		}
	}
	return true
}

// recentDrafts counts the drafted rule PRs for an agent within the window
// and says when the oldest of them leaves it.
func (m *Manager) recentDrafts(st *state, agent string, now time.Time) (int, time.Time) {
	since := now.Add(-m.opts.ProposalWindow)
	n, oldest := 0, now
	for _, id := range st.ids() {
		p, ok := st.proposal(id)
		if !ok || p.ProposedBy != SystemProposer || !slices.Contains(p.Agents, agent) || !p.CreatedAt.After(since) {
			continue
		}
		if p.Status != Pending && p.Status != Approved && p.Status != Rejected {
			continue
		}
		n++
		if p.CreatedAt.Before(oldest) {
			oldest = p.CreatedAt
		}
	}
	return n, oldest.Add(m.opts.ProposalWindow)
}

// commitDrafted commits a guarded draft as a rule PR and removes the held
// draft record it replaces.
func (m *Manager) commitDrafted(ctx context.Context, st *state, p Proposal) (*Proposal, error) {
	h, created, err := m.createProposalBranch(p)
	if err != nil || !created {
		return nil, err
	}
	if st.drafts[p.ID] != nil {
		_, err := m.repo.Update(ctx, m.main, func(s *gitrepo.Snapshot) (*gitrepo.CommitSpec, error) {
			if ok, err := s.Exists(DraftPath(p.ID)); err != nil || !ok {
				return nil, err
			}
			return &gitrepo.CommitSpec{
				Message:  fmt.Sprintf("Release held draft %s: it is now a rule PR", p.ID),
				Trailers: []gitrepo.Trailer{{Key: TrailerProposalID, Value: p.ID}, {Key: TrailerClusterID, Value: p.ClusterID}},
				Changes:  []gitrepo.Change{{Path: DraftPath(p.ID), Delete: true}},
			}, nil
		})
		if err != nil {
			return nil, err
		}
	}
	m.log.Info("rule proposal drafted", "proposal_id", p.ID, "cluster_id", p.ClusterID, "agents", p.Agents, "kind", p.Kind, "drafted_by", p.DraftedBy)
	m.emit(Change{Kind: ProposalCreated, ProposalID: p.ID, RuleID: p.RuleID, Agents: p.Agents, Commit: h.String(), Revision: p.Revision, Actor: SystemProposer, Via: "precept"})
	p.Branch = ProposalBranch(p.ID)
	return &p, nil
}

// holdDraft records a blocked or deferred draft under rules/drafts/ on
// main, unless the same outcome is recorded already.
func (m *Manager) holdDraft(ctx context.Context, p Proposal) (*Proposal, error) {
	g, _ := p.FailedGuard()
	var done bool
	h, err := m.repo.Update(ctx, m.main, func(s *gitrepo.Snapshot) (*gitrepo.CommitSpec, error) {
		done = false
		prev, ok, err := m.readProposal(s, DraftPath(p.ID))
		if err != nil {
			return nil, err
		}
		if ok {
			pg, _ := prev.FailedGuard()
			if prev.Status == p.Status && pg.Guard == g.Guard && prev.Support == p.Support {
				return nil, nil
			}
		}
		data, err := p.Marshal()
		if err != nil {
			return nil, err
		}
		done = true
		verb := "Block"
		if p.Status == Deferred {
			verb = "Defer"
		}
		return &gitrepo.CommitSpec{
			Message: fmt.Sprintf("%s draft %s for %s (%s)", verb, p.ID, strings.Join(p.Agents, ", "), g.Guard),
			Trailers: []gitrepo.Trailer{
				{Key: TrailerProposalID, Value: p.ID}, {Key: TrailerClusterID, Value: p.ClusterID},
				{Key: TrailerReason, Value: clipWords(oneLine(g.Reason), 500)},
				{Key: TrailerFeedbackIDs, Value: feedbackTrailer(p.FeedbackIDs)},
			},
			Changes: []gitrepo.Change{{Path: DraftPath(p.ID), Data: data}},
		}, nil
	})
	if err != nil || !done {
		return nil, err
	}
	m.metrics.guardBlocks.WithLabelValues(g.Guard).Inc()
	m.log.Info("draft held by a guard", "proposal_id", p.ID, "cluster_id", p.ClusterID, "status", p.Status, "guard", g.Guard, "reason", g.Reason)
	m.emit(Change{Kind: DraftHeld, ProposalID: p.ID, Agents: p.Agents, Commit: h.String(), Revision: p.Revision, Actor: SystemProposer, Via: "precept", MainChanged: true})
	return &p, nil
}

// mergeEvidence adds a duplicate draft's evidence to the rule or open
// proposal it duplicates (frequency +1) and records the draft as merged.
func (m *Manager) mergeEvidence(ctx context.Context, st *state, p Proposal, dup ConflictReport) (*Proposal, error) {
	p.MergedInto = dup.OtherID
	record, err := p.Marshal()
	if err != nil {
		return nil, err
	}
	draftChange := gitrepo.Change{Path: DraftPath(p.ID), Data: record}
	trailers := []gitrepo.Trailer{
		{Key: TrailerProposalID, Value: p.ID}, {Key: TrailerClusterID, Value: p.ClusterID},
		{Key: TrailerFeedbackIDs, Value: feedbackTrailer(p.FeedbackIDs)},
	}
	var h gitrepo.Hash
	var agents []string
	if rule := st.rules[dup.OtherID]; rule != nil {
		agents = rule.Agents
		h, err = m.repo.Update(ctx, m.main, func(s *gitrepo.Snapshot) (*gitrepo.CommitSpec, error) {
			if ok, err := s.Exists(DraftPath(p.ID)); err != nil || ok {
				return nil, err
			}
			paths, err := m.rulePathsAt(s, dup.OtherID)
			if err != nil {
				return nil, err
			}
			changes := []gitrepo.Change{draftChange}
			freq := 0
			for _, path := range paths {
				blob, err := s.Stat(path)
				if err != nil {
					return nil, err
				}
				cur, err := m.parseRule(blob)
				if err != nil {
					return nil, err
				}
				next := cur.clone()
				if !slices.Contains(next.EvidenceClusters, p.ClusterID) {
					next.Frequency++
					next.EvidenceClusters = append(next.EvidenceClusters, p.ClusterID)
					next.FeedbackIDs = distinct(append(next.FeedbackIDs, p.FeedbackIDs...))
				}
				freq = next.Frequency
				data, err := next.Marshal()
				if err != nil {
					return nil, err
				}
				changes = append(changes, gitrepo.Change{Path: path, Data: data})
			}
			return &gitrepo.CommitSpec{
				Message:  fmt.Sprintf("Add the evidence of cluster %s to rule %s (frequency %d)", p.ClusterID, dup.OtherID, freq),
				Trailers: append([]gitrepo.Trailer{{Key: TrailerRuleID, Value: dup.OtherID}}, trailers...),
				Changes:  changes,
			}, nil
		})
	} else {
		agents = p.Agents
		if _, err = m.repo.Update(ctx, ProposalBranch(dup.OtherID), func(s *gitrepo.Snapshot) (*gitrepo.CommitSpec, error) {
			target, ok, err := m.readProposal(s, ProposalPath(dup.OtherID))
			if err != nil || !ok || target.Status != Pending || slices.Contains(target.EvidenceClusters, p.ClusterID) {
				return nil, err
			}
			target.EvidenceClusters = append(target.EvidenceClusters, p.ClusterID)
			target.FeedbackIDs = distinct(append(target.FeedbackIDs, p.FeedbackIDs...))
			target.Support = len(target.FeedbackIDs)
			target.EvidenceSummary += "\n\nAlso supported by a duplicate draft: " + p.EvidenceSummary
			target.Revision++
			target.ContentRevision = target.Revision
			target.UpdatedAt = m.now()
			data, err := target.Marshal()
			if err != nil {
				return nil, err
			}
			return &gitrepo.CommitSpec{
				Message:  fmt.Sprintf("Add the evidence of cluster %s to proposal %s", p.ClusterID, dup.OtherID),
				Trailers: []gitrepo.Trailer{{Key: TrailerProposalID, Value: dup.OtherID}, {Key: TrailerClusterID, Value: p.ClusterID}, {Key: TrailerFeedbackIDs, Value: feedbackTrailer(p.FeedbackIDs)}},
				Changes:  []gitrepo.Change{{Path: ProposalPath(dup.OtherID), Data: data}},
			}, nil
		}); err != nil {
			return nil, err
		}
		h, err = m.repo.Update(ctx, m.main, func(s *gitrepo.Snapshot) (*gitrepo.CommitSpec, error) {
			if ok, err := s.Exists(DraftPath(p.ID)); err != nil || ok {
				return nil, err
			}
			return &gitrepo.CommitSpec{
				Message:  fmt.Sprintf("Record draft %s as merged into proposal %s", p.ID, dup.OtherID),
				Trailers: trailers,
				Changes:  []gitrepo.Change{draftChange},
			}, nil
		})
	}
	if err != nil {
		return nil, err
	}
	m.metrics.guardBlocks.WithLabelValues(GuardReconsolidation).Inc()
	m.log.Info("duplicate draft merged into an existing rule", "proposal_id", p.ID, "cluster_id", p.ClusterID, "into", dup.OtherID, "similarity", dup.Similarity)
	m.emit(Change{Kind: EvidenceAdded, ProposalID: p.ID, RuleID: st.ruleIDOf(dup.OtherID), Agents: agents, Commit: h.String(), Actor: SystemProposer, Via: "precept", MainChanged: true})
	return &p, nil
}

// ruleIDOf returns id when it names an active rule, else "".
func (st *state) ruleIDOf(id string) string {
	if st.rules[id] != nil {
		return id
	}
	return ""
}

// draftReason says why a held draft was held.
func draftReason(p *Proposal) string {
	if p.Status == Merged {
		return "its evidence was added to " + p.MergedInto
	}
	if g, ok := p.FailedGuard(); ok {
		return g.Guard + ": " + g.Reason
	}
	return "held"
}
