package evaluator

import (
	"bytes"
	"context"
	"encoding/binary"
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
	// ids are the written clusters, each true when a write did more than
	// add members after its last (a drop, a member removed): its members
	// are then read again from the first.
	ids map[string]bool
	all bool
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
	// A record or a member added leaves the mark as it was.
	grew := func(id string) {
		if _, ok := c.ids[id]; !ok {
			c.ids[id] = false
		}
	}
	for _, cl := range w.clusters {
		grew(cl.ID)
	}
	for _, m := range w.members {
		grew(m.ClusterID)
	}
	for _, id := range w.dropClusters {
		c.ids[id] = true
	}
	for _, p := range w.removeMembers {
		c.ids[p[0]] = true
	}
}

// take returns the clusters written since the last take, each true when
// it must be read from its first member, or all.
func (c *clusterChanges) take() (ids map[string]bool, all bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ids, all = c.ids, c.all
	c.ids, c.all = nil, false
	return ids, all
}

// giveBack marks clusters as written again, to be read from their first
// member: a take whose reading failed.
func (c *clusterChanges) giveBack(ids map[string]bool, all bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ids == nil {
		c.ids = map[string]bool{}
	}
	for id := range ids {
		c.ids[id] = true
	}
	c.all = c.all || all
}

// evidenceCache is each generalizable cluster's evidence, for one
// taxonomy, with the join number of its last member read.
type evidenceCache struct {
	mu  sync.Mutex
	tax *lesson.Taxonomy
	ev  map[string]*cachedEvidence
	// partial is true when ev may lack some generalizable clusters
	// (read asked for some, not all): a read of all then starts afresh.
	partial bool
	// grown counts the clusters read from their new members only.
	grown int
}

type cachedEvidence struct {
	ev      rulefmt.Evidence
	lastSeq uint64
}

