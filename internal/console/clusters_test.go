package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
	"github.com/precept-dev/precept/gen/precept/v1/preceptv1connect"
)

// evaluator is an EvaluatorService client with token.
func (s *server) evaluator(token string) preceptv1connect.EvaluatorServiceClient {
	return preceptv1connect.NewEvaluatorServiceClient(&http.Client{Transport: bearer{token}}, s.url)
}

// firstCluster waits for the evaluator to form a cluster of at least
// size members and returns it.
func (s *server) firstCluster(t *testing.T, size int32) *preceptv1.Cluster {
	t.Helper()
	var c *preceptv1.Cluster
	eventually(t, "a cluster", 30*time.Second, func() bool {
		resp, err := s.evaluator(ritaToken).ListClusters(context.Background(), connect.NewRequest(&preceptv1.ListClustersRequest{}))
		if err != nil || len(resp.Msg.GetClusters()) == 0 || resp.Msg.GetClusters()[0].GetStats().GetSize() < size {
			return false
		}
		c = resp.Msg.GetClusters()[0]
		return true
	})
	return c
}

func (s *server) cluster(t *testing.T, id string) *preceptv1.Cluster {
	t.Helper()
	resp, err := s.evaluator(ritaToken).GetCluster(context.Background(), connect.NewRequest(&preceptv1.GetClusterRequest{Id: id}))
	if err != nil {
		t.Fatalf("GetCluster %s: %v", id, err)
	}
	return resp.Msg.GetCluster()
}

var clusterLink = regexp.MustCompile(`^/ui/clusters/([^?/]+)\?done=corrected$`)

func TestClustersListTheProblemsAndShowTheirMembers(t *testing.T) {
	s := startServer(t, tokensYAML)
	s.xadd(t, clusterEvents()...)
	cl := s.firstCluster(t, 3)
	rita := s.signIn(t, ritaToken)

	status, body := rita.get("/ui/clusters")
	if status != http.StatusOK {
		t.Fatalf("clusters page: %d\n%s", status, body)
	}
	mustContain(t, body, `href="/ui/clusters/`+cl.GetId()+`"`, "coding-agent", `data-label="Size" class="num">3<`,
		`data-label="Reviewers" class="num">3<`, `data-label="Epics" class="num">2<`, "a day", "members per day")
	if status, body := rita.get("/ui/clusters?agent=docs-agent"); status != http.StatusOK || strings.Contains(body, cl.GetId()) {
		t.Fatalf("the agent filter let another agent's cluster through: %d", status)
	}
	if status, _ := rita.get("/ui/clusters?size=0"); status != http.StatusBadRequest {
		t.Fatalf("size=0: %d", status)
	}
	if status, _ := rita.get("/ui/clusters?page=forged"); status != http.StatusBadRequest {
		t.Fatalf("a forged page token: %d", status)
	}

	status, body = rita.get("/ui/clusters/" + cl.GetId())
	if status != http.StatusOK {
		t.Fatalf("cluster page: %d\n%s", status, body)
	}
	mustContain(t, body, `id="d-rule-d1"`, `id="d-rule-d2"`, `id="d-rule-d3"`, "<blockquote>", "retry helper",
		"Distinct reviewers</dt><dd>3", "Distinct epics</dt><dd>2", "Confidence")
	if strings.Contains(body, `action="/ui/clusters/correct"`) {
		t.Error("a reader sees the correction forms")
	}
	// Representative comments and members link to their decision's page.
	mustContain(t, body, `on decision <a href="/ui/decisions/rule-d`, `<a href="/ui/decisions/rule-d3">rule-d3</a></td>`)

	status, body = rita.get("/ui/clusters/no-such-cluster")
	if status != http.StatusNotFound {
		t.Fatalf("unknown cluster: %d", status)
	}
	mustContain(t, body, "no-such-cluster", "not found")
	if status, _ := rita.get("/ui/clusters/" + cl.GetId() + "?members=99"); status != http.StatusNotFound {
		t.Fatalf("a members page past the end: %d", status)
	}

	// Once the proposer drafts a rule from the cluster, both pages link
	// to the proposal.
	p := s.pendingProposal(t, ritaToken)
	link := `href="/ui/proposals/` + p.GetProposalId() + `"`
	eventually(t, "the proposal on the clusters page", 10*time.Second, func() bool {
		_, body := rita.get("/ui/clusters")
		return strings.Contains(body, link)
	})
	_, body = rita.get("/ui/clusters/" + cl.GetId())
	mustContain(t, body, link)
}

