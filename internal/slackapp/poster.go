package slackapp

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/slack-go/slack"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/rules"
	"github.com/precept-dev/precept/rules/rulefmt"
)

// poster is the work queue of proposal messages: proposals whose message
// should be posted or updated (dirty), whether every proposal should be
// looked at (full), failed posts waiting for their retry, and what each
// message shows now.
type poster struct {
	mu       sync.Mutex
	dirty    map[string]bool
	full     bool
	retries  map[string]retryState
	rendered map[string]string
	wake     chan struct{}
}

type retryState struct {
	attempts int
	due      time.Time
}

func (p *poster) init() {
	p.dirty = map[string]bool{}
	p.retries = map[string]retryState{}
	p.rendered = map[string]string{}
	p.wake = make(chan struct{}, 1)
}

func (p *poster) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// markDirty asks for a proposal's message to be posted or updated soon.
func (p *poster) markDirty(id string) {
	p.mu.Lock()
	p.dirty[id] = true
	p.mu.Unlock()
	p.signal()
}

// refresh asks for a proposal's message to be sent again even if precept
// believes Slack shows it already (a click came from a stale message).
func (p *poster) refresh(id string) {
	p.mu.Lock()
	delete(p.rendered, id)
	p.dirty[id] = true
	p.mu.Unlock()
	p.signal()
}

// reconcileSoon asks for every proposal to be looked at.
func (p *poster) reconcileSoon() {
	p.mu.Lock()
	p.full = true
	p.mu.Unlock()
	p.signal()
}

// take returns the proposals to work on now: the dirty ones and those
// whose retry is due.
func (p *poster) take(now time.Time) ([]string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ids := make([]string, 0, len(p.dirty))
	for id := range p.dirty {
		ids = append(ids, id)
	}
	for id, r := range p.retries {
		if !r.due.After(now) && !p.dirty[id] {
			ids = append(ids, id)
		}
	}
	clear(p.dirty)
	full := p.full
	p.full = false
	slices.Sort(ids)
	return ids, full
}

// nextDue returns when the earliest retry is due.
func (p *poster) nextDue() (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var next time.Time
	for _, r := range p.retries {
		if next.IsZero() || r.due.Before(next) {
			next = r.due
		}
	}
	return next, !next.IsZero()
}

// attempt is the number of the next attempt for a proposal.
func (p *poster) attempt(id string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.retries[id].attempts + 1
}

// failed schedules the retry of a failed attempt with exponential backoff
// from 1 s, capped at limit, or later when Slack asked for that.
func (p *poster) failed(id string, now time.Time, attempt int, slackWait, limit time.Duration) time.Duration {
	delay := min(time.Second, limit)
	for i := 1; i < attempt && delay < limit; i++ {
		delay *= 2
	}
	delay = max(min(delay, limit), slackWait)
	p.mu.Lock()
	p.retries[id] = retryState{attempts: attempt, due: now.Add(delay)}
	p.mu.Unlock()
	return delay
}

// done records that Slack shows fp for a proposal.
func (p *poster) done(id, fp string) {
	p.mu.Lock()
	delete(p.retries, id)
	if fp == "" {
		delete(p.rendered, id)
	} else {
		p.rendered[id] = fp
	}
	p.mu.Unlock()
}

func (p *poster) shows(id string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rendered[id]
}

func (p *poster) retrying() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.retries)
}

// runPoster posts and updates proposal messages until ctx is done:
// whenever a proposal changes, when a retry is due, and every PostRetry
// for every proposal (which also catches what changed while precept was
// stopped, or while posting was off).
func (s *Service) runPoster(ctx context.Context) {
	s.post.reconcileSoon()
	tick := time.NewTicker(s.opts.PostRetry)
	defer tick.Stop()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		s.postRound(ctx)
		var due <-chan time.Time
		if next, ok := s.post.nextDue(); ok {
			timer.Reset(max(next.Sub(s.opts.Now()), 0))
			due = timer.C
		}
		select {
		case <-ctx.Done():
			return
		case <-s.post.wake:
		case <-tick.C:
			s.post.reconcileSoon()
		case <-due:
		}
	}
}

// postRound does the work that is due now.
func (s *Service) postRound(ctx context.Context) {
	ids, full := s.post.take(s.opts.Now())
	if !s.Features().Posting {
		// Nothing is lost: turning posting on reconciles every proposal.
		return
	}
	if full {
		list, err := s.rules.List(ctx, rules.ListFilter{})
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("list proposals for Slack; will retry", "err", err)
			}
		}
		posts, err := s.posts.all(ctx)
		if err != nil && ctx.Err() == nil {
			s.log.Warn("read where proposals were posted; will retry", "err", err)
		}
		for _, p := range list {
			post, ok := posts[p.ID]
			if needsWork(p, postOrNil(post, ok)) && !slices.Contains(ids, p.ID) {
				ids = append(ids, p.ID)
			}
		}
		defer s.remind.round(ctx, list, posts)
	}
	for _, id := range ids {
		if ctx.Err() != nil {
			return
		}
		s.syncProposal(ctx, id)
	}
	s.metrics.retrying.Set(float64(s.post.retrying()))
}

