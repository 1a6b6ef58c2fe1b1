package rules

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/gitrepo"
)

// The trailers precept writes; history is read back from them.
const (
	TrailerProposalID   = "Proposal-Id"
	TrailerRuleID       = "Rule-Id"
	TrailerApprovedBy   = "Approved-by"
	TrailerRejectedBy   = "Rejected-by"
	TrailerRolledBackBy = "Rolled-back-by"
	TrailerReason       = "Reason"
	TrailerFeedbackIDs  = "Feedback-Ids"
	TrailerSupersedes   = "Supersedes"
	TrailerMergeCommit  = "Merge-Commit"
	TrailerReverts      = "Reverts"
	TrailerVia          = "Via"
	TrailerClusterID    = "Cluster-Id"
	// TrailerRemoteSync marks the commits that merge the remote's main
	// into the local one.
	TrailerRemoteSync = "Remote-Sync"
)

// HistoryEntry is one commit in a rule's or proposal's history.
type HistoryEntry struct {
	Commit  string
	Subject string
	Message string
	Author  string
	At      time.Time
	// Trailers by key; repeated keys are joined with ", ".
	Trailers map[string]string

	hash gitrepo.Hash
	// createsRule: the commit added the rule named by its Rule-Id.
	createsRule bool
}

// historyIndex holds every commit reachable from main and the proposal
// branches that carries a Proposal-Id or Rule-Id trailer, newest first.
type historyIndex struct {
	key     string
	entries []HistoryEntry
	// retired are the rules rolled back, as they were before.
	retired []retiredRule
}

// retiredRule is a rule that was rolled back, with who did it and why.
type retiredRule struct {
	rule       Rule
	by, reason string
}

// history returns the index for the current tips, walking only when a tip
// moved; commit metadata is cached, so a walk after a new commit is cheap.
func (m *Manager) history(ctx context.Context) (*historyIndex, error) {
	st, err := m.load(ctx)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	if h := m.hist; h != nil && h.key == st.key {
		m.mu.Unlock()
		return h, nil
	}
	m.mu.Unlock()

	var tips []gitrepo.Hash
	if !st.main.IsZero() {
		tips = append(tips, st.main)
	}
	for _, id := range slices.Sorted(maps.Keys(st.branches)) {
		tips = append(tips, st.branches[id])
	}
	depth, err := m.depths(tips)
	if err != nil {
		return nil, err
	}
	var infos []gitrepo.CommitInfo
	for h := range depth {
		ci, err := m.commitInfo(h)
		if err != nil {
			return nil, err
		}
		if ci.Trailer(TrailerProposalID) != "" || ci.Trailer(TrailerRuleID) != "" {
			infos = append(infos, ci)
		}
	}
	// Newest first; commits made within the same second are ordered by
	// their distance from the root, so a child always follows its parent.
	slices.SortFunc(infos, func(a, b gitrepo.CommitInfo) int {
		if c := b.When.Compare(a.When); c != 0 {
			return c
		}
		if c := depth[b.Hash] - depth[a.Hash]; c != 0 {
			return c
		}
		return strings.Compare(a.Hash.String(), b.Hash.String())
	})
	idx := &historyIndex{key: st.key}
	for _, ci := range infos {
		e := HistoryEntry{
			Commit: ci.Hash.String(), hash: ci.Hash, Subject: ci.Subject, Message: ci.Message,
			Author: ci.AuthorName, At: ci.When, Trailers: map[string]string{},
		}
		for _, t := range ci.Trailers {
			if prev, ok := e.Trailers[t.Key]; ok {
				e.Trailers[t.Key] = prev + ", " + t.Value
			} else {
				e.Trailers[t.Key] = t.Value
			}
		}
		if rid := ci.Trailer(TrailerRuleID); rid != "" {
			if e.createsRule, err = m.addsRule(ci, rid); err != nil {
				return nil, err
			}
		}
		idx.entries = append(idx.entries, e)
		if by := e.Trailers[TrailerRolledBackBy]; by != "" {
			r, err := m.ruleBefore(ci.Hash, ci.Trailer(TrailerRuleID))
			if err != nil {
				m.log.Warn("read a rolled-back rule", "commit", ci.Hash.String(), "err", err)
				continue
			}
			idx.retired = append(idx.retired, retiredRule{rule: r, by: by, reason: e.Trailers[TrailerReason]})
		}
	}
	m.mu.Lock()
	m.hist = idx
	m.mu.Unlock()
	return idx, nil
}

