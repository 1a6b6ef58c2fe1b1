package clarification

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/precept-dev/precept/evaluator"
	"github.com/precept-dev/precept/feedbackstore"
)

// Store is the feedback store as the clarification loop uses it
// (feedbackstore.Store).
type Store interface {
	// CatchUp indexes what other replicas committed.
	CatchUp(ctx context.Context) (int, error)
	// Clarification returns a decision's record at the branch's tip.
	Clarification(ctx context.Context, id string) (feedbackstore.Clarification, error)
	// ClarificationThread returns the decision whose record names thread.
	ClarificationThread(ctx context.Context, thread string) (string, bool, error)
	// UpdateClarification changes a record in a compare-and-swap commit.
	UpdateClarification(ctx context.Context, id string, fn func(*feedbackstore.Clarification) bool) (feedbackstore.Clarification, bool, error)
}

// Reviews is the evaluator as the clarification loop uses it
// (evaluator.Service).
type Reviews interface {
	// CatchUp applies everything the feedback store's index holds.
	CatchUp(ctx context.Context) error
	NeedsReview(ctx context.Context, q evaluator.ReviewQuery) ([]evaluator.NeedsReview, int, error)
	Review(ctx context.Context, id string) (evaluator.NeedsReview, error)
	Evaluation(ctx context.Context, id string) (evaluator.Evaluation, string, error)
}

var (
	_ Store   = (*feedbackstore.Store)(nil)
	_ Reviews = (*evaluator.Service)(nil)
)

// Service records the clarification of ambiguous decisions in the
// feedback store and has the evaluator apply it. It holds no state of its
// own: every replica's Service over the same repository sees the same
// conversations.
type Service struct {
	store   Store
	reviews Reviews
	opts    Options
	log     *slog.Logger
}

// New returns a Service over the feedback store and the evaluator that
// follows it; log may be nil.
func New(store Store, reviews Reviews, opts Options, log *slog.Logger) *Service {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{store: store, reviews: reviews, opts: opts.WithDefaults(), log: log}
}

// Options returns the options in effect, defaults filled in.
func (s *Service) Options() Options { return s.opts }

// sync brings this replica's evaluator up to date with the feedback
// store: what other replicas recorded is applied here too.
func (s *Service) sync(ctx context.Context) error {
	if _, err := s.store.CatchUp(ctx); err != nil {
		return fmt.Errorf("follow the feedback store: %w", err)
	}
	if err := s.reviews.CatchUp(ctx); err != nil {
		return fmt.Errorf("apply the feedback store: %w", err)
	}
	return nil
}

// syncOrWarn is sync for readers, who can work with what this replica
// has when the evaluator fails (it retries on its own).
func (s *Service) syncOrWarn(ctx context.Context) {
	if err := s.sync(ctx); err != nil && ctx.Err() == nil {
		s.log.Warn("clarification works with this replica's state; catching up failed", "err", err)
	}
}

// Pending lists the ambiguous decisions that are not resolved, oldest
// first.
func (s *Service) Pending(ctx context.Context) ([]evaluator.NeedsReview, error) {
	s.syncOrWarn(ctx)
	items, _, err := s.reviews.NeedsReview(ctx, evaluator.ReviewQuery{})
	return items, err
}

// Situation returns where the clarification of a decision stands. It
// fails with precept.NotFound when the decision waits for no review.
func (s *Service) Situation(ctx context.Context, id string) (Situation, error) {
	s.syncOrWarn(ctx)
	return s.situation(ctx, id)
}

func (s *Service) situation(ctx context.Context, id string) (Situation, error) {
	r, err := s.reviews.Review(ctx, id)
	if err != nil {
		return Situation{}, err
	}
	rec, err := s.store.Clarification(ctx, id)
	if err != nil {
		return Situation{}, err
	}
	return Situation{Review: r, Record: rec}, nil
}

// Owner returns the decision whose conversation happens in thread.
func (s *Service) Owner(ctx context.Context, thread string) (string, bool, error) {
	return s.store.ClarificationThread(ctx, thread)
}

// Evaluation returns a decision's current evaluation.
func (s *Service) Evaluation(ctx context.Context, id string) (evaluator.Evaluation, error) {
	ev, _, err := s.reviews.Evaluation(ctx, id)
	return ev, err
}

