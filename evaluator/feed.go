package evaluator

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/feedbackstore"
)

// storeFeed is the feedback store as a Feed: the four reads a Feed
// makes of it.
type storeFeed struct {
	entries func(seq uint64, limit int) ([]feedbackstore.Entry, error)
	last    func() (uint64, error)
	get     func(ctx context.Context, id string) (feedbackstore.Record, error)
	changed func() <-chan struct{}
}

// FeedFrom returns the Feed of a feedback store: its decisions and
// clarification records in the order its commits made them.
func FeedFrom(s *feedbackstore.Store) Feed {
	return storeFeed{entries: s.Entries, last: s.LastSeq, get: s.Get, changed: s.Changed}
}

func (f storeFeed) Since(seq uint64, limit int) ([]Item, error) {
	entries, err := f.entries(seq, limit)
	if err != nil {
		return nil, err
	}
	out := make([]Item, len(entries))
	for i, e := range entries {
		out[i] = Item{Seq: e.Seq}
		switch {
		case e.Decision != nil:
			out[i].Feedback, out[i].Commit = e.Decision.Feedback, e.Decision.Commit
		case e.Clarification != nil:
			out[i].Conversation = conversationOf(*e.Clarification)
		case e.Correction != nil:
			c, err := CorrectionOf(*e.Correction)
			if err != nil {
				// A record the store accepted but this version cannot
				// read: skip it rather than stop the feed behind it.
				out[i] = Item{Seq: e.Seq, Skip: err.Error()}
				continue
			}
			out[i].Correction = &c
		}
	}
	return out, nil
}

func (f storeFeed) Last() (uint64, error) { return f.last() }

func (f storeFeed) Get(ctx context.Context, id string) (precept.Feedback, error) {
	r, err := f.get(ctx, id)
	return r.Feedback, err
}

func (f storeFeed) Changed() <-chan struct{} { return f.changed() }

// CorrectionOf reads a correction record of the feedback store: the
// record says who and when, its body what.
func CorrectionOf(r feedbackstore.Correction) (Correction, error) {
	var c Correction
	if err := json.Unmarshal(r.Body, &c); err != nil {
		return Correction{}, fmt.Errorf("correction %s: %w", r.ID, err)
	}
	c.ID, c.By, c.At = r.ID, r.By, r.At
	if err := c.Validate(); err != nil {
		return Correction{}, fmt.Errorf("correction %s: %w", r.ID, err)
	}
	return c, nil
}

// RecordOf is the feedback store's record of a correction, resolved
// (CheckCorrection) so that every replica applies the same.
func RecordOf(c Correction) (feedbackstore.Correction, error) {
	body := c
	body.ID, body.By, body.At = "", "", time.Time{}
	b, err := json.Marshal(body)
	if err != nil {
		return feedbackstore.Correction{}, err
	}
	return feedbackstore.Correction{ID: c.ID, By: c.By, At: c.At, Body: b}, nil
}

// conversationOf is what the evaluator applies of a clarification record.
func conversationOf(c feedbackstore.Clarification) *Conversation {
	conv := &Conversation{DecisionID: c.DecisionID, Thread: c.Thread, Attempts: c.Attempts(), AskedAt: c.LastAsked(), Status: c.Status}
	for _, r := range c.Replies {
		conv.Replies = append(conv.Replies, ConversationReply{Text: r.Text, At: r.At, Absorbed: r.Absorbed})
	}
	return conv
}