func postOrNil(post Post, ok bool) *Post {
	if !ok {
		return nil
	}
	return &post
}

// needsWork reports whether a proposal's message is missing or behind.
func needsWork(p rulefmt.Proposal, post *Post) bool {
	if !post.shown() {
		return p.Status == rulefmt.Pending
	}
	return post.PostedRevision != p.Revision || (post.LastError != "" && !permanentErrors[post.LastError])
}

// syncProposal posts a pending proposal that has no message yet, or
// brings its message up to date.
func (s *Service) syncProposal(ctx context.Context, id string) {
	defer s.lock("proposal:" + id)()
	p, err := s.rules.Get(ctx, id)
	var post *Post
	if err == nil {
		var found Post
		var ok bool
		found, ok, err = s.posts.Get(ctx, id)
		post = postOrNil(found, ok)
	}
	switch {
	case precept.ErrorCode(err) == precept.NotFound || precept.ErrorCode(err) == precept.Invalid:
		s.post.done(id, "")
		return
	case err != nil:
		if ctx.Err() == nil {
			d := s.post.failed(id, s.opts.Now(), s.post.attempt(id), 0, s.opts.PostRetry)
			s.log.Warn("read proposal for Slack; will retry", "proposal_id", id, "retry_in", d, "err", err)
		}
		return
	}
	blocks, text, err := proposalMessage(p, impactLine(s.opts.Impact, p))
	var fp string
	if err == nil {
		fp, err = fingerprint(blocks, text)
	}
	if err != nil {
		s.log.Error("render proposal for Slack", "proposal_id", id, "err", err)
		s.post.done(id, "")
		return
	}
	if !post.shown() {
		if p.Status != rulefmt.Pending {
			s.post.done(id, "")
			return
		}
		adopted := s.adoptPost(ctx, id, post)
		if adopted == nil {
			s.postNew(ctx, p, post, blocks, text, fp)
			return
		}
		post = adopted
	}
	if s.post.shows(id) == fp && post.PostedRevision == p.Revision && post.LastError == "" {
		s.post.done(id, fp)
		return
	}
	s.updatePost(ctx, p, *post, blocks, text, fp)
}

// adoptPost returns the post of a proposal whose record does not say
// where it was posted but the Store does: another replica posted it (and
// its record has not reached this one yet), or this process stopped
// between posting and recording. It returns nil when there is none.
func (s *Service) adoptPost(ctx context.Context, id string, post *Post) *Post {
	v, ok, err := s.store.Get(ctx, keyPosted(id))
	if err != nil || !ok {
		return nil
	}
	ch, ts, ok := strings.Cut(v, " ")
	if !ok || ch == "" || ts == "" {
		return nil
	}
	adopted := Post{}
	if post != nil {
		adopted = *post
	}
	adopted.Channel, adopted.TS, adopted.Posted = ch, ts, true
	return &adopted
}

// postNew posts a proposal's first message and records where it went.
// prev is the proposal's record of earlier attempts, nil when none.
func (s *Service) postNew(ctx context.Context, p rulefmt.Proposal, prev *Post, blocks []slack.Block, text, fp string) {
	claimed, err := s.store.Claim(ctx, keyPostClaim(p.ID), 2*s.opts.PostRetry+time.Minute)
	if err != nil {
		s.recordFailure(ctx, p, prev, s.post.attempt(p.ID), err)
		return
	}
	if !claimed {
		// Another replica is posting it; look again later.
		s.post.failed(p.ID, s.opts.Now(), s.post.attempt(p.ID)-1, 0, s.opts.PostRetry)
		return
	}
	attempt := s.post.attempt(p.ID)
	ch, ts, err := s.api.PostMessageContext(ctx, s.opts.Channel, slack.MsgOptionBlocks(blocks...), slack.MsgOptionText(text, false))
	s.metrics.call("chat.postMessage", err)
	if err != nil {
		if rerr := s.store.Release(ctx, keyPostClaim(p.ID)); rerr != nil {
			s.log.Warn("release the post claim", "proposal_id", p.ID, "err", rerr)
		}
		s.recordFailure(ctx, p, prev, attempt, err)
		return
	}
	if err := s.store.Set(ctx, keyPosted(p.ID), ch+" "+ts, postedTTL); err != nil {
		s.log.Warn("share where a proposal was posted", "proposal_id", p.ID, "err", err)
	}
	post := Post{Channel: ch, TS: ts, Permalink: s.permalink(ctx, ch, ts), Posted: true, Attempts: attempt, PostedRevision: p.Revision}
	if err := s.posts.Set(ctx, p.ID, post); err != nil {
		// The Store remembers the post: the retry adopts it.
		d := s.post.failed(p.ID, s.opts.Now(), attempt, 0, s.opts.PostRetry)
		s.log.Warn("record the Slack post of a proposal; will retry", "proposal_id", p.ID, "retry_in", d, "err", err)
		return
	}
	s.post.done(p.ID, fp)
	s.log.Info("proposal posted to Slack", "proposal_id", p.ID, "channel", ch, "ts", ts, "revision", p.Revision, "attempts", attempt)
}

