package rules

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/precept-dev/precept/lib/text"
	"github.com/precept-dev/precept/rules/gitstore"
	"github.com/precept-dev/precept/rules/rulefmt"

	"github.com/oklog/ulid/v2"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/lib/gitrepo"
)

// Propose commits a manual proposal as a rule PR. It passes the quality
// gate and reconsolidation like a drafted one: a duplicate of an existing
// rule or proposal is refused, overlapping and opposing ones are reported
// and superseded on approval. A proposal touching a protected tag needs
// one approval more; its proposer cannot approve it.
func (m *Manager) Propose(ctx context.Context, mp ManualProposal, proposer precept.Identity) (rulefmt.Proposal, error) {
	if proposer.Name == "" {
		return rulefmt.Proposal{}, precept.Errorf(precept.PermissionDenied, "a proposal needs an identity")
	}
	mp, err := normalizeManual(mp)
	if err != nil {
		return rulefmt.Proposal{}, err
	}
	if reason := m.opts.Quality.Check(mp.Content); reason != "" {
		return rulefmt.Proposal{}, precept.Errorf(precept.Invalid, "rule_content: blocked by the quality gate: %s", reason)
	}
	if err := m.ensureMain(ctx); err != nil {
		return rulefmt.Proposal{}, err
	}
	st, err := m.store.State(ctx)
	if err != nil {
		return rulefmt.Proposal{}, err
	}
	id := "p-" + strings.ToLower(ulid.Make().String())
	p, err := m.policy.manual(ctx, st, mp, proposer.Name, id, m.now())
	if err != nil {
		return rulefmt.Proposal{}, err
	}
	h, created, err := m.store.CreateProposal(ctx, p)
	if err != nil {
		return rulefmt.Proposal{}, err
	}
	if !created {
		return rulefmt.Proposal{}, fmt.Errorf("propose %s: its branch exists already", id)
	}
	m.log.Info("rule proposed", "proposal_id", id, "by", proposer.Name, "agents", p.Agents)
	m.emit(rulefmt.Change{Kind: rulefmt.ProposalCreated, ProposalID: id, RuleID: p.RuleID, Agents: p.Agents, Commit: h.String(), Revision: p.Revision, Actor: proposer.Name, Via: rulefmt.ViaAPI})
	return m.Get(ctx, id)
}

// CheckConflicts reports the active rules and open proposals that
// duplicate, overlap or oppose a candidate rule for the same agents.
func (m *Manager) CheckConflicts(ctx context.Context, c Candidate) ([]rulefmt.ConflictReport, error) {
	c.Agents = rulefmt.Distinct(c.Agents)
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
		c.InsertionPoint = rulefmt.DefaultInsertionPoint
	}
	st, err := m.store.State(ctx)
	if err != nil {
		return nil, err
	}
	return m.policy.conflicts(ctx, st, c)
}

// ensureMain gives a repository without a main branch its first commit,
// after looking for one on the remote, so that rule PRs fork from main.
func (m *Manager) ensureMain(ctx context.Context) error {
	if tip, err := m.store.Tip(m.store.Main()); err != nil || !tip.IsZero() {
		return err
	}
	if m.opts.Remote != nil {
		if err := m.Sync(ctx); err != nil {
			m.log.Warn("sync before creating main", "err", err)
		}
	}
	_, err := m.store.Commit(ctx, m.store.Main(), func(s *gitrepo.Snapshot) (*gitrepo.CommitSpec, error) {
		if !s.Commit.IsZero() {
			return nil, nil
		}
		return &gitrepo.CommitSpec{Message: "Initialize the rules repository", Changes: []gitrepo.Change{{Path: "rules/README.md", Data: []byte(rulefmt.ReadmeText)}}}, nil
	})
	return err
}

