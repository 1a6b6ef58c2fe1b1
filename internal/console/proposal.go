package console

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"connectrpc.com/connect"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
)

// maxNote bounds an approval note or a rejection reason typed in the
// console; the API bounds them as well.
const maxNote = 4000

// proposalData is the proposal page.
type proposalData struct {
	P *preceptv1.Proposal
	// Cluster is the evidence's cluster, nil when the proposal has none
	// or it is gone.
	Cluster *preceptv1.Cluster
	// Pending is true while approvals and rejections are accepted.
	Pending bool
	// Approved names who approved already, to hide a second form.
	Approvers []string
	// Counts are the impact preview's counts, largest first.
	ByAgent, ByEpic []kv
}

// kv is a name and a count.
type kv struct {
	Key   string
	Count int64
}

func sortedCounts(m map[string]int64) []kv {
	out := make([]kv, 0, len(m))
	for k, v := range m {
		out = append(out, kv{k, v})
	}
	slices.SortFunc(out, func(a, b kv) int {
		if a.Count != b.Count {
			return int(b.Count - a.Count)
		}
		return strings.Compare(a.Key, b.Key)
	})
	return out
}

// proposalPage shows one proposal with everything a reviewer weighs.
func (c *Console) proposalPage(w http.ResponseWriter, r *http.Request, q *request) error {
	resp, err := c.rpc.rules.GetProposal(q.ctx, connect.NewRequest(&preceptv1.GetProposalRequest{ProposalId: r.PathValue("id")}))
	if err != nil {
		return err
	}
	p := resp.Msg.GetProposal()
	d := proposalData{P: p, Pending: p.GetStatus() == preceptv1.ProposalStatus_PROPOSAL_STATUS_PENDING}
	for _, a := range p.GetApprovals() {
		d.Approvers = append(d.Approvers, a.GetApprover())
	}
	if id := p.GetClusterId(); id != "" {
		// The page shows the cluster's statistics, not its members: one
		// member is the least GetCluster can be asked for.
		cl, err := c.rpc.evaluator.GetCluster(q.ctx, connect.NewRequest(&preceptv1.GetClusterRequest{Id: id, MemberLimit: 1}))
		switch {
		case err == nil:
			d.Cluster = cl.Msg.GetCluster()
		case connect.CodeOf(err) != connect.CodeNotFound && connect.CodeOf(err) != connect.CodeFailedPrecondition:
			return err
		}
	}
	if im := p.GetImpact(); im != nil {
		d.ByAgent = sortedCounts(im.GetCluster().GetByAgent())
		d.ByEpic = sortedCounts(im.GetCluster().GetByEpic())
	}
	c.render(w, r, http.StatusOK, "proposal", &view{Title: "Proposal " + p.GetProposalId(), Nav: "queue", Live: true, Data: d, q: q})
	return nil
}

// HasApproved reports whether name approved the proposal already.
func (d proposalData) HasApproved(name string) bool { return slices.Contains(d.Approvers, name) }

// decision reads the form fields an approval or rejection carries: the
// note and the revision the reviewer saw.
func decision(r *http.Request, field string) (string, int32, error) {
	note := strings.TrimSpace(r.PostForm.Get(field))
	if len(note) > maxNote {
		return "", 0, invalidArgument("%s: at most %d bytes", field, maxNote)
	}
	rev, err := strconv.ParseInt(r.PostForm.Get("revision"), 10, 32)
	if err != nil || rev < 1 {
		return "", 0, invalidArgument("revision: the form does not say which revision you reviewed; reload the proposal")
	}
	return note, int32(rev), nil
}

// approve records the visitor's approval through RuleService.ApproveRule:
// the same distinct-approver, self-approval and revision checks as the
// API and Slack.
func (c *Console) approve(w http.ResponseWriter, r *http.Request, q *request) error {
	id := r.PathValue("id")
	note, rev, err := decision(r, "note")
	if err != nil {
		return err
	}
	if _, err := c.rpc.rules.ApproveRule(q.ctx, connect.NewRequest(&preceptv1.ApproveRuleRequest{ProposalId: id, Note: note, Revision: rev})); err != nil {
		return staleHint(err, id)
	}
	c.opts.Log.Info("console approval", "proposal", id, "by", q.id.Name)
	http.Redirect(w, r, Prefix+"proposals/"+url.PathEscape(id)+"?done=approved", http.StatusSeeOther)
	return nil
}

// reject records the visitor's rejection through RuleService.RejectRule.
func (c *Console) reject(w http.ResponseWriter, r *http.Request, q *request) error {
	id := r.PathValue("id")
	reason, rev, err := decision(r, "reason")
	if err != nil {
		return err
	}
	if reason == "" {
		return invalidArgument("reason: say why the proposal is rejected; the reason is recorded with it")
	}
	if _, err := c.rpc.rules.RejectRule(q.ctx, connect.NewRequest(&preceptv1.RejectRuleRequest{ProposalId: id, Reason: reason, Revision: rev})); err != nil {
		return staleHint(err, id)
	}
	c.opts.Log.Info("console rejection", "proposal", id, "by", q.id.Name)
	http.Redirect(w, r, Prefix+"proposals/"+url.PathEscape(id)+"?done=rejected", http.StatusSeeOther)
	return nil
}

// staleHint adds what to do to a refusal because the proposal changed
// since the reviewer loaded it.
func staleHint(err error, id string) error {
	var ce *connect.Error
	if errors.As(err, &ce) && (ce.Code() == connect.CodeAborted || ce.Code() == connect.CodeFailedPrecondition) {
		return &pageError{status: http.StatusConflict, back: Prefix + "proposals/" + url.PathEscape(id),
			msg: fmt.Sprintf("%s — reload the proposal to see what changed, then decide again.", ce.Message())}
	}
	return err
}
