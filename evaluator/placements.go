package evaluator

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// The placements bucket keeps, for every evaluation, only where it puts
// its decision: the cluster and the lesson's category. The learning loop
// asks this of every negative decision of a rule's agents on every
// effects pass (docs/effects.md), a million reads at a million stored
// decisions; read from the evaluations themselves, each decoded a whole
// evaluation and touched a page of a database several gigabytes large.
// It came after layout version 3 without changing it: a state without it
// fills it from the evaluations once, when opened (fillPlacements).
var (
	bPlacements = []byte("placements") // decision id -> cluster id \x00 category
	kPlaced     = []byte("placed")     // set once every evaluation has a placement
)

// placementValue is what the placements bucket holds for e.
func placementValue(e Evaluation) []byte {
	category := ""
	if e.Lesson != nil {
		category = e.Lesson.Category
	}
	return []byte(e.ClusterID + "\x00" + category)
}

// category is the placement's lesson category, "" without a lesson.
func (p placement) category() string {
	if p.Lesson == nil {
		return ""
	}
	return p.Lesson.Category
}

// placement is the part of a stored evaluation that says where its
// decision sits.
type placement struct {
	ClusterID string `json:"cluster_id"`
	Lesson    *struct {
		Category string `json:"category"`
	} `json:"lesson"`
}

// fillBatch is how many placements one transaction of fillPlacements
// writes, so that filling a large state holds no transaction's worth of
// dirty pages for all of it.
var fillBatch = 20_000

// fillPlacements gives every evaluation its placement, a batch per
// transaction, unless that was done: a state written before the bucket
// existed, or whose fill a crash interrupted, is filled again from the
// evaluations (writing a placement twice writes the same value).
func fillPlacements(db *bolt.DB) error {
	var after []byte
	for {
		done := false
		err := db.Update(func(tx *bolt.Tx) error {
			meta := tx.Bucket(bMeta)
			if meta.Get(kPlaced) != nil {
				done = true
				return nil
			}
			out := tx.Bucket(bPlacements)
			c := tx.Bucket(bEvals).Cursor()
			k, v := c.First()
			if after != nil {
				k, v = c.Seek(after)
				if k != nil && bytes.Equal(k, after) {
					k, v = c.Next()
				}
			}
			for n := 0; n < fillBatch; n++ {
				if k == nil {
					done = true
					return meta.Put(kPlaced, []byte{1})
				}
				var p placement
				if err := json.Unmarshal(v, &p); err != nil {
					return fmt.Errorf("evaluation %s: %w", k, err)
				}
				if err := out.Put(k, []byte(p.ClusterID+"\x00"+p.category())); err != nil {
					return err
				}
				after = append(after[:0], k...)
				k, v = c.Next()
			}
			return nil
		})
		if err != nil || done {
			return err
		}
	}
}

// Placements reads where evaluations put their decisions, from the
// placements bucket alone: the learning loop asks this of every negative
// decision of a rule's agents (docs/effects.md), and the impact preview
// of every negative decision of a proposal's agents (docs/lifecycle.md,
// "Impact preview"), neither decoding an evaluation.
type Placements struct{ db *bolt.DB }

// Placements returns the reader of the service's placements, valid
// while the service is open.
func (s *Service) Placements() Placements { return Placements{db: s.state.db} }

// Placement returns the cluster and lesson category of a decision's
// evaluation. ok is false while the decision has no evaluation.
func (p Placements) Placement(ctx context.Context, id string) (cluster, category string, ok bool, err error) {
	err = p.EachPlacement(ctx, [][]byte{[]byte(id)}, func(_ int, c, cat []byte, found bool) {
		cluster, category, ok = string(c), string(cat), found
	})
	return cluster, category, ok, err
}

// EachPlacement calls fn with the placement of each of ids, in order,
// all read in one transaction. cluster and category are valid only
// during the call; ok is false while the decision has no evaluation.
func (p Placements) EachPlacement(ctx context.Context, ids [][]byte, fn func(i int, cluster, category []byte, ok bool)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return p.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bPlacements)
		for i, id := range ids {
			v := b.Get(id)
			if v == nil {
				fn(i, nil, nil, false)
				continue
			}
			sep := bytes.IndexByte(v, 0)
			if sep < 0 {
				return fmt.Errorf("placement of %s: %q has no separator", id, v)
			}
			fn(i, v[:sep], v[sep+1:], true)
		}
		return nil
	})
}
