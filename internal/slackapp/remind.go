package slackapp

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/slack-go/slack"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/lib/text"
	"github.com/precept-dev/precept/rules"
	"github.com/precept-dev/precept/rules/rulefmt"
)

// keyRemind claims the reminder of a proposal that follows the one
// posted at last (zero: the first), so that replicas post it once.
func keyRemind(id string, last time.Time) string {
	var at int64
	if !last.IsZero() {
		at = last.Unix()
	}
	return fmt.Sprintf("remind:%d:%s", at, id)
}

// reminders re-posts, in its thread, every pending proposal that has
// waited past its approval deadline (Options.ApprovalSLA), and again an
// SLA after each reminder (docs/lifecycle.md, "Approval deadlines").
type reminders struct {
	api   API
	rules Rules
	posts *Posts
	store Store
	// sla is the approval deadline; not positive: no reminders.
	sla time.Duration
	// approvers may approve: rules.approvers, or when that is empty the
	// identities slack.users maps with a role that allows deciding.
	// slackOf maps identities to a Slack user, to mention them.
	approvers []string
	slackOf   map[string]string
	now       func() time.Time
	log       *slog.Logger
	posted    prometheus.Counter
	// call counts a Slack API call; lock serialises work on one
	// proposal with the poster.
	call func(method string, err error)
	lock func(id string) func()
}

func newReminders(s *Service) *reminders {
	slackOf := map[string]string{}
	for _, u := range slices.Sorted(maps.Keys(s.opts.Users)) {
		if _, taken := slackOf[s.opts.Users[u]]; !taken && validSlackID(u) {
			slackOf[s.opts.Users[u]] = u
		}
	}
	approvers := s.opts.Approvers
	if len(approvers) == 0 {
		// Any approver may approve: name those who may in Slack, the
		// mapped identities whose role allows it.
		for _, name := range slices.Sorted(maps.Keys(slackOf)) {
			if (precept.Identity{Name: name, Role: s.opts.Roles[name]}).Allows(DecisionRole) {
				approvers = append(approvers, name)
			}
		}
	}
	return &reminders{
		api: s.api, rules: s.rules, posts: s.posts, store: s.store,
		sla: s.opts.ApprovalSLA, approvers: approvers, slackOf: slackOf,
		now: s.opts.Now, log: s.log, posted: s.metrics.reminders, call: s.metrics.call, lock: s.lock,
	}
}

// round reminds each proposal of list that is due (reminders.due). The
// poster calls it with the proposals and post records it read for a full
// reconcile.
func (r *reminders) round(ctx context.Context, list []rulefmt.Proposal, posts map[string]Post) {
	if r.sla <= 0 {
		return
	}
	for _, p := range list {
		if ctx.Err() != nil {
			return
		}
		if post, ok := posts[p.ID]; ok && r.due(p, &post) {
			r.remind(ctx, p.ID)
		}
	}
}

// due reports whether a proposal's reminder is due: it is overdue (still
// needing approvals), its message is shown, and it was not reminded
// within the last SLA. The wait since the last reminder is measured
// against the SLA in force now, so a raised SLA spaces the reminders
// out rather than stopping them.
func (r *reminders) due(p rulefmt.Proposal, post *Post) bool {
	now := r.now()
	if rules.Overdue(p, now, r.sla) == 0 || !post.shown() {
		return false
	}
	last := lastReminder(p, post, r.sla)
	return last.IsZero() || now.Sub(last) >= r.sla
}

// lastReminder returns when the last reminder was posted, zero when none
// was. A record from before reminded_at holds the last period reminded:
// its reminder is taken as posted at the start of that period under the
// SLA in force now.
func lastReminder(p rulefmt.Proposal, post *Post, sla time.Duration) time.Time {
	if !post.RemindedAt.IsZero() || post.RemindedPeriod <= 0 {
		return post.RemindedAt
	}
	return p.CreatedAt.Add(time.Duration(post.RemindedPeriod) * sla)
}

// remind posts a reminder in a proposal's thread. Two records keep it to
// one per SLA: a claim in the Store, named by the last reminder's time,
// which replicas share and which holds while the post record is written;
// and the time recorded with the post in the rules repository, which
// outlives a Store that lost its keys (embedded Redis restarted).
func (r *reminders) remind(ctx context.Context, id string) {
	defer r.lock("proposal:" + id)()
	p, err := r.rules.Get(ctx, id)
	if err != nil {
		return
	}
	post, ok, err := r.posts.Get(ctx, id)
	if err != nil || !ok || !r.due(p, &post) {
		return
	}
	key := keyRemind(id, lastReminder(p, &post, r.sla))
	claimed, err := r.store.Claim(ctx, key, r.sla+time.Hour)
	if err != nil {
		r.log.Warn("claim an approval reminder; will retry", "proposal_id", id, "err", err)
		return
	}
	if !claimed {
		return
	}
	_, _, err = r.api.PostMessageContext(ctx, post.Channel, slack.MsgOptionTS(post.TS), slack.MsgOptionText(r.text(p), false))
	r.call("chat.postMessage", err)
	if err != nil {
		// Nothing was posted: let the next round try again.
		if rerr := r.store.Release(ctx, key); rerr != nil {
			r.log.Warn("release an approval reminder claim", "proposal_id", id, "err", rerr)
		}
		r.log.Warn("post an approval reminder; will retry", "proposal_id", id, "err", errText(err))
		return
	}
	r.posted.Inc()
	post.RemindedAt, post.RemindedPeriod, post.UpdatedAt = r.now(), 0, time.Time{}
	if err := r.posts.Set(ctx, id, post); err != nil {
		// The claim still holds for this period.
		r.log.Warn("record an approval reminder", "proposal_id", id, "err", err)
	}
	r.log.Info("approval reminder posted", "proposal_id", id, "waited", r.now().Sub(p.CreatedAt).Round(time.Minute))
}

// text says how long a proposal has waited, against which deadline, how
// many approvals it still needs and who may give them (mentioned when
// slack.users maps them).
func (r *reminders) text(p rulefmt.Proposal) string {
	n, who := rules.StillNeeded(p, r.approvers)
	var b strings.Builder
	fmt.Fprintf(&b, ":alarm_clock: Proposal %s has waited %s for approval, past its deadline of %s.",
		code(p.ID), waited(r.now().Sub(p.CreatedAt)), waited(r.sla))
	fmt.Fprintf(&b, " It needs %d %s.", n, text.Plural(n, "more valid approval", "more valid approvals"))
	if len(who) > 0 {
		names := make([]string, len(who))
		for i, id := range who {
			names[i] = code(id)
			if u, ok := r.slackOf[id]; ok {
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
