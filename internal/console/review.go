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
	// Ignored lists the changes on the rules remote that precept did not
	// take, newest first; they need a person to look at them too.
	Ignored []ignoredRow
}

// ignoredRow is one change fetched from the rules remote that precept
// did not take (docs/decisions/0016-trust-model.md).
type ignoredRow struct {
	Kind, ProposalID, Branch, Commit, Author, Reason string
	// Linked says the proposal is in precept's record, so it has a page.
	Linked bool
}

// ignoredChanges reads the changes precept did not take from the rules
// remote through ListIgnoredRemoteChanges, newest first, linking each to
// its proposal when precept has that proposal.
func (c *Console) ignoredChanges(q *request) ([]ignoredRow, error) {
	resp, err := c.rpc.rules.ListIgnoredRemoteChanges(q.ctx, connect.NewRequest(&preceptv1.ListIgnoredRemoteChangesRequest{}))
	if err != nil {
		return nil, err
	}
	changes := resp.Msg.GetChanges()
	known := map[string]bool{}
	rows := make([]ignoredRow, 0, len(changes))
	for i := len(changes) - 1; i >= 0; i-- {
		ch := changes[i]
		id := ch.GetProposalId()
		if id != "" {
			if _, asked := known[id]; !asked {
				_, err := c.rpc.rules.GetProposal(q.ctx, connect.NewRequest(&preceptv1.GetProposalRequest{ProposalId: id}))
				switch connect.CodeOf(err) {
				case connect.CodeNotFound, connect.CodeInvalidArgument:
					known[id] = false
				default:
					if err != nil {
						return nil, err
					}
					known[id] = true
				}
			}
		}
		rows = append(rows, ignoredRow{Kind: ch.GetKind(), ProposalID: id, Branch: ch.GetBranch(), Commit: ch.GetCommit(),
			Author: ch.GetAuthor(), Reason: ch.GetReason(), Linked: id != "" && known[id]})
	}
	return rows, nil
}

// needsReviewPage lists the ambiguous decisions waiting for a reviewer
// to say more, oldest first as ListNeedsReview returns them, and the
// changes on the rules remote precept did not take.
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
	ignored, err := c.ignoredChanges(q)
	if err != nil {
		return err
	}
	d := reviewData{Agent: agent, Total: resp.Msg.GetTotal(), Ignored: ignored}
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
