package evaluator

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/lesson"
	"github.com/precept-dev/precept/lib/vectorindex"
)

// Curator corrections reach the evaluator through the feed, in the order
// the feedback repository recorded them, so every replica applies them
// alike. A correction is turned into constraints on decisions — these
// belong together, these stay apart, this one has that category, these
// are not a pattern — that every later re-clustering pass respects; then the groups
// it touches are re-clustered at once (docs/lessons.md, "Curator
// corrections").

// CheckCorrection says whether a correction can be applied now — its
// shape, its clusters and decisions exist, its category is in the
// taxonomy, it stays within one agent — and returns it resolved: the
// members of its clusters, the rest of the clusters its decisions leave,
// and the category they go to, as this replica sees them. The API checks
// before recording and records the resolved correction, so what is
// recorded applies, and applies alike on every replica.
func (s *Service) CheckCorrection(ctx context.Context, c Correction) (Correction, error) {
	return s.corrections.check(ctx, c)
}

// corrections applies curators' corrections: it checks and resolves
// them against this replica's clusters, records them in the state, moves
// the decisions a curator recategorised, and has the groups they touch
// re-clustered. It holds what that needs of the evaluator and nothing
// more; applying runs under the evaluator's lock.
type corrections struct {
	state   *state
	index   vectorindex.Index
	groups  *groups
	lessons *lesson.Source
	// thresholds is Options.Thresholds.
	thresholds Thresholds
	now        func() time.Time
	log        *slog.Logger
	recluster  *reclusterer
}

// check is CheckCorrection.
func (s *corrections) check(ctx context.Context, c Correction) (Correction, error) {
	c.Members, c.Former, c.Into = nil, nil, ""
	if err := c.Validate(); err != nil {
		return Correction{}, precept.Errorf(precept.Invalid, "correction: %v", err)
	}
	agents := map[string]bool{}
	for _, id := range c.Clusters {
		ce, ok := s.groups.get(id)
		if !ok {
			return Correction{}, precept.Errorf(precept.NotFound, "cluster %s", id)
		}
		agents[agentOf(ce.group)] = true
	}
	for _, id := range c.Decisions {
		cl, err := s.state.clusterOf(id)
		if err != nil {
			return Correction{}, err
		}
		if cl == "" {
			return Correction{}, precept.Errorf(precept.Invalid, "decision %s is in no cluster (only clear negative decisions are clustered)", id)
		}
		if c.Kind == CorrectSplit && cl != c.Clusters[0] {
			return Correction{}, precept.Errorf(precept.Invalid, "decision %s is not in cluster %s", id, c.Clusters[0])
		}
		if ce, ok := s.groups.get(cl); ok && c.Kind == CorrectMove {
			agents[agentOf(ce.group)] = true
		}
	}
	if c.Kind == CorrectCategory {
		if _, ok := s.lessons.Classifier().Taxonomy().Category(c.Category); !ok {
			return Correction{}, precept.Errorf(precept.Invalid, "category %q is not in the taxonomy", c.Category)
		}
	}
	if len(agents) > 1 {
		return Correction{}, precept.Errorf(precept.Invalid, "the clusters and decisions belong to different agents; clusters never cross agents")
	}
	return s.resolve(ctx, c)
}

// resolve fills in the members, former neighbours and destination of a
// correction from this replica's clusters.
func (s *corrections) resolve(_ context.Context, c Correction) (Correction, error) {
	c.Members = make([][]string, len(c.Clusters))
	for i, id := range c.Clusters {
		ms, err := s.state.members(id, 1)
		if err != nil {
			return Correction{}, err
		}
		for _, m := range ms {
			c.Members[i] = append(c.Members[i], m.DecisionID)
		}
	}
	if c.Kind == CorrectMove || c.Kind == CorrectSplit {
		seen := map[string]bool{}
		for _, id := range c.Decisions {
			cl, err := s.state.clusterOf(id)
			if err != nil {
				return Correction{}, err
			}
			if cl == "" || seen[cl] {
				continue
			}
			seen[cl] = true
			ms, err := s.state.members(cl, 1)
			if err != nil {
				return Correction{}, err
			}
			for _, m := range ms {
				if !slices.Contains(c.Decisions, m.DecisionID) {
					c.Former = append(c.Former, m.DecisionID)
				}
			}
		}
	}
	switch c.Kind {
	case CorrectCategory:
		c.Into = c.Category
	case CorrectMove, CorrectMerge:
		if ce, ok := s.groups.get(c.Clusters[0]); ok {
			c.Into = ce.category
		}
	}
	return c, nil
}

