package rules

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/gitrepo"
)

// maxNoteRunes bounds approval notes and rejection reasons.
const maxNoteRunes = 4000

// Approve records approver's approval of a proposal, made through via
// (api or slack). Approving twice is a no-op. A proposer cannot approve
// their own manual proposal. revision, when not 0, is the revision the
// approver saw: it is refused as stale when the proposal changed since in
// any way other than approvals by others. Once the proposal has its
// required approvals it is APPROVED and, with auto-merge on, merged into
// main as its rule.
func (m *Manager) Approve(ctx context.Context, id, approver, note string, revision int, via string) (Proposal, error) {
	if err := m.checkDecision(id, approver, note, via); err != nil {
		return Proposal{}, err
	}
	st, err := m.load(ctx, id)
	if err != nil {
		return Proposal{}, err
	}
	if err := st.decidable(id); err != nil {
		if ruleID, merged := st.byProposal[id]; merged && slices.ContainsFunc(st.rules[ruleID].Approvals, func(a Approval) bool { return a.Approver == approver }) {
			return m.Get(ctx, id)
		}
		return Proposal{}, err
	}
	var recorded, completed bool
	var after Proposal
	h, err := m.repo.Update(ctx, ProposalBranch(id), func(s *gitrepo.Snapshot) (*gitrepo.CommitSpec, error) {
		recorded, completed = false, false
		p, ok, err := m.readProposal(s, ProposalPath(id))
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, precept.Errorf(precept.NotFound, "proposal %s not found", id)
		}
		after = p
		if p.ApprovedBy(approver) {
			return nil, nil
		}
		if p.Status != Pending {
			return nil, precept.Errorf(precept.FailedPrecondition, "proposal %s is %s; it takes no more approvals", id, p.Status)
		}
		if p.ProposedBy == approver && p.ProposedBy != SystemProposer {
			return nil, precept.Errorf(precept.PermissionDenied, "%s proposed %s and cannot approve it", approver, id)
		}
		if err := checkRevision(p, revision); err != nil {
			return nil, err
		}
		now := m.now()
		p.Approvals = append(p.Approvals, Approval{Approver: approver, Note: note, At: now, Via: via})
		p.Revision++
		p.UpdatedAt = now
		if len(p.Approvals) >= p.Required {
			p.Status = Approved
			completed = true
		}
		data, err := p.Marshal()
		if err != nil {
			return nil, err
		}
		after, recorded = p, true
		return &gitrepo.CommitSpec{
			Message: fmt.Sprintf("Approve %s (%d of %d) by %s", id, len(p.Approvals), p.Required, approver),
			Trailers: []gitrepo.Trailer{
				{Key: TrailerApprovedBy, Value: approver},
				{Key: TrailerProposalID, Value: id},
				{Key: TrailerVia, Value: via},
			},
			Changes: []gitrepo.Change{{Path: ProposalPath(id), Data: data}},
		}, nil
	})
	if err != nil {
		return Proposal{}, err
	}
	if recorded {
		m.metrics.approvals.WithLabelValues(via).Inc()
		m.log.Info("approval recorded", "proposal_id", id, "approver", approver, "via", via, "approvals", len(after.Approvals), "required", after.Required)
		m.emit(Change{Kind: ApprovalRecorded, ProposalID: id, Agents: after.Agents, Commit: h.String(), Revision: after.Revision, Actor: approver, Via: via})
	}
	if completed {
		m.emit(Change{Kind: ProposalApproved, ProposalID: id, RuleID: after.RuleID, Agents: after.Agents, Commit: h.String(), Revision: after.Revision, Actor: approver, Via: via})
	}
	if after.Status == Approved && m.Features().AutoMerge {
		if err := m.mergeProposal(ctx, id); err != nil {
			// The approval is recorded; Maintain retries the merge.
			m.log.Warn("merge approved proposal", "proposal_id", id, "err", err)
		}
	}
	return m.Get(ctx, id)
}

