package evaluator

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/lib/vectorindex"
)

// Between re-clustering passes a decision joins the cluster it is most
// similar to on average, in arrival order. A pass re-clusters each
// changed group (one agent's lessons of one family of categories) from scratch with
// UPGMA, which does not depend on arrival order, and keeps cluster ids
// stable by matching the new clusters to the old ones by overlap
// (docs/lessons.md, "Re-clustering").

// Merge and Split are what a re-clustering pass changed about clusters.
type Merge struct {
	Into string   `json:"into"`
	From []string `json:"from"`
}

// Split is a cluster whose members went to several clusters.
type Split struct {
	From string   `json:"from"`
	Into []string `json:"into"`
}

// ReclusterRecord is what one re-clustering pass did to one group.
type ReclusterRecord struct {
	At    time.Time `json:"at"`
	Agent string    `json:"agent"`
	// Category names the group's family: the smallest category id of a
	// category and its neighbours (the category itself when it has none).
	Category string  `json:"category"`
	Members  int     `json:"members"`
	Before   int     `json:"clusters_before"`
	After    int     `json:"clusters_after"`
	Merges   []Merge `json:"merges,omitempty"`
	Splits   []Split `json:"splits,omitempty"`
	// Moved counts decisions whose cluster changed; Reclassified those
	// whose class changed.
	Moved        int `json:"moved"`
	Reclassified int `json:"reclassified"`
}

// ReclusterReport sums up a re-clustering pass over several groups.
type ReclusterReport struct {
	Groups       int               `json:"groups"`
	Members      int               `json:"members"`
	Moved        int               `json:"moved"`
	Reclassified int               `json:"reclassified"`
	Records      []ReclusterRecord `json:"records,omitempty"`
	Took         time.Duration     `json:"took"`
}

// maxExactGroup is the largest group a pass clusters decision by
// decision; a larger one is clustered with its current clusters as
// units, which bounds a pass's memory and time (docs/lessons.md).
const maxExactGroup = 4000

// Recluster runs a re-clustering pass over the groups that changed since
// their last pass (all groups after a start), one after another. Each
// group is done under the evaluator's lock on its own; Run instead
// interleaves a pass's groups with batches of new decisions (pass).
func (s *Service) Recluster(ctx context.Context) (ReclusterReport, error) {
	if s.pace != nil {
		return ReclusterReport{}, ErrPaced
	}
	p := newPass(s, false)
	err := p.run(ctx, 0)
	p.rep.Took = time.Since(p.start)
	return p.rep, err
}

// pass is a re-clustering pass under way: the groups it has yet to do
// and what it did so far. Between slices (run with a budget) the groups
// not done go back to the dirty queue, so a Recluster asked for
// meanwhile takes them and does them at one go; the next slice takes back
// those of them still queued (held).
type pass struct {
	s       *Service
	start   time.Time
	pending []string
	held    map[string]bool
	rep     ReclusterReport
}

// newPass starts a pass over the groups changed since their last pass;
// with due, as Run's periodic passes, a group that only gained members
// waits until it grew enough (groups.takeDue).
func newPass(s *Service, due bool) *pass {
	take := s.groups.takeDirty
	if due {
		take = s.groups.takeDue
	}
	return newPassOf(s, take)
}

// newPassOf starts a pass over the groups take returns.
func newPassOf(s *Service, take func() []string) *pass {
	// A taxonomy reloaded since the last batch brings its families now.
	s.groups.setTaxonomy(s.opts.Lessons.Classifier().Taxonomy())
	return &pass{s: s, start: time.Now(), pending: take()}
}

func (p *pass) done() bool { return len(p.pending) == 0 && len(p.held) == 0 }

// resume takes back the groups the pass held that are still queued;
// the others queued stay for the next pass.
func (p *pass) resume() {
	if p.held == nil {
		return
	}
	p.pending = p.s.groups.takeQueued(slices.Sorted(maps.Keys(p.held)))
	p.held = nil
}