// updatePost replaces a proposal's message with its current state.
func (s *Service) updatePost(ctx context.Context, p rulefmt.Proposal, prev Post, blocks []slack.Block, text, fp string) {
	attempt := s.post.attempt(p.ID)
	_, _, _, err := s.api.UpdateMessageContext(ctx, prev.Channel, prev.TS, slack.MsgOptionBlocks(blocks...), slack.MsgOptionText(text, false))
	s.metrics.call("chat.update", err)
	if err != nil {
		if gone(err) {
			if p.Status == rulefmt.Pending {
				// Someone deleted the message: post it again, there is
				// nothing left to duplicate.
				s.log.Warn("a proposal's Slack message is gone; posting it again", "proposal_id", p.ID, "err", errText(err))
				for _, k := range []string{keyPosted(p.ID), keyPostClaim(p.ID)} {
					if rerr := s.store.Release(ctx, k); rerr != nil {
						s.log.Warn("forget a deleted post", "proposal_id", p.ID, "err", rerr)
					}
				}
				s.postNew(ctx, p, nil, blocks, text, fp)
				return
			}
			// A decided proposal whose message is gone: record why, and
			// stop trying for this revision.
			prev.Attempts, prev.LastError, prev.PostedRevision, prev.UpdatedAt = attempt, errText(err), p.Revision, time.Time{}
			if err := s.posts.Set(ctx, p.ID, prev); err != nil {
				s.log.Warn("record the Slack post of a proposal", "proposal_id", p.ID, "err", err)
			}
			s.post.done(p.ID, "")
			return
		}
		s.recordFailure(ctx, p, &prev, attempt, err)
		return
	}
	next := prev
	next.Posted, next.Attempts, next.LastError, next.PostedRevision = true, attempt, "", p.Revision
	if next.Permalink == "" {
		next.Permalink = s.permalink(ctx, next.Channel, next.TS)
	}
	if next.Channel != prev.Channel || next.TS != prev.TS || next.Permalink != prev.Permalink || next.Posted != prev.Posted ||
		next.LastError != prev.LastError || next.PostedRevision != prev.PostedRevision {
		next.UpdatedAt = time.Time{}
		if err := s.posts.Set(ctx, p.ID, next); err != nil {
			d := s.post.failed(p.ID, s.opts.Now(), attempt, 0, s.opts.PostRetry)
			s.log.Warn("record the Slack post of a proposal; will retry", "proposal_id", p.ID, "retry_in", d, "err", err)
			return
		}
	}
	s.post.done(p.ID, fp)
	s.log.Debug("proposal's Slack message updated", "proposal_id", p.ID, "revision", p.Revision, "status", p.Status)
}

// recordFailure records a failed post or update of a proposal (prev is
// its record so far, nil when none) and schedules its retry.
func (s *Service) recordFailure(ctx context.Context, p rulefmt.Proposal, prev *Post, attempt int, err error) {
	if ctx.Err() != nil {
		return
	}
	post := Post{Channel: s.opts.Channel}
	if prev != nil {
		post = *prev
	}
	post.Attempts, post.LastError, post.UpdatedAt = attempt, errText(err), time.Time{}
	if serr := s.posts.Set(ctx, p.ID, post); serr != nil {
		s.log.Warn("record a failed Slack post", "proposal_id", p.ID, "err", serr)
	}
	d := s.post.failed(p.ID, s.opts.Now(), attempt, retryAfter(err), s.opts.PostRetry)
	s.log.Warn("Slack post of a proposal failed; will retry", "proposal_id", p.ID, "attempt", attempt, "retry_in", d, "err", errText(err))
}

// permalink asks Slack for a message's permalink; it is only shown, so
// a failure leaves it empty.
func (s *Service) permalink(ctx context.Context, channel, ts string) string {
	link, err := s.api.GetPermalinkContext(ctx, &slack.PermalinkParameters{Channel: channel, Ts: ts})
	s.metrics.call("chat.getPermalink", err)
	if err != nil {
		s.log.Debug("get a Slack permalink", "channel", channel, "ts", ts, "err", errText(err))
		return ""
	}
	return link
}

// permanentErrors are Slack's answers that say a message can no longer
// be updated: retrying cannot help.
var permanentErrors = map[string]bool{
	"message_not_found": true, "cant_update_message": true, "channel_not_found": true, "is_archived": true, "edit_window_closed": true,
}

// gone reports whether Slack says a message can no longer be updated.
func gone(err error) bool {
	var se slack.SlackErrorResponse
	return errors.As(err, &se) && permanentErrors[se.Err]
}
