package clarification

import (
	"slices"
	"time"

	"github.com/precept-dev/precept/evaluator"
	"github.com/precept-dev/precept/feedbackstore"
)

// The defaults of Options (docs/thresholds.md).
const (
	// DefaultMaxAttempts is how many questions are asked before a
	// decision is left for human review.
	DefaultMaxAttempts = 3
	// DefaultStaleAfter is how long a conversation may go without a
	// question or reply before the scheduler acts on it.
	DefaultStaleAfter = 30 * time.Minute
	// DefaultRepostGuard is the least time between two questions the
	// scheduler asks about one decision.
	DefaultRepostGuard = 24 * time.Hour
	// DefaultScanInterval is how often an adapter's scheduler should look
	// at the waiting decisions.
	DefaultScanInterval = 5 * time.Minute
)

// Options configure the clarification loop. Zero values mean the
// defaults.
type Options struct {
	MaxAttempts int
	StaleAfter  time.Duration
	RepostGuard time.Duration
}

// WithDefaults returns o with zero values replaced by the defaults.
func (o Options) WithDefaults() Options {
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	if o.StaleAfter <= 0 {
		o.StaleAfter = DefaultStaleAfter
	}
	if o.RepostGuard <= 0 {
		o.RepostGuard = DefaultRepostGuard
	}
	return o
}

// Situation is where the clarification of one decision stands.
type Situation struct {
	// Review is the evaluator's needs-review record: the rubric
	// attributes the feedback still lacks, and whether the replies
	// resolved it.
	Review evaluator.NeedsReview
	// Record is the conversation as the feedback store holds it; it has
	// no questions before the first one is asked.
	Record feedbackstore.Clarification
}

// Status is where the conversation stands: resolved when the evaluator
// or the record says so, needs-human-review when either says so, else
// pending-clarification.
func (s Situation) Status() string {
	switch {
	case s.Review.Status == evaluator.Resolved || s.Record.Status == evaluator.Resolved:
		return evaluator.Resolved
	case s.Review.Status == evaluator.NeedsHumanReview || s.Record.Status == evaluator.NeedsHumanReview:
		return evaluator.NeedsHumanReview
	}
	return evaluator.PendingClarification
}

// LastActivity is when the last question was asked or reply given.
func (s Situation) LastActivity() time.Time {
	last := s.Record.LastAsked()
	for _, r := range s.Record.Replies {
		if r.At.After(last) {
			last = r.At
		}
	}
	return last
}

// Action is what the loop does next about a decision.
type Action int

// The actions.
const (
	// Nothing is to be done now.
	Nothing Action = iota
	// AskFirst asks the first question, opening the conversation.
	AskFirst
	// FollowUp asks, after a reply that left the decision ambiguous, for
	// what is still missing.
	FollowUp
	// Remind asks again after the reviewer did not answer.
	Remind
	// LeaveForHumanReview gives up asking: the decision waits for a
	// person, and later replies are absorbed.
	LeaveForHumanReview
	// Thank answers the reply that made the decision clear.
	Thank
	// Absorb keeps a reply for the person who reviews the decision,
	// without evaluating it or asking anything.
	Absorb
)

var actionNames = [...]string{"nothing", "ask-first", "follow-up", "remind", "leave-for-human-review", "thank", "absorb"}

func (a Action) String() string {
	if a < 0 || int(a) >= len(actionNames) {
		return "unknown"
	}
	return actionNames[a]
}

// Question kinds as records keep them.
const (
	KindFirst    = "first"
	KindFollowUp = "follow-up"
	KindReminder = "reminder"
)

// Kind is the kind of question an action asks, or "".
func (a Action) Kind() string {
	switch a {
	case AskFirst:
		return KindFirst
	case FollowUp:
		return KindFollowUp
	case Remind:
		return KindReminder
	}
	return ""
}

// Step is what to do next.
type Step struct {
	Action Action
	// Attempt is the number of the question to ask (AskFirst, FollowUp,
	// Remind), or of the questions asked (LeaveForHumanReview).
	Attempt int
	// Stale says nothing happened for StaleAfter: an adapter should first
	// look for replies it missed, and act only when it found none.
	Stale bool
}

// Next decides what the scheduler does about a decision at now: ask the
// first question when none was asked; otherwise nothing until the
// conversation has been quiet for StaleAfter, then leave the decision for
// human review once MaxAttempts questions went unanswered, or remind the
// reviewer — never twice within RepostGuard.
func Next(s Situation, opts Options, now time.Time) Step {
	opts = opts.WithDefaults()
	if s.Status() != evaluator.PendingClarification {
		return Step{}
	}
	asked := s.Record.Attempts()
	if asked == 0 {
		return Step{Action: AskFirst, Attempt: 1}
	}
	if now.Sub(s.LastActivity()) < opts.StaleAfter {
		return Step{}
	}
	switch {
	case asked >= opts.MaxAttempts:
		return Step{Action: LeaveForHumanReview, Attempt: asked, Stale: true}
	case now.Sub(s.Record.LastAsked()) < opts.RepostGuard:
		return Step{Stale: true}
	}
	return Step{Action: Remind, Attempt: asked + 1, Stale: true}
}

// Absorbs reports whether a reply recorded now is absorbed: the decision
// was left for human review.
func Absorbs(rec feedbackstore.Clarification) bool {
	return rec.Status == evaluator.NeedsHumanReview
}

// AfterReply decides what follows a reply once the evaluator applied it:
// an absorbed reply is only acknowledged; the reply that resolved the
// decision is thanked; one that left it ambiguous gets a follow-up
// question while attempts remain, else the decision is left for human
// review. A reply to a decision an earlier reply resolved gets nothing.
func AfterReply(s Situation, reply feedbackstore.Reply, opts Options) Step {
	opts = opts.WithDefaults()
	if reply.Absorbed {
		return Step{Action: Absorb}
	}
	asked := s.Record.Attempts()
	switch s.Status() {
	case evaluator.Resolved:
		i := slices.IndexFunc(s.Record.Replies, func(r feedbackstore.Reply) bool { return r.TS == reply.TS })
		if s.Review.Status == evaluator.Resolved && i >= 0 && len(s.Review.Replies) == i+1 {
			return Step{Action: Thank}
		}
		return Step{}
	case evaluator.NeedsHumanReview:
		return Step{}
	}
	if asked < opts.MaxAttempts {
		return Step{Action: FollowUp, Attempt: asked + 1}
	}
	return Step{Action: LeaveForHumanReview, Attempt: asked}
}