// run re-clusters the pass's pending groups, at least one, until budget
// has passed (0: all of them), and queues the rest again until the next
// call. A failure, or ctx done, leaves the groups not done queued for the
// next pass.
func (p *pass) run(ctx context.Context, budget time.Duration) error {
	s := p.s
	p.resume()
	begin := time.Now()
	for i, key := range p.pending {
		if budget > 0 && i > 0 && time.Since(begin) >= budget {
			p.held = map[string]bool{}
			for _, k := range p.pending[i:] {
				p.held[k] = true
				s.groups.markDirty(k)
			}
			p.pending = nil
			return nil
		}
		// A pass cut short leaves the groups it did not do dirty.
		requeue := func() {
			for _, k := range p.pending[i:] {
				s.groups.markDirty(k)
			}
			p.pending = nil
		}
		if err := ctx.Err(); err != nil {
			requeue()
			return err
		}
		s.mu.Lock()
		rec, change, err := s.reclusterer.group(ctx, key, false)
		s.mu.Unlock()
		if err != nil {
			requeue()
			return fmt.Errorf("re-cluster: %w", err)
		}
		p.rep.Groups++
		p.rep.Members += rec.Members
		p.rep.Moved += rec.Moved
		p.rep.Reclassified += rec.Reclassified
		if rec.Moved > 0 || rec.Reclassified > 0 || len(rec.Merges)+len(rec.Splits) > 0 {
			p.rep.Records = append(p.rep.Records, rec)
		}
		if s.opts.OnChange != nil && len(change.GeneralizableClusters) > 0 {
			s.opts.OnChange(change)
		}
	}
	p.pending = nil
	return nil
}

// ReclusterAll runs a re-clustering pass over every group, changed or not.
func (s *Service) ReclusterAll(ctx context.Context) (ReclusterReport, error) {
	if s.pace != nil {
		return ReclusterReport{}, ErrPaced
	}
	s.groups.markAllDirty()
	return s.Recluster(ctx)
}

// reclusterer re-clusters groups from scratch: it reads a group's
// clusters, members and vectors, partitions them with UPGMA under the
// curators' constraints, and writes the new clusters and the evaluations
// that changed. It holds what that needs of the evaluator and nothing
// more; its caller holds the evaluator's lock.
type reclusterer struct {
	state  *state
	index  vectorindex.Index
	groups *groups
	// linkage is Options.LinkageThreshold, thresholds Options.Thresholds.
	linkage    float64
	thresholds Thresholds
	now        func() time.Time
	log        *slog.Logger
}

// group re-clusters one group and saves the result. With force the group
// is rebuilt even when the pass finds its clusters as they are: a
// correction changed its decisions' evaluations.
func (s *reclusterer) group(ctx context.Context, key string, force bool) (ReclusterRecord, Change, error) {
	now := s.now().UTC()
	oldIDs := s.groups.clusters(key)
	slices.Sort(oldIDs)
	old := map[string]*Cluster{}
	var members []Member
	oldOf := map[string]string{}
	for _, id := range oldIDs {
		cl, ok, err := getJSON[Cluster](s.state, bClusters, id)
		if err != nil {
			return ReclusterRecord{}, Change{}, err
		}
		if !ok {
			continue
		}
		old[id] = &cl
		ms, err := s.state.members(id, 1)
		if err != nil {
			return ReclusterRecord{}, Change{}, err
		}
		for _, m := range ms {
			oldOf[m.DecisionID] = id
		}
		members = append(members, ms...)
	}
	rec := ReclusterRecord{At: now, Members: len(members), Before: len(old)}
	if len(old) > 0 {
		// A group is named by its agent and its family (the smallest
		// category id of a category and its neighbours).
		rec.Agent, rec.Category = old[oldIDs[0]].Agent, strings.SplitN(key, "\x00", 2)[1]
	}
	// Members stored before weights were kept count as their cluster's
	// category alone.
	for i, m := range members {
		if o := old[oldOf[m.DecisionID]]; len(m.Categories) == 0 && o != nil {
			members[i].Categories = m.weights(o.Category)
		}
	}
	k, err := loadConstraints(s.state)
	if err != nil {
		return ReclusterRecord{}, Change{}, err
	}
	if len(members) == 0 {
		// Every decision left the group (a curator moved them): its
		// clusters go.
		if len(oldIDs) > 0 {
			drop := commit{dropClusters: oldIDs}
			if err := s.state.apply(drop); err != nil {
				return ReclusterRecord{}, Change{}, err
			}
			s.groups.committed(drop)
		}
		s.groups.passedWith(key, len(members))
		return rec, Change{}, nil
	}
	// A canonical order: by time, then id.
	slices.SortFunc(members, func(a, b Member) int {
		return cmp.Or(a.At.Compare(b.At), cmp.Compare(a.DecisionID, b.DecisionID))
	})
	ids := make([]string, len(members))
	for i, m := range members {
		ids[i] = m.DecisionID
	}
	vecs, err := vectorsFor(ctx, s.state, s.index, ids)
	if err != nil {
		return ReclusterRecord{}, Change{}, err
	}
	parts, err := s.partitionByFamily(members, vecs, oldOf, k)
	if err != nil {
		return ReclusterRecord{}, Change{}, err
	}
	names := matchByOverlap(parts, members, oldOf, old)
	if !force && unchanged(parts, names, members, oldOf, old, k, s.thresholds.ClassOf) {
		// The pass found the clusters as they are: nothing to write, and
		// nothing to record (passes are recorded when they change
		// something).
		rec.After = len(parts)
		s.groups.passedWith(key, len(members))
		return rec, Change{}, nil
	}
	c, change := s.rebuild(parts, names, members, vecs, oldOf, old, k, now, &rec)
	c.dropClusters = oldIDs
	for _, id := range oldIDs {
		if !slices.Contains(names, id) {
			s.log.Info("cluster merged away in re-clustering", "cluster", id)
		}
	}
	c.reclusters = []ReclusterRecord{rec}
	if err := s.state.apply(c); err != nil {
		return ReclusterRecord{}, Change{}, err
	}
	s.groups.committed(c)
	// A cluster that left for another family's group is clustered there
	// on the next pass.
	for _, cl := range c.clusters {
		if to := s.groups.keyOf(cl.Agent, cl.Category); to != key {
			s.groups.markDirty(to)
		}
	}
	s.groups.passedWith(key, len(members))
	return rec, change, nil
}

