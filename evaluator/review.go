package evaluator

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/precept-dev/precept"
)

// Review statuses of an ambiguous decision (docs/clarification.md).
const (
	PendingClarification = "pending-clarification"
	NeedsHumanReview     = "needs-human-review"
	Resolved             = "resolved"
)

// NeedsReview is an ambiguous decision waiting for clarification.
type NeedsReview struct {
	DecisionID string    `json:"decision_id"`
	Agent      string    `json:"agent"`
	ReviewerID string    `json:"reviewer_id"`
	Comment    string    `json:"comment"`
	Missing    []string  `json:"missing"`
	Status     string    `json:"status"`
	Attempts   int       `json:"attempts"`
	Replies    []string  `json:"replies,omitempty"`
	UpdatedAt  time.Time `json:"updated_at"`
	// AskedAt is when a clarification question was last posted.
	AskedAt time.Time `json:"asked_at,omitempty"`
	// Thread locates the Slack thread, once one was started.
	Thread string `json:"thread,omitempty"`
}

// Conversation is a clarification record as the feedback store held it
// at one commit. The evaluator applies the replies it has not applied
// yet, in order, and keeps where the conversation stands on the
// decision's NeedsReview record; every replica does the same at the same
// point of the feed, so all of them reach the same classifications.
type Conversation struct {
	DecisionID string
	Thread     string
	// Attempts is the number of the last question asked.
	Attempts int
	AskedAt  time.Time
	// Status is PendingClarification or NeedsHumanReview; Resolved is
	// the evaluator's own conclusion, never taken from the record.
	Status  string
	Replies []ConversationReply
}

// ConversationReply is one reply of a Conversation.
type ConversationReply struct {
	Text string
	// At is when the reply was recorded; zero when unknown.
	At time.Time
	// Absorbed replies are kept with the decision, not evaluated.
	Absorbed bool
}

// newNeedsReview is the record of a decision the rubric found ambiguous.
func newNeedsReview(d precept.Decision, r *RubricResult, now time.Time) NeedsReview {
	missing := []string{"what_was_wrong", "where", "why", "desired_behaviour"}
	if r != nil {
		missing = r.Missing
	}
	return NeedsReview{
		DecisionID: d.DecisionID, Agent: d.Agent, ReviewerID: d.ReviewerID, Comment: d.ReviewerComment,
		Missing: missing, Status: PendingClarification, UpdatedAt: now,
	}
}

// ReviewQuery selects needs-review records for NeedsReview.
type ReviewQuery struct {
	// Agent keeps one agent's records; empty keeps every agent's.
	Agent string
	// Offset and Limit pick a page of the ordered list; Limit 0 means
	// to the end.
	Offset, Limit int
}

// NeedsReview lists the ambiguous decisions waiting for a human that q
// selects, oldest update first (then by decision id), and how many wait
// in all. The order and the count come from an index in memory, kept in
// order; only the page is read from the state, so a listing costs its
// page, not the number of records.
func (s *Service) NeedsReview(ctx context.Context, q ReviewQuery) ([]NeedsReview, int, error) {
	ids, total := s.state.open.page(q.Agent, max(q.Offset, 0), max(q.Limit, 0))
	page, err := s.state.reviews(ids)
	if err != nil {
		return nil, 0, fmt.Errorf("list needs review: %w", err)
	}
	return page, total, nil
}

// Review returns one needs-review record.
func (s *Service) Review(ctx context.Context, id string) (NeedsReview, error) {
	r, ok, err := getJSON[NeedsReview](s.state, bReview, id)
	if err != nil {
		return NeedsReview{}, err
	}
	if !ok {
		return NeedsReview{}, precept.Errorf(precept.NotFound, "decision %q is not waiting for review", id)
	}
	return r, nil
}

// CatchUp evaluates and applies what the feed holds when it is called,
// and returns when that is done: how the clarification loop makes sure
// the question or reply it just recorded in the feedback store is
// applied before it acts on the result. What arrives meanwhile is left
// to Run, so a steady stream of decisions cannot keep it busy.
func (s *Service) CatchUp(ctx context.Context) error {
	last, err := s.feed.Last()
	if err != nil {
		return err
	}
	for {
		pos, _, err := s.state.position()
		if err != nil || pos >= last {
			return err
		}
		n, err := s.Step(ctx)
		if err != nil || n == 0 {
			return err
		}
	}
}

