package slackapp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/slack-go/slack"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/rules"
	"github.com/precept-dev/precept/rules/rulefmt"
)

// maxRequestBody bounds what the Slack endpoints read; Slack's payloads
// are a few kilobytes.
const maxRequestBody = 1 << 20

// readVerified reads a request's body and verifies Slack's signature. On
// failure it has answered the request and returns false.
func (s *Service) readVerified(w http.ResponseWriter, r *http.Request, endpoint string) ([]byte, bool) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		s.refuse(w, endpoint, "method_not_allowed", http.StatusMethodNotAllowed, "POST only")
		return nil, false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			s.refuse(w, endpoint, "too_large", http.StatusRequestEntityTooLarge, "request body too large")
		} else {
			s.refuse(w, endpoint, "bad_request", http.StatusBadRequest, "cannot read the request body")
		}
		return nil, false
	}
	if err := s.verify.check(r.Context(), r.Header, body); err != nil {
		code, msg := refusal(err)
		outcome := "unauthorized"
		if code != http.StatusUnauthorized {
			outcome = "unavailable"
			s.log.Error("verify a Slack request", "endpoint", endpoint, "err", err)
		} else {
			s.log.Warn("Slack request refused", "endpoint", endpoint, "why", msg, "remote", r.RemoteAddr)
		}
		s.refuse(w, endpoint, outcome, code, msg)
		return nil, false
	}
	return body, true
}

func (s *Service) refuse(w http.ResponseWriter, endpoint, outcome string, code int, msg string) {
	s.metrics.requests.WithLabelValues(endpoint, outcome).Inc()
	http.Error(w, msg, code)
}

// ack answers a verified request with an empty 200: for a block action
// that acknowledges the click, for a view submission it closes the modal.
func (s *Service) ack(w http.ResponseWriter, endpoint, outcome string) {
	s.metrics.requests.WithLabelValues(endpoint, outcome).Inc()
	w.WriteHeader(http.StatusOK)
}

// Interactions returns the handler of Slack's interactivity requests
// (mount it at the app's Interactivity Request URL, /slack/interactions).
// It verifies the signature, refuses stale and replayed requests, parses
// the payload and answers within Slack's 3 s; approving, rejecting and
// updating the message happen after the answer.
func (s *Service) Interactions() http.Handler {
	return http.HandlerFunc(s.serveInteraction)
}

func (s *Service) serveInteraction(w http.ResponseWriter, r *http.Request) {
	const endpoint = "interactions"
	body, ok := s.readVerified(w, r, endpoint)
	if !ok {
		return
	}
	form, err := url.ParseQuery(string(body))
	if err != nil || form.Get("payload") == "" {
		s.refuse(w, endpoint, "bad_request", http.StatusBadRequest, "missing payload")
		return
	}
	var cb slack.InteractionCallback
	if err := json.Unmarshal([]byte(form.Get("payload")), &cb); err != nil {
		s.refuse(w, endpoint, "bad_request", http.StatusBadRequest, "malformed payload")
		return
	}
	switch cb.Type {
	case slack.InteractionTypeBlockActions:
		s.serveClick(w, cb)
	case slack.InteractionTypeViewSubmission:
		s.serveSubmission(w, cb)
	default:
		// Closed modals, shortcuts and the like need no answer.
		s.ack(w, endpoint, "ignored")
	}
}