// depths returns every commit reachable from tips with its depth: the
// length of the longest path from a root commit.
func (m *Manager) depths(tips []gitrepo.Hash) (map[gitrepo.Hash]int, error) {
	depth := map[gitrepo.Hash]int{}
	type frame struct {
		h        gitrepo.Hash
		expanded bool
	}
	var stack []frame
	for _, t := range tips {
		stack = append(stack, frame{h: t})
	}
	for len(stack) > 0 {
		top := stack[len(stack)-1]
		if _, done := depth[top.h]; done {
			stack = stack[:len(stack)-1]
			continue
		}
		ci, err := m.commitInfo(top.h)
		if err != nil {
			return nil, err
		}
		if !top.expanded {
			stack[len(stack)-1].expanded = true
			for _, p := range ci.Parents {
				if _, done := depth[p]; !done {
					stack = append(stack, frame{h: p})
				}
			}
			continue
		}
		d := 0
		for _, p := range ci.Parents {
			d = max(d, depth[p]+1)
		}
		depth[top.h] = d
		stack = stack[:len(stack)-1]
	}
	return depth, nil
}

// commitInfo reads a commit's metadata, cached: commits never change.
func (m *Manager) commitInfo(h gitrepo.Hash) (gitrepo.CommitInfo, error) {
	m.mu.Lock()
	ci, ok := m.commits[h]
	m.mu.Unlock()
	if ok {
		return ci, nil
	}
	ci, err := m.repo.CommitInfo(h)
	if err != nil {
		return gitrepo.CommitInfo{}, err
	}
	m.mu.Lock()
	if len(m.commits) > 200000 {
		m.commits = map[gitrepo.Hash]gitrepo.CommitInfo{}
	}
	m.commits[h] = ci
	m.mu.Unlock()
	return ci, nil
}

// addsRule reports whether commit ci added a file of rule ruleID relative
// to its first parent: whether it is the commit that approved the rule.
func (m *Manager) addsRule(ci gitrepo.CommitInfo, ruleID string) (bool, error) {
	m.mu.Lock()
	adds, ok := m.creates[ci.Hash]
	m.mu.Unlock()
	if ok {
		return adds, nil
	}
	adds, err := m.diffAddsRule(ci, ruleID)
	if err != nil {
		return false, err
	}
	m.mu.Lock()
	m.creates[ci.Hash] = adds
	m.mu.Unlock()
	return adds, nil
}

func (m *Manager) diffAddsRule(ci gitrepo.CommitInfo, ruleID string) (bool, error) {
	var parent gitrepo.Hash
	if len(ci.Parents) > 0 {
		parent = ci.Parents[0]
	}
	changes, err := m.repo.Diff(parent, ci.Hash, ActiveDir)
	if err != nil {
		return false, err
	}
	for _, c := range changes {
		if c.Kind == gitrepo.Added && strings.HasSuffix(c.Path, "/"+ruleID+".md") {
			return true, nil
		}
	}
	return false, nil
}

// History returns the commits that recorded a proposal's or a rule's
// transitions, newest first. For a rule it includes its proposal's
// commits and the commit that superseded it, if any.
func (m *Manager) History(ctx context.Context, id string) ([]HistoryEntry, error) {
	if !ValidProposalID(id) && !ValidRuleID(id) {
		return nil, precept.Errorf(precept.Invalid, "id: %q is neither a proposal id (p-…) nor a rule id (r-…)", clipRunes(id, 64))
	}
	idx, err := m.history(ctx)
	if err != nil {
		return nil, err
	}
	proposalID, ruleID := id, RuleIDFor(id)
	if ValidRuleID(id) {
		ruleID = id
		proposalID = ""
		for _, e := range idx.entries {
			if e.Trailers[TrailerRuleID] == id && e.Trailers[TrailerProposalID] != "" {
				proposalID = e.Trailers[TrailerProposalID]
				break
			}
		}
	}
	var out []HistoryEntry
	for _, e := range idx.entries {
		if proposalID != "" && e.Trailers[TrailerProposalID] == proposalID || e.Trailers[TrailerRuleID] == ruleID ||
			slices.Contains(strings.Fields(strings.ReplaceAll(e.Trailers[TrailerSupersedes], ",", " ")), ruleID) {
			out = append(out, e)
		}
	}
	return out, nil
}

