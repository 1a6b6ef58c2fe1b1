package console

import (
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
)

// The prompt explorer (docs/console.md, "Prompt explorer"): the prompt
// an agent gets for a stage and a path, why each rule and _rules.md file
// is in it or left out, the versions served, and the diff of two.

const (
	// leftOutPerPage and versionsPerPage are the rows of the explorer's
	// two long lists shown at once.
	leftOutPerPage  = 50
	versionsPerPage = 20
	// maxVersionLen bounds a version named in a link: real ones are
	// "v1:" and 16 hex digits.
	maxVersionLen = 100
	// sourceRulesFile is the kind of a prompt source that is a _rules.md
	// file, and requestBase the base prompt of a version served with the
	// client's own (PromptSource.kind and PromptVersion.base_prompt in
	// proto/precept/v1/prompts.proto).
	sourceRulesFile = "rules_md"
	requestBase     = "request"
)

// promptsData is the explorer page.
type promptsData struct {
	// The form: agent, stage and scope path, with the agents and stages
	// prompts can be built for offered.
	Agent, Stage, Path string
	Agents, Stages     []string
	// Error is what is wrong with the request (the page is a 400).
	Error string

	// Prompt is the assembled prompt; Problem says why there is none.
	Prompt  *preceptv1.BuildPromptResponse
	Problem string
	// Summary and BasePrompt come from the explanation.
	Summary, BasePrompt string
	Files               []rulesFileRow
	Included            []ruleRow
	LeftOut             []ruleRow
	LeftOutTotal        int
	LeftOutPager        pagerLinks

	Versions *versionList
	Diff     *promptDiff
}

// rulesFileRow is one _rules.md place on or off the path.
type rulesFileRow struct {
	Path    string
	Exists  bool
	Applied bool
	Reason  string
}

// ruleRow is one rule of the explanation.
type ruleRow struct {
	*preceptv1.RuleExplanation
	// Code is why the rule is left out (budget, shadow, other_agent...)
	// and Detail the rest of the explanation.
	Code, Detail string
}

// pagerLinks are the links to the neighbouring pages of a list, "" at
// either end.
type pagerLinks struct {
	Prev, Next  string
	Page, Pages int
}

// versionList is the versions served for the agent and stage.
type versionList struct {
	// Unavailable says why there is no list.
	Unavailable string
	Rows        []versionRow
	Total       int
	Pager       pagerLinks
}

// versionRecord is a recorded prompt version (GetPromptVersion,
// ListPromptVersions) as the explorer shows and compares it.
type versionRecord struct {
	Version string
	// Shadow: a shadow prompt, with the agent's shadow rules as well.
	Shadow bool
	// Agent, Stage and ScopeDir are the first request's served with it.
	Agent, Stage, ScopeDir string
	// RuleIDs are the learned rules in the text in order, RulesFiles
	// the _rules.md paths in it.
	RuleIDs, RulesFiles []string
	// BasePrompt is the base prompt's path, or requestBase; BaseDigest
	// its hash.
	BasePrompt, BaseDigest string
	Commit                 string
	FirstServed            time.Time
}

func recordOf(v *preceptv1.PromptVersion) versionRecord {
	return versionRecord{
		Version: v.GetVersion(), Shadow: v.GetShadow(), Agent: v.GetAgent(), Stage: v.GetStage(), ScopeDir: v.GetScopeDir(),
		RuleIDs: v.GetRuleIds(), RulesFiles: v.GetRulesFiles(), BasePrompt: v.GetBasePrompt(), BaseDigest: v.GetBaseDigest(),
		Commit: v.GetCommit(), FirstServed: timeOf(v.GetFirstServed()),
	}
}

// scopePath is the scope path a request for the version can send again:
// the scope directory, "" when the client sent its own base prompt.
func (r versionRecord) scopePath() string {
	if r.BasePrompt == requestBase || r.ScopeDir == "" {
		return ""
	}
	return r.ScopeDir + "/"
}

// versionRow is one version in the list, with the diff form's defaults.
type versionRow struct {
	versionRecord
	// Current: the version the prompt has now (or its shadow prompt).
	Current  bool
	From, To bool
}

