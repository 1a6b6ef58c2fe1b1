package gitstore

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/lib/gitrepo"
	"github.com/precept-dev/precept/rules/rulefmt"
)

// History holds every commit reachable from main and the proposal
// branches that carries a Proposal-Id or Rule-Id trailer, newest first.
type History struct {
	key     string
	entries []rulefmt.HistoryEntry
	// Retired are the rules rolled back, as they were before.
	Retired []RetiredRule
}

// History returns the index for the current tips, walking only when a tip
// moved; commit metadata is cached, so a walk after a new commit is cheap.
func (s *Store) History(ctx context.Context) (*History, error) {
	_, idx, err := s.StateAndHistory(ctx)
	return idx, err
}

// StateAndHistory is history with the state it was read at, for
// answers that need both from one reading of the repository.
func (s *Store) StateAndHistory(ctx context.Context) (*State, *History, error) {
	st, err := s.State(ctx)
	if err != nil {
		return nil, nil, err
	}
	idx, err := s.historyAt(st)
	return st, idx, err
}

// historyAt is history for a state the caller has read already: reading
// the state lists every proposal branch, so a caller that needs both
// reads it once.
func (s *Store) historyAt(st *State) (*History, error) {
	s.mu.Lock()
	if h := s.hist; h != nil && h.key == st.key {
		s.mu.Unlock()
		return h, nil
	}
	s.mu.Unlock()

	var tips []gitrepo.Hash
	if !st.main.IsZero() {
		tips = append(tips, st.main)
	}
	for _, id := range slices.Sorted(maps.Keys(st.Branches)) {
		tips = append(tips, st.Branches[id])
	}
	depth, err := s.depths(tips)
	if err != nil {
		return nil, err
	}
	var infos []gitrepo.CommitInfo
	for h := range depth {
		ci, err := s.commitInfo(h)
		if err != nil {
			return nil, err
		}
		if ci.Trailer(rulefmt.TrailerProposalID) != "" || ci.Trailer(rulefmt.TrailerRuleID) != "" {
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
	idx := &History{key: st.key}
	for _, ci := range infos {
		e := rulefmt.HistoryEntry{
			Commit: ci.Hash.String(), Subject: ci.Subject, Message: ci.Message,
			Author: ci.AuthorName, At: ci.When, Trailers: map[string]string{},
		}
		for _, t := range ci.Trailers {
			if prev, ok := e.Trailers[t.Key]; ok {
				e.Trailers[t.Key] = prev + ", " + t.Value
			} else {
				e.Trailers[t.Key] = t.Value
			}
		}
		if rid := ci.Trailer(rulefmt.TrailerRuleID); rid != "" {
			if e.CreatesRule, err = s.addsRule(ci, rid); err != nil {
				return nil, err
			}
		}
		idx.entries = append(idx.entries, e)
		if by := e.Trailers[rulefmt.TrailerRolledBackBy]; by != "" {
			r, err := s.ruleBeforeHash(ci.Hash, ci.Trailer(rulefmt.TrailerRuleID))
			if err != nil {
				s.log.Warn("read a rolled-back rule", "commit", ci.Hash.String(), "err", err)
				continue
			}
			idx.Retired = append(idx.Retired, RetiredRule{Rule: r, By: by, Reason: e.Trailers[rulefmt.TrailerReason]})
		}
		// A sunset rule counts as rejected too: its cluster must not be
		// drafted straight back (docs/effects.md).
		if id := e.Trailers[rulefmt.TrailerSunsets]; id != "" {
			r, err := s.ruleBeforeHash(ci.Hash, id)
			if err != nil {
				s.log.Warn("read a sunset rule", "commit", ci.Hash.String(), "err", err)
				continue
			}
			idx.Retired = append(idx.Retired, RetiredRule{Rule: r, By: e.Trailers[rulefmt.TrailerApprovedBy], Reason: "sunset: " + e.Trailers[rulefmt.TrailerReason]})
		}
	}
	s.mu.Lock()
	s.hist = idx
	s.mu.Unlock()
	return idx, nil
}

// depths returns every commit reachable from tips with its depth: the
// length of the longest path from a root commit.
func (s *Store) depths(tips []gitrepo.Hash) (map[gitrepo.Hash]int, error) {
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
		ci, err := s.commitInfo(top.h)
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

// addsRule reports whether commit ci added a file of rule ruleID relative
// to its first parent: whether it is the commit that approved the rule.
func (s *Store) addsRule(ci gitrepo.CommitInfo, ruleID string) (bool, error) {
	s.mu.Lock()
	adds, ok := s.creates[ci.Hash]
	s.mu.Unlock()
	if ok {
		return adds, nil
	}
	adds, err := s.diffAddsRule(ci, ruleID)
	if err != nil {
		return false, err
	}
	s.mu.Lock()
	s.creates[ci.Hash] = adds
	s.mu.Unlock()
	return adds, nil
}

func (s *Store) diffAddsRule(ci gitrepo.CommitInfo, ruleID string) (bool, error) {
	var parent gitrepo.Hash
	if len(ci.Parents) > 0 {
		parent = ci.Parents[0]
	}
	changes, err := s.repo.Diff(parent, ci.Hash, rulefmt.ActiveDir)
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

// ruleBeforeHash reads a rule as it was in the first parent of commit c, with
// the agents whose directories held it.
func (s *Store) ruleBeforeHash(c gitrepo.Hash, id string) (rulefmt.Rule, error) {
	key := c.String() + "/" + id
	s.mu.Lock()
	r, ok := s.before[key]
	s.mu.Unlock()
	if ok {
		return r.Clone(), nil
	}
	r, err := s.readRuleBefore(c, id)
	if err != nil {
		return rulefmt.Rule{}, err
	}
	s.mu.Lock()
	if len(s.before) >= maxParsed {
		clear(s.before)
	}
	s.before[key] = r.Clone()
	s.mu.Unlock()
	return r, nil
}

func (s *Store) readRuleBefore(c gitrepo.Hash, id string) (rulefmt.Rule, error) {
	ci, err := s.commitInfo(c)
	if err != nil {
		return rulefmt.Rule{}, err
	}
	if len(ci.Parents) == 0 {
		return rulefmt.Rule{}, precept.Errorf(precept.NotFound, "rule %s not found", id)
	}
	snap, err := s.repo.SnapshotAt(ci.Parents[0])
	if err != nil {
		return rulefmt.Rule{}, err
	}
	agents, err := snap.List(rulefmt.ActiveDir)
	if err != nil {
		return rulefmt.Rule{}, err
	}
	var out rulefmt.Rule
	found := false
	for _, a := range agents {
		blob, err := snap.Stat(rulefmt.ActiveRulePath(a.Name, id))
		if errors.Is(err, gitrepo.ErrNotFound) {
			continue
		}
		if err != nil {
			return rulefmt.Rule{}, err
		}
		if !found {
			r, err := s.rule(blob)
			if err != nil {
				return rulefmt.Rule{}, err
			}
			out, found = r.Clone(), true
			out.Agents = nil
		}
		out.Agents = append(out.Agents, a.Name)
	}
	if !found {
		return rulefmt.Rule{}, precept.Errorf(precept.NotFound, "rule %s not found", id)
	}
	return out, nil
}

// GitApproval is a merge of a proposal into main made by a person in git.
type GitApproval struct {
	Commit      gitrepo.Hash
	name, email string
	fastForward bool
}

func (g *GitApproval) Approver() string {
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

func (g *GitApproval) signature() string {
	if g.email != "" && !g.fastForward {
		return g.Approver() + " <" + g.email + ">"
	}
	return g.Approver()
}

// FindGitMerges lists the proposals whose files reached the main tip
// (local, or the remote's) through a merge made in git, with who merged
// them.
func (s *Store) FindGitMerges(tip gitrepo.Hash) (map[string]*GitApproval, error) {
	if tip.IsZero() {
		return nil, nil
	}
	snap, err := s.repo.SnapshotAt(tip)
	if err != nil {
		return nil, err
	}
	entries, err := snap.List(rulefmt.ProposalsDir)
	if err != nil {
		return nil, err
	}
	out := map[string]*GitApproval{}
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name, ".md")
		if e.IsDir || !ok || !rulefmt.ValidProposalID(id) {
			continue
		}
		c, err := s.commitThatAdded(tip, rulefmt.ProposalPath(id))
		if err != nil {
			return nil, err
		}
		ci, err := s.commitInfo(c)
		if err != nil {
			return nil, err
		}
		g := &GitApproval{
			Commit: c, name: ci.CommitterName, email: ci.CommitterEmail,
			// A commit precept made for the proposal reached main without
			// a merge commit: nobody is recorded as the one who merged.
			fastForward: ci.Trailer(rulefmt.TrailerProposalID) == id,
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
func (s *Store) commitThatAdded(tip gitrepo.Hash, path string) (gitrepo.Hash, error) {
	cur := tip
	for {
		ci, err := s.commitInfo(cur)
		if err != nil {
			return gitrepo.ZeroHash, err
		}
		if len(ci.Parents) == 0 {
			return cur, nil
		}
		parent, err := s.repo.SnapshotAt(ci.Parents[0])
		if err != nil {
			return gitrepo.ZeroHash, err
		}
		if ok, err := parent.Exists(path); err != nil {
			return gitrepo.ZeroHash, err
		} else if ok {
			cur = ci.Parents[0]
			continue
		}
		if ci.Trailer(rulefmt.TrailerRemoteSync) != "" && len(ci.Parents) > 1 {
			cur = ci.Parents[1]
			continue
		}
		return cur, nil
	}
}

// ApprovedBefore reports whether history shows rule id approved before.
func (s *Store) ApprovedBefore(ctx context.Context, ruleID string) (bool, error) {
	idx, err := s.History(ctx)
	if err != nil {
		return false, err
	}
	for _, e := range idx.entries {
		if e.CreatesRule && e.Trailers[rulefmt.TrailerRuleID] == ruleID {
			return true, nil
		}
	}
	return false, nil
}

// PreApprovalContent finds the commit that approved a rule and returns,
// for every path the approval changed, its content before the approval
// (nil: the path did not exist).
func (s *Store) PreApprovalContent(ctx context.Context, ruleID string) (map[string][]byte, gitrepo.Hash, error) {
	idx, err := s.History(ctx)
	if err != nil {
		return nil, gitrepo.ZeroHash, err
	}
	var approval *rulefmt.HistoryEntry
	for i := range idx.entries {
		if e := &idx.entries[i]; e.CreatesRule && e.Trailers[rulefmt.TrailerRuleID] == ruleID {
			approval = e
			break
		}
	}
	if approval == nil {
		return nil, gitrepo.ZeroHash, fmt.Errorf("rollback %s: the commit that approved it is not in main's history", ruleID)
	}
	approvalHash, err := parseHash(approval.Commit)
	if err != nil {
		return nil, gitrepo.ZeroHash, err
	}
	restore := map[string][]byte{}
	if err := s.collectBefore(approvalHash, restore); err != nil {
		return nil, gitrepo.ZeroHash, err
	}
	if mc := approval.Trailers[rulefmt.TrailerMergeCommit]; mc != "" {
		// Approved by a merge in git: what the merge brought is part of
		// the approval, and its pre-merge state wins.
		merge, err := parseHash(mc)
		if err != nil {
			return nil, gitrepo.ZeroHash, err
		}
		if err := s.collectBefore(merge, restore); err != nil {
			return nil, gitrepo.ZeroHash, err
		}
	}
	return restore, approvalHash, nil
}

// collectBefore records, for each path commit c changed relative to its
// first parent, the parent's content.
func (s *Store) collectBefore(c gitrepo.Hash, into map[string][]byte) error {
	ci, err := s.commitInfo(c)
	if err != nil {
		return err
	}
	var parent gitrepo.Hash
	if len(ci.Parents) > 0 {
		parent = ci.Parents[0]
	}
	changes, err := s.repo.Diff(parent, c, "")
	if err != nil {
		return err
	}
	var before *gitrepo.Snapshot
	if !parent.IsZero() {
		if before, err = s.repo.SnapshotAt(parent); err != nil {
			return err
		}
	}
	for _, ch := range changes {
		into[ch.Path] = nil
		if before == nil || ch.Kind == gitrepo.Added {
			continue
		}
		data, err := before.ReadFile(ch.Path)
		if err != nil {
			return err
		}
		into[ch.Path] = data
	}
	return nil
}

// parseHash reads a commit id written in a trailer.
func parseHash(s string) (gitrepo.Hash, error) {
	var h gitrepo.Hash
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(h) {
		return h, fmt.Errorf("malformed commit id %q", s)
	}
	copy(h[:], b)
	return h, nil
}

// RetiredIDs are the ids of the rules the history retired that are not
// on main, sorted.
func RetiredIDs(st *State, idx *History) []string {
	seen := map[string]bool{}
	for _, e := range idx.entries {
		var ids []string
		switch {
		case e.Trailers[rulefmt.TrailerSunsets] != "":
			ids = []string{e.Trailers[rulefmt.TrailerSunsets]}
		case e.Trailers[rulefmt.TrailerRolledBackBy] != "":
			ids = []string{e.Trailers[rulefmt.TrailerRuleID]}
		case e.Trailers[rulefmt.TrailerSupersedes] != "":
			ids = strings.Fields(strings.ReplaceAll(e.Trailers[rulefmt.TrailerSupersedes], ",", " "))
		}
		for _, id := range ids {
			if rulefmt.ValidRuleID(id) && st.Rules[id] == nil {
				seen[id] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// RuleBefore is ruleBeforeHash for a commit id as history entries
// carry it.
func (s *Store) RuleBefore(commit, id string) (rulefmt.Rule, error) {
	c, err := parseHash(commit)
	if err != nil {
		return rulefmt.Rule{}, err
	}
	return s.ruleBeforeHash(c, id)
}

// Entries returns the index's entries, newest first. Callers must not
// modify their trailers.
func (idx *History) Entries() []rulefmt.HistoryEntry { return slices.Clone(idx.entries) }

// HistoryOf picks the entries of a proposal or rule id out of the index.
func HistoryOf(idx *History, id string) []rulefmt.HistoryEntry {
	proposals, ruleID := map[string]bool{id: true}, rulefmt.RuleIDFor(id)
	if rulefmt.ValidRuleID(id) {
		// The rule's own proposal and every lifecycle proposal about it.
		ruleID = id
		proposals = map[string]bool{}
		for _, e := range idx.entries {
			if e.Trailers[rulefmt.TrailerRuleID] == id && e.Trailers[rulefmt.TrailerProposalID] != "" {
				proposals[e.Trailers[rulefmt.TrailerProposalID]] = true
			}
		}
	}
	var out []rulefmt.HistoryEntry
	for _, e := range idx.entries {
		if proposals[e.Trailers[rulefmt.TrailerProposalID]] || e.Trailers[rulefmt.TrailerRuleID] == ruleID ||
			slices.Contains(strings.Fields(strings.ReplaceAll(e.Trailers[rulefmt.TrailerSupersedes], ",", " ")), ruleID) {
			out = append(out, e)
		}
	}
	return out
}
