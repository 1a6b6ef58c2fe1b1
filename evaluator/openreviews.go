package evaluator

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// openReviews keeps, in memory, the agent and last update of every
// needs-review record that is not resolved, so a listing sorts what
// memory holds and reads only its page from the state: at 100,000
// stored decisions tens of thousands of records are kept, most of them
// resolved (docs/console.md, "Performance"). It is loaded when the
// state opens and updated after every write that changes a record; a
// reader may briefly see a record newer than the index, never an index
// entry without its record (records are never deleted).
type openReviews struct {
	mu sync.RWMutex
	m  map[string]reviewHead
}

// reviewHead is what sorting and filtering a listing needs of a record.
type reviewHead struct {
	agent   string
	updated time.Time
}

// load reads every record's head (its comment and replies are skipped
// unparsed) and keeps the open ones.
func (o *openReviews) load(db *bolt.DB) error {
	m := map[string]reviewHead{}
	err := db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bReview).ForEach(func(k, v []byte) error {
			var h struct {
				Agent     string    `json:"agent"`
				Status    string    `json:"status"`
				UpdatedAt time.Time `json:"updated_at"`
			}
			if err := json.Unmarshal(v, &h); err != nil {
				return fmt.Errorf("needs-review record %s: %w", k, err)
			}
			if h.Status != Resolved {
				m[string(k)] = reviewHead{h.Agent, h.UpdatedAt}
			}
			return nil
		})
	})
	o.mu.Lock()
	o.m = m
	o.mu.Unlock()
	return err
}

// written brings the index up to records just committed.
func (o *openReviews) written(rs []NeedsReview) {
	if len(rs) == 0 {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, r := range rs {
		if r.Status == Resolved {
			delete(o.m, r.DecisionID)
		} else {
			o.m[r.DecisionID] = reviewHead{r.Agent, r.UpdatedAt}
		}
	}
}

// pick lists the open records of agent (every agent when empty), oldest
// update first, then by decision id.
func (o *openReviews) pick(agent string) []string {
	type entry struct {
		id string
		reviewHead
	}
	o.mu.RLock()
	picked := make([]entry, 0, len(o.m))
	for id, h := range o.m {
		if agent == "" || h.agent == agent {
			picked = append(picked, entry{id, h})
		}
	}
	o.mu.RUnlock()
	slices.SortFunc(picked, func(a, b entry) int {
		if c := a.updated.Compare(b.updated); c != 0 {
			return c
		}
		return strings.Compare(a.id, b.id)
	})
	ids := make([]string, len(picked))
	for i, e := range picked {
		ids[i] = e.id
	}
	return ids
}

// reviews reads the records with these ids in one read transaction, in
// order, leaving out those resolved since they were picked.
func (s *state) reviews(ids []string) ([]NeedsReview, error) {
	out := make([]NeedsReview, 0, len(ids))
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bReview)
		for _, id := range ids {
			data := b.Get([]byte(id))
			if data == nil {
				continue
			}
			var r NeedsReview
			if err := json.Unmarshal(data, &r); err != nil {
				return fmt.Errorf("needs-review record %s: %w", id, err)
			}
			if r.Status != Resolved {
				out = append(out, r)
			}
		}
		return nil
	})
	return out, err
}