// Reject rejects a proposal with a reason; one rejection decides. The
// rejected proposal is archived on main as rules/rejected/<id>.md and its
// branch is deleted on the remote. Rejecting again by the same person is
// a no-op.
func (m *Manager) Reject(ctx context.Context, id, rejector, reason string, revision int, via string) (Proposal, error) {
	reason = strings.TrimSpace(reason)
	if reason == "" {
		return Proposal{}, precept.Errorf(precept.Invalid, "reason: a rejection needs a reason")
	}
	if err := m.checkDecision(id, rejector, reason, via); err != nil {
		return Proposal{}, err
	}
	st, err := m.load(ctx, id)
	if err != nil {
		return Proposal{}, err
	}
	if p := st.rejected[id]; p != nil && p.Rejection != nil && p.Rejection.Rejector == rejector {
		return m.Get(ctx, id)
	}
	if err := st.decidable(id); err != nil {
		return Proposal{}, err
	}
	if err := m.reject(ctx, id, rejector, "", reason, revision, via); err != nil {
		return Proposal{}, err
	}
	return m.Get(ctx, id)
}

// reject commits the rejection on main. signature is the rejector as a
// git trailer value when it differs from the name (e.g. with an email).
func (m *Manager) reject(ctx context.Context, id, rejector, signature, reason string, revision int, via string) error {
	if signature == "" {
		signature = rejector
	}
	var after Proposal
	var done bool
	h, err := m.repo.Update(ctx, m.main, func(s *gitrepo.Snapshot) (*gitrepo.CommitSpec, error) {
		done = false
		if prev, ok, err := m.readProposal(s, RejectedPath(id)); err != nil {
			return nil, err
		} else if ok {
			if prev.Rejection != nil && prev.Rejection.Rejector == rejector {
				return nil, nil
			}
			return nil, precept.Errorf(precept.FailedPrecondition, "proposal %s was already rejected", id)
		}
		if ok, err := m.hasRule(s, RuleIDFor(id)); err != nil || ok {
			return nil, errOr(err, precept.Errorf(precept.FailedPrecondition, "proposal %s was already approved as rule %s; roll the rule back instead", id, RuleIDFor(id)))
		}
		branch, err := m.repo.Snapshot(ProposalBranch(id))
		if err != nil {
			return nil, err
		}
		p, ok, err := m.readProposal(branch, ProposalPath(id))
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, precept.Errorf(precept.NotFound, "proposal %s not found", id)
		}
		if reach, err := m.reachable(s.Commit); err != nil || reach[branch.Commit] {
			return nil, errOr(err, precept.Errorf(precept.FailedPrecondition, "proposal %s was already merged into %s", id, m.main))
		}
		if p.Status != Pending {
			return nil, precept.Errorf(precept.FailedPrecondition, "proposal %s is %s and waits to be merged; roll its rule back once it is", id, p.Status)
		}
		if err := checkRevision(p, revision); err != nil {
			return nil, err
		}
		now := m.now()
		p.Status = Rejected
		p.Rejection = &Rejection{Rejector: rejector, Reason: reason, At: now, Via: via}
		p.Revision++
		p.ContentRevision = p.Revision
		p.UpdatedAt = now
		data, err := p.Marshal()
		if err != nil {
			return nil, err
		}
		changes := []gitrepo.Change{{Path: RejectedPath(id), Data: data}}
		for _, agent := range p.Agents {
			ex, err := tuningExample(p, agent, "bad", rejector, reason, via, now)
			if err != nil {
				return nil, err
			}
			changes = append(changes, gitrepo.Change{Path: TuningPath(agent, "bad", id, rejector), Data: ex})
		}
		after, done = p, true
		return &gitrepo.CommitSpec{
			Message: fmt.Sprintf("Reject %s by %s: %s", id, rejector, clipWords(oneLine(reason), 72)),
			Trailers: []gitrepo.Trailer{
				{Key: TrailerRejectedBy, Value: signature},
				{Key: TrailerReason, Value: clipWords(oneLine(reason), 500)},
				{Key: TrailerProposalID, Value: id},
				{Key: TrailerFeedbackIDs, Value: feedbackTrailer(p.FeedbackIDs)},
				{Key: TrailerVia, Value: via},
			},
			Changes: changes,
		}, nil
	})
	if err != nil {
		return err
	}
	if done {
		m.metrics.rejections.WithLabelValues(via).Inc()
		m.log.Info("proposal rejected", "proposal_id", id, "rejector", rejector, "via", via)
		m.emit(Change{Kind: ProposalRejected, ProposalID: id, Agents: after.Agents, Commit: h.String(), Revision: after.Revision, Actor: rejector, Via: via, MainChanged: true})
	}
	return nil
}