// unchanged reports whether a pass's partition is the group's clusters
// as they stand: the same clusters under the same ids with the same
// members, none of them newly marked or unmarked as not a pattern, each
// of the class the thresholds give it now.
func unchanged(parts [][]int, names []string, members []Member, oldOf map[string]string, old map[string]*Cluster, k constraints,
	classOf func(Stats) Class) bool {
	if len(parts) != len(old) {
		return false
	}
	for p, items := range parts {
		o := old[names[p]]
		if o == nil || o.Size != len(items) {
			return false
		}
		marked := 0
		for _, i := range items {
			if oldOf[members[i].DecisionID] != names[p] {
				return false
			}
			if k.notPattern[members[i].DecisionID] {
				marked++
			}
		}
		if o.NotAPattern != (marked > 0 && 2*marked >= len(items)) || classOf(o.Stats()) != o.Class {
			return false
		}
		var sum map[string]float64
		for _, i := range items {
			sum = addWeights(sum, members[i].Categories)
		}
		if leadingCategory(sum) != o.Category {
			return false
		}
	}
	return true
}

// partitionByFamily partitions the members of each family apart: a
// group holds one family, but after a taxonomy change split it, its
// members go to their own families' clusters (and groups), their weights
// cut to their family.
func (s *reclusterer) partitionByFamily(members []Member, vecs map[string][]float32, oldOf map[string]string, k constraints) ([][]int, error) {
	tax := s.groups.taxonomy()
	byFamily := map[string][]int{}
	for i, m := range members {
		f := tax.Family(leadingCategory(m.Categories))
		members[i].Categories = inFamily(m.Categories, tax, f)
		byFamily[f] = append(byFamily[f], i)
	}
	if len(byFamily) == 1 {
		return s.partition(members, vecs, oldOf, k)
	}
	var parts [][]int
	for _, f := range slices.Sorted(maps.Keys(byFamily)) {
		idx := byFamily[f]
		sub := make([]Member, len(idx))
		for j, i := range idx {
			sub[j] = members[i]
		}
		ps, err := s.partition(sub, vecs, oldOf, k)
		if err != nil {
			return nil, err
		}
		for _, p := range ps {
			for j := range p {
				p[j] = idx[p[j]]
			}
			parts = append(parts, p)
		}
	}
	return parts, nil
}