func TestCuratorsCorrectClustersFromTheClusterPage(t *testing.T) {
	s := startServer(t, tokensYAML)
	s.xadd(t, clusterEvents()...)
	cl := s.firstCluster(t, 3)
	page := "/ui/clusters/" + cl.GetId()

	// A reader sees no forms, and a reader's POST is refused.
	rita := s.signIn(t, ritaToken)
	rita.get(page)
	if status, body := rita.post("/ui/clusters/correct", url.Values{"kind": {"not_a_pattern"}, "cluster": {cl.GetId()}}); status != http.StatusForbidden {
		t.Fatalf("a reader's correction: %d\n%s", status, body)
	}

	alice := s.signIn(t, aliceToken)
	status, body := alice.get(page)
	if status != http.StatusOK {
		t.Fatalf("cluster page: %d", status)
	}
	mustContain(t, body, `action="/ui/clusters/correct"`, `name="decision" value="rule-d1"`, `value="merge"`, `value="not_a_pattern"`,
		`<option value="tests-weak">`)

	// Without the session's CSRF token.
	if status, _ := alice.post("/ui/clusters/correct", url.Values{"csrf": {"forged"}, "kind": {"not_a_pattern"}, "cluster": {cl.GetId()}}); status != http.StatusForbidden {
		t.Fatalf("a correction without the CSRF token: %d", status)
	}
	// A merge with a cluster that does not exist: the RPC's NotFound.
	status, body = alice.post("/ui/clusters/correct", url.Values{"kind": {"merge"}, "cluster": {cl.GetId()}, "other": {"no-such-cluster"}})
	if status != http.StatusNotFound {
		t.Fatalf("merge with an unknown cluster: %d\n%s", status, body)
	}
	mustContain(t, body, "no-such-cluster")
	// A category outside the taxonomy: the RPC's InvalidArgument.
	alice.get(page)
	status, body = alice.post("/ui/clusters/correct", url.Values{"kind": {"set_category"}, "cluster": {cl.GetId()}, "decision": {"rule-d1"}, "category": {"no-such-category"}})
	if status != http.StatusBadRequest {
		t.Fatalf("an unknown category: %d\n%s", status, body)
	}
	mustContain(t, body, "not in the taxonomy")
	// A form missing what its correction needs.
	if status, _ := alice.post("/ui/clusters/correct", url.Values{"kind": {"split"}, "cluster": {cl.GetId()}}); status != http.StatusBadRequest {
		t.Fatalf("a split of no decisions: %d", status)
	}
	if status, _ := alice.post("/ui/clusters/correct", url.Values{"kind": {"rename"}, "cluster": {cl.GetId()}}); status != http.StatusBadRequest {
		t.Fatalf("an unknown correction: %d", status)
	}

	// Setting the category moves the decisions into a cluster of that
	// category; the console follows them there.
	status, loc := alice.post("/ui/clusters/correct", url.Values{"kind": {"set_category"}, "cluster": {cl.GetId()},
		"decision": {"rule-d1", "rule-d2", "rule-d3"}, "category": {"tests-weak"}, "why": {"these ask for better tests"}})
	m := clusterLink.FindStringSubmatch(loc)
	if status != http.StatusSeeOther || m == nil {
		t.Fatalf("set category: %d %q", status, loc)
	}
	moved := s.cluster(t, m[1])
	if moved.GetCategory() != "tests-weak" || len(moved.GetMemberIds()) != 3 {
		t.Fatalf("after set category, cluster %s: category %q, members %v", moved.GetId(), moved.GetCategory(), moved.GetMemberIds())
	}
	status, body = alice.get(loc)
	if status != http.StatusOK {
		t.Fatalf("the corrected cluster's page: %d", status)
	}
	mustContain(t, body, "The correction was recorded.", "tests-weak")

	// Not a pattern.
	status, loc = alice.post("/ui/clusters/correct", url.Values{"kind": {"not_a_pattern"}, "cluster": {moved.GetId()}, "follow": {"rule-d1"}})
	if m = clusterLink.FindStringSubmatch(loc); status != http.StatusSeeOther || m == nil {
		t.Fatalf("not a pattern: %d %q", status, loc)
	}
	if got := s.cluster(t, m[1]); !got.GetNotAPattern() {
		t.Fatalf("cluster %s is still a pattern after the correction", got.GetId())
	}
	_, body = alice.get(loc)
	mustContain(t, body, "not a pattern</span>")
}