// Asked records that question q was asked about a decision — in thread,
// which the first question opens — and returns the situation once the
// evaluator applied it. The same attempt recorded again changes nothing.
func (s *Service) Asked(ctx context.Context, id, thread string, q feedbackstore.Question) (Situation, error) {
	_, _, err := s.store.UpdateClarification(ctx, id, func(c *feedbackstore.Clarification) bool {
		if !c.AddQuestion(q) {
			return false
		}
		if c.Thread == "" {
			c.Thread = thread
		}
		if c.Status == "" {
			c.Status = evaluator.PendingClarification
		}
		return true
	})
	if err != nil {
		return Situation{}, err
	}
	return s.Situation(ctx, id)
}

// MaxReplies bounds the replies a clarification record keeps. Replies
// after the decision was left for human review are only kept, never
// evaluated, so without a bound a talkative thread would grow the record
// (and each version of it the feedback index keeps) without end.
const MaxReplies = 50

// Reply records a reviewer's reply — absorbed when the decision was left
// for human review — has the evaluator apply it, and returns what
// follows (AfterReply). recorded is false when the reply changes nothing:
// recorded before (by another replica, or through another path), or the
// decision is resolved; nothing follows then.
func (s *Service) Reply(ctx context.Context, id string, reply feedbackstore.Reply) (next Step, sit Situation, recorded bool, err error) {
	rec, recorded, err := s.store.UpdateClarification(ctx, id, func(c *feedbackstore.Clarification) bool {
		if c.Status == evaluator.Resolved {
			return false
		}
		if len(c.Replies) >= MaxReplies && !slices.ContainsFunc(c.Replies, func(r feedbackstore.Reply) bool { return r.TS == reply.TS }) {
			s.log.Warn("a clarification has as many replies as a record keeps; this one is not recorded", "decision_id", id, "replies", len(c.Replies))
			return false
		}
		r := reply
		r.Absorbed = Absorbs(*c)
		return c.AddReply(r)
	})
	if err != nil || !recorded {
		return Step{}, Situation{}, false, err
	}
	i := slices.IndexFunc(rec.Replies, func(r feedbackstore.Reply) bool { return r.TS == reply.TS })
	if i < 0 {
		return Step{}, Situation{}, true, errors.New("record a reply: the record does not hold it")
	}
	// The reply must be applied before its outcome is known.
	if err := s.sync(ctx); err != nil {
		return Step{}, Situation{}, true, err
	}
	sit, err = s.situation(ctx, id)
	if err != nil {
		return Step{}, Situation{}, true, err
	}
	return AfterReply(sit, rec.Replies[i], s.opts), sit, true, nil
}

// Leave records that a decision is left for human review, and reports
// whether this call did so (false: it was already, or it is resolved).
func (s *Service) Leave(ctx context.Context, id string) (bool, error) {
	return s.setStatus(ctx, id, evaluator.NeedsHumanReview)
}

// Resolve records that the replies resolved a decision.
func (s *Service) Resolve(ctx context.Context, id string) error {
	_, err := s.setStatus(ctx, id, evaluator.Resolved)
	return err
}

// statusRank orders the statuses: a record only moves forward.
func statusRank(status string) int {
	switch status {
	case evaluator.PendingClarification:
		return 1
	case evaluator.NeedsHumanReview:
		return 2
	case evaluator.Resolved:
		return 3
	}
	return 0
}

func (s *Service) setStatus(ctx context.Context, id, status string) (bool, error) {
	_, changed, err := s.store.UpdateClarification(ctx, id, func(c *feedbackstore.Clarification) bool {
		if statusRank(c.Status) >= statusRank(status) {
			return false
		}
		c.Status = status
		return true
	})
	if err != nil {
		return false, err
	}
	if changed {
		s.syncOrWarn(ctx)
	}
	return changed, nil
}

// Import merges a conversation kept elsewhere — by an older precept, in
// Redis — into the decision's record: its thread when the record has
// none, the questions and replies it lacks, and its status when that is
// further along. It reports whether the record changed; importing the
// same conversation again changes nothing.
func (s *Service) Import(ctx context.Context, in feedbackstore.Clarification) (bool, error) {
	_, changed, err := s.store.UpdateClarification(ctx, in.DecisionID, func(c *feedbackstore.Clarification) bool {
		changed := false
		if c.Thread == "" && in.Thread != "" {
			c.Thread, changed = in.Thread, true
		}
		for _, q := range in.Questions {
			changed = c.AddQuestion(q) || changed
		}
		for _, r := range in.Replies {
			changed = c.AddReply(r) || changed
		}
		status := in.Status
		if statusRank(status) == 0 {
			status = evaluator.PendingClarification
		}
		if statusRank(c.Status) < statusRank(status) {
			c.Status, changed = status, true
		}
		return changed
	})
	return changed, err
}