// promptDiff compares two recorded versions.
type promptDiff struct {
	From, To versionRecord
	Same     bool
	// Added, Removed and Moved are the learned rules that changed;
	// positions count from 1, 0 where the rule is absent.
	Added, Removed, Moved []ruleChange
	// FilesAdded and FilesRemoved are _rules.md paths.
	FilesAdded, FilesRemoved []string
	BaseChanged              bool
	// Lines is the line diff of the texts; NoText says why there is none.
	Lines  []diffLine
	Cut    bool
	NoText string
	// Back links to the explorer for the same request.
	Back string
}

type ruleChange struct {
	ID       string
	From, To int
}

func (c *Console) promptsPage(w http.ResponseWriter, r *http.Request, q *request) error {
	qs := r.URL.Query()
	d := &promptsData{Agent: strings.TrimSpace(qs.Get("agent")), Stage: strings.TrimSpace(qs.Get("stage")), Path: strings.TrimSpace(qs.Get("path"))}
	// The suggestions are a convenience: without them any name can
	// still be typed.
	if t, err := c.rpc.prompts.ListPromptTargets(q.ctx, connect.NewRequest(&preceptv1.ListPromptTargetsRequest{})); err == nil {
		d.Agents, d.Stages = t.Msg.GetAgents(), t.Msg.GetStages()
	} else {
		c.opts.Log.Warn("console: list prompt agents and stages", "err", err)
	}
	v := &view{Title: "Prompt explorer", Nav: "prompts", Data: d, q: q}
	if qs.Has("from") || qs.Has("to") {
		if err := c.diffVersions(q, d, qs.Get("from"), qs.Get("to")); err != nil {
			return err
		}
		v.Title = "Prompt versions compared"
		c.render(w, r, http.StatusOK, "prompts", v)
		return nil
	}
	if d.Agent == "" && d.Stage == "" && d.Path == "" {
		c.render(w, r, http.StatusOK, "prompts", v)
		return nil
	}
	leftOutPage, err := pageParam(qs, "xpage")
	if err != nil {
		return err
	}
	versionPage, err := pageParam(qs, "vpage")
	if err != nil {
		return err
	}

	built, err := c.rpc.prompts.BuildPrompt(q.ctx, connect.NewRequest(&preceptv1.BuildPromptRequest{Agent: d.Agent, Stage: d.Stage, ScopePath: d.Path}))
	switch connect.CodeOf(err) {
	case connect.CodeInvalidArgument:
		// The form again, with what is wrong.
		d.Error = rpcMessage(err)
		c.render(w, r, http.StatusBadRequest, "prompts", v)
		return nil
	case connect.CodeFailedPrecondition:
		// No base prompt for the stage: the explanation says so too.
		d.Problem = rpcMessage(err)
	default:
		if err != nil {
			return err
		}
		d.Prompt = built.Msg
	}
	ex, err := c.rpc.prompts.ExplainPrompt(q.ctx, connect.NewRequest(&preceptv1.ExplainPromptRequest{Agent: d.Agent, Stage: d.Stage, ScopePath: d.Path}))
	if err != nil {
		return err
	}
	d.explain(ex.Msg, leftOutPage)
	d.Versions = c.listVersions(q, d, versionPage)
	v.Live = true
	c.render(w, r, http.StatusOK, "prompts", v)
	return nil
}

// rpcMessage is an RPC error's message, written for clients; other
// errors are not shown.
func rpcMessage(err error) string {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce.Message()
	}
	return "unavailable"
}

// link is the explorer's URL for the form's request with extra
// parameters.
func (d *promptsData) link(extra ...string) string {
	qs := url.Values{"agent": {d.Agent}, "stage": {d.Stage}}
	if d.Path != "" {
		qs.Set("path", d.Path)
	}
	for i := 0; i+1 < len(extra); i += 2 {
		qs.Set(extra[i], extra[i+1])
	}
	return Prefix + "prompts?" + qs.Encode()
}

// pager returns page of total items in pages of size, and the links to
// its neighbours (param names the page in links). A page past the end
// shows the last.
func (d *promptsData) pager(param string, page, size, total int) (lo, hi int, links pagerLinks) {
	pages := max(1, (total+size-1)/size)
	page = min(page, pages)
	links = pagerLinks{Page: page, Pages: pages}
	if page > 1 {
		links.Prev = d.link(param, strconv.Itoa(page-1))
	}
	if page < pages {
		links.Next = d.link(param, strconv.Itoa(page+1))
	}
	lo = (page - 1) * size
	return lo, min(total, lo+size), links
}

