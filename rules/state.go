package rules

import (
	"slices"

	"github.com/precept-dev/precept/lib/gitrepo"
	"github.com/precept-dev/precept/rules/rulefmt"
)

// state is what the rules repository says at one set of ref tips. The
// store builds it; it is immutable once built, and everything that reads
// it copies out. The policy functions take a state, so tests can build
// one in memory (newState, addRule) without a repository.
type state struct {
	key  string
	main gitrepo.Hash
	snap *gitrepo.Snapshot
	// branches are the proposal branches' tips by proposal id.
	branches map[string]gitrepo.Hash
	// onBranch is each proposal branch's proposal file.
	onBranch map[string]*rulefmt.Proposal
	rejected map[string]*rulefmt.Proposal
	drafts   map[string]*rulefmt.Proposal
	// onMain are proposal files that reached main by a merge in git and
	// await their conversion into rules.
	onMain map[string]*rulefmt.Proposal
	// rules are the active and shadow rules by id; their Agents are the
	// directories holding the rule, rulePaths its files.
	rules      map[string]*rulefmt.Rule
	rulePaths  map[string][]string
	byProposal map[string]string
	byCluster  map[string][]string
	// merged are the proposal branches whose tips main contains.
	merged map[string]bool
}

func newState() *state {
	return &state{
		snap:     &gitrepo.Snapshot{},
		branches: map[string]gitrepo.Hash{}, onBranch: map[string]*rulefmt.Proposal{},
		rejected: map[string]*rulefmt.Proposal{}, drafts: map[string]*rulefmt.Proposal{}, onMain: map[string]*rulefmt.Proposal{},
		rules: map[string]*rulefmt.Rule{}, rulePaths: map[string][]string{}, byProposal: map[string]string{},
		byCluster: map[string][]string{}, merged: map[string]bool{},
	}
}

// addRule adds the file of rule r found in agent's directory at path p:
// a rule for several agents has one file in each agent's directory.
func (st *state) addRule(r rulefmt.Rule, agent, p string) {
	if prev, ok := st.rules[r.ID]; ok {
		if !slices.Contains(prev.Agents, agent) {
			prev.Agents = append(prev.Agents, agent)
			slices.Sort(prev.Agents)
		}
	} else {
		c := r.Clone()
		c.Agents = []string{agent}
		st.rules[r.ID] = &c
	}
	st.rulePaths[r.ID] = append(st.rulePaths[r.ID], p)
	if r.ProposalID != "" {
		st.byProposal[r.ProposalID] = r.ID
	}
}

// ids lists every proposal id the state knows.
func (st *state) ids() []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range []map[string]*rulefmt.Proposal{st.onBranch, st.rejected, st.drafts, st.onMain} {
		for id := range m {
			if !seen[id] {
				seen[id] = true
				out = append(out, id)
			}
		}
	}
	for id := range st.byProposal {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// proposal assembles the view of one proposal: its decision on main wins
// over its branch, which wins over a held draft.
func (st *state) proposal(id string) (rulefmt.Proposal, bool) {
	var p rulefmt.Proposal
	ruleID, merged := st.byProposal[id]
	switch {
	case st.rejected[id] != nil:
		p = st.rejected[id].Clone()
	case st.onBranch[id] != nil:
		p = st.onBranch[id].Clone()
		switch {
		case merged:
			r := st.rules[ruleID]
			p.Status, p.Approvals, p.RuleID = rulefmt.Approved, slices.Clone(r.Approvals), ruleID
		case st.onMain[id] != nil:
			// Merged in git; the conversion into a rule is pending.
			p = st.onMain[id].Clone()
		case st.merged[id]:
			// Merged into main once; its rule was rolled back since.
			p.Status = rulefmt.Approved
		}
	case merged:
		p = proposalFromRule(id, st.rules[ruleID])
	case st.onMain[id] != nil:
		p = st.onMain[id].Clone()
	case st.drafts[id] != nil:
		p = st.drafts[id].Clone()
	default:
		return rulefmt.Proposal{}, false
	}
	if _, ok := st.branches[id]; ok && p.Status != rulefmt.Rejected {
		p.Branch = rulefmt.ProposalBranch(id)
	}
	return p, true
}

// proposalFromRule rebuilds an approved proposal from its rule when its
// branch is gone (e.g. deleted on the git host after the merge).
func proposalFromRule(id string, r *rulefmt.Rule) rulefmt.Proposal {
	return rulefmt.Proposal{
		ID: id, Kind: rulefmt.KindNewRule, Status: rulefmt.Approved, FeedbackIDs: slices.Clone(r.FeedbackIDs),
		Confidence: r.Confidence, Agents: slices.Clone(r.Agents), Type: r.Type, InsertionPoint: r.InsertionPoint,
		EvidenceSummary: r.EvidenceSummary, CreatedAt: r.ActivatedAt, UpdatedAt: r.ActivatedAt,
		ProposedBy: r.ProposedBy, ClusterID: r.ClusterID, Tags: slices.Clone(r.Tags), Protected: r.Protected,
		Approvals: slices.Clone(r.Approvals), Supersedes: slices.Clone(r.Supersedes), RuleID: r.ID,
		Required: len(r.Approvals), Content: r.Content,
	}
}

// counts tallies proposals by status.
func (st *state) counts() map[rulefmt.ProposalStatus]int {
	out := map[rulefmt.ProposalStatus]int{}
	for _, id := range st.ids() {
		if p, ok := st.proposal(id); ok {
			out[p.Status]++
		}
	}
	return out
}

// open reports whether a proposal is still a rule PR: pending, or
// approved and not yet merged.
func (st *state) open(id string) bool {
	p := st.onBranch[id]
	if p == nil || st.rejected[id] != nil || st.onMain[id] != nil || st.merged[id] {
		return false
	}
	if _, merged := st.byProposal[id]; merged {
		return false
	}
	return p.Status == rulefmt.Pending || p.Status == rulefmt.Approved
}

// live reports whether a rule is in a prompt: ACTIVE, or SHADOW in the
// shadow prompt.
func live(r *rulefmt.Rule) bool { return r.Status == rulefmt.Active || r.Status == rulefmt.Shadow }

// activeCount is how many ACTIVE and SHADOW rules an agent has.
func (st *state) activeCount(agent string) int {
	n := 0
	for _, r := range st.rules {
		if slices.Contains(r.Agents, agent) && live(r) {
			n++
		}
	}
	return n
}

// supersededOf counts the rules in ids that belong to agent.
func (st *state) supersededOf(ids []string, agent string) int {
	n := 0
	for _, id := range ids {
		if r := st.rules[id]; r != nil && slices.Contains(r.Agents, agent) {
			n++
		}
	}
	return n
}

// ruleIDOf returns id when it names an active rule, else "".
func (st *state) ruleIDOf(id string) string {
	if st.rules[id] != nil {
		return id
	}
	return ""
}

// retiredRule is a rule that was rolled back, with who did it and why.
type retiredRule struct {
	rule       rulefmt.Rule
	by, reason string
}
