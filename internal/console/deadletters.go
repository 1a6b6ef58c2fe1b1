package console

import (
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"connectrpc.com/connect"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
	"github.com/precept-dev/precept/gen/precept/v1/preceptv1connect"
)

// deadLetterActions are what an admin may do with a dead letter, by the
// name in the confirmation page's address.
var deadLetterActions = map[string]struct {
	Verb, Done, Explain string
}{
	"replay": {"Replay", "replayed", "Its original fields are added to the decision stream again, in your name, and the dead letter is removed; the audit stream records it. Replay once the cause is fixed, or it is dead-lettered again."},
	"drop":   {"Drop", "dropped", "It is removed from the dead-letter stream for good, in your name; the audit stream records it. The decision it carried is lost unless its producer sends it again."},
}

// deadLetterPages serve the dead-letter pages: the list anyone may read,
// and the replay and drop admins confirm.
type deadLetterPages struct {
	feedback preceptv1connect.FeedbackServiceClient
	log      *slog.Logger
	renderer
}

// deadLetterConfirm is the confirmation page of a replay or a drop.
type deadLetterConfirm struct {
	ID, Action, Verb, Explain string
}

// confirm asks an admin to confirm a replay or a drop.
func (p deadLetterPages) confirm(w http.ResponseWriter, r *http.Request, q *request) error {
	id, action := strings.TrimSpace(r.URL.Query().Get("id")), r.URL.Query().Get("action")
	a, ok := deadLetterActions[action]
	if !ok {
		return invalidArgument("action must be replay or drop")
	}
	if id == "" {
		return invalidArgument("name the dead letter (id)")
	}
	p.render(w, r, http.StatusOK, "deadletter", &view{Title: a.Verb + " dead letter " + id, Nav: "deadletters", q: q,
		Data: deadLetterConfirm{ID: id, Action: action, Verb: a.Verb, Explain: a.Explain}})
	return nil
}

// act replays or drops one dead letter through the RPC the CLI
// calls (`precept dlq replay|drop`), which checks the admin role again.
func (p deadLetterPages) act(w http.ResponseWriter, r *http.Request, q *request) error {
	action := r.PathValue("action")
	a, ok := deadLetterActions[action]
	if !ok {
		return notFound("no dead-letter action %q", clip(action))
	}
	ids := []string{strings.TrimSpace(r.PostForm.Get("id"))}
	var outs []*preceptv1.DeadLetterOutcome
	if action == "replay" {
		resp, err := p.feedback.ReplayDeadLetters(q.ctx, connect.NewRequest(&preceptv1.ReplayDeadLettersRequest{Ids: ids}))
		if err != nil {
			return err
		}
		outs = resp.Msg.GetOutcomes()
	} else {
		resp, err := p.feedback.DropDeadLetters(q.ctx, connect.NewRequest(&preceptv1.DropDeadLettersRequest{Ids: ids}))
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
	p.log.Info("console dead letter "+a.Done, "by", q.id.Name, "id", ids[0], "stream_id", outs[0].GetStreamId())
	http.Redirect(w, r, Prefix+"deadletters?done="+a.Done, http.StatusSeeOther)
	return nil
}

// Raw stream bytes are shown up to these lengths: text up to
// shownTextBytes, bytes that are not text as hex up to shownHexBytes.
const (
	shownTextBytes = 1024
	shownHexBytes  = 256
)

// shownBytes is a raw field value made safe to show: printable text with
// control characters escaped, or hex when the bytes are not UTF-8.
type shownBytes struct {
	Text   string
	Binary bool
	// More is how many bytes were left out.
	More int
}

func showBytes(b []byte) shownBytes {
	if !utf8.Valid(b) {
		n := min(len(b), shownHexBytes)
		return shownBytes{Text: hex.EncodeToString(b[:n]), Binary: true, More: len(b) - n}
	}
	n := min(len(b), shownTextBytes)
	for n < len(b) && !utf8.RuneStart(b[n]) {
		n--
	}
	var sb strings.Builder
	for _, r := range string(b[:n]) {
		switch {
		case r == '\n' || r == '\t':
			sb.WriteRune(r)
		case unicode.IsControl(r) || r == utf8.RuneError || unicode.Is(unicode.Cf, r):
			// Controls and invisible format characters (bidi overrides)
			// could disguise what the text says: show their code point.
			fmt.Fprintf(&sb, "\\u{%X}", r)
		default:
			sb.WriteRune(r)
		}
	}
	return shownBytes{Text: sb.String(), More: len(b) - n}
}

// rawField is one field of a dead letter.
type rawField struct {
	Name  shownBytes
	Value shownBytes
}

// deadLetterRow is one dead letter.
type deadLetterRow struct {
	*preceptv1.DeadLetter
	// Reason may quote the entry: shown as its fields are.
	Reason   shownBytes
	FailedAt time.Time
	Fields   []rawField
}

// deadLettersData is the dead-letters page.
type deadLettersData struct {
	Total int64
	Rows  []deadLetterRow
	Pager pager
}

// list lists the stream entries precept could not accept,
// newest first, with why and the original fields shown safely.
func (p deadLetterPages) list(w http.ResponseWriter, r *http.Request, q *request) error {
	size, err := askedPageSize(r)
	if err != nil {
		return err
	}
	page := r.URL.Query().Get("page")
	resp, err := p.feedback.ListDeadLetters(q.ctx, connect.NewRequest(&preceptv1.ListDeadLettersRequest{PageSize: size, PageToken: page}))
	if err != nil {
		return err
	}
	d := deadLettersData{Total: resp.Msg.GetTotal()}
	for _, l := range resp.Msg.GetDeadLetters() {
		row := deadLetterRow{DeadLetter: l, Reason: showBytes([]byte(l.GetReason())), FailedAt: timeOf(l.GetFailedAt())}
		for _, f := range l.GetFields() {
			row.Fields = append(row.Fields, rawField{Name: showBytes(f.GetName()), Value: showBytes(f.GetValue())})
		}
		d.Rows = append(d.Rows, row)
	}
	if next := resp.Msg.GetNextPageToken(); next != "" {
		d.Pager.Next = listLink(Prefix+"deadletters", "size", sizeParam(size), "page", next)
	}
	if page != "" {
		d.Pager.First = listLink(Prefix+"deadletters", "size", sizeParam(size))
	}
	p.render(w, r, http.StatusOK, "deadletters", &view{Title: "Dead letters", Nav: "deadletters", Live: true, Data: d, q: q})
	return nil
}
