package console

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"connectrpc.com/connect"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
)

// rulesPageSize is how many rules a rules page lists.
const rulesPageSize = 25

// ruleStatuses are the rules page's tabs and the statuses each shows.
var ruleStatuses = map[string][]preceptv1.RuleStatus{
	"active":  {preceptv1.RuleStatus_RULE_STATUS_ACTIVE},
	"shadow":  {preceptv1.RuleStatus_RULE_STATUS_SHADOW},
	"retired": {preceptv1.RuleStatus_RULE_STATUS_SUNSET, preceptv1.RuleStatus_RULE_STATUS_ROLLED_BACK},
}

// rulesData is the rules page.
type rulesData struct {
	Agent, Status string
	Statuses      []string
	Rules         []*preceptv1.Rule
	Total         int
	Page, Pages   int
	PrevURL       string
	NextURL       string
}

// rulesPage lists the rules of one status (active, shadow, retired) per
// agent, the most important first as prompts order them.
func (c *Console) rulesPage(w http.ResponseWriter, r *http.Request, q *request) error {
	query := r.URL.Query()
	agent := strings.TrimSpace(query.Get("agent"))
	status := query.Get("status")
	if status == "" {
		status = "active"
	}
	want, ok := ruleStatuses[status]
	if !ok {
		return invalidArgument("status: %q is not one of active, shadow, retired", clip(status))
	}
	page, err := pageNumber(r)
	if err != nil {
		return err
	}
	resp, err := c.rpc.rules.ListActiveRules(q.ctx, connect.NewRequest(&preceptv1.ListActiveRulesRequest{
		Agent: agent, IncludeShadow: status == "shadow", IncludeRetired: status == "retired",
	}))
	if err != nil {
		return err
	}
	var list []*preceptv1.Rule
	for _, ru := range resp.Msg.GetRules() {
		for _, s := range want {
			if ru.GetStatus() == s {
				list = append(list, ru)
			}
		}
	}
	d := rulesData{Agent: agent, Status: status, Statuses: []string{"active", "shadow", "retired"}, Total: len(list), Page: page}
	d.Pages = max(1, (len(list)+rulesPageSize-1)/rulesPageSize)
	if page > d.Pages {
		return notFound("the list has %d pages", d.Pages)
	}
	from := (page - 1) * rulesPageSize
	d.Rules = list[from:min(from+rulesPageSize, len(list))]
	link := func(p int) string {
		v := url.Values{"status": {status}, "page": {strconv.Itoa(p)}}
		if agent != "" {
			v.Set("agent", agent)
		}
		return Prefix + "rules?" + v.Encode()
	}
	if page > 1 {
		d.PrevURL = link(page - 1)
	}
	if page < d.Pages {
		d.NextURL = link(page + 1)
	}
	c.render(w, r, http.StatusOK, "rules", &view{Title: "Rules", Nav: "rules", Live: true, Data: d, q: q})
	return nil
}

// ruleData is a rule's page.
type ruleData struct {
	Rule    *preceptv1.Rule
	History []*preceptv1.RuleCommit
	// Effect is nil when effects are off on this server; EffectNote says
	// why there is none.
	Effect     *preceptv1.RuleEffect
	EffectNote string
	// Figure is the effect chart.
	Figure *figure
	// CommitURL links a commit sha to the rules repository's web page,
	// empty without one.
	CommitURL string
	// Active is true while the rule can be rolled back.
	Active bool
}

// Link returns the web page of a commit, or "" without a web URL.
func (d ruleData) Link(sha string) string {
	if d.CommitURL == "" {
		return ""
	}
	return d.CommitURL + sha
}

// rulePage shows a rule, its history in git and its effect.
func (c *Console) rulePage(w http.ResponseWriter, r *http.Request, q *request) error {
	d, err := c.rule(q, r.PathValue("id"))
	if err != nil {
		return err
	}
	eff, err := c.rpc.effects.GetRuleEffect(q.ctx, connect.NewRequest(&preceptv1.GetRuleEffectRequest{RuleId: d.Rule.GetRuleId()}))
	switch {
	case err == nil:
		d.Effect = eff.Msg.GetEffect()
		f, err := ruleEffectFigure(d.Effect, &c.draws)
		if err != nil {
			return err
		}
		f.Export = Prefix + "rules/" + url.PathEscape(d.Rule.GetRuleId()) + "/effect"
		d.Figure = &f
	case connect.CodeOf(err) == connect.CodeFailedPrecondition || connect.CodeOf(err) == connect.CodeNotFound:
		d.EffectNote = rpcMessage(err)
	default:
		return err
	}
	c.render(w, r, http.StatusOK, "rule", &view{Title: "Rule " + d.Rule.GetRuleId(), Nav: "rules", Live: true, Data: d, q: q})
	return nil
}

func (c *Console) rule(q *request, id string) (ruleData, error) {
	resp, err := c.rpc.rules.GetRule(q.ctx, connect.NewRequest(&preceptv1.GetRuleRequest{RuleId: id}))
	if err != nil {
		return ruleData{}, err
	}
	ru := resp.Msg.GetRule()
	d := ruleData{Rule: ru, History: resp.Msg.GetHistory(), CommitURL: c.opts.CommitURL,
		Active: ru.GetStatus() == preceptv1.RuleStatus_RULE_STATUS_ACTIVE || ru.GetStatus() == preceptv1.RuleStatus_RULE_STATUS_SHADOW}
	return d, nil
}

// rollbackPage asks for confirmation and a reason before a rollback.
func (c *Console) rollbackPage(w http.ResponseWriter, r *http.Request, q *request) error {
	d, err := c.rule(q, r.PathValue("id"))
	if err != nil {
		return err
	}
	if !d.Active {
		return newPageError(http.StatusConflict, "rule %s is %s: only a rule on main can be rolled back", d.Rule.GetRuleId(), word(d.Rule.GetStatus()))
	}
	c.render(w, r, http.StatusOK, "rollback", &view{Title: "Roll back " + d.Rule.GetRuleId(), Nav: "rules", Data: d, q: q})
	return nil
}

// rollback reverts the rule through RuleService.RollbackRule in the
// visitor's name.
func (c *Console) rollback(w http.ResponseWriter, r *http.Request, q *request) error {
	id := r.PathValue("id")
	reason := strings.TrimSpace(r.PostForm.Get("reason"))
	if reason == "" {
		return invalidArgument("reason: say why the rule is rolled back; the reason is recorded in git")
	}
	if len(reason) > maxNote {
		return invalidArgument("reason: at most %d bytes", maxNote)
	}
	if _, err := c.rpc.rules.RollbackRule(q.ctx, connect.NewRequest(&preceptv1.RollbackRuleRequest{RuleId: id, Reason: reason})); err != nil {
		return err
	}
	c.opts.Log.Info("console rollback", "rule", id, "by", q.id.Name)
	http.Redirect(w, r, Prefix+"rules/"+url.PathEscape(id)+"?done=rolledback", http.StatusSeeOther)
	return nil
}
