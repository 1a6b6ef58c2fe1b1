package rules

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/gitrepo"
)

// SlackBranch holds where proposals were posted (slack/<id>.yaml). It is
// kept apart from proposal branches and main: recording a post must not
// change a rule PR, nor fill main's audit log with bookkeeping.
const SlackBranch = "precept/slack"

func slackPath(id string) string { return "slack/" + id + ".yaml" }

// state is what the repository says at one set of ref tips. It is
// immutable once built; views copy out of it.
type state struct {
	key  string
	main gitrepo.Hash
	snap *gitrepo.Snapshot
	// branches are the proposal branches' tips by proposal id.
	branches map[string]gitrepo.Hash
	// onBranch is each proposal branch's proposal file.
	onBranch map[string]*Proposal
	rejected map[string]*Proposal
	drafts   map[string]*Proposal
	// onMain are proposal files that reached main by a merge in git and
	// await their conversion into rules.
	onMain map[string]*Proposal
	// rules are the active and shadow rules by id; Agents are the
	// directories holding the rule.
	rules      map[string]*Rule
	rulePaths  map[string][]string
	byProposal map[string]string
	slack      map[string]SlackPost
	byCluster  map[string][]string
	// merged are the proposal branches whose tips main contains.
	merged map[string]bool
}

type parsedKey struct {
	blob gitrepo.Hash
	kind byte
}

const (
	kindProposal byte = iota
	kindRule
	kindSlack
)

// parse returns the parsed content of a blob, cached by blob hash: blobs
// never change.
func (m *Manager) parse(blob gitrepo.Hash, kind byte) (any, error) {
	k := parsedKey{blob, kind}
	m.mu.Lock()
	v, ok := m.parsed[k]
	m.mu.Unlock()
	if ok {
		return v, nil
	}
	data, err := m.repo.ReadBlob(blob)
	if err != nil {
		return nil, err
	}
	switch kind {
	case kindProposal:
		p, err := ParseProposal(data)
		if err != nil {
			return nil, err
		}
		v = &p
	case kindRule:
		r, err := ParseRule(data)
		if err != nil {
			return nil, err
		}
		v = &r
	case kindSlack:
		var s SlackPost
		if err := yaml.Unmarshal(data, &s); err != nil {
			return nil, fmt.Errorf("parse slack post: %w", err)
		}
		v = &s
	}
	m.mu.Lock()
	if len(m.parsed) > 100000 {
		m.parsed = map[parsedKey]any{}
	}
	m.parsed[k] = v
	m.mu.Unlock()
	return v, nil
}

func (m *Manager) parseProposal(blob gitrepo.Hash) (*Proposal, error) {
	v, err := m.parse(blob, kindProposal)
	if err != nil {
		return nil, err
	}
	return v.(*Proposal), nil
}

func (m *Manager) parseRule(blob gitrepo.Hash) (*Rule, error) {
	v, err := m.parse(blob, kindRule)
	if err != nil {
		return nil, err
	}
	return v.(*Rule), nil
}

// readProposal reads a proposal file at a snapshot; ok is false when it
// is not there.
func (m *Manager) readProposal(s *gitrepo.Snapshot, p string) (Proposal, bool, error) {
	if s == nil || s.Commit.IsZero() {
		return Proposal{}, false, nil
	}
	blob, err := s.Stat(p)
	if errors.Is(err, gitrepo.ErrNotFound) {
		return Proposal{}, false, nil
	}
	if err != nil {
		return Proposal{}, false, err
	}
	pp, err := m.parseProposal(blob)
	if err != nil {
		return Proposal{}, false, fmt.Errorf("%s: %w", p, err)
	}
	return pp.Clone(), true, nil
}

// tipOrZero returns a branch's tip, or ZeroHash when it does not exist.
func (m *Manager) tipOrZero(branch string) (gitrepo.Hash, error) {
	h, err := m.repo.Tip(branch)
	if errors.Is(err, gitrepo.ErrNotFound) {
		return gitrepo.ZeroHash, nil
	}
	return h, err
}

