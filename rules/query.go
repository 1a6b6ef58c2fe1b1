package rules

import (
	"context"
	"slices"
	"sort"
	"strings"

	"github.com/precept-dev/precept/lib/text"
	"github.com/precept-dev/precept/rules/gitstore"
	"github.com/precept-dev/precept/rules/rulefmt"

	"github.com/precept-dev/precept"
)

// List returns the proposals the filter selects, newest first.
func (m *Manager) List(ctx context.Context, f ListFilter) ([]rulefmt.Proposal, error) {
	if f.Status != "" && !f.Status.Valid() {
		return nil, precept.Errorf(precept.Invalid, "status: unknown status %q", f.Status)
	}
	st, err := m.store.State(ctx)
	if err != nil {
		return nil, err
	}
	var out []rulefmt.Proposal
	for _, id := range st.IDs() {
		p, ok := st.Proposal(id)
		if !ok || f.Status != "" && p.Status != f.Status || f.Agent != "" && !slices.Contains(p.Agents, f.Agent) {
			continue
		}
		decorate(&p, m.opts.Remote, m.store.Main())
		out = append(out, p)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.After(out[j].CreatedAt)
		}
		return out[i].ID > out[j].ID
	})
	return out, nil
}

// proposal returns one proposal with the commits that recorded it.
func (rc *recorder) proposal(ctx context.Context, id string) (rulefmt.Proposal, error) {
	if err := checkProposalID(id); err != nil {
		return rulefmt.Proposal{}, err
	}
	st, err := rc.store.State(ctx, id)
	if err != nil {
		return rulefmt.Proposal{}, err
	}
	p, ok := st.Proposal(id)
	if !ok {
		return rulefmt.Proposal{}, precept.Errorf(precept.NotFound, "proposal %s not found", id)
	}
	hist, err := rc.history(ctx, id)
	if err != nil {
		return rulefmt.Proposal{}, err
	}
	for i := len(hist) - 1; i >= 0; i-- {
		p.Commits = append(p.Commits, hist[i].Commit)
		if hist[i].Trailers[rulefmt.TrailerRuleID] == p.RuleID && p.MergedCommit == "" && hist[i].CreatesRule {
			p.MergedCommit = hist[i].Commit
		}
	}
	fillApprovalCommits(p.Approvals, hist)
	if p.Rejection != nil {
		for _, e := range hist {
			if e.Trailers[rulefmt.TrailerRejectedBy] != "" {
				p.Rejection.Commit = e.Commit
				break
			}
		}
	}
	decorate(&p, rc.remoteOpts, rc.store.Main())
	return p, nil
}

// fillApprovalCommits sets each approval's Commit to the oldest commit
// of hist (newest first) whose Approved-by trailers name the approver.
func fillApprovalCommits(approvals []rulefmt.Approval, hist []rulefmt.HistoryEntry) {
	for i := range approvals {
		for j := len(hist) - 1; j >= 0; j-- {
			if namesApprover(hist[j].Trailers[rulefmt.TrailerApprovedBy], approvals[i].Approver) {
				approvals[i].Commit = hist[j].Commit
				break
			}
		}
	}
}

// namesApprover reports whether a joined Approved-by value lists who,
// alone or as "who <email>".
func namesApprover(joined, who string) bool {
	for _, v := range strings.Split(joined, ", ") {
		if v == who || strings.HasPrefix(v, who+" <") {
			return true
		}
	}
	return false
}

// decorate fills the fields derived from configuration: the link that
// opens a rule PR on the remote's web UI.
func decorate(p *rulefmt.Proposal, r *Remote, main string) {
	if r != nil && r.WebURL != "" && p.Branch != "" {
		p.ReviewURL = strings.TrimSuffix(r.WebURL, "/") + "/compare/" + main + "..." + p.Branch
	}
}

// ProposalForCluster returns the proposal drafted from a cluster: the open
// one if there is one, else the newest in any status (including held
// drafts). ok is false when the cluster never produced a draft.
func (m *Manager) ProposalForCluster(ctx context.Context, clusterID string) (string, bool) {
	st, err := m.store.State(ctx)
	if err != nil {
		m.log.Warn("look up the proposal of a cluster", "cluster_id", clusterID, "err", err)
		return "", false
	}
	return st.ProposalOfCluster(clusterID)
}

// ProposalsForClusters is ProposalForCluster for many clusters at once,
// from one reading of the repository: a listing of clusters asks for a
// page of them. Clusters without a proposal are absent from the map.
func (m *Manager) ProposalsForClusters(ctx context.Context, clusterIDs []string) map[string]string {
	st, err := m.store.State(ctx)
	if err != nil {
		m.log.Warn("look up the proposals of clusters", "clusters", len(clusterIDs), "err", err)
		return nil
	}
	out := make(map[string]string, len(clusterIDs))
	for _, c := range clusterIDs {
		if id, ok := st.ProposalOfCluster(c); ok {
			out[c] = id
		}
	}
	return out
}