// partition clusters a group's members: decision by decision up to
// maxExactGroup, else with the current clusters as units that stay whole;
// decisions a curator linked are one unit, and units a curator kept
// apart never merge.
func (s *reclusterer) partition(members []Member, vecs map[string][]float32, oldOf map[string]string, k constraints) ([][]int, error) {
	for _, m := range members {
		if vecs[m.DecisionID] == nil {
			return nil, fmt.Errorf("decision %s has no vector in the index", m.DecisionID)
		}
	}
	// unitKey names the unit of a member.
	unitKey := func(m Member) string {
		if set, ok := k.together[m.DecisionID]; ok {
			return fmt.Sprintf("link:%d", set)
		}
		if len(members) > maxExactGroup {
			return "cluster:" + oldOf[m.DecisionID]
		}
		return "decision:" + m.DecisionID
	}
	// Each vector carries its member's category weights as extra
	// dimensions, so that average linkage over the augmented vectors at
	// the threshold plus categoryWeight is the family similarity at the
	// threshold (families.go).
	ws := make([]map[string]float64, len(members))
	for i, m := range members {
		ws[i] = m.Categories
	}
	cats := groupCategories(ws)
	unitOf := map[string]int{}
	memberUnit := make([]int, len(members))
	var sums [][]float32
	var weights []int
	for i, m := range members {
		key := unitKey(m)
		v := vecs[m.DecisionID]
		u, ok := unitOf[key]
		if !ok {
			u = len(sums)
			unitOf[key] = u
			sums = append(sums, make([]float32, len(v)+len(cats)))
			weights = append(weights, 0)
		}
		memberUnit[i] = u
		addAugmented(sums[u], v, m.Categories, cats)
		weights[u]++
	}
	var apart [][2]int
	if len(k.apart) > 0 {
		unitByDecision := make(map[string]int, len(members))
		for i, m := range members {
			unitByDecision[m.DecisionID] = memberUnit[i]
		}
		for _, pair := range k.apart {
			for _, a := range pair[0] {
				ua, ok := unitByDecision[a]
				if !ok {
					continue
				}
				for _, b := range pair[1] {
					if ub, ok := unitByDecision[b]; ok && ua != ub {
						apart = append(apart, [2]int{ua, ub})
					}
				}
			}
		}
	}
	units := upgma(sums, weights, apart, s.linkage+categoryWeight)
	assign := make([]int, len(members))
	for i := range members {
		assign[i] = units[memberUnit[i]]
	}
	return partition(assign), nil
}

// matchByOverlap names the new clusters: the pairs of a new and an old
// cluster sharing the most members get the old id first (ties: the
// smaller old id, then the earlier new cluster); a new cluster left
// without one is named after its earliest member.
func matchByOverlap(parts [][]int, members []Member, oldOf map[string]string, old map[string]*Cluster) []string {
	type pair struct {
		part    int
		old     string
		overlap int
	}
	count := map[[2]string]int{}
	var pairs []pair
	for p, items := range parts {
		for _, i := range items {
			o := oldOf[members[i].DecisionID]
			k := [2]string{fmt.Sprint(p), o}
			if count[k] == 0 {
				pairs = append(pairs, pair{part: p, old: o})
			}
			count[k]++
		}
	}
	for i := range pairs {
		pairs[i].overlap = count[[2]string{fmt.Sprint(pairs[i].part), pairs[i].old}]
	}
	slices.SortFunc(pairs, func(a, b pair) int {
		return cmp.Or(cmp.Compare(b.overlap, a.overlap), cmp.Compare(a.old, b.old), cmp.Compare(a.part, b.part))
	})
	names := make([]string, len(parts))
	used := map[string]bool{}
	for _, pr := range pairs {
		if names[pr.part] == "" && !used[pr.old] {
			names[pr.part], used[pr.old] = pr.old, true
		}
	}
	for p, items := range parts {
		if names[p] != "" {
			continue
		}
		id := clusterID(members[items[0]].DecisionID)
		for n := 2; used[id] || old[id] != nil; n++ {
			id = clusterID(fmt.Sprintf("%s#%d", members[items[0]].DecisionID, n))
		}
		names[p], used[id] = id, true
	}
	return names
}