// read is Evidence for the generalizable clusters of st among want
// (every one with want nil), by id, under taxonomy tax: the clusters
// written since the last call are read again and made into evidence with
// build. A cluster that only gained members since it was read is read
// from its new members and its comment sample; the others with all their
// members (appendedAmong). A written cluster not wanted is dropped from
// the cache, to be read whole when it is wanted: the proposer asks only
// for the clusters it may draft, most of which it has not asked for
// before.
func (c *evidenceCache) read(ctx context.Context, st *state, tax *lesson.Taxonomy,
	build func(context.Context, clusterMembers) (rulefmt.Evidence, error), want []string) ([]rulefmt.Evidence, error) {
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
	if c.tax != tax || c.ev == nil || (want == nil && c.partial) {
		c.tax, c.ev, all = tax, map[string]*cachedEvidence{}, true
	}
	wanted := func(string) bool { return true }
	if want != nil {
		set := make(map[string]bool, len(want))
		for _, id := range want {
			set[id] = true
		}
		wanted = func(id string) bool { return set[id] }
	}
	// The cache holds every generalizable cluster until a read of some
	// starts it afresh or drops one.
	partial := c.partial || (want != nil && all)
	for id := range ids {
		partial = partial || !wanted(id)
	}
	var read []clusterMembers
	switch {
	case all && want == nil:
		read, err = generalizableAmong(tx, nil, true, centralitySample)
	case all:
		read, err = generalizableAmong(tx, slices.Sorted(slices.Values(want)), false, centralitySample)
	default:
		var whole []string
		var grown map[string]*cachedEvidence
		for id, rewritten := range ids {
			switch prev := c.ev[id]; {
			case !wanted(id):
			case prev != nil && !rewritten:
				if grown == nil {
					grown = map[string]*cachedEvidence{}
				}
				grown[id] = prev
			default:
				whole = append(whole, id)
			}
		}
		// Wanted clusters neither written nor kept: not asked for before.
		for _, id := range want {
			if _, written := ids[id]; !written && c.ev[id] == nil {
				whole = append(whole, id)
			}
		}
		slices.Sort(whole)
		whole = slices.Compact(whole)
		if read, err = generalizableAmong(tx, whole, false, centralitySample); err == nil {
			var more []clusterMembers
			var n int
			more, n, err = appendedAmong(tx, grown, centralitySample)
			read, c.grown = append(read, more...), c.grown+n
		}
	}
	if rerr := tx.Rollback(); err == nil {
		err = rerr
	}
	if err == nil && all {
		clear(c.ev)
	}
	if err == nil {
		c.partial = partial
	}
	for id := range ids {
		delete(c.ev, id) // gone, no longer generalizable, not wanted, or read again
	}
	for i := 0; err == nil && i < len(read); i++ {
		var ev rulefmt.Evidence
		if ev, err = build(ctx, read[i]); err == nil {
			c.ev[read[i].cluster.ID] = &cachedEvidence{ev: ev, lastSeq: read[i].lastSeq}
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
	if want == nil {
		want = slices.Sorted(maps.Keys(c.ev))
	} else {
		want = slices.Compact(slices.Sorted(slices.Values(want)))
	}
	out := make([]rulefmt.Evidence, 0, len(want))
	for _, id := range want {
		if e := c.ev[id]; e != nil {
			out = append(out, e.ev.Clone())
		}
	}
	return out, nil
}

// appendedAmong reads, in read transaction tx, the clusters of grown
// that are generalizable, each of which only gained members since its
// evidence was made: its members after the last one read then, and
// those its comment sample now spans, are read; the earlier ones are
// taken from the evidence, which lists every member (FeedbackIDs, in
// join order) and what each asked (Asked, AskedBy) — all that evidence
// reads of a member outside the sample. A cluster whose members read do
// not continue its evidence's is read with all its members.
func appendedAmong(tx *bolt.Tx, grown map[string]*cachedEvidence, sampleSize int) (out []clusterMembers, counted int, err error) {
	clusters, mc := tx.Bucket(bClusters), tx.Bucket(bMembers).Cursor()
	for _, id := range slices.Sorted(maps.Keys(grown)) {
		v := clusters.Get([]byte(id))
		if v == nil {
			continue
		}
		var cl Cluster
		if err := json.Unmarshal(v, &cl); err != nil {
			return nil, 0, err
		}
		if !cl.Class.Generalizable() {
			continue
		}
		prev := grown[id]
		from := uint64(max(cl.Size-sampleSize+1, 1))
		r, ok, err := membersAfter(mc, cl, min(prev.lastSeq+1, from), from, prev)
		if err == nil && !ok {
			r, err = withMembers(mc, cl, sampleSize)
		} else if err == nil {
			counted++
		}
		if err != nil {
			return nil, 0, err
		}
		out = append(out, r)
	}
	return out, counted, nil
}

// membersAfter reads cl's members from join number start on, and puts
// before them the earlier members prev's evidence lists. ok is false
// when the members read with numbers up to prev.lastSeq are not the
// last ones prev lists, in order.
func membersAfter(mc *bolt.Cursor, cl Cluster, start, from uint64, prev *cachedEvidence) (clusterMembers, bool, error) {
	prefix := append([]byte(cl.ID), 0)
	var fresh []Member
	overlap, sample, last := 0, -1, prev.lastSeq
	for k, mv := mc.Seek(binary.BigEndian.AppendUint64(bytes.Clone(prefix), start)); k != nil && bytes.HasPrefix(k, prefix); k, mv = mc.Next() {
		var m Member
		if err := json.Unmarshal(mv, &m); err != nil {
			return clusterMembers{}, false, err
		}
		seq := binary.BigEndian.Uint64(k[len(prefix):])
		if seq <= prev.lastSeq {
			overlap++
		}
		last = max(last, seq)
		if sample < 0 && seq >= from {
			sample = len(fresh)
		}
		fresh = append(fresh, m)
	}
	ids := prev.ev.FeedbackIDs
	if overlap > len(ids) {
		return clusterMembers{}, false, nil
	}
	kept := ids[:len(ids)-overlap]
	for i, m := range fresh[:overlap] {
		if m.DecisionID != ids[len(kept)+i] {
			return clusterMembers{}, false, nil
		}
	}
	asked := make(map[string]string, len(prev.ev.AskedBy))
	for i, id := range prev.ev.AskedBy {
		asked[id] = prev.ev.Asked[i]
	}
	r := clusterMembers{cluster: cl, members: make([]Member, 0, len(kept)+len(fresh)), lastSeq: last}
	for _, id := range kept {
		r.members = append(r.members, Member{DecisionID: id, Asked: asked[id]})
	}
	r.sample = len(r.members) + len(fresh)
	if sample >= 0 {
		r.sample = len(r.members) + sample
	}
	r.members = append(r.members, fresh...)
	return r, true, nil
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