// load returns the state at the current ref tips, rebuilding it only when
// a tip moved. want names proposals the caller is about to act on: their
// branches are looked up directly, not only through the ref listing.
func (m *Manager) load(ctx context.Context, want ...string) (*state, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	mainTip, err := m.tipOrZero(m.main)
	if err != nil {
		return nil, err
	}
	slackTip, err := m.tipOrZero(SlackBranch)
	if err != nil {
		return nil, err
	}
	branches, err := m.proposalBranches(want)
	if err != nil {
		return nil, err
	}
	sort.Slice(branches, func(i, j int) bool { return branches[i].Name < branches[j].Name })
	var key strings.Builder
	key.WriteString(mainTip.String() + slackTip.String())
	for _, b := range branches {
		key.WriteString(b.Name + b.Tip.String())
	}
	m.mu.Lock()
	if c := m.cached; c != nil && c.key == key.String() {
		m.mu.Unlock()
		return c, nil
	}
	m.mu.Unlock()

	st, err := m.build(key.String(), mainTip, slackTip, branches)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	m.cached = st
	m.mu.Unlock()
	m.metrics.setProposalCounts(st.counts())
	return st, nil
}

func (m *Manager) build(key string, mainTip, slackTip gitrepo.Hash, branches []gitrepo.Branch) (*state, error) {
	st := &state{
		key: key, main: mainTip,
		branches: map[string]gitrepo.Hash{}, onBranch: map[string]*Proposal{},
		rejected: map[string]*Proposal{}, drafts: map[string]*Proposal{}, onMain: map[string]*Proposal{},
		rules: map[string]*Rule{}, rulePaths: map[string][]string{}, byProposal: map[string]string{},
		slack: map[string]SlackPost{}, byCluster: map[string][]string{}, merged: map[string]bool{},
	}
	var err error
	if mainTip.IsZero() {
		st.snap = &gitrepo.Snapshot{}
	} else if st.snap, err = m.repo.SnapshotAt(mainTip); err != nil {
		return nil, err
	}
	for _, b := range branches {
		id := strings.TrimPrefix(b.Name, BranchPrefix)
		if !ValidProposalID(id) {
			continue
		}
		snap, err := m.repo.SnapshotAt(b.Tip)
		if err != nil {
			return nil, err
		}
		blob, err := snap.Stat(ProposalPath(id))
		if errors.Is(err, gitrepo.ErrNotFound) {
			m.log.Warn("proposal branch without its proposal file; ignored", "branch", b.Name)
			continue
		}
		if err != nil {
			return nil, err
		}
		p, err := m.parseProposal(blob)
		if err != nil {
			m.log.Warn("unreadable proposal file; ignored", "branch", b.Name, "err", err)
			continue
		}
		st.branches[id] = b.Tip
		st.onBranch[id] = p
	}
	reach, err := m.reachable(mainTip)
	if err != nil {
		return nil, err
	}
	for id, tip := range st.branches {
		st.merged[id] = reach[tip]
	}
	if !mainTip.IsZero() {
		for dir, into := range map[string]map[string]*Proposal{RejectedDir: st.rejected, DraftsDir: st.drafts, ProposalsDir: st.onMain} {
			if err := m.loadProposalDir(st.snap, dir, into); err != nil {
				return nil, err
			}
		}
		if err := m.loadRules(st); err != nil {
			return nil, err
		}
	}
	if !slackTip.IsZero() {
		snap, err := m.repo.SnapshotAt(slackTip)
		if err != nil {
			return nil, err
		}
		err = snap.Walk("slack", func(p string, blob gitrepo.Hash) error {
			v, err := m.parse(blob, kindSlack)
			if err != nil {
				m.log.Warn("unreadable slack post record; ignored", "path", p, "err", err)
				return nil
			}
			st.slack[strings.TrimSuffix(path.Base(p), ".yaml")] = *v.(*SlackPost)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	for _, id := range st.ids() {
		if p, ok := st.proposal(id); ok && p.ClusterID != "" {
			st.byCluster[p.ClusterID] = append(st.byCluster[p.ClusterID], id)
		}
	}
	return st, nil
}

func (m *Manager) loadProposalDir(snap *gitrepo.Snapshot, dir string, into map[string]*Proposal) error {
	entries, err := snap.List(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name, ".md")
		if e.IsDir || !ok || !ValidProposalID(id) {
			continue
		}
		p, err := m.parseProposal(e.Hash)
		if err != nil {
			m.log.Warn("unreadable proposal record; ignored", "path", e.Path, "err", err)
			continue
		}
		into[id] = p
	}
	return nil
}

func (m *Manager) loadRules(st *state) error {
	return st.snap.Walk(ActiveDir, func(p string, blob gitrepo.Hash) error {
		rel := strings.TrimPrefix(p, ActiveDir+"/")
		agent, file, ok := strings.Cut(rel, "/")
		if !ok || strings.Contains(file, "/") || !strings.HasSuffix(file, ".md") {
			return nil
		}
		r, err := m.parseRule(blob)
		if err != nil {
			m.log.Warn("unreadable rule file; ignored", "path", p, "err", err)
			return nil
		}
		if !ValidRuleID(r.ID) || !ValidName(agent) {
			m.log.Warn("rule file with an invalid rule id or agent directory; ignored", "path", p)
			return nil
		}
		if prev, ok := st.rules[r.ID]; ok {
			if !slices.Contains(prev.Agents, agent) {
				prev.Agents = append(prev.Agents, agent)
				slices.Sort(prev.Agents)
			}
		} else {
			c := r.clone()
			c.Agents = []string{agent}
			st.rules[r.ID] = &c
		}
		st.rulePaths[r.ID] = append(st.rulePaths[r.ID], p)
		if r.ProposalID != "" {
			st.byProposal[r.ProposalID] = r.ID
		}
		return nil
	})
}

// clone returns a deep copy of a rule.
func (r Rule) clone() Rule {
	r.Agents = slices.Clone(r.Agents)
	r.FeedbackIDs = slices.Clone(r.FeedbackIDs)
	r.Approvals = slices.Clone(r.Approvals)
	r.Tags = slices.Clone(r.Tags)
	r.Supersedes = slices.Clone(r.Supersedes)
	r.EvidenceClusters = slices.Clone(r.EvidenceClusters)
	if r.ShadowUntil != nil {
		t := *r.ShadowUntil
		r.ShadowUntil = &t
	}
	return r
}

// ids lists every proposal id the state knows.
func (st *state) ids() []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range []map[string]*Proposal{st.onBranch, st.rejected, st.drafts, st.onMain} {
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
func (st *state) proposal(id string) (Proposal, bool) {
	var p Proposal
	ruleID, merged := st.byProposal[id]
	switch {
	case st.rejected[id] != nil:
		p = st.rejected[id].Clone()
	case st.onBranch[id] != nil:
		p = st.onBranch[id].Clone()
		switch {
		case merged:
			r := st.rules[ruleID]
			p.Status, p.Approvals, p.RuleID = Approved, slices.Clone(r.Approvals), ruleID
		case st.onMain[id] != nil:
			// Merged in git; the conversion into a rule is pending.
			p = st.onMain[id].Clone()
		case st.merged[id]:
			// Merged into main once; its rule was rolled back since.
			p.Status = Approved
		}
	case merged:
		p = proposalFromRule(id, st.rules[ruleID])
	case st.onMain[id] != nil:
		p = st.onMain[id].Clone()
	case st.drafts[id] != nil:
		p = st.drafts[id].Clone()
	default:
		return Proposal{}, false
	}
	if _, ok := st.branches[id]; ok && p.Status != Rejected {
		p.Branch = ProposalBranch(id)
	}
	if s, ok := st.slack[id]; ok {
		p.Slack = &s
	}
	return p, true
}

// proposalFromRule rebuilds an approved proposal from its rule when its
// branch is gone (e.g. deleted on the git host after the merge).
func proposalFromRule(id string, r *Rule) Proposal {
	return Proposal{
		ID: id, Kind: KindNewRule, Status: Approved, FeedbackIDs: slices.Clone(r.FeedbackIDs),
		Confidence: r.Confidence, Agents: slices.Clone(r.Agents), Type: r.Type, InsertionPoint: r.InsertionPoint,
		EvidenceSummary: r.EvidenceSummary, CreatedAt: r.ActivatedAt, UpdatedAt: r.ActivatedAt,
		ProposedBy: r.ProposedBy, ClusterID: r.ClusterID, Tags: slices.Clone(r.Tags), Protected: r.Protected,
		Approvals: slices.Clone(r.Approvals), Supersedes: slices.Clone(r.Supersedes), RuleID: r.ID,
		Required: len(r.Approvals), Content: r.Content,
	}
}

// counts tallies proposals by status, for the metrics.
func (st *state) counts() map[ProposalStatus]int {
	out := map[ProposalStatus]int{}
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
	return p.Status == Pending || p.Status == Approved
}

// reachSet is the set of commits reachable from one main tip.
type reachSet struct {
	tip gitrepo.Hash
	set map[gitrepo.Hash]bool
}

// reachable returns the commits reachable from tip. It extends the set of
// the previous tip when tip descends from it, so a new commit costs a
// walk over the new commits only.
func (m *Manager) reachable(tip gitrepo.Hash) (map[gitrepo.Hash]bool, error) {
	m.mu.Lock()
	prev := m.reach
	m.mu.Unlock()
	if tip.IsZero() {
		return map[gitrepo.Hash]bool{}, nil
	}
	if prev != nil && prev.tip == tip {
		return prev.set, nil
	}
	base := map[gitrepo.Hash]bool{}
	if prev != nil && !prev.tip.IsZero() {
		if ok, err := m.repo.IsAncestor(prev.tip, tip); err != nil {
			return nil, err
		} else if ok {
			base = prev.set
		}
	}
	set := make(map[gitrepo.Hash]bool, len(base)+16)
	for h := range base {
		set[h] = true
	}
	stack := []gitrepo.Hash{tip}
	for len(stack) > 0 {
		h := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if set[h] {
			continue
		}
		set[h] = true
		ci, err := m.commitInfo(h)
		if err != nil {
			return nil, err
		}
		stack = append(stack, ci.Parents...)
	}
	m.mu.Lock()
	m.reach = &reachSet{tip: tip, set: set}
	m.mu.Unlock()
	return set, nil
}

// activeCount is how many ACTIVE and SHADOW rules an agent has.
func (st *state) activeCount(agent string) int {
	n := 0
	for _, r := range st.rules {
		if slices.Contains(r.Agents, agent) && (r.Status == Active || r.Status == Shadow) {
			n++
		}
	}
	return n
}

// texts returns the active rules and open proposals the guards compare
// drafts with, in a stable order.
func (st *state) texts() []ruleText {
	var out []ruleText
	ids := make([]string, 0, len(st.rules))
	for id := range st.rules {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		r := st.rules[id]
		if r.Status != Active && r.Status != Shadow {
			continue
		}
		out = append(out, ruleText{ID: id, Agents: r.Agents, InsertionPoint: r.InsertionPoint, Content: r.Content, IsRule: true})
	}
	for _, id := range st.ids() {
		if !st.open(id) {
			continue
		}
		p := st.onBranch[id]
		out = append(out, ruleText{ID: id, Agents: p.Agents, InsertionPoint: p.InsertionPoint, Content: p.Content})
	}
	return out
}

// ListFilter selects proposals.
type ListFilter struct {
	// Status; empty lists every status.
	Status ProposalStatus
	// Agent; empty lists every agent.
	Agent string
}

// List returns the proposals the filter selects, newest first.
func (m *Manager) List(ctx context.Context, f ListFilter) ([]Proposal, error) {
	if f.Status != "" && !f.Status.Valid() {
		return nil, precept.Errorf(precept.Invalid, "status: unknown status %q", f.Status)
	}
	st, err := m.load(ctx)
	if err != nil {
		return nil, err
	}
	var out []Proposal
	for _, id := range st.ids() {
		p, ok := st.proposal(id)
		if !ok || f.Status != "" && p.Status != f.Status || f.Agent != "" && !slices.Contains(p.Agents, f.Agent) {
			continue
		}
		m.decorate(&p)
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

// Get returns one proposal with the commits that recorded it.
func (m *Manager) Get(ctx context.Context, id string) (Proposal, error) {
	if err := checkProposalID(id); err != nil {
		return Proposal{}, err
	}
	st, err := m.load(ctx, id)
	if err != nil {
		return Proposal{}, err
	}
	p, ok := st.proposal(id)
	if !ok {
		return Proposal{}, precept.Errorf(precept.NotFound, "proposal %s not found", id)
	}
	hist, err := m.History(ctx, id)
	if err != nil {
		return Proposal{}, err
	}
	for i := len(hist) - 1; i >= 0; i-- {
		p.Commits = append(p.Commits, hist[i].Commit)
		if hist[i].Trailers[TrailerRuleID] == p.RuleID && p.MergedCommit == "" && hist[i].createsRule {
			p.MergedCommit = hist[i].Commit
		}
	}
	fillApprovalCommits(p.Approvals, hist)
	if p.Rejection != nil {
		for _, e := range hist {
			if e.Trailers[TrailerRejectedBy] != "" {
				p.Rejection.Commit = e.Commit
				break
			}
		}
	}
	m.decorate(&p)
	return p, nil
}

// fillApprovalCommits sets each approval's Commit to the oldest commit
// of hist (newest first) whose Approved-by trailers name the approver.
func fillApprovalCommits(approvals []Approval, hist []HistoryEntry) {
	for i := range approvals {
		for j := len(hist) - 1; j >= 0; j-- {
			if namesApprover(hist[j].Trailers[TrailerApprovedBy], approvals[i].Approver) {
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

// decorate fills the fields derived from configuration.
func (m *Manager) decorate(p *Proposal) {
	if r := m.opts.Remote; r != nil && r.WebURL != "" && p.Branch != "" {
		p.ReviewURL = strings.TrimSuffix(r.WebURL, "/") + "/compare/" + m.main + "..." + p.Branch
	}
}

// ProposalForCluster returns the proposal drafted from a cluster: the open
// one if there is one, else the newest in any status (including held
// drafts). ok is false when the cluster never produced a draft.
func (m *Manager) ProposalForCluster(ctx context.Context, clusterID string) (string, bool) {
	st, err := m.load(ctx)
	if err != nil {
		m.log.Warn("look up the proposal of a cluster", "cluster_id", clusterID, "err", err)
		return "", false
	}
	best, bestAt, found := "", time.Time{}, false
	for _, id := range st.byCluster[clusterID] {
		if st.open(id) {
			return id, true
		}
		if p, ok := st.proposal(id); ok && (!found || p.CreatedAt.After(bestAt)) {
			best, bestAt, found = id, p.CreatedAt, true
		}
	}
	return best, found
}

// ActiveRules returns the ACTIVE and SHADOW rules of an agent (every agent
// when agent is empty), by id.
func (m *Manager) ActiveRules(ctx context.Context, agent string) ([]Rule, error) {
	st, err := m.load(ctx)
	if err != nil {
		return nil, err
	}
	var out []Rule
	for _, r := range st.rules {
		if agent != "" && !slices.Contains(r.Agents, agent) {
			continue
		}
		if r.Status == Active || r.Status == Shadow {
			out = append(out, r.clone())
		}
	}
	slices.SortFunc(out, func(a, b Rule) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}