// The categories offered to curators are the live taxonomy's, read
// through ListCategories: a curator's own (evaluator.taxonomy_file) are
// offered too, and can be set.
func TestTheClusterPageOffersACuratorsOwnCategories(t *testing.T) {
	taxonomy := filepath.Join(t.TempDir(), "taxonomy.yaml")
	own := "categories:\n  - id: feature-flags\n    group: configuration\n    name: Feature flags\n    description: New behaviour is not behind a feature flag.\n    rule: Put new behaviour behind a feature flag.\n    cues: [feature flag]\n"
	if err := os.WriteFile(taxonomy, []byte(own), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, tokensYAML+"evaluator: {taxonomy_file: "+strconv.Quote(taxonomy)+"}\n")
	s.xadd(t, clusterEvents()...)
	cl := s.firstCluster(t, 3)
	page := "/ui/clusters/" + cl.GetId()
	alice := s.signIn(t, aliceToken)
	status, body := alice.get(page)
	if status != http.StatusOK {
		t.Fatalf("cluster page: %d", status)
	}
	mustContain(t, body, `<option value="feature-flags">Feature flags</option>`, `<option value="tests-weak">`)

	status, loc := alice.post("/ui/clusters/correct", url.Values{"kind": {"set_category"}, "cluster": {cl.GetId()},
		"decision": {"rule-d1"}, "category": {"feature-flags"}})
	m := clusterLink.FindStringSubmatch(loc)
	if status != http.StatusSeeOther || m == nil {
		t.Fatalf("set the curator's category: %d %q", status, loc)
	}
	if got := s.cluster(t, m[1]); got.GetCategory() != "feature-flags" {
		t.Fatalf("after set category, cluster %s has category %q", got.GetId(), got.GetCategory())
	}
}

func TestALargeClusterShowsItsMembersFiftyAtATime(t *testing.T) {
	s := startServer(t, tokensYAML)
	var events []map[string]any
	for i := range 55 {
		events = append(events, event(fmt.Sprintf("big-%02d", i),
			"reviewer_id", fmt.Sprintf("rev-%d", i%5), "epic_id", fmt.Sprintf("EPIC-%d", i%3),
			"reviewer_comment", []string{
				"missing unit tests for the new retry helper",
				"the new retry helper is missing unit tests",
				"unit tests are missing for the new retry helper",
			}[i%3]))
	}
	s.xadd(t, events...)
	cl := s.firstCluster(t, 55)
	rita := s.signIn(t, ritaToken)
	status, first := rita.get("/ui/clusters/" + cl.GetId())
	if status != http.StatusOK {
		t.Fatalf("cluster page: %d", status)
	}
	mustContain(t, first, "Members 1 to 50 of 55.")
	if n := strings.Count(first, `<tr id="d-`); n != 50 {
		t.Fatalf("the first page shows %d members, want 50", n)
	}
	status, second := rita.next(first)
	if status != http.StatusOK {
		t.Fatalf("second page of members: %d", status)
	}
	mustContain(t, second, "Members 51 to 55 of 55.", `href="/ui/clusters/`+cl.GetId()+`#h-members">First page</a>`)
	if n := strings.Count(second, `<tr id="d-`); n != 5 {
		t.Fatalf("the second page shows %d members, want 5", n)
	}
	for _, id := range s.cluster(t, cl.GetId()).GetMemberIds() {
		if strings.Contains(first, `id="d-`+id+`"`) == strings.Contains(second, `id="d-`+id+`"`) {
			t.Errorf("member %s is on both pages or on neither", id)
		}
	}
}

