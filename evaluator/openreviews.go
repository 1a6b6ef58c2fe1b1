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
// needs-review record that is not resolved, in order, so a listing reads
// only its page from the state: at 100,000 stored decisions tens of
// thousands of records are open, and sorting them for each page cost
// 30 ms (docs/console.md, "Performance"). It is loaded when the state
// opens and updated after every write that changes a record; a reader may
// briefly see a record newer than the index, never an index entry without
// its record (records are never deleted).
//
// order holds (last update, id) ascending. A record updated or resolved
// leaves its old entry behind, stale (it no longer matches m), rather
// than moving the rest of the slice; stale entries are skipped and
// dropped once they are half of order. Updates carry the time of the
// write, so a new entry almost always goes at the end.
type openReviews struct {
	mu    sync.RWMutex
	m     map[string]reviewHead
	order []orderEntry
	stale int
	// perAgent counts the open records of each agent.
	perAgent map[string]int
}

// reviewHead is what ordering and filtering a listing needs of a record.
type reviewHead struct {
	agent   string
	updated time.Time
}

type orderEntry struct {
	updated time.Time
	id      string
}

func (a orderEntry) compare(b orderEntry) int {
	if c := a.updated.Compare(b.updated); c != 0 {
		return c
	}
	return strings.Compare(a.id, b.id)
}

// load reads every record's head (its comment and replies are skipped
// unparsed) and keeps the open ones.
func (o *openReviews) load(db *bolt.DB) error {
	m, perAgent := map[string]reviewHead{}, map[string]int{}
	var order []orderEntry
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
				perAgent[h.Agent]++
				order = append(order, orderEntry{h.UpdatedAt, string(k)})
			}
			return nil
		})
	})
	slices.SortFunc(order, orderEntry.compare)
	o.mu.Lock()
	o.m, o.order, o.stale, o.perAgent = m, order, 0, perAgent
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
		old, had := o.m[r.DecisionID]
		if r.Status == Resolved {
			if had {
				delete(o.m, r.DecisionID)
				o.perAgent[old.agent]--
				o.stale++
			}
			continue
		}
		if had && old.updated.Equal(r.UpdatedAt) {
			continue
		}
		if had {
			o.stale++
			o.perAgent[old.agent]--
		}
		o.m[r.DecisionID] = reviewHead{r.Agent, r.UpdatedAt}
		o.perAgent[r.Agent]++
		e := orderEntry{r.UpdatedAt, r.DecisionID}
		if n := len(o.order); n == 0 || o.order[n-1].compare(e) < 0 {
			o.order = append(o.order, e)
		} else if i, found := slices.BinarySearchFunc(o.order, e, orderEntry.compare); found {
			// Back to an update time it had: that stale entry is live again.
			o.stale--
		} else {
			o.order = slices.Insert(o.order, i, e)
		}
	}
	if o.stale > 1024 && o.stale > len(o.order)/2 {
		o.order = slices.DeleteFunc(o.order, func(e orderEntry) bool { return !o.live(e) })
		o.stale = 0
	}
}

// live reports whether an entry of order is a record's current one.
func (o *openReviews) live(e orderEntry) bool {
	h, ok := o.m[e.id]
	return ok && h.updated.Equal(e.updated)
}

// page lists limit (every one when 0) of the open records of agent
// (every agent when empty) from position offset, oldest update first,
// then by decision id, and how many are open in all.
func (o *openReviews) page(agent string, offset, limit int) ([]string, int) {
	o.mu.RLock()
	defer o.mu.RUnlock()
	total := len(o.m)
	if agent != "" {
		total = o.perAgent[agent]
	}
	var ids []string
	seen := 0
	for _, e := range o.order {
		if limit > 0 && len(ids) == limit {
			break
		}
		if !o.live(e) || (agent != "" && o.m[e.id].agent != agent) {
			continue
		}
		if seen >= offset {
			ids = append(ids, e.id)
		}
		seen++
	}
	return ids, total
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
