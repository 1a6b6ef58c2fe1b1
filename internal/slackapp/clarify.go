package slackapp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/slack-go/slack"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/evaluator"
)

// maxReplyChars bounds a clarifying reply.
const maxReplyChars = 4000

// clarifier is the clarification loop's queue: decisions that just
// became ambiguous, and whether the scheduler should scan now.
type clarifier struct {
	mu      sync.Mutex
	pending map[string]bool
	scan    bool
	wake    chan struct{}
}

func (c *clarifier) init() {
	c.pending = map[string]bool{}
	c.wake = make(chan struct{}, 1)
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

// conversation is where a clarification stands in Slack. The Store holds
// it so that every replica continues the same conversation; each replica
// mirrors it into its evaluator's needs-review record.
type conversation struct {
	// Thread is "channel:ts" of the thread's first message.
	Thread   string    `json:"thread"`
	Attempts int       `json:"attempts"`
	AskedAt  time.Time `json:"asked_at"`
	Status   string    `json:"status"`
}

// replyEntry is one reply in a decision's shared reply log. Every
// replica applies the log in order to its own evaluator, so all of them
// see the same clarified decision; Absorb says the reply came after the
// decision was left for human review and is only kept.
type replyEntry struct {
	TS     string `json:"ts"`
	User   string `json:"user"`
	Text   string `json:"text"`
	Absorb bool   `json:"absorb,omitempty"`
}

type askKind int

const (
	askFirst askKind = iota
	askFollowUp
	askReminder
)

var errAskedElsewhere = errors.New("another replica is asking this question")

// runClarifier asks about decisions as they become ambiguous and scans
// the needs-review queue every ScanInterval, until ctx is done.
func (s *Service) runClarifier(ctx context.Context) {
	if s.reviews == nil {
		<-ctx.Done()
		return
	}
	tick := time.NewTicker(s.opts.Clarification.ScanInterval)
	defer tick.Stop()
	s.clarify.scanSoon()
	for {
		ids, scan := s.clarify.take()
		if s.Features().Clarification {
			for _, id := range ids {
				if ctx.Err() != nil {
					return
				}
				s.askNew(ctx, id)
			}
			if scan {
				s.scan(ctx)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-s.clarify.wake:
		case <-tick.C:
			s.clarify.scanSoon()
		}
	}
}

// askNew asks the first question about a decision that just became
// ambiguous.
func (s *Service) askNew(ctx context.Context, id string) {
	defer s.lock("review:" + id)()
	r, err := s.reviews.Review(ctx, id)
	if err != nil {
		if precept.ErrorCode(err) != precept.NotFound {
			s.log.Warn("read a needs-review item", "decision_id", id, "err", err)
		}
		return
	}
	if r.Status != evaluator.PendingClarification {
		return
	}
	c, err := s.conversation(ctx, r)
	if err != nil {
		s.log.Warn("read a clarification conversation", "decision_id", id, "err", err)
		return
	}
	if c.Thread != "" {
		s.mirror(ctx, r, c)
		return
	}
	if _, err := s.ask(ctx, r, c, askFirst); err != nil && !errors.Is(err, errAskedElsewhere) {
		s.log.Warn("ask for clarification in Slack; the scheduler retries", "decision_id", id, "err", errText(err))
	}
}

// scan is the clarification scheduler (seed 000 U13): for each decision
// pending clarification it applies replies other replicas received, asks
// the first question if none was asked, and for items without activity
// for StaleAfter recovers replies missed while precept was down, leaves
// the item for human review once MaxAttempts questions went unanswered,
// or asks again — never twice within RepostGuard.
func (s *Service) scan(ctx context.Context) {
	items, err := s.reviews.NeedsReview(ctx, "")
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("list needs-review items", "err", err)
		}
		return
	}
	for _, r := range items {
		if ctx.Err() != nil {
			return
		}
		s.scanOne(ctx, r.DecisionID)
	}
}