func TestClustersCanBeOrderedByGrowth(t *testing.T) {
	s := startServer(t, tokensYAML)
	// coding-agent: three decisions in one day, 3 a day. docs-agent: four
	// over 40 days, 0.1 a day.
	events := clusterEvents()
	for i, day := range []string{"2026-10-01", "2026-10-15", "2026-10-30", "2026-11-10"} {
		events = append(events, event(fmt.Sprintf("slow-%d", i), "agent", "docs-agent", "timestamp", day+"T10:00:00Z",
			"reviewer_id", fmt.Sprintf("rev-%d", i), "epic_id", fmt.Sprintf("EPIC-%d", i%2),
			"reviewer_comment", []string{
				"missing unit tests for the new retry helper",
				"the new retry helper is missing unit tests",
				"unit tests are missing for the new retry helper",
			}[i%3]))
	}
	s.xadd(t, events...)
	var fast, slow string
	eventually(t, "both clusters", 30*time.Second, func() bool {
		resp, err := s.evaluator(ritaToken).ListClusters(context.Background(), connect.NewRequest(&preceptv1.ListClustersRequest{}))
		if err != nil {
			return false
		}
		for _, c := range resp.Msg.GetClusters() {
			switch {
			case c.GetAgent() == "coding-agent" && c.GetStats().GetSize() == 3:
				fast = c.GetId()
			case c.GetAgent() == "docs-agent" && c.GetStats().GetSize() == 4:
				slow = c.GetId()
			}
		}
		return fast != "" && slow != ""
	})
	rita := s.signIn(t, ritaToken)
	_, body := rita.get("/ui/clusters")
	if a, b := strings.Index(body, slow), strings.Index(body, fast); a < 0 || b < 0 || a > b {
		t.Fatalf("largest first: the cluster of 4 (%s) should come before the cluster of 3 (%s)", slow, fast)
	}
	mustContain(t, body, "0.1 a day", "3.0 a day")
	status, body := rita.get("/ui/clusters?order=growth")
	if status != http.StatusOK {
		t.Fatalf("growth order: %d", status)
	}
	if a, b := strings.Index(body, fast), strings.Index(body, slow); a < 0 || b < 0 || a > b {
		t.Fatalf("fastest-growing first: %s (3 a day) should come before %s (0.1 a day)", fast, slow)
	}
	mustContain(t, body, `<option value="growth" selected>`, "Fastest-growing first; among")

	// One a page: the second page holds the slow cluster and links back.
	_, first := rita.get("/ui/clusters?order=growth&size=1")
	status, second := rita.next(first)
	if status != http.StatusOK || !strings.Contains(second, slow) || strings.Contains(second, fast) {
		t.Fatalf("second page by growth: %d\n%s", status, second)
	}
	mustContain(t, second, `rel="prev">Previous page</a>`)
	if status, _ := rita.get("/ui/clusters?order=growth&size=1&page=3"); status != http.StatusNotFound {
		t.Fatalf("a page past the end: %d", status)
	}
	if status, _ := rita.get("/ui/clusters?order=newest"); status != http.StatusBadRequest {
		t.Fatalf("an unknown order: %d", status)
	}
}
