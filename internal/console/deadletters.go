package console

import (
	"net/http"
	"strings"

	"connectrpc.com/connect"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
)

// deadLetterActions are what an admin may do with a dead letter, by the
// name in the confirmation page's address.
var deadLetterActions = map[string]struct {
	Verb, Done, Explain string
}{
	"replay": {"Replay", "replayed", "Its original fields are added to the decision stream again, in your name, and the dead letter is removed; the audit stream records it. Replay once the cause is fixed, or it is dead-lettered again."},
	"drop":   {"Drop", "dropped", "It is removed from the dead-letter stream for good, in your name; the audit stream records it. The decision it carried is lost unless its producer sends it again."},
}

// deadLetterConfirm is the confirmation page of a replay or a drop.
type deadLetterConfirm struct {
	ID, Action, Verb, Explain string
}

// deadLetterConfirmPage asks an admin to confirm a replay or a drop.
func (c *Console) deadLetterConfirmPage(w http.ResponseWriter, r *http.Request, q *request) error {
	id, action := strings.TrimSpace(r.URL.Query().Get("id")), r.URL.Query().Get("action")
	a, ok := deadLetterActions[action]
	if !ok {
		return invalidArgument("action must be replay or drop")
	}
	if id == "" {
		return invalidArgument("name the dead letter (id)")
	}
	c.render(w, r, http.StatusOK, "deadletter", &view{Title: a.Verb + " dead letter " + id, Nav: "deadletters", q: q,
		Data: deadLetterConfirm{ID: id, Action: action, Verb: a.Verb, Explain: a.Explain}})
	return nil
}

// deadLetterAct replays or drops one dead letter through the RPC the CLI
// calls (`precept dlq replay|drop`), which checks the admin role again.
func (c *Console) deadLetterAct(w http.ResponseWriter, r *http.Request, q *request) error {
	action := r.PathValue("action")
	a, ok := deadLetterActions[action]
	if !ok {
		return notFound("no dead-letter action %q", clip(action))
	}
	ids := []string{strings.TrimSpace(r.PostForm.Get("id"))}
	var outs []*preceptv1.DeadLetterOutcome
	if action == "replay" {
		resp, err := c.rpc.feedback.ReplayDeadLetters(q.ctx, connect.NewRequest(&preceptv1.ReplayDeadLettersRequest{Ids: ids}))
		if err != nil {
			return err
		}
		outs = resp.Msg.GetOutcomes()
	} else {
		resp, err := c.rpc.feedback.DropDeadLetters(q.ctx, connect.NewRequest(&preceptv1.DropDeadLettersRequest{Ids: ids}))
		if err != nil {
			return err
		}
		outs = resp.Msg.GetOutcomes()
	}
	if len(outs) != 1 || !outs[0].GetDone() {
		msg := "the server gave no outcome"
		if len(outs) == 1 {
			msg = outs[0].GetError()
		}
		return newPageError(http.StatusConflict, "the dead letter was left as it was: %s", msg)
	}
	c.opts.Log.Info("console dead letter "+a.Done, "by", q.id.Name, "id", ids[0], "stream_id", outs[0].GetStreamId())
	http.Redirect(w, r, Prefix+"deadletters?done="+a.Done, http.StatusSeeOther)
	return nil
}