// activeRules returns the ACTIVE and SHADOW rules of an agent (every agent
// when agent is empty), by id.
func (rc *recorder) activeRules(ctx context.Context, agent string) ([]rulefmt.Rule, error) {
	st, err := rc.store.State(ctx)
	if err != nil {
		return nil, err
	}
	var out []rulefmt.Rule
	for _, r := range st.Rules {
		if agent != "" && !slices.Contains(r.Agents, agent) {
			continue
		}
		if r.Live() {
			out = append(out, r.Clone())
		}
	}
	slices.SortFunc(out, func(a, b rulefmt.Rule) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// history returns the commits that recorded a proposal's or a rule's
// transitions, newest first. For a rule it includes its proposal's
// commits and the commit that superseded it, if any.
func (rc *recorder) history(ctx context.Context, id string) ([]rulefmt.HistoryEntry, error) {
	if !rulefmt.ValidProposalID(id) && !rulefmt.ValidRuleID(id) {
		return nil, precept.Errorf(precept.Invalid, "id: %q is neither a proposal id (p-…) nor a rule id (r-…)", text.ClipRunes(id, 64))
	}
	idx, err := rc.store.History(ctx)
	if err != nil {
		return nil, err
	}
	return gitstore.HistoryOf(idx, id), nil
}

// rule returns a rule with its provenance: on main while it is active or
// in its shadow period, else as it was when it was rolled back or
// superseded (status ROLLED_BACK or SUNSET), read from history. The
// history is newest first.
func (rc *recorder) rule(ctx context.Context, id string) (rulefmt.Rule, []rulefmt.HistoryEntry, error) {
	if !rulefmt.ValidRuleID(id) {
		return rulefmt.Rule{}, nil, precept.Errorf(precept.Invalid, "rule_id: %q is not a rule id (r-…)", text.ClipRunes(id, 64))
	}
	st, idx, err := rc.store.StateAndHistory(ctx)
	if err != nil {
		return rulefmt.Rule{}, nil, err
	}
	return rc.ruleAt(st, idx, id)
}

// ruleAt is rule as of one reading of the repository.
func (rc *recorder) ruleAt(st *gitstore.State, idx *gitstore.History, id string) (rulefmt.Rule, []rulefmt.HistoryEntry, error) {
	hist := gitstore.HistoryOf(idx, id)
	if r, ok := st.Rules[id]; ok {
		out := r.Clone()
		fillApprovalCommits(out.Approvals, hist)
		return out, hist, nil
	}
	for _, e := range hist {
		switch {
		case e.Trailers[rulefmt.TrailerRuleID] == id && e.Trailers[rulefmt.TrailerRolledBackBy] != "":
			r, err := rc.store.RuleBefore(e.Commit, id)
			if err != nil {
				return rulefmt.Rule{}, nil, err
			}
			r.Status, r.RollbackReason = rulefmt.RolledBack, e.Trailers[rulefmt.TrailerReason]
			fillApprovalCommits(r.Approvals, hist)
			return r, hist, nil
		case e.Trailers[rulefmt.TrailerSunsets] == id:
			r, err := rc.store.RuleBefore(e.Commit, id)
			if err != nil {
				return rulefmt.Rule{}, nil, err
			}
			r.Status, r.SunsetReason = rulefmt.Sunset, e.Trailers[rulefmt.TrailerReason]+" (sunset by "+e.Trailers[rulefmt.TrailerProposalID]+")"
			fillApprovalCommits(r.Approvals, hist)
			return r, hist, nil
		case e.Trailers[rulefmt.TrailerRuleID] != id && strings.Contains(e.Trailers[rulefmt.TrailerSupersedes], id):
			r, err := rc.store.RuleBefore(e.Commit, id)
			if err != nil {
				return rulefmt.Rule{}, nil, err
			}
			r.Status, r.SunsetReason = rulefmt.Sunset, "superseded by "+e.Trailers[rulefmt.TrailerRuleID]
			fillApprovalCommits(r.Approvals, hist)
			return r, hist, nil
		}
	}
	return rulefmt.Rule{}, nil, precept.Errorf(precept.NotFound, "rule %s not found", id)
}

// ProposalCounts tallies the proposals and held drafts by status.
func (m *Manager) ProposalCounts(ctx context.Context) (map[rulefmt.ProposalStatus]int, error) {
	st, err := m.store.State(ctx)
	if err != nil {
		return nil, err
	}
	return st.Counts(), nil
}

// Commits returns the commit SHAs of a history, oldest first.
func Commits(hist []rulefmt.HistoryEntry) []string {
	out := make([]string, 0, len(hist))
	for i := len(hist) - 1; i >= 0; i-- {
		out = append(out, hist[i].Commit)
	}
	return out
}

// Get returns one proposal with the commits that recorded it.
func (m *Manager) Get(ctx context.Context, id string) (rulefmt.Proposal, error) {
	return m.proposal(ctx, id)
}

// ActiveRules returns the ACTIVE and SHADOW rules of an agent (every agent
// when agent is empty), by id.
func (m *Manager) ActiveRules(ctx context.Context, agent string) ([]rulefmt.Rule, error) {
	return m.activeRules(ctx, agent)
}

// History returns the commits that recorded a proposal's or a rule's
// transitions, newest first. For a rule it includes its proposal's
// commits and the commit that superseded it, if any.
func (m *Manager) History(ctx context.Context, id string) ([]rulefmt.HistoryEntry, error) {
	return m.history(ctx, id)
}

// Rule returns a rule with its provenance: on main while it is active or
// in its shadow period, else as it was when it was rolled back or
// superseded (status ROLLED_BACK or SUNSET), read from history. The
// history is newest first.
func (m *Manager) Rule(ctx context.Context, id string) (rulefmt.Rule, []rulefmt.HistoryEntry, error) {
	return m.rule(ctx, id)
}
