package evaluator

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/maphash"
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
// taxonomy; members are written only together with their cluster's
// record (a join raises its size, a pass or a correction rewrites it).
// So evidence is kept with a hash of the record it was made from, and a
// round decodes, reads members of and ranks only the clusters whose
// record changed (docs/lessons.md, "Evidence for rules").

// evidenceCache is each cluster's evidence, or that it is not
// generalizable, with a hash of its record; for one taxonomy.
type evidenceCache struct {
	mu   sync.Mutex
	tax  *lesson.Taxonomy
	seen map[string]cachedEvidence
}

type cachedEvidence struct {
	sum uint64
	ev  *rulefmt.Evidence // nil: the cluster is not generalizable
}

// recordSeed keys the hashes of cluster records; they live only in
// memory.
var recordSeed = maphash.MakeSeed()

// allEvidence is Evidence for every generalizable cluster, by id.
func (s *Service) allEvidence(ctx context.Context) ([]rulefmt.Evidence, error) {
	c := &s.evidence
	c.mu.Lock()
	defer c.mu.Unlock()
	if tax := s.opts.Lessons.Classifier().Taxonomy(); c.tax != tax || c.seen == nil {
		c.tax, c.seen = tax, map[string]cachedEvidence{}
	}
	ids, sums, changed, err := s.state.changedGeneralizable(centralitySample, c.seen)
	if err != nil {
		return nil, fmt.Errorf("read generalizable clusters: %w", err)
	}
	for id := range c.seen {
		if _, ok := sums[id]; !ok {
			delete(c.seen, id) // the cluster is gone
		}
	}
	for id, sum := range sums {
		if e, ok := c.seen[id]; !ok || e.sum != sum {
			// Not generalizable (changed ones that are get their
			// evidence below).
			c.seen[id] = cachedEvidence{sum: sum}
		}
	}
	for _, r := range changed {
		ev, err := s.evidenceFrom(ctx, r)
		if err != nil {
			// Not kept: the next round ranks it again.
			delete(c.seen, r.cluster.ID)
			return nil, err
		}
		c.seen[r.cluster.ID] = cachedEvidence{sum: sums[r.cluster.ID], ev: &ev}
	}
	out := make([]rulefmt.Evidence, 0, len(ids))
	for _, id := range ids {
		if e := c.seen[id]; e.ev != nil {
			out = append(out, e.ev.Clone())
		}
	}
	return out, nil
}

// changedGeneralizable reads every cluster record in one read
// transaction and returns: the ids of the generalizable ones, in id
// order, by the cache known and what this read found; every cluster's
// record hash; and, with all their members, the generalizable clusters
// whose record is not the one known.
func (s *state) changedGeneralizable(sampleSize int, known map[string]cachedEvidence) ([]string, map[string]uint64, []clusterMembers, error) {
	var ids []string
	sums := map[string]uint64{}
	var changed []clusterMembers
	err := s.db.View(func(tx *bolt.Tx) error {
		mc := tx.Bucket(bMembers).Cursor()
		return tx.Bucket(bClusters).ForEach(func(k, v []byte) error {
			id := string(k)
			sum := maphash.Bytes(recordSeed, v)
			sums[id] = sum
			if e, ok := known[id]; ok && e.sum == sum {
				if e.ev != nil {
					ids = append(ids, id)
				}
				return nil
			}
			var c Cluster
			if err := json.Unmarshal(v, &c); err != nil {
				return err
			}
			if !c.Class.Generalizable() {
				return nil
			}
			r, err := withMembers(mc, c, sampleSize)
			if err != nil {
				return err
			}
			ids = append(ids, id)
			changed = append(changed, r)
			return nil
		})
	})
	return ids, sums, changed, err
}