// explain fills the page from the explanation: the _rules.md files
// (applied when the built prompt has them), the rules in the prompt, and
// a page of those left out.
func (d *promptsData) explain(ex *preceptv1.ExplainPromptResponse, leftOutPage int) {
	d.Summary, d.BasePrompt = ex.GetSummary(), ex.GetBasePromptRef()
	applied := map[string]bool{}
	for _, s := range d.Prompt.GetSources() {
		if s.GetKind() == sourceRulesFile {
			applied[s.GetRef()] = true
		}
	}
	for _, f := range ex.GetRulesFiles() {
		d.Files = append(d.Files, rulesFileRow{Path: f.GetPath(), Exists: f.GetExists(), Applied: applied[f.GetPath()], Reason: f.GetReason()})
	}
	var out []ruleRow
	for _, x := range ex.GetRules() {
		if x.GetIncluded() {
			d.Included = append(d.Included, ruleRow{RuleExplanation: x, Detail: x.GetReason()})
			continue
		}
		// Left-out reasons read "code: detail" (api.ExplanationToProto).
		code, detail, ok := strings.Cut(x.GetReason(), ": ")
		if !ok {
			code, detail = "", x.GetReason()
		}
		out = append(out, ruleRow{RuleExplanation: x, Code: code, Detail: detail})
	}
	d.LeftOutTotal = len(out)
	lo, hi, links := d.pager("xpage", leftOutPage, leftOutPerPage, len(out))
	d.LeftOut, d.LeftOutPager = out[lo:hi], links
}

// listVersions lists the versions recorded for the agent and stage,
// newest first, a page at a time (ListPromptVersions). Versions of every
// scope are listed: prompts with the same text share a version, recorded
// with the scope of the first request that got it.
func (c *Console) listVersions(q *request, d *promptsData, page int) *versionList {
	list := func(page int) (*preceptv1.ListPromptVersionsResponse, error) {
		resp, err := c.rpc.prompts.ListPromptVersions(q.ctx, connect.NewRequest(&preceptv1.ListPromptVersionsRequest{
			Agent: d.Agent, Stage: d.Stage, Offset: int32((page - 1) * versionsPerPage), Limit: versionsPerPage}))
		if err != nil {
			return nil, err
		}
		return resp.Msg, nil
	}
	resp, err := list(page)
	if err == nil {
		// A page past the end shows the last.
		if last := max(1, (int(resp.GetTotal())+versionsPerPage-1)/versionsPerPage); page > last {
			page = last
			resp, err = list(page)
		}
	}
	switch {
	case connect.CodeOf(err) == connect.CodeFailedPrecondition:
		return &versionList{Unavailable: "Versions are not recorded on this server (effects.enabled is off), so there is no history to compare."}
	case err != nil:
		c.opts.Log.Warn("console: read prompt versions", "err", err)
		return &versionList{Unavailable: "The recorded versions cannot be read just now; the server log says why."}
	}
	l := &versionList{Total: int(resp.GetTotal())}
	_, _, l.Pager = d.pager("vpage", page, versionsPerPage, l.Total)
	for i, v := range resp.GetVersions() {
		row := versionRow{versionRecord: recordOf(v), To: i == 0, From: i == 1}
		if p := d.Prompt; p != nil {
			row.Current = row.Version == p.GetVersion() || row.Version == p.GetShadowVersion()
		}
		l.Rows = append(l.Rows, row)
	}
	return l
}

// errNoVersions answers a comparison on a server that records no
// versions.
var errNoVersions = unavailable("versions are not recorded on this server (effects.enabled is off), so two cannot be compared")