// serveClick handles an Approve or Reject click: it checks the button,
// answers, then opens the note modal (or tells the user why not).
func (s *Service) serveClick(w http.ResponseWriter, cb slack.InteractionCallback) {
	const endpoint = "interactions"
	var act *slack.BlockAction
	for _, a := range cb.ActionCallback.BlockActions {
		if a != nil && a.BlockID == blockSuggestion && (a.ActionID == ActionMerge || a.ActionID == ActionKeepApart) {
			s.serveSuggestionClick(w, cb, a)
			return
		}
		if a != nil && a.BlockID == blockDecision {
			act = a
			break
		}
	}
	if act == nil || (act.ActionID != ActionApprove && act.ActionID != ActionReject) {
		s.refuse(w, endpoint, "unknown_action", http.StatusBadRequest, "unknown action")
		return
	}
	val, err := DecodeButtonValue(act.Value)
	if err != nil || val.Action != act.ActionID {
		s.refuse(w, endpoint, "bad_request", http.StatusBadRequest, "malformed button value")
		return
	}
	channel, msgTS := clickedMessage(cb)
	if !validSlackID(channel) || !validSlackID(cb.User.ID) || cb.TriggerID == "" {
		s.refuse(w, endpoint, "bad_request", http.StatusBadRequest, "payload lacks the user, channel or trigger")
		return
	}
	meta := noteMeta{ButtonValue: val, Channel: channel, MessageTS: msgTS}
	identity, why := s.decider(cb.User.ID, "click")
	if why != "" {
		s.ack(w, endpoint, "forbidden")
		s.log.Info("Slack click refused", "slack_user", cb.User.ID, "identity", identity.Name, "role", identity.Role, "proposal_id", val.ProposalID)
		s.async("refusal notice", func(ctx context.Context) { s.ephemeral(ctx, channel, cb.User.ID, "", why) })
		return
	}
	s.ack(w, endpoint, "ok")
	// views.open must use the trigger within 3 s of the click, so the
	// modal is opened at once, before queued work.
	s.urgent("open note modal", func(ctx context.Context) { s.openNote(ctx, cb.TriggerID, cb.User.ID, identity.Name, meta) })
}

// openNote checks that the click can still act — the proposal waits for
// decisions, the buttons are current, the user has not approved it
// already — and opens the note modal.
func (s *Service) openNote(ctx context.Context, trigger, user, identity string, meta noteMeta) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.AckTimeout)
	defer cancel()
	var shown *rulefmt.Proposal
	p, err := s.rules.Get(ctx, meta.ProposalID)
	switch {
	case err == nil:
		if why := refusalOf(p, meta.ButtonValue, identity); why != "" {
			s.post.refresh(p.ID)
			s.ephemeral(s.base, meta.Channel, user, "", why)
			return
		}
		shown = &p
	case precept.ErrorCode(err) == precept.NotFound:
		s.ephemeral(s.base, meta.Channel, user, "", fmt.Sprintf("Proposal `%s` does not exist (any more); nothing was changed.", meta.ProposalID))
		return
	default:
		// The submission checks again; do not lose the trigger.
		s.log.Warn("read proposal before opening the note modal", "proposal_id", meta.ProposalID, "err", err)
	}
	view, err := noteModal(meta, identity, shown)
	if err == nil {
		_, err = s.api.OpenViewContext(ctx, trigger, view)
	}
	s.metrics.call("views.open", err)
	if err != nil {
		s.log.Warn("open the note modal", "proposal_id", meta.ProposalID, "err", errText(err))
		s.ephemeral(s.base, meta.Channel, user, "", fmt.Sprintf("precept could not open the note dialog (%s); nothing was changed. Please click again.", errText(err)))
	}
}

// refusalOf says why a click or submission cannot act on p, or "".
func refusalOf(p rulefmt.Proposal, v ButtonValue, identity string) string {
	switch {
	case p.Status == rulefmt.Approved:
		return fmt.Sprintf("Proposal `%s` was already approved (%s); nothing was changed.", p.ID, approverNames(p))
	case p.Status == rulefmt.Rejected:
		who := "someone"
		if p.Rejection != nil {
			who = p.Rejection.Rejector
		}
		return fmt.Sprintf("Proposal `%s` was already rejected by %s; nothing was changed.", p.ID, escape(who))
	case p.Status != rulefmt.Pending:
		return fmt.Sprintf("Proposal `%s` is %s and takes no decisions; nothing was changed.", p.ID, strings.ToLower(string(p.Status)))
	case v.Revision > p.Revision:
		return fmt.Sprintf("These buttons carry revision %d of `%s`, which precept does not know (the latest is %d); nothing was changed.", v.Revision, p.ID, p.Revision)
	case v.Revision < p.ContentRevision:
		return fmt.Sprintf("These buttons are from revision %d of `%s`, but the proposal changed at revision %d. Nothing was changed; the message now shows the current proposal — read it and decide again.", v.Revision, p.ID, p.ContentRevision)
	case v.Action == ActionApprove && p.ApprovedBy(identity):
		return fmt.Sprintf("You (%s) already approved `%s`; an approver counts once. Nothing was changed.", escape(identity), p.ID)
	}
	return ""
}