// ProposeFromEvidence drafts a proposal for each generalizable cluster
// without a live one, applies the guards and commits the outcome: a rule
// PR, a held draft (blocked or deferred, under rules/drafts/), or the
// evidence added to the rule or proposal it duplicates. It returns what
// it committed. With proposing switched off, or without an evidence
// source, it does nothing and the clusters keep their evidence.
func (m *Manager) ProposeFromEvidence(ctx context.Context) ([]rulefmt.Proposal, error) {
	if m.opts.Evidence == nil || !m.features.Proposing {
		return nil, nil
	}
	// One read of the repository serves the clusters until a write or
	// until it is a second old: reading it lists every proposal branch,
	// and a round may look at thousands of clusters that draft nothing.
	var st *gitstore.State
	var idx *gitstore.History
	var read time.Time
	readState := func(ctx context.Context) (*gitstore.State, *gitstore.History, error) {
		if err := m.ensureMain(ctx); err != nil {
			return nil, nil, err
		}
		s, h, err := m.store.StateAndHistory(ctx)
		if err == nil {
			st, idx, read = s, h, time.Now()
		}
		return s, h, err
	}
	evs, err := draftable(ctx, m.opts.Evidence, readState, m.policy, m.now())
	if err != nil {
		return nil, fmt.Errorf("read generalizable clusters: %w", err)
	}
	// Support sorts a copy of every decision id: computed once per
	// cluster, not in each comparison (at 750k stored, comparisons of
	// clusters of tens of thousands of members made a sixth of the
	// process's CPU).
	type ranked struct {
		ev      rulefmt.Evidence
		support int
	}
	rs := make([]ranked, len(evs))
	for i, ev := range evs {
		rs[i] = ranked{ev, ev.Support()}
	}
	sort.SliceStable(rs, func(i, j int) bool {
		a, b := rs[i], rs[j]
		if (a.ev.Class == rulefmt.ClassGeneralizableHigh) != (b.ev.Class == rulefmt.ClassGeneralizableHigh) {
			return a.ev.Class == rulefmt.ClassGeneralizableHigh
		}
		if a.support != b.support {
			return a.support > b.support
		}
		return a.ev.ClusterID < b.ev.ClusterID
	})
	for i := range rs {
		evs[i] = rs[i].ev
	}
	if len(evs) > 0 {
		if err := m.ensureMain(ctx); err != nil {
			return nil, err
		}
	}
	var out []rulefmt.Proposal
	var errs []error
	for _, ev := range evs {
		if st == nil || time.Since(read) > stateReuse {
			if st, idx, err = m.store.StateAndHistory(ctx); err != nil {
				return out, errors.Join(append(errs, err)...)
			}
			read = time.Now()
		}
		p, err := m.proposeCluster(ctx, st, idx, ev)
		if p != nil || err != nil {
			st = nil // it may have written
		}
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

// draftable is the evidence of the generalizable clusters a round may
// draft, with read reading the repository's state. From a source that lists its clusters (rulefmt.ClusterLister)
// only the evidence of those mayDraft lets through is read: once a store
// has grown, nearly every generalizable cluster has an open proposal, a
// rule or a held draft already, and reading all their evidence each
// round was a fifth of the process's CPU at 250k stored
// (docs/lessons.md, "Evidence for rules"). Otherwise it is all of it.
func draftable(ctx context.Context, src rulefmt.EvidenceSource, read func(context.Context) (*gitstore.State, *gitstore.History, error),
	pol policy, now time.Time) ([]rulefmt.Evidence, error) {
	lister, ok := src.(rulefmt.ClusterLister)
	if !ok {
		return src.Generalizable(ctx)
	}
	refs, listed, err := lister.GeneralizableClusters(ctx)
	switch {
	case err != nil:
		return nil, err
	case !listed:
		return src.Generalizable(ctx)
	case len(refs) == 0:
		return nil, nil
	}
	st, idx, err := read(ctx)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, r := range refs {
		if pol.mayDraft(st, idx.Retired, r, now) {
			ids = append(ids, r.ID)
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	return lister.EvidenceOf(ctx, ids)
}

// stateReuse is how long ProposeFromEvidence reuses one read of the
// repository across clusters that write nothing. A draft another replica
// made meanwhile for the same cluster is caught by the proposal branch's
// exclusive create; one for another cluster is seen at the next read,
// which only a rate cap reached within that second could miss.
const stateReuse = time.Second

// proposeCluster handles one cluster against st and idx, read by the
// caller; it returns nil when nothing was committed.
func (m *Manager) proposeCluster(ctx context.Context, st *gitstore.State, idx *gitstore.History, ev rulefmt.Evidence) (*rulefmt.Proposal, error) {
	ev, ok := m.policy.normalizeEvidence(ev)
	if !ok {
		return nil, nil
	}
	now := m.now()
	plan, ok := m.policy.planDraft(st, idx.Retired, ev, now)
	if !ok {
		return nil, nil
	}
	d := plan.reuse
	if d.Content == "" {
		d = m.policy.draft(ctx, ev)
	}
	p := m.policy.drafted(ev, plan, d, now)
	status, dup, err := m.policy.guard(ctx, st, idx.Retired, &p, now)
	if err != nil {
		return nil, err
	}
	p.Status = status
	switch status {
	case rulefmt.Pending:
		return m.commitDrafted(ctx, st, p)
	case rulefmt.Merged:
		return m.mergeEvidence(ctx, st, p, *dup)
	default:
		return m.holdDraft(ctx, p)
	}
}

// commitDrafted commits a guarded draft as a rule PR and removes the held
// draft record it replaces.
func (m *Manager) commitDrafted(ctx context.Context, st *gitstore.State, p rulefmt.Proposal) (*rulefmt.Proposal, error) {
	h, created, err := m.store.CreateProposal(ctx, p)
	if err != nil || !created {
		return nil, err
	}
	if st.Drafts[p.ID] != nil {
		_, err := m.store.Commit(ctx, m.store.Main(), func(s *gitrepo.Snapshot) (*gitrepo.CommitSpec, error) {
			if ok, err := s.Exists(rulefmt.DraftPath(p.ID)); err != nil || !ok {
				return nil, err
			}
			return &gitrepo.CommitSpec{
				Message:  fmt.Sprintf("Release held draft %s: it is now a rule PR", p.ID),
				Trailers: []gitrepo.Trailer{{Key: rulefmt.TrailerProposalID, Value: p.ID}, {Key: rulefmt.TrailerClusterID, Value: p.ClusterID}},
				Changes:  []gitrepo.Change{{Path: rulefmt.DraftPath(p.ID), Delete: true}},
			}, nil
		})
		if err != nil {
			return nil, err
		}
	}
	m.log.Info("rule proposal drafted", "proposal_id", p.ID, "cluster_id", p.ClusterID, "agents", p.Agents, "kind", p.Kind, "drafted_by", p.DraftedBy)
	m.emit(rulefmt.Change{Kind: rulefmt.ProposalCreated, ProposalID: p.ID, RuleID: p.RuleID, Agents: p.Agents, Commit: h.String(), Revision: p.Revision, Actor: rulefmt.SystemProposer, Via: "precept"})
	p.Branch = rulefmt.ProposalBranch(p.ID)
	return &p, nil
}

// holdDraft records a blocked or deferred draft under rules/drafts/ on
// main, unless the same outcome is recorded already.
func (m *Manager) holdDraft(ctx context.Context, p rulefmt.Proposal) (*rulefmt.Proposal, error) {
	g, _ := p.FailedGuard()
	var done bool
	h, err := m.store.Commit(ctx, m.store.Main(), func(s *gitrepo.Snapshot) (*gitrepo.CommitSpec, error) {
		done = false
		prev, ok, err := m.store.ProposalAt(s, rulefmt.DraftPath(p.ID))
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
		if p.Status == rulefmt.Deferred {
			verb = "Defer"
		}
		return &gitrepo.CommitSpec{
			Message: fmt.Sprintf("%s draft %s for %s (%s)", verb, p.ID, strings.Join(p.Agents, ", "), g.Guard),
			Trailers: []gitrepo.Trailer{
				{Key: rulefmt.TrailerProposalID, Value: p.ID}, {Key: rulefmt.TrailerClusterID, Value: p.ClusterID},
				{Key: rulefmt.TrailerReason, Value: text.ClipWords(text.OneLine(g.Reason), 500)},
				{Key: rulefmt.TrailerFeedbackIDs, Value: rulefmt.FeedbackTrailer(p.FeedbackIDs)},
			},
			Changes: []gitrepo.Change{{Path: rulefmt.DraftPath(p.ID), Data: data}},
		}, nil
	})
	if err != nil || !done {
		return nil, err
	}
	m.log.Info("draft held by a guard", "proposal_id", p.ID, "cluster_id", p.ClusterID, "status", p.Status, "guard", g.Guard, "reason", g.Reason)
	m.emit(rulefmt.Change{Kind: rulefmt.DraftHeld, ProposalID: p.ID, Agents: p.Agents, Commit: h.String(), Revision: p.Revision, Actor: rulefmt.SystemProposer, Via: "precept", MainChanged: true, Guard: g.Guard})
	return &p, nil
}

// mergeEvidence adds a duplicate draft's evidence to the rule or open
// proposal it duplicates (frequency +1) and records the draft as merged.
func (m *Manager) mergeEvidence(ctx context.Context, st *gitstore.State, p rulefmt.Proposal, dup rulefmt.ConflictReport) (*rulefmt.Proposal, error) {
	p.MergedInto = dup.OtherID
	record, err := p.Marshal()
	if err != nil {
		return nil, err
	}
	draftChange := gitrepo.Change{Path: rulefmt.DraftPath(p.ID), Data: record}
	trailers := []gitrepo.Trailer{
		{Key: rulefmt.TrailerProposalID, Value: p.ID}, {Key: rulefmt.TrailerClusterID, Value: p.ClusterID},
		{Key: rulefmt.TrailerFeedbackIDs, Value: rulefmt.FeedbackTrailer(p.FeedbackIDs)},
	}
	var h gitrepo.Hash
	var agents []string
	if rule := st.Rules[dup.OtherID]; rule != nil {
		agents = rule.Agents
		h, err = m.store.Commit(ctx, m.store.Main(), func(s *gitrepo.Snapshot) (*gitrepo.CommitSpec, error) {
			if ok, err := s.Exists(rulefmt.DraftPath(p.ID)); err != nil || ok {
				return nil, err
			}
			paths, err := m.store.RuleFiles(s, dup.OtherID)
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
				cur, err := m.store.RuleFile(blob)
				if err != nil {
					return nil, err
				}
				next := cur.Clone()
				if !slices.Contains(next.EvidenceClusters, p.ClusterID) {
					next.Frequency++
					next.EvidenceClusters = append(next.EvidenceClusters, p.ClusterID)
					next.FeedbackIDs = rulefmt.Distinct(append(next.FeedbackIDs, p.FeedbackIDs...))
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
				Trailers: append([]gitrepo.Trailer{{Key: rulefmt.TrailerRuleID, Value: dup.OtherID}}, trailers...),
				Changes:  changes,
			}, nil
		})
	} else {
		agents = p.Agents
		if _, err = m.store.Commit(ctx, rulefmt.ProposalBranch(dup.OtherID), func(s *gitrepo.Snapshot) (*gitrepo.CommitSpec, error) {
			target, ok, err := m.store.ProposalAt(s, rulefmt.ProposalPath(dup.OtherID))
			if err != nil || !ok || target.Status != rulefmt.Pending || slices.Contains(target.EvidenceClusters, p.ClusterID) {
				return nil, err
			}
			target.EvidenceClusters = append(target.EvidenceClusters, p.ClusterID)
			target.FeedbackIDs = rulefmt.Distinct(append(target.FeedbackIDs, p.FeedbackIDs...))
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
				Trailers: []gitrepo.Trailer{{Key: rulefmt.TrailerProposalID, Value: dup.OtherID}, {Key: rulefmt.TrailerClusterID, Value: p.ClusterID}, {Key: rulefmt.TrailerFeedbackIDs, Value: rulefmt.FeedbackTrailer(p.FeedbackIDs)}},
				Changes:  []gitrepo.Change{{Path: rulefmt.ProposalPath(dup.OtherID), Data: data}},
			}, nil
		}); err != nil {
			return nil, err
		}
		h, err = m.store.Commit(ctx, m.store.Main(), func(s *gitrepo.Snapshot) (*gitrepo.CommitSpec, error) {
			if ok, err := s.Exists(rulefmt.DraftPath(p.ID)); err != nil || ok {
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
	m.log.Info("duplicate draft merged into an existing rule", "proposal_id", p.ID, "cluster_id", p.ClusterID, "into", dup.OtherID, "similarity", dup.Similarity)
	m.emit(rulefmt.Change{Kind: rulefmt.EvidenceAdded, ProposalID: p.ID, RuleID: st.RuleIDOf(dup.OtherID), Agents: agents, Commit: h.String(), Actor: rulefmt.SystemProposer, Via: "precept", MainChanged: true, Guard: rulefmt.GuardReconsolidation})
	return &p, nil
}
