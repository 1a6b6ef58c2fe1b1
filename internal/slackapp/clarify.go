package slackapp

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/slack-go/slack"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/clarification"
	"github.com/precept-dev/precept/evaluator"
	"github.com/precept-dev/precept/feedbackstore"
)

// recordTries and recordTimeout bound the attempts to record a question
// just posted. The record keeps the question from being asked again and
// leads replies in its thread to the decision, so it is made even when
// the request that posted it is cancelled (e.g. by shutdown).
const (
	recordTries   = 3
	recordTimeout = 30 * time.Second
)

var errAskedElsewhere = errors.New("another replica is asking this question")

// clarifier is the clarification loop in Slack: it asks reviewers of
// ambiguous decisions in threads, receives their replies, and does what
// the clarification domain says comes next. It keeps a queue of
// decisions that just became ambiguous, and whether the scheduler should
// scan now; where each conversation stands lives in the feedback store.
type clarifier struct {
	s    *Service
	clar Clarifications

	mu      sync.Mutex
	pending map[string]bool
	scan    bool
	wake    chan struct{}
}

func newClarifier(s *Service, clar Clarifications) *clarifier {
	return &clarifier{s: s, clar: clar, pending: map[string]bool{}, wake: make(chan struct{}, 1)}
}

func (c *clarifier) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *clarifier) askSoon(ids []string) {
	c.mu.Lock()
	for _, id := range ids {
		c.pending[id] = true
	}
	c.mu.Unlock()
	c.signal()
}

func (c *clarifier) scanSoon() {
	c.mu.Lock()
	c.scan = true
	c.mu.Unlock()
	c.signal()
}

func (c *clarifier) take() ([]string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ids := make([]string, 0, len(c.pending))
	for id := range c.pending {
		ids = append(ids, id)
	}
	clear(c.pending)
	scan := c.scan
	c.scan = false
	return ids, scan
}

// run imports what an older precept left in the Store, then asks about
// decisions as they become ambiguous and scans the waiting ones every
// ScanInterval, until ctx is done.
func (c *clarifier) run(ctx context.Context) {
	c.importLegacy(ctx)
	tick := time.NewTicker(c.s.opts.ScanInterval)
	defer tick.Stop()
	c.scanSoon()
	for {
		ids, scan := c.take()
		if c.s.Features().Clarification {
			for _, id := range ids {
				if ctx.Err() != nil {
					return
				}
				c.askNew(ctx, id)
			}
			if scan {
				c.scanAll(ctx)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-c.wake:
		case <-tick.C:
			c.scanSoon()
		}
	}
}

// situation returns where a decision's clarification stands; it logs
// failures other than the decision waiting for no review.
func (c *clarifier) situation(ctx context.Context, id string) (clarification.Situation, bool) {
	sit, err := c.clar.Situation(ctx, id)
	if err != nil {
		if precept.ErrorCode(err) != precept.NotFound && ctx.Err() == nil {
			c.s.log.Warn("read where a clarification stands", "decision_id", id, "err", err)
		}
		return sit, false
	}
	return sit, true
}

// askNew asks the first question about a decision that just became
// ambiguous.
func (c *clarifier) askNew(ctx context.Context, id string) {
	defer c.s.lock("review:" + id)()
	sit, ok := c.situation(ctx, id)
	if !ok {
		return
	}
	step := clarification.Next(sit, c.clar.Options(), c.s.opts.Now())
	if step.Action != clarification.AskFirst {
		return
	}
	if err := c.ask(ctx, sit, step); err != nil && !errors.Is(err, errAskedElsewhere) {
		c.s.log.Warn("ask for clarification in Slack; the scheduler retries", "decision_id", id, "err", errText(err))
	}
}

// scanAll is the clarification scheduler: it acts on each decision
// waiting for clarification as clarification.Next says, after looking
// for replies missed while precept was down.
func (c *clarifier) scanAll(ctx context.Context) {
	items, err := c.clar.Pending(ctx)
	if err != nil {
		if ctx.Err() == nil {
			c.s.log.Warn("list needs-review items", "err", err)
		}
		return
	}
	for _, r := range items {
		if ctx.Err() != nil {
			return
		}
		c.scanOne(ctx, r.DecisionID)
	}
}

func (c *clarifier) scanOne(ctx context.Context, id string) {
	defer c.s.lock("review:" + id)()
	sit, ok := c.situation(ctx, id)
	if !ok {
		return
	}
	step := clarification.Next(sit, c.clar.Options(), c.s.opts.Now())
	if step.Stale && c.recoverReplies(ctx, sit) {
		return
	}
	switch step.Action {
	case clarification.AskFirst, clarification.Remind:
		if err := c.ask(ctx, sit, step); err != nil && !errors.Is(err, errAskedElsewhere) {
			what := "ask for clarification in Slack; will retry"
			if step.Action == clarification.Remind {
				what = "remind a reviewer in Slack; will retry"
			}
			c.s.log.Warn(what, "decision_id", id, "err", errText(err))
		}
	case clarification.LeaveForHumanReview:
		if _, err := c.clar.Leave(ctx, id); err != nil {
			c.s.log.Warn("leave a decision for human review", "decision_id", id, "err", err)
			return
		}
		c.s.log.Info("clarification unanswered; decision left for human review", "decision_id", id, "attempts", step.Attempt)
	}
}

// recoverReplies reads the thread for replies no replica recorded (Slack
// gives up on an event after a few retries) and applies them. It
// reports whether it applied any.
func (c *clarifier) recoverReplies(ctx context.Context, sit clarification.Situation) bool {
	id := sit.Review.DecisionID
	channel, root, ok := strings.Cut(sit.Record.Thread, ":")
	if !ok {
		return false
	}
	msgs, _, _, err := c.s.api.GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{ChannelID: channel, Timestamp: root, Limit: 200})
	c.s.metrics.call("conversations.replies", err)
	if err != nil {
		c.s.log.Warn("read a clarification thread", "decision_id", id, "err", errText(err))
		return false
	}
	applied := false
	for _, m := range msgs {
		if m.Timestamp == root || m.BotID != "" || m.User == "" || (m.SubType != "" && m.SubType != "thread_broadcast") {
			continue
		}
		if !c.mayClarify(sit.Review, m.User) {
			// Told when their event arrived; not again on every scan.
			continue
		}
		if c.applyReply(ctx, id, channel, root, m.Timestamp, m.User, m.Text) {
			applied = true
		}
	}
	return applied
}