// Rule returns a rule with its provenance: on main while it is active or
// in its shadow period, else as it was when it was rolled back or
// superseded (status ROLLED_BACK or SUNSET), read from history. The
// history is newest first.
func (m *Manager) Rule(ctx context.Context, id string) (Rule, []HistoryEntry, error) {
	if !ValidRuleID(id) {
		return Rule{}, nil, precept.Errorf(precept.Invalid, "rule_id: %q is not a rule id (r-…)", clipRunes(id, 64))
	}
	st, err := m.load(ctx)
	if err != nil {
		return Rule{}, nil, err
	}
	hist, err := m.History(ctx, id)
	if err != nil {
		return Rule{}, nil, err
	}
	if r, ok := st.rules[id]; ok {
		out := r.clone()
		fillApprovalCommits(out.Approvals, hist)
		return out, hist, nil
	}
	for _, e := range hist {
		switch {
		case e.Trailers[TrailerRuleID] == id && e.Trailers[TrailerRolledBackBy] != "":
			r, err := m.ruleBefore(e.hash, id)
			if err != nil {
				return Rule{}, nil, err
			}
			r.Status, r.RollbackReason = RolledBack, e.Trailers[TrailerReason]
			fillApprovalCommits(r.Approvals, hist)
			return r, hist, nil
		case e.Trailers[TrailerRuleID] != id && strings.Contains(e.Trailers[TrailerSupersedes], id):
			r, err := m.ruleBefore(e.hash, id)
			if err != nil {
				return Rule{}, nil, err
			}
			r.Status, r.SunsetReason = Sunset, "superseded by "+e.Trailers[TrailerRuleID]
			fillApprovalCommits(r.Approvals, hist)
			return r, hist, nil
		}
	}
	return Rule{}, nil, precept.Errorf(precept.NotFound, "rule %s not found", id)
}

// ruleBefore reads a rule as it was in the first parent of commit c, with
// the agents whose directories held it.
func (m *Manager) ruleBefore(c gitrepo.Hash, id string) (Rule, error) {
	ci, err := m.commitInfo(c)
	if err != nil {
		return Rule{}, err
	}
	if len(ci.Parents) == 0 {
		return Rule{}, precept.Errorf(precept.NotFound, "rule %s not found", id)
	}
	snap, err := m.repo.SnapshotAt(ci.Parents[0])
	if err != nil {
		return Rule{}, err
	}
	agents, err := snap.List(ActiveDir)
	if err != nil {
		return Rule{}, err
	}
	var out Rule
	found := false
	for _, a := range agents {
		blob, err := snap.Stat(ActiveRulePath(a.Name, id))
		if errors.Is(err, gitrepo.ErrNotFound) {
			continue
		}
		if err != nil {
			return Rule{}, err
		}
		if !found {
			r, err := m.parseRule(blob)
			if err != nil {
				return Rule{}, err
			}
			out, found = r.clone(), true
			out.Agents = nil
		}
		out.Agents = append(out.Agents, a.Name)
	}
	if !found {
		return Rule{}, precept.Errorf(precept.NotFound, "rule %s not found", id)
	}
	return out, nil
}

// Commits returns the commit SHAs of a history, oldest first.
func Commits(hist []HistoryEntry) []string {
	out := make([]string, 0, len(hist))
	for i := len(hist) - 1; i >= 0; i-- {
		out = append(out, hist[i].Commit)
	}
	return out
}