func (s *Service) scanOne(ctx context.Context, id string) {
	defer s.lock("review:" + id)()
	r, _, err := s.catchUp(ctx, id)
	if err != nil {
		s.log.Warn("apply shared clarification replies", "decision_id", id, "err", err)
		return
	}
	if r.Status == evaluator.Resolved {
		return
	}
	c, err := s.conversation(ctx, r)
	if err != nil {
		s.log.Warn("read a clarification conversation", "decision_id", id, "err", err)
		return
	}
	r = s.mirror(ctx, r, c)
	if r.Status != evaluator.PendingClarification {
		return
	}
	if c.Thread == "" {
		if _, err := s.ask(ctx, r, c, askFirst); err != nil && !errors.Is(err, errAskedElsewhere) {
			s.log.Warn("ask for clarification in Slack; will retry", "decision_id", id, "err", errText(err))
		}
		return
	}
	now := s.opts.Now()
	lastActivity := c.AskedAt
	if r.UpdatedAt.After(lastActivity) {
		lastActivity = r.UpdatedAt
	}
	cl := s.opts.Clarification
	if now.Sub(lastActivity) < cl.StaleAfter {
		return
	}
	if s.recoverReplies(ctx, id, c) {
		return
	}
	if c.Attempts >= cl.MaxAttempts {
		c.Status = evaluator.NeedsHumanReview
		if err := s.saveConversation(ctx, id, c); err != nil {
			s.log.Warn("leave a decision for human review", "decision_id", id, "err", err)
			return
		}
		s.log.Info("clarification unanswered; decision left for human review", "decision_id", id, "attempts", c.Attempts)
		return
	}
	if now.Sub(c.AskedAt) < cl.RepostGuard {
		return
	}
	if _, err := s.ask(ctx, r, c, askReminder); err != nil && !errors.Is(err, errAskedElsewhere) {
		s.log.Warn("remind a reviewer in Slack; will retry", "decision_id", id, "err", errText(err))
	}
}

// recoverReplies reads the thread for replies no replica applied (Slack
// gives up on an event after a few retries) and applies them. It
// reports whether it applied any.
func (s *Service) recoverReplies(ctx context.Context, id string, c conversation) bool {
	channel, root, ok := strings.Cut(c.Thread, ":")
	if !ok {
		return false
	}
	msgs, _, _, err := s.api.GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{ChannelID: channel, Timestamp: root, Limit: 200})
	s.metrics.call("conversations.replies", err)
	if err != nil {
		s.log.Warn("read a clarification thread", "decision_id", id, "err", errText(err))
		return false
	}
	applied := false
	for _, m := range msgs {
		if m.Timestamp == root || m.BotID != "" || m.User == "" || (m.SubType != "" && m.SubType != "thread_broadcast") {
			continue
		}
		if r, err := s.reviews.Review(ctx, id); err != nil || !s.mayClarify(r, m.User) {
			// Told when their event arrived; not again on every scan.
			continue
		}
		if s.applyReply(ctx, id, channel, root, m.Timestamp, m.User, m.Text) {
			applied = true
		}
	}
	return applied
}

// threadReply handles a person's reply in a thread: if the thread is a
// clarification precept started, the reply is applied.
func (s *Service) threadReply(ctx context.Context, channel, root, ts, user, text string) {
	id, ok := s.threadOwner(ctx, channel+":"+root)
	if !ok {
		return
	}
	defer s.lock("review:" + id)()
	s.applyReply(ctx, id, channel, root, ts, user, text)
}

// threadOwner finds the decision a thread asks about: in the Store, or
// in this replica's needs-review records when the Store lost it.
func (s *Service) threadOwner(ctx context.Context, thread string) (string, bool) {
	id, ok, err := s.store.Get(ctx, keyThread(thread))
	if err == nil && ok {
		return id, true
	}
	items, lerr := s.reviews.NeedsReview(ctx, "")
	if lerr != nil {
		s.log.Warn("look up a clarification thread", "err", errors.Join(err, lerr))
		return "", false
	}
	for _, r := range items {
		if r.Thread == thread {
			return r.DecisionID, true
		}
	}
	return "", false
}

