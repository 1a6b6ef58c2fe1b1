package evaluator

import (
	"context"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/feedbackstore"
)

// storeFeed is the feedback store as a Feed.
type storeFeed struct{ s *feedbackstore.Store }

// FeedFrom returns the Feed of a feedback store: its decisions and
// clarification records in the order its commits made them.
func FeedFrom(s *feedbackstore.Store) Feed { return storeFeed{s} }

func (f storeFeed) Since(seq uint64, limit int) ([]Item, error) {
	entries, err := f.s.Entries(seq, limit)
	if err != nil {
		return nil, err
	}
	out := make([]Item, len(entries))
	for i, e := range entries {
		out[i] = Item{Seq: e.Seq}
		switch {
		case e.Decision != nil:
			out[i].Feedback = e.Decision.Feedback
		case e.Clarification != nil:
			out[i].Conversation = conversationOf(*e.Clarification)
		}
	}
	return out, nil
}

func (f storeFeed) Last() (uint64, error) { return f.s.LastSeq() }

func (f storeFeed) Get(ctx context.Context, id string) (precept.Feedback, error) {
	r, err := f.s.Get(ctx, id)
	return r.Feedback, err
}

func (f storeFeed) Changed() <-chan struct{} { return f.s.Changed() }

// conversationOf is what the evaluator applies of a clarification record.
func conversationOf(c feedbackstore.Clarification) *Conversation {
	conv := &Conversation{DecisionID: c.DecisionID, Thread: c.Thread, Attempts: c.Attempts(), AskedAt: c.LastAsked(), Status: c.Status}
	for _, r := range c.Replies {
		conv.Replies = append(conv.Replies, ConversationReply{Text: r.Text, At: r.At, Absorbed: r.Absorbed})
	}
	return conv
}