func (m *Manager) checkDecision(id, who, text, via string) error {
	if err := checkProposalID(id); err != nil {
		return err
	}
	if via != ViaAPI && via != ViaSlack {
		return precept.Errorf(precept.Invalid, "via: %q is not api or slack", via)
	}
	if err := m.mayDecide(who); err != nil {
		return err
	}
	if utf8.RuneCountInString(text) > maxNoteRunes {
		return precept.Errorf(precept.Invalid, "note: longer than %d characters", maxNoteRunes)
	}
	return nil
}

// decidable returns why a proposal takes no decision, or nil.
func (st *state) decidable(id string) error {
	if p := st.rejected[id]; p != nil {
		who, why := "", ""
		if p.Rejection != nil {
			who, why = p.Rejection.Rejector, p.Rejection.Reason
		}
		return precept.Errorf(precept.FailedPrecondition, "proposal %s was rejected by %s: %s", id, who, why)
	}
	if ruleID, merged := st.byProposal[id]; merged {
		return precept.Errorf(precept.FailedPrecondition, "proposal %s was already approved as rule %s", id, ruleID)
	}
	if st.onMain[id] != nil {
		return precept.Errorf(precept.FailedPrecondition, "proposal %s was merged in git and is becoming a rule", id)
	}
	if st.merged[id] {
		return precept.Errorf(precept.FailedPrecondition, "proposal %s was already merged into main", id)
	}
	if _, ok := st.branches[id]; ok {
		return nil
	}
	if p := st.drafts[id]; p != nil {
		return precept.Errorf(precept.FailedPrecondition, "%s is a %s draft, not a rule PR: %s", id, strings.ToLower(string(p.Status)), draftReason(p))
	}
	return precept.Errorf(precept.NotFound, "proposal %s not found", id)
}

// checkRevision refuses a decision made on a stale view of the proposal.
func checkRevision(p Proposal, revision int) error {
	switch {
	case revision == 0:
		return nil
	case revision < 0 || revision > p.Revision:
		return precept.Errorf(precept.FailedPrecondition, "revision %d of proposal %s is unknown (the latest is %d); reload it", revision, p.ID, p.Revision)
	case revision < p.ContentRevision:
		return precept.Errorf(precept.FailedPrecondition, "stale revision %d: proposal %s changed at revision %d (now %d); reload it and decide again", revision, p.ID, p.ContentRevision, p.Revision)
	}
	return nil
}