// applyReply applies one reply to a decision — once, whichever replica
// and path (event or recovery) sees it first — and answers it: with
// thanks when the decision is clear now, with a question for what is
// still missing while attempts remain, with a note that the decision is
// left for human review when they do not, and with only a reaction once
// it is (absorb mode, seed 000 U15). The caller holds the decision's
// lock. It reports whether the reply was applied.
func (s *Service) applyReply(ctx context.Context, id, channel, root, ts, user, text string) bool {
	r, err := s.reviews.Review(ctx, id)
	if err != nil || r.Status == evaluator.Resolved {
		return false
	}
	c, err := s.conversation(ctx, r)
	if err != nil {
		s.log.Warn("read a clarification conversation", "decision_id", id, "err", err)
		return false
	}
	if !s.mayClarify(r, user) {
		s.log.Info("clarifying reply from someone else ignored", "decision_id", id, "slack_user", user)
		s.ephemeral(ctx, channel, user, root, "Only the reviewer of this decision (or a precept approver) can clarify it; your reply was not added.")
		return false
	}
	reply := cleanReply(text)
	if reply == "" {
		return false
	}
	fresh, err := s.store.Claim(ctx, keyReply(channel, ts), conversationTTL)
	if err != nil || !fresh {
		if err != nil {
			s.log.Warn("record a clarifying reply", "decision_id", id, "err", err)
		}
		return false
	}
	absorb := c.Status == evaluator.NeedsHumanReview || r.Status == evaluator.NeedsHumanReview
	entry, _ := json.Marshal(replyEntry{TS: ts, User: user, Text: reply, Absorb: absorb})
	if _, err := s.store.Append(ctx, keyReplies(id), string(entry), conversationTTL); err != nil {
		s.log.Warn("share a clarifying reply", "decision_id", id, "err", err)
		if rerr := s.store.Release(ctx, keyReply(channel, ts)); rerr != nil {
			s.log.Warn("release a reply claim", "decision_id", id, "err", rerr)
		}
		return false
	}
	r, ev, err := s.catchUp(ctx, id)
	if err != nil {
		// The reply is in the shared log; the next scan applies it.
		s.log.Warn("apply a clarifying reply; the scheduler retries", "decision_id", id, "err", err)
		return true
	}
	if absorb {
		s.log.Info("reply absorbed for human review", "decision_id", id, "replies", len(r.Replies))
		err := s.api.AddReactionContext(ctx, "inbox_tray", slack.NewRefToMessage(channel, ts))
		s.metrics.call("reactions.add", err)
		if err != nil {
			s.log.Debug("acknowledge an absorbed reply", "decision_id", id, "err", errText(err))
		}
		return true
	}
	switch {
	case r.Status == evaluator.Resolved:
		c.Status = evaluator.Resolved
		if err := s.saveConversation(ctx, id, c); err != nil {
			s.log.Warn("record a resolved clarification", "decision_id", id, "err", err)
		}
		msg := fmt.Sprintf("Thanks <@%s> — that is clear now.", user)
		if ev != nil {
			msg += fmt.Sprintf(" Decision %s is classified *%s*.", code(id), escape(string(ev.Class)))
		}
		s.threadPost(ctx, channel, root, msg)
		s.log.Info("clarification resolved an ambiguous decision", "decision_id", id, "replies", len(r.Replies))
	case c.Attempts < s.opts.Clarification.MaxAttempts:
		if _, err := s.ask(ctx, r, c, askFollowUp); err != nil && !errors.Is(err, errAskedElsewhere) {
			s.log.Warn("ask a follow-up question in Slack; the scheduler retries", "decision_id", id, "err", errText(err))
		}
	default:
		c.Status = evaluator.NeedsHumanReview
		if err := s.saveConversation(ctx, id, c); err != nil {
			s.log.Warn("leave a decision for human review", "decision_id", id, "err", err)
			return true
		}
		s.log.Info("clarification attempts used up; decision left for human review", "decision_id", id, "attempts", c.Attempts)
		if ok, err := s.store.Claim(ctx, keyFinal(id), conversationTTL); err == nil && ok {
			s.threadPost(ctx, channel, root, fmt.Sprintf("Thanks. After %d questions decision %s still lacks %s, so it is left for human review. Further replies here are kept with it.",
				c.Attempts, code(id), strings.Join(plainMissing(r.Missing), ", ")))
		}
	}
	return true
}

// catchUp applies, in order, the replies of a decision's shared log that
// this replica's evaluator has not seen yet. It returns the needs-review
// record after them and the last evaluation Clarify made, if any. The
// caller holds the decision's lock.
func (s *Service) catchUp(ctx context.Context, id string) (evaluator.NeedsReview, *evaluator.Evaluation, error) {
	r, err := s.reviews.Review(ctx, id)
	if err != nil {
		return r, nil, err
	}
	raw, err := s.store.List(ctx, keyReplies(id), len(r.Replies))
	if err != nil {
		return r, nil, err
	}
	var last *evaluator.Evaluation
	for _, item := range raw {
		if r.Status == evaluator.Resolved {
			break
		}
		var e replyEntry
		if err := json.Unmarshal([]byte(item), &e); err != nil {
			return r, last, fmt.Errorf("decode a shared reply of %s: %w", id, err)
		}
		if e.Absorb {
			r.Replies = append(r.Replies, e.Text)
			r.UpdatedAt = s.opts.Now().UTC()
			if err := s.reviews.UpdateReview(ctx, r); err != nil {
				return r, last, err
			}
			continue
		}
		ev, next, err := s.reviews.Clarify(ctx, id, e.Text)
		if err != nil {
			return r, last, fmt.Errorf("clarify %s: %w", id, err)
		}
		r, last = next, &ev
	}
	return r, last, nil
}

