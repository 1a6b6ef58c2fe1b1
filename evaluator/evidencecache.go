package evaluator

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"

	bolt "go.etcd.io/bbolt"

	"github.com/precept-dev/precept/lesson"
	"github.com/precept-dev/precept/rules/rulefmt"
)

// The rule proposer asks for every generalizable cluster's evidence each
// round, and a round follows the last while decisions arrive. Reading
// every cluster with all its members and ranking their comments each
// time grew with the store (18% of the process's CPU at 500k stored). A
// cluster's evidence is a function of its record, its members and the
// taxonomy, and the evaluator's state writes them in one place
// (state.write). So the state notes which clusters a write touched, and
// the evidence of the others is kept: a round reads, and ranks the
// comments of, only the clusters written since the last round
// (docs/lessons.md, "Evidence for rules").

// clusterChanges are the clusters written since the evidence cache last
// took them; all says every cluster counts as written (too many to list,
// or a read that failed). The cache starts with nothing, so its first
// read is of every cluster.
//
// Evidence also carries the central member's evaluation (its confidence);
// every write of a clustered member's evaluation writes its cluster in
// the same commit (re-evaluation, re-clustering), which this relies on.
type clusterChanges struct {
	// commit is held by state.apply across its write and note, and by
	// evidenceCache.all across take and the start of its read, so a read never
	// sees a write whose clusters it did not take.
	commit sync.Mutex
	mu     sync.Mutex
	ids    map[string]bool
	all    bool
}

// maxNoted is how many written clusters are listed before they count as
// all: with proposing off nothing takes them.
const maxNoted = 20000

// note marks the clusters a committed write touched.
func (c *clusterChanges) note(w commit) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.all {
		return
	}
	if len(c.ids) > maxNoted {
		c.ids, c.all = nil, true
		return
	}
	if c.ids == nil {
		c.ids = map[string]bool{}
	}
	for _, cl := range w.clusters {
		c.ids[cl.ID] = true
	}
	for _, id := range w.dropClusters {
		c.ids[id] = true
	}
	for _, p := range w.removeMembers {
		c.ids[p[0]] = true
	}
	for _, m := range w.members {
		c.ids[m.ClusterID] = true
	}
}

// take returns the clusters written since the last take, or all.
func (c *clusterChanges) take() (ids []string, all bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ids, all = slices.Collect(maps.Keys(c.ids)), c.all
	c.ids, c.all = nil, false
	return ids, all
}

// giveBack marks clusters as written again: a take whose reading failed.
func (c *clusterChanges) giveBack(ids []string, all bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ids == nil {
		c.ids = map[string]bool{}
	}
	for _, id := range ids {
		c.ids[id] = true
	}
	c.all = c.all || all
}

// evidenceCache is each generalizable cluster's evidence, for one
// taxonomy.
type evidenceCache struct {
	mu  sync.Mutex
	tax *lesson.Taxonomy
	ev  map[string]*rulefmt.Evidence
}

// all is Evidence for every generalizable cluster of st, by id, under
// taxonomy tax: the clusters written since the last call are read again
// and made into evidence with build.
func (c *evidenceCache) all(ctx context.Context, st *state, tax *lesson.Taxonomy,
	build func(context.Context, clusterMembers) (rulefmt.Evidence, error)) ([]rulefmt.Evidence, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	changes := &st.changes
	changes.commit.Lock()
	ids, all := changes.take()
	tx, err := st.db.Begin(false)
	changes.commit.Unlock()
	if err != nil {
		changes.giveBack(ids, all)
		return nil, fmt.Errorf("read generalizable clusters: %w", err)
	}
	if c.tax != tax || c.ev == nil {
		c.tax, c.ev, all = tax, map[string]*rulefmt.Evidence{}, true
	}
	read, err := generalizableAmong(tx, ids, all, centralitySample)
	if rerr := tx.Rollback(); err == nil {
		err = rerr
	}
	if err == nil && all {
		clear(c.ev)
	}
	for _, id := range ids {
		delete(c.ev, id) // gone, no longer generalizable, or read again
	}
	for i := 0; err == nil && i < len(read); i++ {
		var ev rulefmt.Evidence
		if ev, err = build(ctx, read[i]); err == nil {
			c.ev[read[i].cluster.ID] = &ev
		}
	}
	if err != nil {
		// What was taken is read again next time: the named clusters'
		// entries are gone already, and after a read of all the cache
		// starts again.
		changes.giveBack(ids, all)
		if all {
			c.ev = nil
		}
		return nil, fmt.Errorf("read generalizable clusters: %w", err)
	}
	out := make([]rulefmt.Evidence, 0, len(c.ev))
	for _, id := range slices.Sorted(maps.Keys(c.ev)) {
		out = append(out, c.ev[id].Clone())
	}
	return out, nil
}

// generalizableAmong reads, in read transaction tx, the named clusters
// (every cluster with all) that are generalizable, with all their
// members.
func generalizableAmong(tx *bolt.Tx, ids []string, all bool, sampleSize int) ([]clusterMembers, error) {
	var out []clusterMembers
	clusters, mc := tx.Bucket(bClusters), tx.Bucket(bMembers).Cursor()
	add := func(v []byte) error {
		var c Cluster
		if err := json.Unmarshal(v, &c); err != nil {
			return err
		}
		if !c.Class.Generalizable() {
			return nil
		}
		r, err := withMembers(mc, c, sampleSize)
		if err == nil {
			out = append(out, r)
		}
		return err
	}
	if all {
		err := clusters.ForEach(func(_, v []byte) error { return add(v) })
		return out, err
	}
	for _, id := range ids {
		if v := clusters.Get([]byte(id)); v != nil {
			if err := add(v); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}