func errOr(err, otherwise error) error {
	if err != nil {
		return err
	}
	return otherwise
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// maxFeedbackTrailerIDs bounds the Feedback-Ids trailer; the full list is
// in the files.
const maxFeedbackTrailerIDs = 50

func feedbackTrailer(ids []string) string {
	if len(ids) <= maxFeedbackTrailerIDs {
		return strings.Join(ids, " ")
	}
	return strings.Join(ids[:maxFeedbackTrailerIDs], " ") + fmt.Sprintf(" (+%d more)", len(ids)-maxFeedbackTrailerIDs)
}

// hasRule reports whether any agent's directory holds rule id at s.
func (m *Manager) hasRule(s *gitrepo.Snapshot, ruleID string) (bool, error) {
	paths, err := m.rulePathsAt(s, ruleID)
	return len(paths) > 0, err
}

// rulePathsAt lists the files of rule id at a snapshot.
func (m *Manager) rulePathsAt(s *gitrepo.Snapshot, ruleID string) ([]string, error) {
	if s == nil || s.Commit.IsZero() {
		return nil, nil
	}
	agents, err := s.List(ActiveDir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, a := range agents {
		if !a.IsDir {
			continue
		}
		p := ActiveRulePath(a.Name, ruleID)
		if ok, err := s.Exists(p); err != nil {
			return nil, err
		} else if ok {
			out = append(out, p)
		}
	}
	return out, nil
}

// gitApproval is a merge of a proposal into main made by a person in git.
type gitApproval struct {
	commit      gitrepo.Hash
	name, email string
	fastForward bool
}

func (g *gitApproval) approver() string {
	switch {
	case g.fastForward:
		return "unknown (fast-forward merge in git)"
	case g.name != "":
		return g.name
	case g.email != "":
		return g.email
	}
	return "unknown"
}

func (g *gitApproval) signature() string {
	if g.email != "" && !g.fastForward {
		return g.approver() + " <" + g.email + ">"
	}
	return g.approver()
}

// mergeProposal merges an APPROVED proposal's branch into main as its
// rule. It does nothing when the branch was merged before.
func (m *Manager) mergeProposal(ctx context.Context, id string) error {
	tip, err := m.tipOrZero(ProposalBranch(id))
	if err != nil || tip.IsZero() {
		return err
	}
	branch, err := m.repo.SnapshotAt(tip)
	if err != nil {
		return err
	}
	p, ok, err := m.readProposal(branch, ProposalPath(id))
	if err != nil || !ok || p.Status != Approved {
		return err
	}
	var done bool
	var superseded []string
	h, err := m.repo.Update(ctx, m.main, func(s *gitrepo.Snapshot) (*gitrepo.CommitSpec, error) {
		done = false
		if ok, err := s.Exists(RejectedPath(id)); err != nil || ok {
			return nil, errOr(err, precept.Errorf(precept.FailedPrecondition, "proposal %s was rejected", id))
		}
		if ok, err := m.hasRule(s, p.RuleID); err != nil || ok {
			return nil, err
		}
		// Merged before (and perhaps rolled back since): never again.
		if reach, err := m.reachable(s.Commit); err != nil || reach[tip] {
			return nil, err
		}
		spec, sup, err := m.approvalSpec(s, p, nil)
		if err != nil {
			return nil, err
		}
		spec.MergeParents = []gitrepo.Hash{tip}
		done, superseded = true, sup
		return spec, nil
	})
	if err != nil {
		return err
	}
	if done {
		m.log.Info("rule merged into main", "proposal_id", id, "rule_id", p.RuleID, "commit", h.String(), "supersedes", superseded)
		m.emit(Change{Kind: RuleMerged, ProposalID: id, RuleID: p.RuleID, Agents: p.Agents, Commit: h.String(), Revision: p.Revision, Actor: SystemProposer, Via: "precept", MainChanged: true})
	}
	return nil
}

// approvalSpec is the commit that turns approved proposal p into its
// rule at snapshot s: the rule file in each agent's directory, the
// superseded rules removed, a tuning example per approval, and (for a
// merge made in git) the merged proposal file removed. It returns the
// rules it supersedes.
func (m *Manager) approvalSpec(s *gitrepo.Snapshot, p Proposal, g *gitApproval) (*gitrepo.CommitSpec, []string, error) {
	now := m.now()
	confidence := p.Confidence
	if confidence == 0 {
		confidence = 1
	}
	typ := p.Type
	if !typ.Valid() {
		typ = Guideline
	}
	r := Rule{
		ID: p.RuleID, ProposalID: p.ID, Agents: p.Agents, Type: typ, InsertionPoint: p.InsertionPoint,
		Status: Active, Importance: Normal, Confidence: confidence, Frequency: 1 + len(p.EvidenceClusters),
		FeedbackIDs: p.FeedbackIDs, ClusterID: p.ClusterID, Approvals: p.Approvals, Tags: p.Tags,
		Protected: p.Protected, ActivatedAt: now, EvidenceSummary: p.EvidenceSummary, ProposedBy: p.ProposedBy,
		EvidenceClusters: p.EvidenceClusters, Content: p.Content,
	}
	if m.opts.ShadowPeriod > 0 {
		until := now.Add(m.opts.ShadowPeriod)
		r.Status, r.ShadowUntil = Shadow, &until
	}
	var changes []gitrepo.Change
	var superseded []string
	for _, old := range p.Supersedes {
		paths, err := m.rulePathsAt(s, old)
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
		changes = append(changes, gitrepo.Change{Path: ActiveRulePath(agent, r.ID), Data: data})
		for _, a := range p.Approvals {
			ex, err := tuningExample(p, agent, "good", a.Approver, a.Note, a.Via, a.At)
			if err != nil {
				return nil, nil, err
			}
			changes = append(changes, gitrepo.Change{Path: TuningPath(agent, "good", p.ID, a.Approver), Data: ex})
		}
	}
	trailers := []gitrepo.Trailer{{Key: TrailerProposalID, Value: p.ID}, {Key: TrailerRuleID, Value: r.ID}}
	for _, a := range p.Approvals {
		v := a.Approver
		if g != nil && a.Via == ViaGit {
			v = g.signature()
		}
		trailers = append(trailers, gitrepo.Trailer{Key: TrailerApprovedBy, Value: v})
	}
	trailers = append(trailers, gitrepo.Trailer{Key: TrailerFeedbackIDs, Value: feedbackTrailer(p.FeedbackIDs)})
	if len(superseded) > 0 {
		trailers = append(trailers, gitrepo.Trailer{Key: TrailerSupersedes, Value: strings.Join(superseded, " ")})
	}
	subject := fmt.Sprintf("Approve %s as rule %s for %s", p.ID, r.ID, strings.Join(p.Agents, ", "))
	if g != nil {
		if ok, err := s.Exists(ProposalPath(p.ID)); err != nil {
			return nil, nil, err
		} else if ok {
			changes = append(changes, gitrepo.Change{Path: ProposalPath(p.ID), Delete: true})
		}
		trailers = append(trailers, gitrepo.Trailer{Key: TrailerMergeCommit, Value: g.commit.String()})
		subject = fmt.Sprintf("Activate rule %s: %s merged %s in git", r.ID, g.approver(), ProposalBranch(p.ID))
	}
	return &gitrepo.CommitSpec{Message: subject, Trailers: trailers, Changes: changes}, superseded, nil
}

// mergeApproved merges every APPROVED proposal still waiting on its
// branch (auto-merge was off, or the process stopped after the approval).
func (m *Manager) mergeApproved(ctx context.Context) error {
	st, err := m.load(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, id := range st.ids() {
		if st.open(id) && st.onBranch[id].Status == Approved && st.onMain[id] == nil {
			if err := m.mergeProposal(ctx, id); err != nil {
				errs = append(errs, fmt.Errorf("merge %s: %w", id, err))
			}
		}
	}
	return errors.Join(errs...)
}

// findGitMerges lists the proposals whose files reached the main tip
// (local, or the remote's) through a merge made in git, with who merged
// them.
func (m *Manager) findGitMerges(tip gitrepo.Hash) (map[string]*gitApproval, error) {
	if tip.IsZero() {
		return nil, nil
	}
	snap, err := m.repo.SnapshotAt(tip)
	if err != nil {
		return nil, err
	}
	entries, err := snap.List(ProposalsDir)
	if err != nil {
		return nil, err
	}
	out := map[string]*gitApproval{}
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name, ".md")
		if e.IsDir || !ok || !ValidProposalID(id) {
			continue
		}
		c, err := m.commitThatAdded(tip, ProposalPath(id))
		if err != nil {
			return nil, err
		}
		ci, err := m.commitInfo(c)
		if err != nil {
			return nil, err
		}
		g := &gitApproval{
			commit: c, name: ci.CommitterName, email: ci.CommitterEmail,
			// A commit precept made for the proposal reached main without
			// a merge commit: nobody is recorded as the one who merged.
			fastForward: ci.Trailer(TrailerProposalID) == id,
		}
		if strings.HasPrefix(strings.ToLower(ci.CommitterEmail), "noreply@") {
			// Merged in a git host's web UI: the host commits, the person
			// who merged is the author.
			g.name, g.email = ci.AuthorName, ci.AuthorEmail
		}
		out[id] = g
	}
	return out, nil
}

// commitThatAdded walks tip's first-parent chain back to the commit that
// brought path in; through precept's own remote-sync merges it follows
// the remote side.
func (m *Manager) commitThatAdded(tip gitrepo.Hash, path string) (gitrepo.Hash, error) {
	cur := tip
	for {
		ci, err := m.commitInfo(cur)
		if err != nil {
			return gitrepo.ZeroHash, err
		}
		if len(ci.Parents) == 0 {
			return cur, nil
		}
		parent, err := m.repo.SnapshotAt(ci.Parents[0])
		if err != nil {
			return gitrepo.ZeroHash, err
		}
		if ok, err := parent.Exists(path); err != nil {
			return gitrepo.ZeroHash, err
		} else if ok {
			cur = ci.Parents[0]
			continue
		}
		if ci.Trailer(TrailerRemoteSync) != "" && len(ci.Parents) > 1 {
			cur = ci.Parents[1]
			continue
		}
		return cur, nil
	}
}

// convertMerged turns proposals merged into main in git into rules.
// merges come from the remote's main when syncing; nil looks at the local
// main.
func (m *Manager) convertMerged(ctx context.Context, branch string, merges map[string]*gitApproval) error {
	if merges == nil {
		tip, err := m.tipOrZero(branch)
		if err != nil {
			return err
		}
		if merges, err = m.findGitMerges(tip); err != nil {
			return err
		}
	}
	var errs []error
	for _, id := range slices.Sorted(maps.Keys(merges)) {
		if err := m.convertOne(ctx, id, merges[id]); err != nil {
			errs = append(errs, fmt.Errorf("convert %s merged in git: %w", id, err))
		}
	}
	return errors.Join(errs...)
}

func (m *Manager) convertOne(ctx context.Context, id string, g *gitApproval) error {
	var p Proposal
	var outcome string
	h, err := m.repo.Update(ctx, m.main, func(s *gitrepo.Snapshot) (*gitrepo.CommitSpec, error) {
		outcome = ""
		var ok bool
		var err error
		if p, ok, err = m.readProposal(s, ProposalPath(id)); err != nil || !ok {
			return nil, err
		}
		stray := func(why string) (*gitrepo.CommitSpec, error) {
			outcome = why
			return &gitrepo.CommitSpec{
				Message:  fmt.Sprintf("Remove %s merged in git: %s", ProposalPath(id), why),
				Trailers: []gitrepo.Trailer{{Key: TrailerProposalID, Value: id}, {Key: TrailerMergeCommit, Value: g.commit.String()}},
				Changes:  []gitrepo.Change{{Path: ProposalPath(id), Delete: true}},
			}, nil
		}
		if ok, err := s.Exists(RejectedPath(id)); err != nil {
			return nil, err
		} else if ok {
			return stray("the proposal was rejected before")
		}
		if ok, err := m.hasRule(s, p.RuleID); err != nil {
			return nil, err
		} else if ok {
			return stray("the proposal was approved before")
		}
		if approved, err := m.wasApproved(ctx, p.RuleID); err != nil {
			return nil, err
		} else if approved {
			return stray("its rule was approved and rolled back before")
		}
		if !p.ApprovedBy(g.approver()) {
			p.Approvals = append(p.Approvals, Approval{Approver: g.approver(), At: m.now(), Via: ViaGit})
		}
		p.Status = Approved
		p.Revision++
		p.UpdatedAt = m.now()
		spec, _, err := m.approvalSpec(s, p, g)
		if err != nil {
			return nil, err
		}
		outcome = "approved"
		return spec, nil
	})
	switch {
	case err != nil:
		return err
	case outcome == "approved":
		m.metrics.approvals.WithLabelValues(ViaGit).Inc()
		m.log.Info("proposal approved by a merge in git", "proposal_id", id, "approver", g.approver(), "merge", g.commit.String(), "commit", h.String())
		c := Change{ProposalID: id, RuleID: p.RuleID, Agents: p.Agents, Commit: h.String(), Revision: p.Revision, Actor: g.approver(), Via: ViaGit, MainChanged: true}
		c.Kind = ProposalApproved
		m.emit(c)
		c.Kind = RuleMerged
		m.emit(c)
	case outcome != "":
		m.log.Warn("a proposal merged in git was already decided; its file was removed from main", "proposal_id", id, "why", outcome)
	}
	return nil
}

// wasApproved reports whether history shows rule id approved before.
func (m *Manager) wasApproved(ctx context.Context, ruleID string) (bool, error) {
	idx, err := m.history(ctx)
	if err != nil {
		return false, err
	}
	for _, e := range idx.entries {
		if e.createsRule && e.Trailers[TrailerRuleID] == ruleID {
			return true, nil
		}
	}
	return false, nil
}

// activateShadowRules commits SHADOW → ACTIVE for rules whose shadow
// period ended.
func (m *Manager) activateShadowRules(ctx context.Context) error {
	st, err := m.load(ctx)
	if err != nil {
		return err
	}
	now := m.now()
	var errs []error
	for _, id := range slices.Sorted(maps.Keys(st.rules)) {
		r := st.rules[id]
		if r.Status != Shadow || r.ShadowUntil == nil || r.ShadowUntil.After(now) {
			continue
		}
		if err := m.activate(ctx, id); err != nil {
			errs = append(errs, fmt.Errorf("activate %s: %w", id, err))
		}
	}
	return errors.Join(errs...)
}

func (m *Manager) activate(ctx context.Context, ruleID string) error {
	var r *Rule
	h, err := m.repo.Update(ctx, m.main, func(s *gitrepo.Snapshot) (*gitrepo.CommitSpec, error) {
		r = nil
		paths, err := m.rulePathsAt(s, ruleID)
		if err != nil {
			return nil, err
		}
		var changes []gitrepo.Change
		for _, p := range paths {
			blob, err := s.Stat(p)
			if err != nil {
				return nil, err
			}
			cur, err := m.parseRule(blob)
			if err != nil {
				return nil, err
			}
			if cur.Status != Shadow {
				continue
			}
			next := cur.clone()
			next.Status = Active
			next.ActivatedAt = m.now()
			data, err := next.Marshal()
			if err != nil {
				return nil, err
			}
			changes = append(changes, gitrepo.Change{Path: p, Data: data})
			r = &next
		}
		if len(changes) == 0 {
			return nil, nil
		}
		return &gitrepo.CommitSpec{
			Message:  fmt.Sprintf("Activate rule %s after its shadow period", ruleID),
			Trailers: []gitrepo.Trailer{{Key: TrailerRuleID, Value: ruleID}, {Key: TrailerProposalID, Value: r.ProposalID}},
			Changes:  changes,
		}, nil
	})
	if err != nil || r == nil {
		return err
	}
	m.log.Info("shadow rule activated", "rule_id", ruleID, "commit", h.String())
	m.emit(Change{Kind: RuleActivated, ProposalID: r.ProposalID, RuleID: ruleID, Agents: r.Agents, Commit: h.String(), Actor: SystemProposer, Via: "precept", MainChanged: true})
	return nil
}

// tuningExample renders an approve/reject note as a tuning example (seed
// 000 R34): front matter, the note, and the rule text it judged.
func tuningExample(p Proposal, agent, label, curator, note, via string, at time.Time) ([]byte, error) {
	meta := struct {
		ProposalID  string    `yaml:"proposal_id"`
		RuleID      string    `yaml:"rule_id"`
		Agent       string    `yaml:"agent"`
		Label       string    `yaml:"label"`
		Curator     string    `yaml:"curator"`
		Via         string    `yaml:"via"`
		At          time.Time `yaml:"at"`
		GroundTruth bool      `yaml:"ground_truth"`
		FeedbackIDs []string  `yaml:"feedback_ids,omitempty"`
	}{p.ID, p.RuleID, agent, label, curator, via, at, strings.TrimSpace(note) != "", p.FeedbackIDs}
	if strings.TrimSpace(note) == "" {
		note = "(no note)"
	}
	body := "## Note\n\n" + strings.TrimSpace(note) + "\n\n## Rule\n\n" + strings.TrimSpace(p.Content)
	return renderFrontMatter(meta, body)
}

// TuningPath is where an approve (good) or reject (bad) note on a
// proposal is kept for an agent.
func TuningPath(agent, label, proposalID, curator string) string {
	return TuningDir + "/" + agent + "/" + label + "/" + proposalID + "-" + slug(curator) + ".md"
}

// slug makes a name safe as part of a file name.
func slug(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if r < 0x80 && (r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' || r == '_') {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
		if b.Len() >= 64 {
			break
		}
	}
	out := strings.Trim(b.String(), "-.")
	if out == "" {
		return "unknown"
	}
	return out
}