// clarify appends a reviewer's reply, given at at (zero: unknown), to an
// ambiguous decision and evaluates it again with the reply as part of its
// comment. When the clarified feedback passes the rubric it is clustered
// like any clear negative and the record is resolved. Replies come only
// from clarification records in the feed (applyConversation), so every
// replica applies the same replies in the same order. The caller holds
// s.mu.
func (s *Service) clarify(ctx context.Context, id, reply string, at time.Time) (Evaluation, NeedsReview, error) {
	r, err := s.Review(ctx, id)
	if err != nil {
		return Evaluation{}, NeedsReview{}, err
	}
	f, err := s.feed.Get(ctx, id)
	if err != nil {
		return Evaluation{}, NeedsReview{}, err
	}
	now := s.opts.Now().UTC()
	r.Replies = append(r.Replies, strings.TrimSpace(reply))
	if !at.IsZero() {
		r.UpdatedAt = at.UTC()
	}
	clarified := clarifiedText(f.Decision, r.Replies)
	clarified.Source, clarified.ReceivedAt = f.Source, f.ReceivedAt
	d := clarified.Decision
	old, _, err := getJSON[Evaluation](s.state, bEvals, id)
	if err != nil {
		return Evaluation{}, NeedsReview{}, err
	}

	rubric := s.opts.Rubric.Rubric()
	l := s.learn(ctx, d)
	score := rubric.Score(d, l)
	if !score.Passed {
		ev := ambiguousEvaluation(d, &score)
		ev.Lesson = &l
		ev.Evaluator, ev.EvaluatedAt = "deterministic", now
		ev.Revision = old.Revision + 1
		r.Missing = score.Missing
		if err := s.state.apply(commit{evaluations: []Evaluation{ev}, reviews: []NeedsReview{r}}); err != nil {
			return Evaluation{}, NeedsReview{}, err
		}
		return ev, r, nil
	}
	b, err := s.evaluateBatch(ctx, []Item{{Feedback: clarified}})
	if err != nil {
		return Evaluation{}, NeedsReview{}, err
	}
	for i := range b.commit.evaluations {
		if b.commit.evaluations[i].DecisionID == id {
			b.commit.evaluations[i].Revision = old.Revision + 1
		}
	}
	b.fresh[0].Revision = old.Revision + 1
	if len(b.vectors) > 0 {
		if err := s.index.Upsert(ctx, b.vectors); err != nil {
			return Evaluation{}, NeedsReview{}, fmt.Errorf("index clarified feedback: %w", err)
		}
		_, indexed, err := s.state.position()
		if err != nil {
			return Evaluation{}, NeedsReview{}, err
		}
		b.commit.indexed = indexed + uint64(len(b.vectors))
	}
	r.Status, r.Missing = Resolved, nil
	b.commit.reviews = []NeedsReview{r}
	if err := s.state.apply(b.commit); err != nil {
		return Evaluation{}, NeedsReview{}, err
	}
	s.groups.committed(b.commit)
	s.flushEdgeCases(ctx)
	if s.opts.OnChange != nil && len(b.change.GeneralizableClusters) > 0 {
		s.opts.OnChange(Change{GeneralizableClusters: b.change.GeneralizableClusters})
	}
	return b.fresh[0], r, nil
}

// clarifiedText is a decision with the reviewer's clarifying replies
// appended to the comment.
func clarifiedText(d precept.Decision, replies []string) precept.Feedback {
	d.ReviewerComment = strings.TrimSpace(strings.Join(append([]string{d.ReviewerComment}, replies...), "\n"))
	return precept.NewFeedback(d, "", time.Time{})
}

// leadingDecisions returns the decisions at the head of items, up to the
// first conversation: a batch evaluates decisions only, so conversations
// are applied exactly where the feed puts them.
func leadingDecisions(items []Item) []Item {
	for i, it := range items {
		if it.Conversation != nil || it.Correction != nil || it.Skip != "" {
			return items[:i]
		}
	}
	return items
}

// applyConversations applies the conversations at the head of items in
// order, moving the position past each, and returns how many it applied.
// The caller holds s.mu.
func (s *Service) applyConversations(ctx context.Context, items []Item) (int, error) {
	n := 0
	for _, it := range items {
		if it.Conversation == nil {
			break
		}
		if err := s.applyConversation(ctx, *it.Conversation, it.Seq); err != nil {
			return n, fmt.Errorf("apply the clarification of %s: %w", it.Conversation.DecisionID, err)
		}
		n++
	}
	return n, nil
}

// applyConversation brings a decision's NeedsReview record up to a
// conversation: where it stands (thread, attempts, the last question),
// then each reply it holds beyond those applied — evaluated, or only kept
// when absorbed — until one resolves the decision; later replies change
// nothing. Replies are counted, so applying a conversation again (after
// a crash, or a newer version of it) applies nothing twice.
func (s *Service) applyConversation(ctx context.Context, c Conversation, seq uint64) error {
	r, ok, err := getJSON[NeedsReview](s.state, bReview, c.DecisionID)
	if err != nil {
		return err
	}
	if !ok {
		// Not ambiguous here: there is nothing to clarify.
		s.log.Debug("clarification of a decision that waits for no review", "decision_id", c.DecisionID)
		return s.state.apply(commit{position: seq})
	}
	if r.Status != Resolved && (r.Thread != c.Thread || r.Attempts != c.Attempts || !r.AskedAt.Equal(c.AskedAt)) {
		r.Thread, r.Attempts, r.AskedAt = c.Thread, c.Attempts, c.AskedAt
		if err := s.state.apply(commit{reviews: []NeedsReview{r}}); err != nil {
			return err
		}
	}
	for i := len(r.Replies); i < len(c.Replies) && r.Status != Resolved; i++ {
		reply := c.Replies[i]
		if !reply.Absorbed {
			_, next, err := s.clarify(ctx, c.DecisionID, reply.Text, reply.At)
			if precept.ErrorCode(err) == precept.NotFound {
				// The decision left the store: nothing to evaluate, and
				// stopping here would stop the feed.
				s.log.Warn("clarification of a decision that is gone", "decision_id", c.DecisionID, "err", err)
				break
			}
			if err != nil {
				return err
			}
			r = next
			continue
		}
		r.Replies = append(r.Replies, strings.TrimSpace(reply.Text))
		if !reply.At.IsZero() {
			r.UpdatedAt = reply.At.UTC()
		}
		if err := s.state.apply(commit{reviews: []NeedsReview{r}}); err != nil {
			return err
		}
	}
	if r.Status != Resolved && c.Status == NeedsHumanReview {
		r.Status = NeedsHumanReview
	}
	return s.state.apply(commit{position: seq, reviews: []NeedsReview{r}})
}
