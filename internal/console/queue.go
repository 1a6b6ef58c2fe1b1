package console

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"connectrpc.com/connect"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
	"github.com/precept-dev/precept/lib/text"
)

// queuePageSize is how many proposals a queue page shows.
const queuePageSize = 20

// queueData is the review queue.
type queueData struct {
	Agent     string
	Proposals []*preceptv1.Proposal
	Total     int32
	// First is set past the first page; NextURL when there is more.
	First   string
	NextURL string
}

// queuePage lists pending proposals, the most evidence first and, among
// equals, the longest waiting first (docs/console.md, "Review queue"):
// one ListProposals call in that order, one page of it.
func (c *Console) queuePage(w http.ResponseWriter, r *http.Request, q *request) error {
	query := r.URL.Query()
	agent := strings.TrimSpace(query.Get("agent"))
	token := query.Get("after")
	resp, err := c.rpc.rules.ListProposals(q.ctx, connect.NewRequest(&preceptv1.ListProposalsRequest{
		Status: preceptv1.ProposalStatus_PROPOSAL_STATUS_PENDING, Agent: agent, PageSize: queuePageSize, PageToken: token,
		Order: preceptv1.ProposalOrder_PROPOSAL_ORDER_EVIDENCE,
	}))
	if err != nil {
		return err
	}
	d := queueData{Agent: agent, Proposals: resp.Msg.GetProposals(), Total: resp.Msg.GetTotal()}
	link := func(after string) string {
		v := url.Values{}
		if agent != "" {
			v.Set("agent", agent)
		}
		if after != "" {
			v.Set("after", after)
		}
		if len(v) == 0 {
			return Prefix + "queue"
		}
		return Prefix + "queue?" + v.Encode()
	}
	if token != "" {
		d.First = link("")
	}
	if next := resp.Msg.GetNextPageToken(); next != "" {
		d.NextURL = link(next)
	}
	c.render(w, r, http.StatusOK, "queue", &view{Title: "Review queue", Nav: "queue", Live: true, Data: d, q: q})
	return nil
}

// pageNumber reads ?page=, 1 when absent.
func pageNumber(r *http.Request) (int, error) { return pageParam(r.URL.Query(), "page") }

// pageParam reads a 1-based page number from the query parameter name; 1
// when absent.
func pageParam(qs url.Values, name string) (int, error) {
	s := qs.Get(name)
	if s == "" {
		return 1, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 1_000_000 {
		return 0, invalidArgument("%s: %q is not a page number", name, clip(s))
	}
	return n, nil
}

// clip shortens user input quoted back in a message.
func clip(s string) string { return text.ClipRunes(s, 64) }
