package console

import (
	"cmp"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/precept-dev/precept"
	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
	"github.com/precept-dev/precept/gen/precept/v1/preceptv1connect"
)

// Lists show listPageSize rows unless the address asks for another size
// (?size=, at most maxListPageSize); a cluster page shows memberPageSize
// member ids at a time.
const (
	listPageSize    = 25
	maxListPageSize = 100
	memberPageSize  = 50
)

// askedPageSize reads ?size=: the page size a list asks its RPC for.
func askedPageSize(r *http.Request) (int32, error) {
	s := r.URL.Query().Get("size")
	if s == "" {
		return listPageSize, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > maxListPageSize {
		return 0, invalidArgument("size must be a number from 1 to %d", maxListPageSize)
	}
	return int32(n), nil
}

// listLink is the address of a list page with query; empty values are
// left out, so links stay short.
func listLink(path string, query ...string) string {
	v := url.Values{}
	for i := 0; i+1 < len(query); i += 2 {
		if query[i+1] != "" {
			v.Set(query[i], query[i+1])
		}
	}
	if len(v) == 0 {
		return path
	}
	return path + "?" + v.Encode()
}

// pager is the navigation of a list: a list paged by its RPC's tokens
// pages forward only, so "back" is its first page; a list the console
// pages itself has a previous page.
type pager struct {
	First string
	Prev  string
	Next  string
}

func sizeParam(n int32) string {
	if n == listPageSize {
		return ""
	}
	return strconv.Itoa(int(n))
}

// classWords names a classification in words (docs/console.md).
var classWords = map[preceptv1.Classification]string{
	preceptv1.Classification_CLASSIFICATION_POSITIVE:           "positive",
	preceptv1.Classification_CLASSIFICATION_AMBIGUOUS:          "ambiguous",
	preceptv1.Classification_CLASSIFICATION_EDGE_CASE:          "edge case",
	preceptv1.Classification_CLASSIFICATION_GENERALIZABLE_LOW:  "generalizable (low)",
	preceptv1.Classification_CLASSIFICATION_GENERALIZABLE_HIGH: "generalizable (high)",
}

func classOf(c preceptv1.Classification) string {
	if w, ok := classWords[c]; ok {
		return w
	}
	return "not classified"
}

func timeOf(ts *timestamppb.Timestamp) time.Time {
	if ts == nil {
		return time.Time{}
	}
	return ts.AsTime()
}

// clusterRow is one cluster of the list.
type clusterRow struct {
	ID          string
	Agent       string
	Size        int32
	Reviewers   int32
	Epics       int32
	Class       string
	Category    string
	NotAPattern bool
	ProposalID  string
	FirstSeen   time.Time
	LastSeen    time.Time
	// Growth is members per day over first_seen..last_seen, the span
	// counted as at least one day (docs/console.md, "Clusters").
	Growth float64
}

func rowOf(c *preceptv1.Cluster) clusterRow {
	st := c.GetStats()
	row := clusterRow{ID: c.GetId(), Agent: c.GetAgent(), Size: st.GetSize(), Reviewers: st.GetDistinctReviewers(),
		Epics: st.GetDistinctEpics(), Class: classOf(c.GetClassification()), Category: c.GetCategory(),
		NotAPattern: c.GetNotAPattern(), ProposalID: c.GetProposalId(),
		FirstSeen: timeOf(st.GetFirstSeen()), LastSeen: timeOf(st.GetLastSeen())}
	row.Growth = growth(row.Size, row.FirstSeen, row.LastSeen)
	return row
}

// growth is a cluster's members per day over the time its decisions
// span, the span counted as at least a day: a cluster of 10 decisions
// made within one day grows at 10 a day, one of 10 over 20 days at 0.5.
func growth(size int32, first, last time.Time) float64 {
	days := last.Sub(first).Hours() / 24
	if days < 1 {
		days = 1
	}
	return float64(size) / days
}

// clustersData is the clusters page.
type clustersData struct {
	Agent string
	// Order is "size" (largest first) or "growth" (fastest-growing first).
	Order string
	Rows  []clusterRow
	Pager pager
	// Capped says the growth order was taken over the largest
	// maxGrowthScan clusters only.
	Capped bool
}

// maxGrowthScan bounds the clusters read to order them by growth: the
// largest ones, as ListClusters returns them; past it the page says so.
const maxGrowthScan = 1000

// clustersPage lists clusters (docs/console.md, "Clusters"): largest
// first, one page of ListClusters, clusters of one size fastest-growing
// first; or, with ?order=growth, fastest-growing first.
func (c *Console) clustersPage(w http.ResponseWriter, r *http.Request, q *request) error {
	size, err := askedPageSize(r)
	if err != nil {
		return err
	}
	agent := strings.TrimSpace(r.URL.Query().Get("agent"))
	var d clustersData
	switch order := r.URL.Query().Get("order"); order {
	case "", "size":
		d, err = clustersBySize(q, c.rpc.evaluator, agent, size, r.URL.Query().Get("page"))
	case "growth":
		var page int
		if page, err = pageNumber(r); err == nil {
			d, err = clustersByGrowth(q, c.rpc.evaluator, agent, size, page)
		}
	default:
		return invalidArgument("order must be size or growth")
	}
	if err != nil {
		return err
	}
	c.render(w, r, http.StatusOK, "clusters", &view{Title: "Clusters", Nav: "clusters", Live: true, Data: d, q: q})
	return nil
}

// clustersBySize reads one page of ListClusters, which pages largest
// first, and orders clusters of one size fastest-growing first.
func clustersBySize(q *request, ev preceptv1connect.EvaluatorServiceClient, agent string, size int32, page string) (clustersData, error) {
	resp, err := ev.ListClusters(q.ctx, connect.NewRequest(&preceptv1.ListClustersRequest{Agent: agent, PageSize: size, PageToken: page}))
	if err != nil {
		return clustersData{}, err
	}
	d := clustersData{Agent: agent, Order: "size"}
	for _, cl := range resp.Msg.GetClusters() {
		d.Rows = append(d.Rows, rowOf(cl))
	}
	slices.SortStableFunc(d.Rows, func(a, b clusterRow) int {
		return cmp.Or(cmp.Compare(b.Size, a.Size), cmp.Compare(b.Growth, a.Growth))
	})
	if next := resp.Msg.GetNextPageToken(); next != "" {
		d.Pager.Next = listLink(Prefix+"clusters", "agent", agent, "size", sizeParam(size), "page", next)
	}
	if page != "" {
		d.Pager.First = listLink(Prefix+"clusters", "agent", agent, "size", sizeParam(size))
	}
	return d, nil
}

// clustersByGrowth orders the largest maxGrowthScan clusters by growth,
// then size, and shows page page of them: growth is not an order the API
// pages by.
func clustersByGrowth(q *request, ev preceptv1connect.EvaluatorServiceClient, agent string, size int32, page int) (clustersData, error) {
	resp, err := ev.ListClusters(q.ctx, connect.NewRequest(&preceptv1.ListClustersRequest{Agent: agent, PageSize: maxGrowthScan}))
	if err != nil {
		return clustersData{}, err
	}
	all := make([]clusterRow, 0, len(resp.Msg.GetClusters()))
	for _, cl := range resp.Msg.GetClusters() {
		all = append(all, rowOf(cl))
	}
	slices.SortStableFunc(all, func(a, b clusterRow) int {
		return cmp.Or(cmp.Compare(b.Growth, a.Growth), cmp.Compare(b.Size, a.Size))
	})
	pages := max(1, (len(all)+int(size)-1)/int(size))
	if page > pages {
		return clustersData{}, notFound("the clusters fill %d pages", pages)
	}
	from := (page - 1) * int(size)
	d := clustersData{Agent: agent, Order: "growth", Rows: all[from:min(from+int(size), len(all))], Capped: resp.Msg.GetNextPageToken() != ""}
	link := func(p int) string {
		return listLink(Prefix+"clusters", "agent", agent, "order", "growth", "size", sizeParam(size), "page", strconv.Itoa(p))
	}
	if page > 1 {
		d.Pager.Prev = link(page - 1)
	}
	if page < pages {
		d.Pager.Next = link(page + 1)
	}
	return d, nil
}

// memberRow is one member of a cluster; Comment is set for the members
// that represent the cluster.
type memberRow struct {
	ID      string
	Comment string
}

// clusterData is one cluster's page.
type clusterData struct {
	clusterRow
	Producers       int32
	Tags            []string
	Representatives []*preceptv1.RepresentativeComment
	Confidence      float64
	Rationale       string
	// Pending says why the classification's evidence is not available.
	Pending    string
	Members    []memberRow
	MemberFrom int
	Pager      pager
	// Categories are offered to curators setting a category: the live
	// taxonomy's, a curator's own included (ListCategories).
	Categories []*preceptv1.TaxonomyCategory
}

// clusterPage shows one cluster: its statistics, the evaluation of its
// most central member (class, confidence and why), its representative
// comments and a page of its member ids, with the curator's corrections.
func (c *Console) clusterPage(w http.ResponseWriter, r *http.Request, q *request) error {
	id := r.PathValue("id")
	from := 0
	if s := r.URL.Query().Get("members"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return invalidArgument("members must be a position in the member list")
		}
		from = n
	}
	if from > math.MaxInt32-memberPageSize {
		return invalidArgument("members must be a position in the member list")
	}
	resp, err := c.rpc.evaluator.GetCluster(q.ctx, connect.NewRequest(&preceptv1.GetClusterRequest{Id: id,
		MemberOffset: int32(from), MemberLimit: memberPageSize}))
	if err != nil {
		return err
	}
	cl := resp.Msg.GetCluster()
	d := clusterData{clusterRow: rowOf(cl), Producers: cl.GetStats().GetDistinctProducers(), Tags: cl.GetTags(),
		Representatives: cl.GetRepresentatives(), MemberFrom: from}
	if q.id.Allows(precept.RoleApprover) {
		cats, err := c.rpc.evaluator.ListCategories(q.ctx, connect.NewRequest(&preceptv1.ListCategoriesRequest{}))
		if err != nil {
			return err
		}
		d.Categories = cats.Msg.GetCategories()
	}
	members, size := cl.GetMemberIds(), int(cl.GetStats().GetSize())
	if len(members) == 0 && from > 0 {
		return notFound("cluster %s has %d members; there is no page from member %d", id, size, from+1)
	}
	comments := map[string]string{}
	self := Prefix + "clusters/" + url.PathEscape(id)
	for _, rep := range d.Representatives {
		comments[rep.GetDecisionId()] = rep.GetText()
	}
	for _, m := range members {
		d.Members = append(d.Members, memberRow{ID: m, Comment: comments[m]})
	}
	if next := from + memberPageSize; next < size {
		d.Pager.Next = listLink(self, "members", strconv.Itoa(next)) + "#h-members"
	}
	if from > 0 {
		d.Pager.First = self + "#h-members"
	}
	// The cluster's class is that of its most central member; that
	// member's evaluation says how sure the evaluator is, and why.
	if len(d.Representatives) > 0 {
		ev, err := c.rpc.evaluator.GetEvaluation(q.ctx, connect.NewRequest(&preceptv1.GetEvaluationRequest{DecisionId: d.Representatives[0].GetDecisionId()}))
		switch {
		case err == nil:
			d.Confidence, d.Rationale = ev.Msg.GetEvaluation().GetConfidence(), ev.Msg.GetEvaluation().GetRationale()
		case connect.CodeOf(err) == connect.CodeUnavailable || connect.CodeOf(err) == connect.CodeNotFound:
			d.Pending = "the evaluation of its most central member is pending"
		default:
			return err
		}
	}
	c.render(w, r, http.StatusOK, "cluster", &view{Title: "Cluster " + id, Nav: "clusters", Live: true, Data: d, q: q})
	return nil
}

