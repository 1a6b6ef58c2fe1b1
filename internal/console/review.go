package console

import (
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"connectrpc.com/connect"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
)

// reviewRow is one decision waiting for clarification.
type reviewRow struct {
	DecisionID string
	Agent      string
	Reviewer   string
	Comment    string
	Missing    []string
	Status     string
	Attempts   int32
	Replies    []string
	Updated    time.Time
}

// reviewData is the needs-review page.
type reviewData struct {
	Agent string
	Rows  []reviewRow
	Pager pager
}

// needsReviewPage lists the ambiguous decisions waiting for a reviewer
// to say more, oldest first as ListNeedsReview returns them.
func (c *Console) needsReviewPage(w http.ResponseWriter, r *http.Request, q *request) error {
	size, err := askedPageSize(r)
	if err != nil {
		return err
	}
	agent, page := strings.TrimSpace(r.URL.Query().Get("agent")), r.URL.Query().Get("page")
	resp, err := c.rpc.evaluator.ListNeedsReview(q.ctx, connect.NewRequest(&preceptv1.ListNeedsReviewRequest{Agent: agent, PageSize: size, PageToken: page}))
	if err != nil {
		return err
	}
	d := reviewData{Agent: agent}
	for _, it := range resp.Msg.GetItems() {
		d.Rows = append(d.Rows, reviewRow{DecisionID: it.GetDecisionId(), Agent: it.GetAgent(), Reviewer: it.GetReviewerId(),
			Comment: it.GetReviewerComment(), Missing: it.GetMissingAttributes(), Status: it.GetStatus(),
			Attempts: it.GetAttempts(), Replies: it.GetReplies(), Updated: timeOf(it.GetUpdatedAt())})
	}
	if next := resp.Msg.GetNextPageToken(); next != "" {
		d.Pager.Next = listLink(Prefix+"review", "agent", agent, "size", sizeParam(size), "page", next)
	}
	if page != "" {
		d.Pager.First = listLink(Prefix+"review", "agent", agent, "size", sizeParam(size))
	}
	c.render(w, r, http.StatusOK, "review", &view{Title: "Needs review", Nav: "review", Live: true, Data: d, q: q})
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

// deadLettersPage lists the stream entries precept could not accept,
// newest first, with why and the original fields shown safely.
func (c *Console) deadLettersPage(w http.ResponseWriter, r *http.Request, q *request) error {
	size, err := askedPageSize(r)
	if err != nil {
		return err
	}
	page := r.URL.Query().Get("page")
	resp, err := c.rpc.feedback.ListDeadLetters(q.ctx, connect.NewRequest(&preceptv1.ListDeadLettersRequest{PageSize: size, PageToken: page}))
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
	c.render(w, r, http.StatusOK, "deadletters", &view{Title: "Dead letters", Nav: "deadletters", Live: true, Data: d, q: q})
	return nil
}