// conversation returns where a decision's clarification stands: as the
// Store has it, else as this replica's record has it.
func (s *Service) conversation(ctx context.Context, r evaluator.NeedsReview) (conversation, error) {
	v, ok, err := s.store.Get(ctx, keyConversation(r.DecisionID))
	if err != nil {
		return conversation{}, err
	}
	if ok {
		var c conversation
		if err := json.Unmarshal([]byte(v), &c); err == nil {
			return c, nil
		}
	}
	return conversation{Thread: r.Thread, Attempts: r.Attempts, AskedAt: r.AskedAt, Status: r.Status}, nil
}

// saveConversation records a conversation in the Store and mirrors it
// into this replica's needs-review record.
func (s *Service) saveConversation(ctx context.Context, id string, c conversation) error {
	b, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("encode conversation: %w", err)
	}
	if err := s.store.Set(ctx, keyConversation(id), string(b), conversationTTL); err != nil {
		return err
	}
	if c.Thread != "" {
		if err := s.store.Set(ctx, keyThread(c.Thread), id, conversationTTL); err != nil {
			return err
		}
	}
	r, err := s.reviews.Review(ctx, id)
	if err != nil {
		return err
	}
	s.mirror(ctx, r, c)
	return nil
}

// mirror copies a conversation's state into this replica's needs-review
// record, so the API and CLI show it. A resolved record stays resolved.
func (s *Service) mirror(ctx context.Context, r evaluator.NeedsReview, c conversation) evaluator.NeedsReview {
	if r.Status == evaluator.Resolved {
		return r
	}
	next := r
	next.Thread, next.Attempts, next.AskedAt = c.Thread, c.Attempts, c.AskedAt
	if c.Status == evaluator.NeedsHumanReview {
		next.Status = c.Status
	}
	if next.Thread == r.Thread && next.Attempts == r.Attempts && next.AskedAt.Equal(r.AskedAt) && next.Status == r.Status {
		return r
	}
	if err := s.reviews.UpdateReview(ctx, next); err != nil {
		s.log.Warn("record a clarification on its needs-review item", "decision_id", r.DecisionID, "err", err)
		return r
	}
	return next
}

// ask posts a clarification question: the first one opens a thread in
// the channel (mentioning the reviewer when slack.reviewers maps them);
// follow-ups and reminders go to that thread, reminders also to the
// channel. Each attempt is claimed in the Store, so one replica posts it.
func (s *Service) ask(ctx context.Context, r evaluator.NeedsReview, c conversation, kind askKind) (conversation, error) {
	n := c.Attempts + 1
	claimed, err := s.store.Claim(ctx, keyAsk(r.DecisionID, n), s.opts.Clarification.RepostGuard)
	if err != nil {
		return c, err
	}
	if !claimed {
		return c, errAskedElsewhere
	}
	text := s.question(r, n, kind)
	var ch, ts string
	if c.Thread == "" {
		ch, ts, err = s.api.PostMessageContext(ctx, s.opts.Channel, slack.MsgOptionText(text, false))
	} else {
		channel, root, _ := strings.Cut(c.Thread, ":")
		opts := []slack.MsgOption{slack.MsgOptionText(text, false), slack.MsgOptionTS(root)}
		if kind == askReminder {
			opts = append(opts, slack.MsgOptionBroadcast())
		}
		_, _, err = s.api.PostMessageContext(ctx, channel, opts...)
	}
	s.metrics.call("chat.postMessage", err)
	if err != nil {
		if rerr := s.store.Release(ctx, keyAsk(r.DecisionID, n)); rerr != nil {
			s.log.Warn("release a question claim", "decision_id", r.DecisionID, "err", rerr)
		}
		return c, err
	}
	if c.Thread == "" {
		c.Thread = ch + ":" + ts
	}
	c.Attempts, c.AskedAt, c.Status = n, s.opts.Now().UTC(), evaluator.PendingClarification
	if err := s.saveConversation(ctx, r.DecisionID, c); err != nil {
		return c, err
	}
	s.log.Info("clarification asked in Slack", "decision_id", r.DecisionID, "attempt", n, "missing", r.Missing, "thread", c.Thread)
	return c, nil
}

