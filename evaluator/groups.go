package evaluator

import (
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/lesson"
	"github.com/precept-dev/precept/lib/vectorindex"
)

// A group is one agent's lessons of one family of categories (a category
// and its neighbours): clusters never cross groups (docs/lessons.md).
func groupOf(agent, family string) string { return agent + "\x00" + family }

// agentOf is the agent of a group key.
func agentOf(group string) string { return strings.SplitN(group, "\x00", 2)[0] }

// groups keeps every cluster's agent, category, size and vector sum in
// memory, so a decision finds the cluster it is most similar to on
// average without reading the state. It holds what the state holds:
// batches update it only after they commit.
type groups struct {
	mu      sync.RWMutex
	byGroup map[string][]string
	byID    map[string]centroid
	// dirty are the groups that changed since their last re-clustering
	// pass; grown those that only gained members in batches, which a
	// periodic pass takes once they grew enough (takeDue) and Recluster
	// takes at once. passed is each group's members at its last pass.
	dirty  map[string]bool
	grown  map[string]bool
	passed map[string]int
	// tax names each category's family (setTaxonomy).
	tax *lesson.Taxonomy
}

// centroid is what average linkage needs of a cluster.
type centroid struct {
	group    string
	category string
	size     int
	sum      []float32
	catSum   map[string]float64
	// listed is the cluster as listings show it, with its statistics:
	// its counts per reviewer and per epic and its vector sum are left
	// out, so memory holds what a listing needs and the listing reads
	// no record (a large cluster's record holds thousands of epics).
	listed *ClusterView
}

func newGroups(tax *lesson.Taxonomy) *groups {
	return &groups{byGroup: map[string][]string{}, byID: map[string]centroid{}, dirty: map[string]bool{}, grown: map[string]bool{},
		passed: map[string]int{}, tax: tax}
}

// keyOf is the group of an agent's lesson of category.
func (g *groups) keyOf(agent, category string) string {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.keyLocked(agent, category)
}

func (g *groups) keyLocked(agent, category string) string {
	return groupOf(agent, g.tax.Family(category))
}

// taxonomy is the taxonomy whose families the groups follow.
func (g *groups) taxonomy() *lesson.Taxonomy {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.tax
}

// setTaxonomy makes a changed taxonomy's families the groups' own: a
// cluster whose category now belongs to another family moves to its new
// group, and both groups are queued for the next pass.
func (g *groups) setTaxonomy(tax *lesson.Taxonomy) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if tax == nil || tax.Version == g.tax.Version {
		return
	}
	old := g.tax
	g.tax = tax
	// A family that changed may now hold members of another: every group
	// is clustered again, and each member goes to its own family's group.
	for _, c := range g.byID {
		if old.Family(c.category) != tax.Family(c.category) || len(old.Neighbours) != len(tax.Neighbours) {
			for key := range g.byGroup {
				g.dirty[key] = true
			}
			break
		}
	}
	for id, c := range g.byID {
		key := g.keyLocked(agentOf(c.group), c.category)
		if key == c.group {
			continue
		}
		g.byGroup[c.group] = slices.DeleteFunc(g.byGroup[c.group], func(x string) bool { return x == id })
		g.byGroup[key] = append(g.byGroup[key], id)
		g.dirty[c.group], g.dirty[key] = true, true
		c.group = key
		g.byID[id] = c
	}
}

// markDirty queues a group for the next re-clustering pass.
func (g *groups) markDirty(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.dirty[key] = true
}

// markAllDirty queues every group, as after a start.
func (g *groups) markAllDirty() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for key := range g.byGroup {
		g.dirty[key] = true
	}
}

// takeDirty returns the queued groups, grown or not, sorted, and empties
// the queue.
func (g *groups) takeDirty() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	maps.Copy(g.dirty, g.grown)
	out := slices.Sorted(maps.Keys(g.dirty))
	clear(g.dirty)
	clear(g.grown)
	return out
}

// dueGrowth is how much of its size a group must have gained in batches
// since its last pass before a periodic pass takes it again: a pass over
// a group of thousands costs seconds, and at a million stored decisions
// every group gains members in every minute (docs/lessons.md,
// "Re-clustering").
const dueGrowth = 0.1

// grownEnough is whether a group of now members, of was at its last pass
// (passed false: never passed), changed enough for a periodic pass.
func grownEnough(now, was int, passed bool) bool {
	return !passed || now-was >= max(1, int(dueGrowth*float64(was))) || now < was
}