// correctionKinds are the corrections the cluster page offers, by the
// value of the form's kind field.
var correctionKinds = map[string]preceptv1.CorrectionKind{
	"merge":         preceptv1.CorrectionKind_CORRECTION_KIND_MERGE,
	"split":         preceptv1.CorrectionKind_CORRECTION_KIND_SPLIT,
	"move":          preceptv1.CorrectionKind_CORRECTION_KIND_MOVE,
	"set_category":  preceptv1.CorrectionKind_CORRECTION_KIND_SET_CATEGORY,
	"not_a_pattern": preceptv1.CorrectionKind_CORRECTION_KIND_NOT_A_PATTERN,
}

// correctionRequest builds the CorrectClusters request a cluster page's
// form asks for, as `precept clusters ...` builds it, and the decision
// to follow to the cluster the correction leaves it in.
func correctionRequest(f url.Values) (*preceptv1.CorrectClustersRequest, string, error) {
	kind, ok := correctionKinds[f.Get("kind")]
	if !ok {
		return nil, "", invalidArgument("unknown correction %q: merge, split, move, set_category or not_a_pattern", clip(f.Get("kind")))
	}
	cluster, other := strings.TrimSpace(f.Get("cluster")), strings.TrimSpace(f.Get("other"))
	var decisions []string
	for _, d := range f["decision"] {
		if d = strings.TrimSpace(d); d != "" {
			decisions = append(decisions, d)
		}
	}
	req := &preceptv1.CorrectClustersRequest{Kind: kind, Why: strings.TrimSpace(f.Get("why"))}
	follow := strings.TrimSpace(f.Get("follow"))
	if len(decisions) > 0 {
		follow = decisions[0]
	}
	if cluster == "" {
		return nil, "", invalidArgument("the form names no cluster; reload the cluster's page")
	}
	switch f.Get("kind") {
	case "merge":
		if other == "" {
			return nil, "", invalidArgument("name the cluster to merge this one with")
		}
		req.ClusterIds = []string{cluster, other}
	case "split":
		if len(decisions) == 0 {
			return nil, "", invalidArgument("choose the decisions to split out of the cluster")
		}
		// A cluster or category typed in means another action was meant:
		// never split when the curator asked to move or recategorize.
		if other != "" || strings.TrimSpace(f.Get("category")) != "" {
			return nil, "", invalidArgument("a split takes no target cluster or category; clear them, or choose Move or Set the category")
		}
		req.ClusterIds, req.DecisionIds = []string{cluster}, decisions
	case "move":
		if len(decisions) == 0 || other == "" {
			return nil, "", invalidArgument("choose the decisions to move and name the cluster to move them to")
		}
		req.ClusterIds, req.DecisionIds = []string{other}, decisions
	case "set_category":
		req.Category = strings.TrimSpace(f.Get("category"))
		if len(decisions) == 0 || req.Category == "" {
			return nil, "", invalidArgument("choose the decisions and the category to give them")
		}
		req.DecisionIds = decisions
	case "not_a_pattern":
		req.ClusterIds = []string{cluster}
	}
	return req, follow, nil
}

// correctClusters records a curator's correction through CorrectClusters
// (docs/lessons.md, "Curator corrections") and shows the cluster the
// corrected decisions are in now: a merge or a split may give them
// another cluster id.
func (c *Console) correctClusters(w http.ResponseWriter, r *http.Request, q *request) error {
	req, follow, err := correctionRequest(r.PostForm)
	if err != nil {
		return err
	}
	resp, err := c.rpc.evaluator.CorrectClusters(q.ctx, connect.NewRequest(req))
	if err != nil {
		return err
	}
	c.opts.Log.Info("console cluster correction", "by", q.id.Name, "kind", req.GetKind().String(), "correction", resp.Msg.GetCorrectionId())
	to := Prefix + "clusters?done=corrected"
	if resp.Msg.GetApplied() && follow != "" {
		ev, err := c.rpc.evaluator.GetEvaluation(q.ctx, connect.NewRequest(&preceptv1.GetEvaluationRequest{DecisionId: follow}))
		if err == nil && ev.Msg.GetEvaluation().GetClusterId() != "" {
			to = Prefix + "clusters/" + url.PathEscape(ev.Msg.GetEvaluation().GetClusterId()) + "?done=corrected"
		}
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
	return nil
}