// question is the text of a clarification question, listing the missing
// rubric attributes in plain words.
func (s *Service) question(r evaluator.NeedsReview, n int, kind askKind) string {
	var missing strings.Builder
	for _, m := range plainMissing(r.Missing) {
		missing.WriteString("\n• " + m)
	}
	of := fmt.Sprintf("_Question %d of %d._", n, s.opts.Clarification.MaxAttempts)
	switch kind {
	case askFollowUp:
		return fmt.Sprintf("Thanks. It is still unclear:%s\nCould you add that? %s", missing.String(), of)
	case askReminder:
		return fmt.Sprintf("%s, a reminder: decision %s still needs%s\nPlease reply in this thread. %s", s.reviewerRef(r), code(r.DecisionID), missing.String(), of)
	}
	return fmt.Sprintf("%s, precept could not learn from your review of decision %s (agent %s):\n%s\nCould you reply in this thread with%s\n%s",
		s.reviewerRef(r), code(r.DecisionID), code(r.Agent), quote(clip(r.Comment, 500)), missing.String(), of)
}

// reviewerRef mentions the reviewer when slack.reviewers maps them.
func (s *Service) reviewerRef(r evaluator.NeedsReview) string {
	if u := s.opts.Reviewers[r.ReviewerID]; validSlackID(u) {
		return "<@" + u + ">"
	}
	return "Reviewer " + code(r.ReviewerID)
}

// mayClarify reports whether a Slack user may answer for a decision: its
// reviewer (or a mapped precept user) when slack.reviewers maps the
// reviewer, anyone in the thread otherwise.
func (s *Service) mayClarify(r evaluator.NeedsReview, user string) bool {
	if user == "" {
		return false
	}
	if u, ok := s.opts.Reviewers[r.ReviewerID]; ok && u != "" {
		return user == u || s.opts.Users[user] != ""
	}
	return true
}

func (s *Service) threadPost(ctx context.Context, channel, root, text string) {
	_, _, err := s.api.PostMessageContext(ctx, channel, slack.MsgOptionText(text, false), slack.MsgOptionTS(root))
	s.metrics.call("chat.postMessage", err)
	if err != nil {
		s.log.Warn("post in a clarification thread", "channel", channel, "err", errText(err))
	}
}

// plainWords names the clarity rubric's attributes for reviewers.
var plainWords = map[string]string{
	"what_was_wrong":    "what was wrong with the output",
	"where":             "where the problem is (file, function, section or step)",
	"why":               "why it matters",
	"desired_behaviour": "what the agent should have done instead",
}

func plainMissing(missing []string) []string {
	if len(missing) == 0 {
		missing = []string{"what_was_wrong", "where", "why", "desired_behaviour"}
	}
	out := make([]string, len(missing))
	for i, m := range missing {
		if w, ok := plainWords[m]; ok {
			out[i] = w
		} else {
			out[i] = escape(strings.ReplaceAll(m, "_", " "))
		}
	}
	return out
}

// code renders an identifier as inline code, safely.
func code(s string) string {
	return "`" + strings.ReplaceAll(escape(clip(s, 100)), "`", "'") + "`"
}

// slackMarkup matches Slack's <…> markup in message text: mentions,
// channel references, links.
var slackMarkup = regexp.MustCompile(`<([^<>]*)>`)

// cleanReply turns a Slack message's text into plain text: mentions and
// links are written out, entities unescaped, length bounded.
func cleanReply(text string) string {
	text = slackMarkup.ReplaceAllStringFunc(text, func(m string) string {
		inner := m[1 : len(m)-1]
		target, label, hasLabel := strings.Cut(inner, "|")
		switch {
		case strings.HasPrefix(target, "@"), strings.HasPrefix(target, "!"):
			if hasLabel {
				return label
			}
			return target
		case strings.HasPrefix(target, "#"):
			if hasLabel {
				return "#" + label
			}
			return target
		case hasLabel:
			return label + " (" + target + ")"
		}
		return target
	})
	return clip(strings.TrimSpace(unescape(text)), maxReplyChars)
}
