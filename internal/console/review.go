package console

import (
	"net/http"
	"strings"
	"time"

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
	// Total is how many wait for the agent filter, on every page.
	Total int32
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
	d := reviewData{Agent: agent, Total: resp.Msg.GetTotal()}
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
