package console

import (
	"net/http"

	"connectrpc.com/connect"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
)

// maxShown bounds an agent output or diff shown on a decision page; the
// rest is behind the API.
const maxShown = 16 << 10

// decisionData is the decision page.
type decisionData struct {
	F *preceptv1.Feedback
	// Output, Approved and Diff are the texts shown, cut at maxShown.
	Output, Approved, Diff string
	Cut                    bool
}

// decisionPage shows one stored decision and how it was judged: what the
// queue's and clusters' evidence links open.
func (c *Console) decisionPage(w http.ResponseWriter, r *http.Request, q *request) error {
	resp, err := c.rpc.feedback.GetFeedback(q.ctx, connect.NewRequest(&preceptv1.GetFeedbackRequest{DecisionId: r.PathValue("id")}))
	if err != nil {
		return err
	}
	f := resp.Msg.GetFeedback()
	d := decisionData{F: f}
	var cut [3]bool
	d.Output, cut[0] = head(f.GetDecision().GetAgentOutput(), maxShown)
	d.Approved, cut[1] = head(f.GetDecision().GetApprovedOutput(), maxShown)
	d.Diff, cut[2] = head(f.GetDecision().GetCorrectionDiff(), maxShown)
	d.Cut = cut[0] || cut[1] || cut[2]
	c.render(w, r, http.StatusOK, "decision", &view{Title: "Decision " + f.GetDecision().GetDecisionId(), Nav: "clusters", Data: d, q: q})
	return nil
}

// head returns at most n bytes of s, cut at a character boundary.
func head(s string, n int) (string, bool) {
	if len(s) <= n {
		return s, false
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n], true
}
