package feedbackstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/precept-dev/precept/lib/text"

	"github.com/precept-dev/precept/lib/gitrepo"
)

// ClarificationsDir is where clarification records live in the feedback
// repository.
const ClarificationsDir = "feedback/clarifications"

// Clarification is the conversation with a reviewer about one ambiguous
// decision: the questions asked and the replies given, in the order they
// were recorded (docs/clarification.md). Records are only ever added to:
// a question is recorded once per attempt number, a reply once per TS.
type Clarification struct {
	DecisionID string `json:"decision_id"`
	// Status is where the conversation stands: "pending-clarification",
	// "needs-human-review" (attempts used up; later replies are absorbed)
	// or "resolved".
	Status string `json:"status"`
	// Thread locates the conversation: "channel:ts" of the Slack message
	// that opened it.
	Thread    string     `json:"thread,omitempty"`
	Questions []Question `json:"questions"`
	Replies   []Reply    `json:"replies"`
}

// Question is one question asked about a decision.
type Question struct {
	// Attempt numbers the questions of a record from 1.
	Attempt int `json:"attempt"`
	// Kind is "first", "follow-up" or "reminder".
	Kind    string    `json:"kind,omitempty"`
	AskedAt time.Time `json:"asked_at,omitzero"`
}

// Reply is one reply a reviewer gave.
type Reply struct {
	// TS identifies the reply where it was given (the Slack message's
	// ts); the same TS is recorded once.
	TS   string `json:"ts"`
	User string `json:"user"`
	Text string `json:"text"`
	// At is when the reply was recorded; zero for replies imported from
	// an older precept, which did not keep it.
	At time.Time `json:"at,omitzero"`
	// Absorbed replies came after the decision was left for human review:
	// they are kept for the person who reviews it, not evaluated.
	Absorbed bool `json:"absorbed"`
}

// AddQuestion records q unless a question with its attempt number is
// recorded already, and reports whether it did.
func (c *Clarification) AddQuestion(q Question) bool {
	if q.Attempt <= 0 || slices.ContainsFunc(c.Questions, func(x Question) bool { return x.Attempt == q.Attempt }) {
		return false
	}
	c.Questions = append(c.Questions, q)
	slices.SortStableFunc(c.Questions, func(a, b Question) int { return a.Attempt - b.Attempt })
	return true
}

// AddReply records r unless a reply with its TS is recorded already, and
// reports whether it did.
func (c *Clarification) AddReply(r Reply) bool {
	if r.TS == "" || slices.ContainsFunc(c.Replies, func(x Reply) bool { return x.TS == r.TS }) {
		return false
	}
	c.Replies = append(c.Replies, r)
	return true
}

// Attempts is the number of the last question asked, 0 before the first.
func (c Clarification) Attempts() int {
	if len(c.Questions) == 0 {
		return 0
	}
	return c.Questions[len(c.Questions)-1].Attempt
}

// LastAsked is when the last question was asked.
func (c Clarification) LastAsked() time.Time {
	if len(c.Questions) == 0 {
		return time.Time{}
	}
	return c.Questions[len(c.Questions)-1].AskedAt
}

func encodeClarification(c Clarification) ([]byte, error) {
	if c.Questions == nil {
		c.Questions = []Question{}
	}
	if c.Replies == nil {
		c.Replies = []Reply{}
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode clarification of %s: %w", c.DecisionID, err)
	}
	return append(b, '\n'), nil
}

func decodeClarification(b []byte) (Clarification, error) {
	var c Clarification
	if err := json.Unmarshal(b, &c); err != nil {
		return Clarification{}, fmt.Errorf("decode clarification: %w", err)
	}
	if c.DecisionID == "" {
		return Clarification{}, errors.New("decode clarification: no decision_id")
	}
	return c, nil
}

// readClarification returns a decision's record in snap; a decision
// without one gets an empty record.
func readClarification(snap *gitrepo.Snapshot, id string) (Clarification, error) {
	layout, _, err := readLayout(snap)
	if err != nil {
		return Clarification{}, fmt.Errorf("read clarification of %s: %w", id, err)
	}
	b, err := snap.ReadFile(layout.ClarificationPath(id))
	if errors.Is(err, gitrepo.ErrNotFound) {
		return Clarification{DecisionID: id}, nil
	}
	if err != nil {
		return Clarification{}, fmt.Errorf("read clarification of %s: %w", id, err)
	}
	c, err := decodeClarification(b)
	if err != nil {
		return Clarification{}, fmt.Errorf("read clarification of %s: %w", id, err)
	}
	return c, nil
}