// markGrown queues a group that gained members in a batch.
func (g *groups) markGrown(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.grown[key] = true
}

// takeDue returns, sorted, the queued groups a periodic pass takes: every
// one queued for another reason than growth, and those grown by at least
// dueGrowth of their members at their last pass (any growth for a group
// never passed, or of fewer than 10). The others stay queued.
func (g *groups) takeDue() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	for key := range g.grown {
		was, ok := g.passed[key]
		if grownEnough(g.membersLocked(key), was, ok) {
			g.dirty[key] = true
			delete(g.grown, key)
		}
	}
	out := slices.Sorted(maps.Keys(g.dirty))
	clear(g.dirty)
	return out
}

// takeQueued removes those of keys still queued and returns them,
// sorted; the rest of the queue stays.
func (g *groups) takeQueued(keys []string) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	for _, k := range keys {
		if g.dirty[k] || g.grown[k] {
			out = append(out, k)
			delete(g.dirty, k)
			delete(g.grown, k)
		}
	}
	slices.Sort(out)
	return out
}

// takeByMembers returns, sorted, the groups a pass paced by the feed
// takes (pacer): every one queued for another reason than growth, and
// every one whose members differ from those at its last pass by
// dueGrowth as takeDue reckons it, whether or not this process saw it
// grow; they leave the queues.
func (g *groups) takeByMembers() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	keys := map[string]bool{}
	for key := range g.byGroup {
		keys[key] = true
	}
	for key := range g.passed {
		keys[key] = true
	}
	for key := range keys {
		was, ok := g.passed[key]
		if now := g.membersLocked(key); (ok || now > 0) && grownEnough(now, was, ok) {
			g.dirty[key] = true
		}
	}
	out := slices.Sorted(maps.Keys(g.dirty))
	for _, k := range out {
		delete(g.grown, k)
	}
	clear(g.dirty)
	return out
}

// setPassed replaces the members each group had at its last pass.
func (g *groups) setPassed(passed map[string]int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.passed = passed
}

// passedCopy returns the members each group had at its last pass.
func (g *groups) passedCopy() map[string]int {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return maps.Clone(g.passed)
}

// passedWith records that a pass re-clustered a group of members.
func (g *groups) passedWith(key string, members int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.passed[key] = members
}

// membersLocked is how many members a group's clusters hold.
func (g *groups) membersLocked(key string) int {
	n := 0
	for _, id := range g.byGroup[key] {
		n += g.byID[id].size
	}
	return n
}

// put records a cluster as committed.
func (g *groups) put(cl *Cluster) { g.apply(nil, []*Cluster{cl}) }

// committed brings the groups up to what the state holds after c: the
// clusters it dropped go and those it wrote are recorded, at once.
func (g *groups) committed(c commit) { g.apply(c.dropClusters, c.clusters) }

// apply brings the groups up to a commit at once: the clusters it
// dropped go, the clusters it wrote are recorded, so no listing sees a
// group halfway.
func (g *groups) apply(drop []string, put []*Cluster) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, id := range drop {
		g.removeLocked(id)
	}
	for _, cl := range put {
		g.putLocked(cl)
	}
}

func (g *groups) putLocked(cl *Cluster) {
	key := g.keyLocked(cl.Agent, cl.Category)
	old, ok := g.byID[cl.ID]
	if ok && old.group != key {
		g.byGroup[old.group] = slices.DeleteFunc(g.byGroup[old.group], func(id string) bool { return id == cl.ID })
	}
	if !ok || old.group != key {
		g.byGroup[key] = append(g.byGroup[key], cl.ID)
	}
	g.byID[cl.ID] = centroid{group: key, category: cl.Category, size: cl.Size, sum: slices.Clone(cl.Sum), catSum: maps.Clone(cl.categorySum()),
		listed: listedView(cl)}
}

// listedView is a cluster as listings show it (centroid.listed); it is
// never modified once made, so listings copy it outside the lock.
func listedView(cl *Cluster) *ClusterView {
	v := ClusterView{Cluster: *cl, Stats: cl.Stats(), Tags: cl.Tags()}
	v.Reviewers, v.Epics, v.Sum, v.CategorySum = nil, nil, nil, nil
	v.Agents, v.TagCounts, v.Producers = maps.Clone(cl.Agents), maps.Clone(cl.TagCounts), maps.Clone(cl.Producers)
	return &v
}