// threadGrace is how long a reply in a thread no record names waits
// before the thread is looked up once more: the question that opened it
// may just have been posted, and not recorded yet.
const threadGrace = time.Second

// threadReply handles a person's reply in a thread: if the thread is a
// clarification precept started, the reply is applied.
func (c *clarifier) threadReply(ctx context.Context, channel, root, ts, user, text string) {
	thread := channel + ":" + root
	id, ok, err := c.clar.Owner(ctx, thread)
	if err == nil && !ok {
		select {
		case <-ctx.Done():
			return
		case <-time.After(threadGrace):
		}
		id, ok, err = c.clar.Owner(ctx, thread)
	}
	if err != nil {
		c.s.log.Warn("look up a clarification thread", "err", err)
		return
	}
	if !ok {
		return
	}
	defer c.s.lock("review:" + id)()
	c.applyReply(ctx, id, channel, root, ts, user, text)
}

// applyReply records one reply to a decision — once, whichever replica
// and path (event or recovery) sees it first — and answers it as the
// clarification domain says: with thanks when the decision is clear now,
// with a question for what is still missing while attempts remain, with
// a note that the decision is left for human review when they do not,
// and with only a reaction once it is (absorb mode). The caller holds the
// decision's lock. It reports whether the reply was recorded.
func (c *clarifier) applyReply(ctx context.Context, id, channel, root, ts, user, text string) bool {
	sit, ok := c.situation(ctx, id)
	if !ok || sit.Status() == evaluator.Resolved {
		return false
	}
	if !c.mayClarify(sit.Review, user) {
		c.s.log.Info("clarifying reply from someone else ignored", "decision_id", id, "slack_user", user)
		c.s.ephemeral(ctx, channel, user, root, "Only the reviewer of this decision (or a precept approver) can clarify it; your reply was not added.")
		return false
	}
	reply := cleanReply(text)
	if reply == "" {
		return false
	}
	step, sit, recorded, err := c.clar.Reply(ctx, id, feedbackstore.Reply{TS: ts, User: user, Text: reply, At: c.s.opts.Now().UTC()})
	switch {
	case err != nil && !recorded:
		c.s.log.Warn("record a clarifying reply", "decision_id", id, "err", err)
		return false
	case err != nil:
		// The reply is in the feedback store; the next scan follows up.
		c.s.log.Warn("apply a clarifying reply; the scheduler retries", "decision_id", id, "err", err)
		return true
	case !recorded:
		return false
	}
	c.answer(ctx, sit, step, channel, root, ts, user)
	return true
}

// answer does what follows a recorded reply.
func (c *clarifier) answer(ctx context.Context, sit clarification.Situation, step clarification.Step, channel, root, ts, user string) {
	id := sit.Review.DecisionID
	switch step.Action {
	case clarification.Absorb:
		c.s.log.Info("reply absorbed for human review", "decision_id", id, "replies", len(sit.Review.Replies))
		err := c.s.api.AddReactionContext(ctx, "inbox_tray", slack.NewRefToMessage(channel, ts))
		c.s.metrics.call("reactions.add", err)
		if err != nil {
			c.s.log.Debug("acknowledge an absorbed reply", "decision_id", id, "err", errText(err))
		}
	case clarification.Thank:
		if err := c.clar.Resolve(ctx, id); err != nil {
			c.s.log.Warn("record a resolved clarification", "decision_id", id, "err", err)
		}
		msg := fmt.Sprintf("Thanks <@%s> — that is clear now.", user)
		if ev, err := c.clar.Evaluation(ctx, id); err == nil {
			msg += fmt.Sprintf(" Decision %s is classified *%s*.", code(id), escape(string(ev.Class)))
		}
		c.threadPost(ctx, channel, root, msg)
		c.s.log.Info("clarification resolved an ambiguous decision", "decision_id", id, "replies", len(sit.Review.Replies))
	case clarification.FollowUp:
		if err := c.ask(ctx, sit, step); err != nil && !errors.Is(err, errAskedElsewhere) {
			c.s.log.Warn("ask a follow-up question in Slack; the scheduler retries", "decision_id", id, "err", errText(err))
		}
	case clarification.LeaveForHumanReview:
		left, err := c.clar.Leave(ctx, id)
		if err != nil {
			c.s.log.Warn("leave a decision for human review", "decision_id", id, "err", err)
			return
		}
		c.s.log.Info("clarification attempts used up; decision left for human review", "decision_id", id, "attempts", step.Attempt)
		if left {
			c.threadPost(ctx, channel, root, fmt.Sprintf("Thanks. After %d questions decision %s still lacks %s, so it is left for human review. Further replies here are kept with it.",
				step.Attempt, code(id), strings.Join(plainMissing(sit.Review.Missing), ", ")))
		}
	}
}