// rebuild makes the new clusters, their members and the evaluations that
// changed, and fills in the pass's record.
func (s *reclusterer) rebuild(parts [][]int, names []string, members []Member, vecs map[string][]float32, oldOf map[string]string,
	old map[string]*Cluster, k constraints, now time.Time, rec *ReclusterRecord) (commit, Change) {
	var c commit
	var change Change
	rec.After = len(parts)
	into := map[string][]string{} // old id -> new ids its members went to
	from := map[string][]string{} // new id -> old ids its members came from
	for p, items := range parts {
		id := names[p]
		cl := newCluster(id, now)
		if o := old[id]; o != nil {
			cl.CreatedAt, cl.Class, cl.Revision = o.CreatedAt, o.Class, o.Revision
		}
		cl.Agent = rec.Agent
		sum := make([]float32, len(vecs[members[items[0]].DecisionID]))
		var catSum map[string]float64
		for _, i := range items {
			for d, x := range vecs[members[i].DecisionID] {
				sum[d] += x
			}
			catSum = addWeights(catSum, members[i].Categories)
		}
		cl.Category = leadingCategory(catSum)
		for seq, i := range items {
			m := members[i]
			v := vecs[m.DecisionID]
			m.Similarity = 1
			if len(items) > 1 {
				m.Similarity = round2((dot(v, sum) - dot(v, v)) / float64(len(items)-1))
			}
			cl.add(m)
			cl.addVector(v)
			c.members = append(c.members, memberRecord{ClusterID: id, Seq: seq + 1, Member: m})
			o := oldOf[m.DecisionID]
			if !slices.Contains(into[o], id) {
				into[o] = append(into[o], id)
			}
			if !slices.Contains(from[id], o) {
				from[id] = append(from[id], o)
			}
		}
		cl.UpdatedAt = now
		marked := 0
		for _, i := range items {
			if k.notPattern[members[i].DecisionID] {
				marked++
			}
		}
		cl.NotAPattern = marked > 0 && 2*marked >= len(items)
		class := s.thresholds.ClassOf(cl.Stats())
		if class != cl.Class {
			cl.Class = class
			cl.Revision++
		}
		if class.Generalizable() {
			change.GeneralizableClusters = append(change.GeneralizableClusters, id)
		}
		c.clusters = append(c.clusters, cl)
		c.evaluations = append(c.evaluations, s.reevaluate(cl, items, members, oldOf, old, now, rec, &c)...)
	}
	for _, id := range slices.Sorted(maps.Keys(from)) {
		if len(from[id]) > 1 {
			rec.Merges = append(rec.Merges, Merge{Into: id, From: slices.Sorted(slices.Values(from[id]))})
		}
	}
	for _, id := range slices.Sorted(maps.Keys(into)) {
		if len(into[id]) > 1 {
			rec.Splits = append(rec.Splits, Split{From: id, Into: slices.Sorted(slices.Values(into[id]))})
		}
	}
	return c, change
}

// reevaluate gives the members of a rebuilt cluster whose cluster or
// class changed a new evaluation.
func (s *reclusterer) reevaluate(cl *Cluster, items []int, members []Member, oldOf map[string]string, old map[string]*Cluster,
	now time.Time, rec *ReclusterRecord, c *commit) []Evaluation {
	var out []Evaluation
	stats, tags, meanSim := cl.Stats(), cl.Tags(), cl.meanSimilarity()
	for _, i := range items {
		m := members[i]
		prev, ok, err := getJSON[Evaluation](s.state, bEvals, m.DecisionID)
		if err != nil || !ok {
			continue
		}
		// Moved: its evaluation names another cluster (a pass moved it, or
		// a correction did before this pass).
		moved := oldOf[m.DecisionID] != cl.ID || prev.ClusterID != cl.ID
		sameStats := old[cl.ID] != nil && old[cl.ID].Size == cl.Size && prev.Class == cl.Class
		if !moved && sameStats {
			continue
		}
		d := precept.Decision{DecisionID: m.DecisionID, Agent: m.Agent}
		ev := s.thresholds.clusterEvaluation(d, prev.Rubric, cl.ID, stats, tags, meanSim)
		ev.SimilarIDs, ev.Evaluator, ev.EvaluatedAt, ev.Lesson = prev.SimilarIDs, "deterministic", now, prev.Lesson
		ev.Revision = prev.Revision + 1
		if moved {
			rec.Moved++
		}
		if ev.Class != prev.Class {
			rec.Reclassified++
			if prev.Class == EdgeCase {
				c.edgeAdd = append(c.edgeAdd, EdgeCaseDoc{DecisionID: m.DecisionID, Remove: true})
			}
		}
		out = append(out, ev)
	}
	return out
}