func approverNames(p rulefmt.Proposal) string {
	names := make([]string, len(p.Approvals))
	for i, a := range p.Approvals {
		names[i] = escape(a.Approver)
	}
	if len(names) == 0 {
		return "in git"
	}
	return "by " + strings.Join(names, ", ")
}

// serveSubmission handles the note modal's submission: it closes the
// modal at once and routes the decision (approve, approve with note,
// reject, reject with note) after.
func (s *Service) serveSubmission(w http.ResponseWriter, cb slack.InteractionCallback) {
	const endpoint = "interactions"
	if cb.View.CallbackID != callbackNote {
		s.refuse(w, endpoint, "unknown_view", http.StatusBadRequest, "unknown view")
		return
	}
	meta, err := decodeNoteMeta(cb.View.PrivateMetadata)
	if err != nil || !validSlackID(cb.User.ID) {
		s.refuse(w, endpoint, "bad_request", http.StatusBadRequest, "malformed view metadata")
		return
	}
	note := submittedNote(cb.View)
	identity, why := s.decider(cb.User.ID, "decision")
	if why != "" {
		s.ack(w, endpoint, "forbidden")
		s.log.Info("Slack decision refused", "slack_user", cb.User.ID, "identity", identity.Name, "role", identity.Role, "proposal_id", meta.ProposalID)
		s.async("refusal notice", func(ctx context.Context) { s.ephemeral(ctx, meta.Channel, cb.User.ID, "", why) })
		return
	}
	s.ack(w, endpoint, "ok")
	s.async("decide", func(ctx context.Context) { s.decide(ctx, meta, note, cb.User.ID, identity.Name) })
}

// clickedMessage returns the channel and message a button was clicked
// in: the container's, else the payload's channel and message.
func clickedMessage(cb slack.InteractionCallback) (channel, ts string) {
	channel, ts = cb.Container.ChannelID, cb.Container.MessageTs
	if channel == "" {
		channel = cb.Channel.ID
	}
	if ts == "" {
		ts = cb.Message.Timestamp
	}
	return channel, ts
}

// DecisionRole is the role a Slack user's mapped identity needs to
// approve or reject a proposal: the role the API asks of ApproveRule and
// RejectRule, so Slack grants nobody more than their token would.
const DecisionRole = precept.RoleApprover

// decider returns the identity a Slack user decides as, and why they may
// not decide ("" when they may): they must be mapped in Options.Users to
// an identity whose role (Options.Roles) includes DecisionRole. what
// names what was not recorded ("click", "decision").
func (s *Service) decider(user, what string) (precept.Identity, string) {
	id, mapped := s.identityOf(user)
	if !mapped {
		return precept.Identity{}, fmt.Sprintf("You are not mapped to a precept approver, so precept did not record your %s. Ask an operator to add your Slack user to `slack.users`.", what)
	}
	if id.Allows(DecisionRole) {
		return id, ""
	}
	name := id.Name
	has := "has no precept role"
	if id.Role != precept.RoleNone {
		has = "has the " + id.Role.String() + " role"
	}
	return id, fmt.Sprintf("Your Slack user is mapped to the precept identity %s, which %s; approving and rejecting need the %s role, in Slack as over the API. precept did not record your %s. Ask an operator to make %s an approver.",
		escape(name), has, DecisionRole, what, escape(name))
}

