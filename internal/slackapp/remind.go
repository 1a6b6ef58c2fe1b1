package slackapp

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/precept-dev/precept/lib/text"
	"github.com/precept-dev/precept/rules"
	"github.com/precept-dev/precept/rules/rulefmt"
)

// keyRemind claims the reminder of one approval SLA period of a
// proposal, so that replicas post it once.
func keyRemind(id string, period int64) string { return fmt.Sprintf("remind:%d:%s", period, id) }

// remindRound re-posts, in its thread, every pending proposal that has
// waited past its approval deadline (Options.ApprovalSLA) and was not yet
// reminded in its current SLA period (docs/lifecycle.md, "Approval
// deadlines"). The poster calls it with the proposals and post records it
// read for a full reconcile.
func (s *Service) remindRound(ctx context.Context, list []rulefmt.Proposal, posts map[string]Post) {
	if s.opts.ApprovalSLA <= 0 {
		return
	}
	now := s.opts.Now()
	for _, p := range list {
		if ctx.Err() != nil {
			return
		}
		period := rules.Overdue(p, now, s.opts.ApprovalSLA)
		post, ok := posts[p.ID]
		if period == 0 || !ok || !post.shown() || post.RemindedPeriod >= period {
			continue
		}
		s.remind(ctx, p.ID, period)
	}
}

// remind posts the reminder of one SLA period in a proposal's thread.
// Two records keep it to one per period: a claim in the Store, which
// replicas share and which holds while the post record is written, and
// the period recorded with the post in the rules repository, which
// outlives a Store that lost its keys (embedded Redis restarted).
func (s *Service) remind(ctx context.Context, id string, period int64) {
	defer s.lock("proposal:" + id)()
	p, err := s.rules.Get(ctx, id)
	if err != nil {
		return
	}
	post, ok, err := s.posts.Get(ctx, id)
	if err != nil || !ok || !post.shown() || post.RemindedPeriod >= period || rules.Overdue(p, s.opts.Now(), s.opts.ApprovalSLA) < period {
		return
	}
	key := keyRemind(id, period)
	claimed, err := s.store.Claim(ctx, key, s.opts.ApprovalSLA+time.Hour)
	if err != nil {
		s.log.Warn("claim an approval reminder; will retry", "proposal_id", id, "err", err)
		return
	}
	if !claimed {
		return
	}
	msg := s.reminderText(p, s.opts.Now())
	_, _, err = s.api.PostMessageContext(ctx, post.Channel, slack.MsgOptionTS(post.TS), slack.MsgOptionText(msg, false))
	s.metrics.call("chat.postMessage", err)
	if err != nil {
		// Nothing was posted: let the next round try again.
		if rerr := s.store.Release(ctx, key); rerr != nil {
			s.log.Warn("release an approval reminder claim", "proposal_id", id, "err", rerr)
		}
		s.log.Warn("post an approval reminder; will retry", "proposal_id", id, "err", errText(err))
		return
	}
	s.metrics.reminders.Inc()
	post.RemindedPeriod, post.UpdatedAt = period, time.Time{}
	if err := s.posts.Set(ctx, id, post); err != nil {
		// The claim still holds for this period.
		s.log.Warn("record an approval reminder", "proposal_id", id, "err", err)
	}
	s.log.Info("approval reminder posted", "proposal_id", id, "period", period, "waited", s.opts.Now().Sub(p.CreatedAt).Round(time.Minute))
}

// reminderText says how long a proposal has waited, against which
// deadline, how many approvals it still needs and, when rules.approvers
// names them, who may give them (mentioned when slack.users maps them).
func (s *Service) reminderText(p rulefmt.Proposal, now time.Time) string {
	n, who := rules.StillNeeded(p, s.opts.Approvers)
	var b strings.Builder
	fmt.Fprintf(&b, ":alarm_clock: Proposal %s has waited %s for approval, past its deadline of %s.",
		code(p.ID), waited(now.Sub(p.CreatedAt)), waited(s.opts.ApprovalSLA))
	fmt.Fprintf(&b, " It needs %d %s.", n, text.Plural(n, "more valid approval", "more valid approvals"))
	if len(who) > 0 {
		bySlack := map[string]string{}
		for _, u := range slices.Sorted(maps.Keys(s.opts.Users)) {
			if _, taken := bySlack[s.opts.Users[u]]; !taken && validSlackID(u) {
				bySlack[s.opts.Users[u]] = u
			}
		}
		names := make([]string, len(who))
		for i, id := range who {
			names[i] = code(id)
			if u, ok := bySlack[id]; ok {
				names[i] = "<@" + u + "> (" + escape(id) + ")"
			}
		}
		fmt.Fprintf(&b, " Who may approve: %s.", strings.Join(names, ", "))
	}
	return b.String()
}

// waited renders a duration in days and hours, as people read a wait.
func waited(d time.Duration) string {
	d = d.Round(time.Hour)
	days, hours := int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour)
	switch {
	case days == 0:
		return fmt.Sprintf("%dh", hours)
	case hours == 0:
		return fmt.Sprintf("%dd", days)
	}
	return fmt.Sprintf("%dd %dh", days, hours)
}
