package evaluator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Several nodes evaluating the same feed reach the same clusters only
// when their evaluation is a function of the feed alone: the same
// batches, and re-clustering passes at the same points between them.
// With Options.PassEvery set, Step never mixes two commits of the feed in
// one batch, and Run re-clusters after the batch that carried the feed's
// position past a multiple of PassEvery, to completion, before it
// evaluates the next one; which groups a pass takes is read from their
// members and the members at their last pass, both kept in the state, so
// a node that restarted takes the same ones (docs/decisions/0019).

// ErrPaced is Recluster's answer while passes are paced by the feed: a
// pass on demand on one node would part its clusters from the others'.
var ErrPaced = errors.New("re-clustering is paced by the feed's position (evaluator.recluster_every_decisions): a pass on demand would make this node's clusters differ from the other nodes'")

var (
	kPassMark = []byte("pass_mark") // the last multiple of PassEvery re-clustered after, as a count of them
	kPassed   = []byte("passed")    // JSON: group key -> members at its last pass
)

// pacer runs the passes at the feed's positions.
type pacer struct {
	every  uint64
	state  *state
	groups *groups
}

// load gives groups the members of each group at its last pass, as the
// state kept them.
func (p *pacer) load() error {
	return p.state.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bMeta).Get(kPassed)
		if v == nil {
			return nil
		}
		passed := map[string]int{}
		if err := json.Unmarshal(v, &passed); err != nil {
			return fmt.Errorf("read the groups' last passes: %w", err)
		}
		p.groups.setPassed(passed)
		return nil
	})
}

// catchUp runs the pass owed at the state's position, if one is: none
// when the position did not pass a multiple of every since the last.
func (p *pacer) catchUp(ctx context.Context, s *Service) (ran bool, err error) {
	pos, _, err := p.state.position()
	if err != nil {
		return false, err
	}
	var mark uint64
	if err := p.state.db.View(func(tx *bolt.Tx) error {
		mark = u64(tx.Bucket(bMeta).Get(kPassMark))
		return nil
	}); err != nil {
		return false, err
	}
	due := pos / p.every
	if due <= mark {
		return false, nil
	}
	ps := newPassOf(s, p.groups.takeByMembers)
	if err := ps.run(ctx, 0); err != nil {
		return false, err
	}
	if ps.rep.Groups > 0 {
		s.log.Info("re-clustered at the feed's position", "position", pos, "groups", ps.rep.Groups, "decisions", ps.rep.Members,
			"moved", ps.rep.Moved, "reclassified", ps.rep.Reclassified, "took", time.Since(ps.start).Round(time.Millisecond))
	}
	passed, err := json.Marshal(p.groups.passedCopy())
	if err != nil {
		return false, err
	}
	return true, p.state.db.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bMeta)
		if err := putU64(meta, kPassMark, due); err != nil {
			return err
		}
		return meta.Put(kPassed, passed)
	})
}

// oneCommit is the head of items that came from the commit of the first:
// a batch that mixed commits would depend on how many of them the index
// had applied when the batch was read.
func oneCommit(items []Item) []Item {
	for i, it := range items {
		if it.Commit != items[0].Commit {
			return items[:i]
		}
	}
	return items
}