// ask posts a clarification question and records it: the first one
// opens a thread in the channel (mentioning the reviewer when
// slack.reviewers maps them); follow-ups and reminders go to that thread,
// reminders also to the channel. Each attempt is claimed in the Store
// for RepostGuard, so one replica posts it. Where it was posted is kept
// in the Store too: when recording it failed, the next attempt records
// that question, in its thread, instead of asking again.
func (c *clarifier) ask(ctx context.Context, sit clarification.Situation, step clarification.Step) error {
	r, n := sit.Review, step.Attempt
	if thread, ok, err := c.s.store.Get(ctx, keyAsked(r.DecisionID, n)); err != nil {
		return err
	} else if ok {
		return c.record(ctx, r, thread, step)
	}
	guard := c.clar.Options().RepostGuard
	claimed, err := c.s.store.Claim(ctx, keyAsk(r.DecisionID, n), guard)
	if err != nil {
		return err
	}
	if !claimed {
		return errAskedElsewhere
	}
	text := c.question(r, n, step.Action)
	thread := sit.Record.Thread
	if thread == "" {
		var ch, ts string
		ch, ts, err = c.s.api.PostMessageContext(ctx, c.s.opts.Channel, slack.MsgOptionText(text, false))
		thread = ch + ":" + ts
	} else {
		channel, root, _ := strings.Cut(thread, ":")
		opts := []slack.MsgOption{slack.MsgOptionText(text, false), slack.MsgOptionTS(root)}
		if step.Action == clarification.Remind {
			opts = append(opts, slack.MsgOptionBroadcast())
		}
		_, _, err = c.s.api.PostMessageContext(ctx, channel, opts...)
	}
	c.s.metrics.call("chat.postMessage", err)
	if err != nil {
		if rerr := c.s.store.Release(ctx, keyAsk(r.DecisionID, n)); rerr != nil {
			c.s.log.Warn("release a question claim", "decision_id", r.DecisionID, "err", rerr)
		}
		return err
	}
	if err := c.s.store.Set(context.WithoutCancel(ctx), keyAsked(r.DecisionID, n), thread, guard); err != nil {
		c.s.log.Warn("remember where a question was posted", "decision_id", r.DecisionID, "err", err)
	}
	return c.record(ctx, r, thread, step)
}

// record records a question posted in thread, retrying briefly; a
// question still unrecorded is recorded by the next scan (ask).
func (c *clarifier) record(ctx context.Context, r evaluator.NeedsReview, thread string, step clarification.Step) error {
	q := feedbackstore.Question{Attempt: step.Attempt, Kind: step.Action.Kind(), AskedAt: c.s.opts.Now().UTC()}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	var err error
	for try := 1; try <= recordTries; try++ {
		if _, err = c.clar.Asked(rctx, r.DecisionID, thread, q); err == nil {
			c.s.log.Info("clarification asked in Slack", "decision_id", r.DecisionID, "attempt", step.Attempt, "missing", r.Missing, "thread", thread)
			return nil
		}
		if try < recordTries {
			select {
			case <-rctx.Done():
			case <-time.After(time.Duration(try) * 100 * time.Millisecond):
			}
		}
	}
	return fmt.Errorf("record the question (the next scan records it): %w", err)
}

// mayClarify reports whether a Slack user may answer for a decision: its
// reviewer (or a Slack user who may decide on proposals, see decider)
// when slack.reviewers maps the reviewer, anyone in the thread otherwise.
func (c *clarifier) mayClarify(r evaluator.NeedsReview, user string) bool {
	if user == "" {
		return false
	}
	if u, ok := c.s.opts.Reviewers[r.ReviewerID]; ok && u != "" {
		_, why := c.s.decider(user, "reply")
		return user == u || why == ""
	}
	return true
}

func (c *clarifier) threadPost(ctx context.Context, channel, root, text string) {
	_, _, err := c.s.api.PostMessageContext(ctx, channel, slack.MsgOptionText(text, false), slack.MsgOptionTS(root))
	c.s.metrics.call("chat.postMessage", err)
	if err != nil {
		c.s.log.Warn("post in a clarification thread", "channel", channel, "err", errText(err))
	}
}