// applyAll applies the corrections at the head of items in order,
// moving the position past each. The caller holds the evaluator's lock.
func (s *corrections) applyAll(ctx context.Context, items []Item) (int, error) {
	n := 0
	for _, it := range items {
		if it.Correction == nil {
			break
		}
		if err := s.apply(ctx, *it.Correction, it.Seq); err != nil {
			return n, fmt.Errorf("apply correction %s: %w", it.Correction.ID, err)
		}
		n++
	}
	return n, nil
}

// apply records a correction with the members its clusters had
// and re-clusters the groups it touches. A correction that no longer
// applies (its cluster is gone) is kept with what it could resolve and
// logged: it is already in git and cannot be refused here.
func (s *corrections) apply(ctx context.Context, c Correction, seq uint64) error {
	if c.Members == nil {
		// A record made before corrections were resolved when recorded:
		// resolve it from this replica's clusters.
		r, err := s.resolve(ctx, c)
		if err != nil {
			return err
		}
		c = r
	}
	touched := map[string]bool{}
	for i, id := range c.Clusters {
		if i < len(c.Members) && len(c.Members[i]) == 0 {
			s.log.Warn("correction names a cluster that had no members", "correction", c.ID, "cluster", id)
		}
	}
	// The groups the correction touches: those its decisions are in now.
	var involved []string
	for _, ms := range c.Members {
		involved = append(involved, ms...)
	}
	involved = append(append(involved, c.Decisions...), c.Former...)
	for _, id := range involved {
		cl, err := s.state.clusterOf(id)
		if err != nil {
			return err
		}
		if ce, ok := s.groups.get(cl); ok {
			touched[ce.group] = true
		}
	}
	// Recorded first, without moving the feed position: should anything
	// below fail, the correction is applied again from the feed, and
	// every step is idempotent.
	if err := s.state.apply(commit{correctionAt: seq, corrections: []Correction{c}}); err != nil {
		return err
	}
	if c.Into != "" {
		moved := c.Decisions
		if c.Kind == CorrectMerge {
			for _, ms := range c.Members[1:] {
				moved = append(moved, ms...)
			}
		}
		groups, err := s.recategorise(ctx, moved, c.Into, c.By)
		if err != nil {
			return err
		}
		for _, g := range groups {
			touched[g] = true
		}
	}
	for _, g := range slices.Sorted(maps.Keys(touched)) {
		if _, _, err := s.recluster.group(ctx, g, true); err != nil {
			return err
		}
	}
	return s.state.apply(commit{position: seq})
}

// constraints are what the recorded corrections say about a set of
// decisions, in the order they were made: a later correction overrides
// an earlier one about the same decisions.
type constraints struct {
	// together maps a decision to its link set; decisions of one set are
	// clustered as one unit.
	together map[string]int
	// apart are pairs of decision lists never to share a cluster.
	apart [][2][]string
	// notPattern marks decisions of clusters a curator said are no pattern.
	notPattern map[string]bool
}

// loadConstraints reads every recorded correction and returns the
// constraints.
func loadConstraints(st *state) (constraints, error) {
	k := constraints{together: map[string]int{}, notPattern: map[string]bool{}}
	next := 0
	link := func(ids ...[]string) {
		next++
		for _, list := range ids {
			for _, id := range list {
				k.together[id] = next
			}
		}
	}
	err := eachJSON(st, bCorrections, func(c Correction) error {
		switch c.Kind {
		case CorrectMerge:
			link(c.Members...)
		case CorrectMove:
			if len(c.Members) > 0 {
				link(c.Members[0], c.Decisions)
			}
			k.apart = append(k.apart, [2][]string{c.Decisions, c.Former})
		case CorrectSplit:
			link(c.Decisions)
			k.apart = append(k.apart, [2][]string{c.Decisions, c.Former})
		case CorrectKeepApart:
			if len(c.Members) == 2 {
				k.apart = append(k.apart, [2][]string{c.Members[0], c.Members[1]})
			}
		case CorrectNotAPattern:
			if len(c.Members) > 0 {
				for _, id := range c.Members[0] {
					k.notPattern[id] = true
				}
			}
		}
		return nil
	})
	return k, err
}