// Clarification returns a decision's clarification record as the
// branch's tip holds it; a decision nobody asked about yet has an empty
// record.
func (s *Store) Clarification(ctx context.Context, id string) (Clarification, error) {
	if err := ctx.Err(); err != nil {
		return Clarification{}, err
	}
	snap, err := s.repo.Snapshot(Branch)
	if err != nil {
		return Clarification{}, fmt.Errorf("read clarification of %s: %w", id, err)
	}
	return readClarification(snap, id)
}

// ClarificationThread returns the decision whose clarification happens
// in thread; ok is false when no record names the thread.
func (s *Store) ClarificationThread(ctx context.Context, thread string) (id string, ok bool, err error) {
	id, ok, err = s.ix.thread(thread)
	if err != nil || ok {
		return id, ok, err
	}
	// Another replica may have opened the thread since the last catch-up.
	n, err := s.CatchUp(ctx)
	if err != nil || n == 0 {
		return "", false, err
	}
	return s.ix.thread(thread)
}

// UpdateClarification changes a decision's clarification record with fn
// in one compare-and-swap commit on the feedback branch, and returns the
// record as the branch now holds it. fn receives the current record (an
// empty one with DecisionID set when there is none) and reports whether
// it changed it; fn may run more than once, each time on a fresh copy,
// when another writer moved the branch in between. changed is false when
// fn changed nothing: no commit is made, so the same question or reply
// recorded twice — by two replicas or by a retry — is recorded once.
func (s *Store) UpdateClarification(ctx context.Context, id string, fn func(*Clarification) bool) (rec Clarification, changed bool, err error) {
	if err := gitrepo.ValidPath(LayoutCurrent.ClarificationPath(id)); err != nil {
		return Clarification{}, false, fmt.Errorf("record clarification: %w", err)
	}
	_, err = s.update(ctx, func(snap *gitrepo.Snapshot) (*gitrepo.CommitSpec, error) {
		layout, marker, err := readLayout(snap)
		if err != nil {
			return nil, err
		}
		cur, err := readClarification(snap, id)
		if err != nil {
			return nil, err
		}
		before := len(cur.Questions)
		beforeReplies, beforeStatus := len(cur.Replies), cur.Status
		changed = fn(&cur)
		cur.DecisionID = id
		rec = cur
		if !changed {
			return nil, nil
		}
		data, err := encodeClarification(cur)
		if err != nil {
			return nil, err
		}
		changes := []gitrepo.Change{{Path: layout.ClarificationPath(id), Data: data}}
		if marker != nil {
			changes = append(changes, *marker)
		}
		return &gitrepo.CommitSpec{
			Message:  clarificationMessage(cur, len(cur.Questions)-before, len(cur.Replies)-beforeReplies, cur.Status != beforeStatus),
			Trailers: []gitrepo.Trailer{{Key: "Decision-Id", Value: id}},
			Changes:  changes,
		}, nil
	})
	if err != nil {
		return Clarification{}, false, fmt.Errorf("record clarification of %s: %w", id, err)
	}
	if changed {
		if _, err := s.CatchUp(ctx); err != nil {
			// The record is durable; the index follows on the next tick.
			s.opts.Logger.Warn("index a clarification record", "decision_id", id, "err", err)
		}
	}
	return rec, changed, nil
}

// clarificationMessage says what a commit did to a record, e.g.
// "Clarify decision d-1: question 2 asked, 1 reply recorded".
func clarificationMessage(c Clarification, questions, replies int, status bool) string {
	var what []string
	if questions > 0 {
		what = append(what, fmt.Sprintf("question %d asked", c.Attempts()))
	}
	if replies > 0 {
		what = append(what, fmt.Sprintf("%d %s recorded", replies, text.Plural(replies, "reply", "replies")))
	}
	if status {
		what = append(what, "now "+c.Status)
	}
	if len(what) == 0 {
		what = append(what, "record updated")
	}
	return fmt.Sprintf("Clarify decision %s: %s", c.DecisionID, strings.Join(what, ", "))
}
