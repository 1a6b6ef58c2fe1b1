package gitstore

import (
	"slices"
	"sync"
	"time"

	"github.com/precept-dev/precept/lib/gitrepo"
	"github.com/precept-dev/precept/rules/rulefmt"
)

// State is what the rules repository says at one set of ref tips. The
// store builds it; it is immutable once built, and everything that reads
// it copies out. The policy functions take a state, so tests can build
// one in memory (NewState, AddRule) without a repository.
type State struct {
	key  string
	main gitrepo.Hash
	snap *gitrepo.Snapshot
	// Branches are the proposal branches' tips by proposal id.
	Branches map[string]gitrepo.Hash
	// OnBranch is each proposal branch's proposal file.
	OnBranch map[string]*rulefmt.Proposal
	Rejected map[string]*rulefmt.Proposal
	Drafts   map[string]*rulefmt.Proposal
	// OnMain are proposal files that reached main by a merge in git and
	// await their conversion into rules.
	OnMain map[string]*rulefmt.Proposal
	// Rules are the active and shadow rules by id; their Agents are the
	// directories holding the rule, rulePaths its files.
	Rules      map[string]*rulefmt.Rule
	rulePaths  map[string][]string
	ByProposal map[string]string
	ByCluster  map[string][]string
	// Merged are the proposal branches whose tips main contains.
	Merged map[string]bool

	// drafted indexes SystemDrafts, built on its first call.
	draftedOnce sync.Once
	drafted     map[string][]time.Time
}

// NewState returns an empty state: the store starts from it, and tests of
// the policy build states in memory from it.
func NewState() *State {
	return &State{
		snap:     &gitrepo.Snapshot{},
		Branches: map[string]gitrepo.Hash{}, OnBranch: map[string]*rulefmt.Proposal{},
		Rejected: map[string]*rulefmt.Proposal{}, Drafts: map[string]*rulefmt.Proposal{}, OnMain: map[string]*rulefmt.Proposal{},
		Rules: map[string]*rulefmt.Rule{}, rulePaths: map[string][]string{}, ByProposal: map[string]string{},
		ByCluster: map[string][]string{}, Merged: map[string]bool{},
	}
}

// AddRule adds the file of rule r found in agent's directory at path p:
// a rule for several agents has one file in each agent's directory.
func (st *State) AddRule(r rulefmt.Rule, agent, p string) {
	if prev, ok := st.Rules[r.ID]; ok {
		if !slices.Contains(prev.Agents, agent) {
			prev.Agents = append(prev.Agents, agent)
			slices.Sort(prev.Agents)
		}
	} else {
		c := r.Clone()
		c.Agents = []string{agent}
		st.Rules[r.ID] = &c
	}
	st.rulePaths[r.ID] = append(st.rulePaths[r.ID], p)
	if r.ProposalID != "" {
		st.ByProposal[r.ProposalID] = r.ID
	}
}

// SystemDrafts returns, for agent, when each rule PR precept drafted for
// it was created, ascending: new-rule and consolidation proposals by the
// system proposer that are pending, approved or rejected (what the rate
// cap counts). The index is built once per state, on the first call, so
// a state built in memory is finished before it is read. The slice is
// the state's: callers read it and do not change it.
func (st *State) SystemDrafts(agent string) []time.Time {
	st.draftedOnce.Do(func() {
		st.drafted = map[string][]time.Time{}
		for _, id := range st.IDs() {
			p, ok := st.Proposal(id)
			if !ok || p.ProposedBy != rulefmt.SystemProposer || p.Kind.DecidesOnRule() {
				continue
			}
			if p.Status != rulefmt.Pending && p.Status != rulefmt.Approved && p.Status != rulefmt.Rejected {
				continue
			}
			for _, a := range slices.Compact(slices.Sorted(slices.Values(p.Agents))) {
				st.drafted[a] = append(st.drafted[a], p.CreatedAt)
			}
		}
		for _, ts := range st.drafted {
			slices.SortFunc(ts, time.Time.Compare)
		}
	})
	return st.drafted[agent]
}