// list returns the page of committed clusters q selects, largest first,
// then by id, and how many it selects in all, from memory. The views are
// the caller's: their maps and slices are copies.
func (g *groups) list(q ClusterQuery) ([]ClusterView, int) {
	type entry struct {
		size int
		v    *ClusterView
	}
	g.mu.RLock()
	picked := make([]entry, 0, len(g.byID))
	for _, c := range g.byID {
		if c.size >= q.MinSize && (q.Agent == "" || c.listed.Agents[q.Agent] > 0) {
			picked = append(picked, entry{c.size, c.listed})
		}
	}
	g.mu.RUnlock()
	slices.SortFunc(picked, func(a, b entry) int {
		if a.size != b.size {
			return b.size - a.size
		}
		return strings.Compare(a.v.ID, b.v.ID)
	})
	total := len(picked)
	from := min(max(q.Offset, 0), total)
	to := total
	if q.Limit > 0 {
		to = min(from+q.Limit, total)
	}
	page := make([]ClusterView, 0, to-from)
	for _, e := range picked[from:to] {
		v := *e.v
		v.Agents, v.TagCounts, v.Producers = maps.Clone(v.Agents), maps.Clone(v.TagCounts), maps.Clone(v.Producers)
		v.Stats.Agents, v.Stats.Producers, v.Tags = slices.Clone(v.Stats.Agents), slices.Clone(v.Stats.Producers), slices.Clone(v.Tags)
		page = append(page, v)
	}
	return page, total
}

// removeLocked forgets a cluster (merged away or emptied).
func (g *groups) removeLocked(id string) {
	old, ok := g.byID[id]
	if !ok {
		return
	}
	delete(g.byID, id)
	g.byGroup[old.group] = slices.DeleteFunc(g.byGroup[old.group], func(x string) bool { return x == id })
}

// members lists a group's clusters.
func (g *groups) clusters(group string) []string {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return slices.Clone(g.byGroup[group])
}

func (g *groups) get(id string) (centroid, bool) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	c, ok := g.byID[id]
	return c, ok
}

// meanSimilarity is the mean cosine of a unit vector v to a cluster's
// members, from their sum: v·sum/size.
func meanSimilarity(v, sum []float32, size int) float64 {
	if size == 0 || len(v) != len(sum) {
		return -1
	}
	var dot float64
	for i := range v {
		dot += float64(v[i]) * float64(sum[i])
	}
	return dot / float64(size)
}

// addVector adds a member's unit vector to the cluster's sum.
func (c *Cluster) addVector(v []float32) {
	if len(c.Sum) == 0 {
		c.Sum = make([]float32, len(v))
	}
	if len(c.Sum) != len(v) {
		return
	}
	for i := range v {
		c.Sum[i] += v[i]
	}
}

// nearestCluster returns the cluster of the candidate's group (agent and
// family) it is most similar to on average (linkageSimilarity) — among
// committed clusters and those the batch touched, as the batch left them
// — when that similarity reaches the linkage threshold; ties go to the
// smaller cluster id. It returns "" and -1 when there is none.
func (r *batchRun) nearestCluster(c *candidate) (string, float64) {
	d := c.item.Feedback.Decision
	key := r.s.groups.keyOf(d.Agent, c.judged.lesson.Category)
	ids := append(r.s.groups.clusters(key), r.founded[key]...)
	best, bestSim := "", -1.0
	for _, id := range ids {
		var sim float64
		if cl, ok := r.clusters[id]; ok {
			sim = linkageSimilarity(c.vec, c.weights, cl.Sum, cl.categorySum(), cl.Size)
		} else if ce, ok := r.s.groups.get(id); ok {
			sim = linkageSimilarity(c.vec, c.weights, ce.sum, ce.catSum, ce.size)
		} else {
			continue
		}
		if sim < r.s.opts.LinkageThreshold {
			continue
		}
		if sim > bestSim || (sim == bestSim && id < best) {
			best, bestSim = id, sim
		}
	}
	return best, bestSim
}

func vectorFor(d precept.Decision, clusterID, category string) vectorindex.Vector {
	return vectorindex.Vector{
		ID: d.DecisionID,
		Metadata: map[string]string{
			"cluster_id": clusterID, "agent": d.Agent, "reviewer_id": d.ReviewerID, "epic_id": d.EpicID, "category": category,
		},
	}
}