// recategorise gives decisions the category a curator set: their lessons
// say so (by the curator), and each leaves its cluster for a cluster of
// its own in its new group, where the re-clustering pass that follows places it. It
// returns the groups it took decisions from and put them in.
func (s *corrections) recategorise(ctx context.Context, ids []string, category, by string) ([]string, error) {
	classifier := s.lessons.Classifier()
	now := s.now().UTC()
	var c commit
	var groups []string
	// read holds each cluster's members, read once however many of them
	// move.
	read := map[string][]Member{}
	for _, id := range ids {
		from, err := s.state.clusterOf(id)
		if err != nil {
			return nil, err
		}
		ce, ok := s.groups.get(from)
		if !ok {
			continue
		}
		ev, found, err := getJSON[Evaluation](s.state, bEvals, id)
		if err != nil {
			return nil, err
		}
		if found && ev.Lesson != nil {
			l, ok := classifier.WithCategory(*ev.Lesson, category, "curator:"+by)
			if ok {
				ev.Lesson = &l
				c.evaluations = append(c.evaluations, ev)
			}
		}
		// A member of a cluster of that category stays where it is;
		// another leaves with the curator's category alone, and the next
		// pass may join it to its neighbours again.
		if ce.category == category {
			continue
		}
		ms, ok := read[from]
		if !ok {
			if ms, err = s.state.members(from, 1); err != nil {
				return nil, err
			}
			read[from] = ms
		}
		i := slices.IndexFunc(ms, func(m Member) bool { return m.DecisionID == id })
		if i < 0 {
			continue
		}
		vecs, err := vectorsFor(ctx, s.state, s.index, []string{id})
		if err != nil {
			return nil, err
		}
		agent := agentOf(ce.group)
		cl := newCluster(clusterID(id+"@"+category), now)
		for n := 2; ; n++ {
			if _, taken := s.groups.get(cl.ID); !taken {
				break
			}
			cl.ID = clusterID(fmt.Sprintf("%s@%s#%d", id, category, n))
		}
		cl.Agent, cl.Category = agent, category
		m := ms[i]
		m.Similarity, m.Categories = 1, map[string]float64{category: 1}
		cl.add(m)
		cl.addVector(vecs[id])
		cl.Class = s.thresholds.ClassOf(cl.Stats())
		c.clusters = append(c.clusters, cl)
		c.removeMembers = append(c.removeMembers, [2]string{from, id})
		c.members = append(c.members, memberRecord{ClusterID: cl.ID, Seq: 1, Member: m})
		groups = append(groups, ce.group, s.groups.keyOf(agent, category))
	}
	if err := s.state.apply(c); err != nil {
		return nil, err
	}
	s.groups.committed(c)
	return groups, nil
}

// keptApart reports whether a curator kept any of a apart from any of b.
func (k constraints) keptApart(a, b []string) bool {
	inB := make(map[string]bool, len(b))
	for _, id := range b {
		inB[id] = true
	}
	inA := make(map[string]bool, len(a))
	for _, id := range a {
		inA[id] = true
	}
	any := func(ids []string, in map[string]bool) bool {
		return slices.ContainsFunc(ids, func(id string) bool { return in[id] })
	}
	for _, pair := range k.apart {
		if (any(pair[0], inA) && any(pair[1], inB)) || (any(pair[1], inA) && any(pair[0], inB)) {
			return true
		}
	}
	return false
}

// CorrectionApplied reports whether this replica has applied the
// correction with id.
func (s *Service) CorrectionApplied(id string) (bool, error) {
	var at uint64
	err := s.state.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bCorrections).ForEach(func(k, v []byte) error {
			var c Correction
			if err := json.Unmarshal(v, &c); err != nil {
				return err
			}
			if c.ID == id {
				at = binary.BigEndian.Uint64(k)
			}
			return nil
		})
	})
	if err != nil || at == 0 {
		return false, err
	}
	// Recorded is not yet applied: the feed moves past a correction once
	// its re-clustering passes are done.
	pos, _, err := s.state.position()
	return pos >= at, err
}

// Learned returns the phrasings curators' corrections teach: for every
// decision a curator put in a category (set_category, or a move or merge
// into a cluster of another category), what its reviewer said, by
// category. Secrets are redacted by the caller's rendering.
func (s *Service) Learned(ctx context.Context) (lesson.Learned, error) {
	var ids []string
	err := eachJSON(s.state, bCorrections, func(c Correction) error {
		switch c.Kind {
		case CorrectCategory, CorrectMove:
			ids = append(ids, c.Decisions...)
		case CorrectMerge:
			for _, ms := range c.Members[min(1, len(c.Members)):] {
				ids = append(ids, ms...)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := lesson.Learned{}
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		ev, ok, err := getJSON[Evaluation](s.state, bEvals, id)
		if err != nil {
			return nil, err
		}
		if !ok || ev.Lesson == nil || !strings.HasPrefix(ev.Lesson.By, "curator:") || ev.Lesson.Said == "" {
			continue
		}
		if !slices.Contains(out[ev.Lesson.Category], ev.Lesson.Said) {
			out[ev.Lesson.Category] = append(out[ev.Lesson.Category], ev.Lesson.Said)
		}
	}
	return out, nil
}