// identityOf is the precept identity a Slack user acts as, with the role
// the API would give it; false when the user is not mapped.
func (s *Service) identityOf(user string) (precept.Identity, bool) {
	name, mapped := s.opts.Users[user]
	if !mapped {
		return precept.Identity{}, false
	}
	return precept.Identity{Name: name, Role: s.opts.Roles[name]}, true
}

// decide records a decision made in Slack through the rule manager, so
// the API's policy applies: distinct approvers, the approval count,
// safety floors and the approver list. Refusals reach the user as an
// ephemeral message; the message itself is updated through the manager's
// change hook.
func (s *Service) decide(ctx context.Context, meta noteMeta, note, user, identity string) {
	defer s.lock("decide:" + meta.ProposalID)()
	p, err := s.rules.Get(ctx, meta.ProposalID)
	if err != nil {
		s.log.Warn("read proposal for a Slack decision", "proposal_id", meta.ProposalID, "err", err)
		s.ephemeral(ctx, meta.Channel, user, "", fmt.Sprintf("precept could not record your decision on `%s`: %s.", meta.ProposalID, escape(precept.ErrorMessage(err))))
		return
	}
	if why := refusalOf(p, meta.ButtonValue, identity); why != "" {
		s.post.refresh(p.ID)
		s.ephemeral(ctx, meta.Channel, user, "", why)
		return
	}
	var after rulefmt.Proposal
	variant := meta.Action
	switch meta.Action {
	case ActionApprove:
		after, err = s.rules.Approve(ctx, rules.ApproveRequest{ProposalID: p.ID, By: identity, Note: note, Revision: meta.Revision, Via: rulefmt.ViaSlack})
	case ActionReject:
		reason := note
		if reason == "" {
			reason = noReasonText(identity)
		}
		after, err = s.rules.Reject(ctx, rules.RejectRequest{ProposalID: p.ID, By: identity, Reason: reason, Revision: meta.Revision, Via: rulefmt.ViaSlack})
	}
	if note != "" {
		variant += "-with-note"
	}
	if err != nil {
		code := precept.ErrorCode(err)
		if code == precept.Internal {
			s.log.Error("record a Slack decision", "proposal_id", p.ID, "variant", variant, "approver", identity, "err", err)
		} else {
			s.log.Info("Slack decision refused", "proposal_id", p.ID, "variant", variant, "approver", identity, "why", precept.ErrorMessage(err))
		}
		s.post.refresh(p.ID)
		s.ephemeral(ctx, meta.Channel, user, "", fmt.Sprintf("precept did not record your decision on `%s`: %s.", p.ID, escape(precept.ErrorMessage(err))))
		return
	}
	s.log.Info("Slack decision recorded", "proposal_id", p.ID, "variant", variant, "approver", identity, "status", after.Status)
	s.post.markDirty(p.ID)
	var confirm string
	switch {
	case meta.Action == ActionReject:
		confirm = fmt.Sprintf("You rejected `%s`.", p.ID)
	case after.Status == rulefmt.Approved:
		confirm = fmt.Sprintf("You approved `%s`; with %d/%d approvals it is approved.", p.ID, len(after.Approvals), max(after.Required, len(after.Approvals)))
	default:
		confirm = fmt.Sprintf("You approved `%s` (%d/%d approvals).", p.ID, len(after.Approvals), after.Required)
	}
	s.ephemeral(ctx, meta.Channel, user, "", confirm)
}

// ephemeral shows text to one user in a channel (or thread).
func (s *Service) ephemeral(ctx context.Context, channel, user, thread, text string) {
	opts := []slack.MsgOption{slack.MsgOptionText(text, false)}
	if thread != "" {
		opts = append(opts, slack.MsgOptionTS(thread))
	}
	_, err := s.api.PostEphemeralContext(ctx, channel, user, opts...)
	s.metrics.call("chat.postEphemeral", err)
	if err != nil {
		s.log.Warn("send an ephemeral Slack message", "channel", channel, "slack_user", user, "err", errText(err))
	}
}