// diffVersions compares two recorded versions of the form's agent and
// stage (or, when the form names none, of the first version's).
func (c *Console) diffVersions(q *request, d *promptsData, fromV, toV string) error {
	get := func(version string, withText bool) (*preceptv1.GetPromptVersionResponse, error) {
		resp, err := c.rpc.prompts.GetPromptVersion(q.ctx, connect.NewRequest(&preceptv1.GetPromptVersionRequest{Version: version, WithText: withText}))
		if connect.CodeOf(err) == connect.CodeFailedPrecondition {
			return nil, errNoVersions
		}
		if err != nil {
			return nil, err
		}
		return resp.Msg, nil
	}
	if fromV == "" || toV == "" {
		// A server that records no versions says so first: asking for
		// no version answers FailedPrecondition there, InvalidArgument
		// elsewhere.
		if _, err := get("", false); errors.Is(err, errNoVersions) {
			return err
		}
		return invalidArgument("choose two versions to compare: from and to")
	}
	var recs [2]versionRecord
	for i, ver := range []string{fromV, toV} {
		if len(ver) > maxVersionLen {
			return invalidArgument("%q is not a prompt version", ver[:maxVersionLen]+"…")
		}
		resp, err := get(ver, false)
		if err != nil {
			return err
		}
		recs[i] = recordOf(resp.GetVersion())
	}
	if d.Agent == "" && d.Stage == "" {
		d.Agent, d.Stage = recs[0].Agent, recs[0].Stage
		d.Path = recs[0].scopePath()
	}
	for _, rec := range recs {
		if rec.Agent != d.Agent || rec.Stage != d.Stage {
			return invalidArgument("version %s is a prompt of agent %s, stage %s, not of agent %s, stage %s",
				rec.Version, rec.Agent, rec.Stage, d.Agent, d.Stage)
		}
	}
	diff := compareVersions(recs[0], recs[1])
	diff.Back = d.link()
	d.Diff = diff
	if diff.Same {
		return nil
	}
	// The texts are assembled again from the versions' commits.
	var texts [2]string
	for i, rec := range recs {
		resp, err := get(rec.Version, true)
		if err != nil {
			return err
		}
		if why := resp.GetTextUnavailable(); why != "" {
			diff.NoText = "The texts cannot be compared line by line: " + why + "."
			return nil
		}
		texts[i] = resp.GetText()
	}
	diff.Lines, diff.Cut = lineDiff(texts[0], texts[1])
	return nil
}

// compareVersions says how the learned rules, _rules.md files and base
// prompt of two versions differ. A rule is moved when its order among
// the rules both versions hold changed, not when rules added or removed
// above it shift its position.
func compareVersions(from, to versionRecord) *promptDiff {
	d := &promptDiff{From: from, To: to, Same: from.Version == to.Version}
	posFrom, posTo := positions(from.RuleIDs), positions(to.RuleIDs)
	var commonFrom, commonTo []string
	for i, id := range to.RuleIDs {
		if _, ok := posFrom[id]; !ok {
			d.Added = append(d.Added, ruleChange{ID: id, To: i + 1})
		} else {
			commonTo = append(commonTo, id)
		}
	}
	for i, id := range from.RuleIDs {
		if _, ok := posTo[id]; !ok {
			d.Removed = append(d.Removed, ruleChange{ID: id, From: i + 1})
		} else {
			commonFrom = append(commonFrom, id)
		}
	}
	stay := longestCommon(commonFrom, commonTo)
	for _, id := range commonTo {
		if !stay[id] {
			d.Moved = append(d.Moved, ruleChange{ID: id, From: posFrom[id], To: posTo[id]})
		}
	}
	d.FilesAdded = missingFrom(to.RulesFiles, from.RulesFiles)
	d.FilesRemoved = missingFrom(from.RulesFiles, to.RulesFiles)
	d.BaseChanged = from.BasePrompt != to.BasePrompt || from.BaseDigest != to.BaseDigest
	return d
}

// positions maps ids to their place, from 1.
func positions(ids []string) map[string]int {
	m := make(map[string]int, len(ids))
	for i, id := range ids {
		m[id] = i + 1
	}
	return m
}

// longestCommon returns the ids of a longest common subsequence of a and
// b, which hold the same ids (a prompt's rules: at most
// prompts.max_rules, so the quadratic table is small).
func longestCommon(a, b []string) map[string]bool {
	n, m := len(a), len(b)
	t := make([][]int, n+1)
	for i := range t {
		t[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if a[i] == b[j] {
				t[i][j] = t[i+1][j+1] + 1
			} else {
				t[i][j] = max(t[i+1][j], t[i][j+1])
			}
		}
	}
	out := map[string]bool{}
	for i, j := 0, 0; i < n && j < m; {
		switch {
		case a[i] == b[j]:
			out[a[i]] = true
			i++
			j++
		case t[i+1][j] >= t[i][j+1]:
			i++
		default:
			j++
		}
	}
	return out
}

// missingFrom returns the items of a that b lacks, in a's order.
func missingFrom(a, b []string) []string {
	var out []string
	for _, s := range a {
		if !slices.Contains(b, s) {
			out = append(out, s)
		}
	}
	return out
}