// IDs lists every proposal id the state knows.
func (st *State) IDs() []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range []map[string]*rulefmt.Proposal{st.OnBranch, st.Rejected, st.Drafts, st.OnMain} {
		for id := range m {
			if !seen[id] {
				seen[id] = true
				out = append(out, id)
			}
		}
	}
	for id := range st.ByProposal {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// Proposal assembles the view of one proposal: its decision on main wins
// over its branch, which wins over a held draft.
func (st *State) Proposal(id string) (rulefmt.Proposal, bool) {
	var p rulefmt.Proposal
	ruleID, merged := st.ByProposal[id]
	switch {
	case st.Rejected[id] != nil:
		p = st.Rejected[id].Clone()
	case st.OnBranch[id] != nil:
		p = st.OnBranch[id].Clone()
		switch {
		case merged:
			r := st.Rules[ruleID]
			p.Status, p.Approvals, p.RuleID = rulefmt.Approved, slices.Clone(r.Approvals), ruleID
		case st.OnMain[id] != nil:
			// Merged in git; the conversion into a rule is pending.
			p = st.OnMain[id].Clone()
		case st.Merged[id]:
			// Merged into main once; its rule was rolled back since.
			p.Status = rulefmt.Approved
		}
	case merged:
		p = proposalFromRule(id, st.Rules[ruleID])
	case st.OnMain[id] != nil:
		p = st.OnMain[id].Clone()
	case st.Drafts[id] != nil:
		p = st.Drafts[id].Clone()
	default:
		return rulefmt.Proposal{}, false
	}
	if _, ok := st.Branches[id]; ok && p.Status != rulefmt.Rejected {
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

// Counts tallies proposals by status.
func (st *State) Counts() map[rulefmt.ProposalStatus]int {
	out := map[rulefmt.ProposalStatus]int{}
	for _, id := range st.IDs() {
		if p, ok := st.Proposal(id); ok {
			out[p.Status]++
		}
	}
	return out
}

// Open reports whether a proposal is still a rule PR: pending, or
// approved and not yet merged.
func (st *State) Open(id string) bool {
	p := st.OnBranch[id]
	if p == nil || st.Rejected[id] != nil || st.OnMain[id] != nil || st.Merged[id] {
		return false
	}
	if _, merged := st.ByProposal[id]; merged {
		return false
	}
	return p.Status == rulefmt.Pending || p.Status == rulefmt.Approved
}

// ActiveCount is how many ACTIVE and SHADOW rules an agent has.
func (st *State) ActiveCount(agent string) int {
	n := 0
	for _, r := range st.Rules {
		if slices.Contains(r.Agents, agent) && r.Live() {
			n++
		}
	}
	return n
}

// SupersededOf counts the rules in ids that belong to agent.
func (st *State) SupersededOf(ids []string, agent string) int {
	n := 0
	for _, id := range ids {
		if r := st.Rules[id]; r != nil && slices.Contains(r.Agents, agent) {
			n++
		}
	}
	return n
}

// RuleIDOf returns id when it names an active rule, else "".
func (st *State) RuleIDOf(id string) string {
	if st.Rules[id] != nil {
		return id
	}
	return ""
}

// RetiredRule is a rule that was rolled back, with who did it and why.
type RetiredRule struct {
	Rule       rulefmt.Rule
	By, Reason string
}

// ProposalOfCluster is the open proposal drafted from a cluster, else the
// newest one.
func (st *State) ProposalOfCluster(clusterID string) (string, bool) {
	best, bestAt, found := "", time.Time{}, false
	for _, id := range st.ByCluster[clusterID] {
		if st.Open(id) {
			return id, true
		}
		if p, ok := st.Proposal(id); ok && (!found || p.CreatedAt.After(bestAt)) {
			best, bestAt, found = id, p.CreatedAt, true
		}
	}
	return best, found
}
