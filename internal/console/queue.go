package console

import (
	"cmp"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"connectrpc.com/connect"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
	"github.com/precept-dev/precept/internal/text"
)

// queuePageSize is how many proposals a queue page shows.
const queuePageSize = 20

// maxQueue bounds the pending proposals read to order the queue. The
// proposal rate cap keeps far fewer pending (docs/thresholds.md); past
// the bound the page says so.
const maxQueue = 1000

// queueData is the review queue.
type queueData struct {
	Agent     string
	Proposals []*preceptv1.Proposal
	Page      int
	Pages     int
	Total     int
	Capped    bool
	PrevURL   string
	NextURL   string
}

// queuePage lists pending proposals, the most evidence first and, among
// equals, the longest waiting first (docs/console.md, "Review queue").
func (c *Console) queuePage(w http.ResponseWriter, r *http.Request, q *request) error {
	agent := strings.TrimSpace(r.URL.Query().Get("agent"))
	page, err := pageNumber(r)
	if err != nil {
		return err
	}
	var all []*preceptv1.Proposal
	capped := false
	token := ""
	for {
		resp, err := c.rpc.rules.ListProposals(q.ctx, connect.NewRequest(&preceptv1.ListProposalsRequest{
			Status: preceptv1.ProposalStatus_PROPOSAL_STATUS_PENDING, Agent: agent, PageSize: 200, PageToken: token,
		}))
		if err != nil {
			return err
		}
		all = append(all, resp.Msg.GetProposals()...)
		token = resp.Msg.GetNextPageToken()
		if token == "" {
			break
		}
		if len(all) >= maxQueue {
			capped = true
			break
		}
	}
	slices.SortStableFunc(all, func(a, b *preceptv1.Proposal) int {
		if d := cmp.Compare(len(b.GetCreatedFromFeedbackIds()), len(a.GetCreatedFromFeedbackIds())); d != 0 {
			return d
		}
		return a.GetCreatedAt().AsTime().Compare(b.GetCreatedAt().AsTime())
	})
	d := queueData{Agent: agent, Total: len(all), Capped: capped, Page: page}
	d.Pages = max(1, (len(all)+queuePageSize-1)/queuePageSize)
	if page > d.Pages {
		return notFound("the queue has %d pages", d.Pages)
	}
	from := (page - 1) * queuePageSize
	d.Proposals = all[from:min(from+queuePageSize, len(all))]
	link := func(p int) string {
		v := url.Values{"page": {strconv.Itoa(p)}}
		if agent != "" {
			v.Set("agent", agent)
		}
		return Prefix + "queue?" + v.Encode()
	}
	if page > 1 {
		d.PrevURL = link(page - 1)
	}
	if page < d.Pages {
		d.NextURL = link(page + 1)
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
