package slackapp

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/slack-go/slack/slackevents"
)

// eventDedupWindow is how long an event id is remembered: Slack retries
// an event three times within about five minutes.
const eventDedupWindow = time.Hour

// Events returns the handler of Slack's Events API requests (mount it at
// the app's Event Subscriptions Request URL, /slack/events). It answers
// url_verification with the challenge — after verifying the signature
// like any request — and acknowledges event callbacks at once, handling
// them after; a retry of an event already handled is ignored.
func (s *Service) Events() http.Handler {
	return http.HandlerFunc(s.serveEvent)
}

func (s *Service) serveEvent(w http.ResponseWriter, r *http.Request) {
	const endpoint = "events"
	body, ok := s.readVerified(w, r, endpoint)
	if !ok {
		return
	}
	var outer struct {
		Type      string `json:"type"`
		Challenge string `json:"challenge"`
		EventID   string `json:"event_id"`
		Event     struct {
			Type string `json:"type"`
		} `json:"event"`
	}
	if err := json.Unmarshal(body, &outer); err != nil {
		s.refuse(w, endpoint, "bad_request", http.StatusBadRequest, "malformed event")
		return
	}
	switch outer.Type {
	case slackevents.URLVerification:
		if outer.Challenge == "" {
			s.refuse(w, endpoint, "bad_request", http.StatusBadRequest, "url_verification without a challenge")
			return
		}
		s.metrics.requests.WithLabelValues(endpoint, "url_verification").Inc()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]string{"challenge": outer.Challenge})
		return
	case slackevents.CallbackEvent:
	default:
		s.ack(w, endpoint, "ignored")
		return
	}
	if outer.EventID == "" {
		s.refuse(w, endpoint, "bad_request", http.StatusBadRequest, "event_callback without an event_id")
		return
	}
	if outer.Event.Type != string(slackevents.Message) {
		s.ack(w, endpoint, "ignored")
		return
	}
	parsed, err := slackevents.ParseEvent(json.RawMessage(body), slackevents.OptionNoVerifyToken())
	msg, isMsg := parsed.InnerEvent.Data.(*slackevents.MessageEvent)
	if err != nil || !isMsg {
		s.refuse(w, endpoint, "bad_request", http.StatusBadRequest, "malformed message event")
		return
	}
	if !s.Features().Clarification || s.clarify == nil || !humanThreadReply(msg) {
		s.ack(w, endpoint, "ignored")
		return
	}
	fresh, err := s.store.Claim(r.Context(), keyEvent(outer.EventID), eventDedupWindow)
	if err != nil {
		s.log.Error("record a Slack event", "err", err)
		s.refuse(w, endpoint, "unavailable", http.StatusServiceUnavailable, "cannot record the event now; retry")
		return
	}
	if !fresh {
		s.log.Debug("Slack event already handled", "event_id", outer.EventID, "retry", r.Header.Get(headerRetryNum))
		s.ack(w, endpoint, "duplicate")
		return
	}
	s.ack(w, endpoint, "ok")
	reply := *msg
	s.async("thread reply", func(ctx context.Context) {
		s.clarify.threadReply(ctx, reply.Channel, reply.ThreadTimeStamp, reply.TimeStamp, reply.User, reply.Text)
	})
}

// humanThreadReply reports whether a message event is a person's reply in
// a thread: not a top-level message, not a bot's (precept's own questions
// included), not an edit or deletion.
func humanThreadReply(m *slackevents.MessageEvent) bool {
	if m.ThreadTimeStamp == "" || m.ThreadTimeStamp == m.TimeStamp || m.BotID != "" || m.User == "" || m.Text == "" {
		return false
	}
	switch m.SubType {
	case "", "thread_broadcast":
	default:
		return false
	}
	return validSlackID(m.Channel) && validSlackID(m.User)
}
