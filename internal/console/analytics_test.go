package console_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"image/png"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/clarification"
	"github.com/precept-dev/precept/feedbackstore"
	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
	"github.com/precept-dev/precept/gen/precept/v1/preceptv1connect"
)

// analyticsEvents are five decisions of two agents at two gates over two
// days of November 2026.
func analyticsEvents() []map[string]any {
	with := func(m map[string]any, kv ...any) map[string]any {
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	return []map[string]any{
		with(event("an-1", "agent", "coder", "gate_id", "code-review", "decision", "APPROVED", "task_id", "T1", "timestamp", "2026-11-20T09:00:00Z"),
			"review_duration_seconds", 5),
		with(event("an-2", "agent", "coder", "gate_id", "code-review", "decision", "REJECTED", "task_id", "T2", "timestamp", "2026-11-20T10:00:00Z"),
			"review_duration_seconds", 9, "error_categories", []string{"naming", "security"}),
		with(event("an-3", "agent", "coder", "gate_id", "code-review", "decision", "APPROVED", "task_id", "T2", "timestamp", "2026-11-21T10:00:00Z"),
			"review_duration_seconds", 11),
		with(event("an-4", "agent", "tester", "gate_id", "test-gate", "decision", "APPROVED_WITH_CHANGES", "task_id", "T3", "timestamp", "2026-11-21T11:00:00Z"),
			"agent_output", "abcdefghij", "approved_output", "abcdefghiX", "error_categories", []string{"naming"}),
		with(event("an-5", "agent", "tester", "gate_id", "test-gate", "decision", "REJECTED", "task_id", "T4", "timestamp", "2026-11-21T12:00:00Z"),
			"error_categories", []string{"naming"}),
	}
}

// xaddJSON writes decisions to the stream as JSON in the data field, the
// form that carries numbers and lists.
func (s *server) xaddJSON(t *testing.T, events ...map[string]any) {
	t.Helper()
	for _, e := range events {
		data, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.rdb.XAdd(context.Background(), &redis.XAddArgs{Stream: s.app.Config.Redis.Stream, Values: map[string]any{"data": string(data)}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// analyticsRange is the range of the tests' URLs, fixed so that the tests
// do not depend on today's date.
const analyticsRange = "from=2026-11-20&to=2026-11-21"

// analyticsClient calls GetAnalytics as a reader.
func (s *server) analyticsClient() preceptv1connect.AnalyticsServiceClient {
	return preceptv1connect.NewAnalyticsServiceClient(&http.Client{Transport: bearer{ritaToken}}, s.url)
}

// waitForAnalytics waits until analytics has counted n decisions in
// November 2026.
func (s *server) waitForAnalytics(t *testing.T, n int64) {
	t.Helper()
	req := &preceptv1.GetAnalyticsRequest{
		From: timestamppb.New(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)),
		To:   timestamppb.New(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)),
	}
	eventually(t, "analytics to count the decisions", 30*time.Second, func() bool {
		resp, err := s.analyticsClient().GetAnalytics(context.Background(), connect.NewRequest(req))
		return err == nil && resp.Msg.GetTotals().GetDecisions() == n
	})
}

// styleAttr is a style="" attribute (not font-style="").
var styleAttr = regexp.MustCompile(`\sstyle=`)

// download is an export's answer.
type download struct {
	status      int
	contentType string
	disposition string
	body        []byte
}

func (v *visitor) download(path string) download {
	v.t.Helper()
	resp, err := v.hc.Get(v.base + path)
	if err != nil {
		v.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		v.t.Fatal(err)
	}
	return download{resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Content-Disposition"), body}
}

// mustParseSVG fails unless data is well-formed XML with an <svg> root
// that has no style="" attribute (the console's CSP refuses them).
func mustParseSVG(t *testing.T, what string, data []byte) {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(data))
	root := ""
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s is not well-formed XML: %v", what, err)
		}
		if se, ok := tok.(xml.StartElement); ok {
			if root == "" {
				root = se.Name.Local
			}
			for _, a := range se.Attr {
				if a.Name.Local == "style" {
					t.Fatalf("%s: <%s> has a style attribute", what, se.Name.Local)
				}
			}
		}
	}
	if root != "svg" {
		t.Fatalf("%s: root element is %q, not svg", what, root)
	}
}

func readCSV(t *testing.T, what string, data []byte) [][]string {
	t.Helper()
	rows, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
	if err != nil {
		t.Fatalf("%s is not CSV: %v\n%s", what, err, data)
	}
	return rows
}

func TestAnalyticsPageShowsTheDecisionsAndExportsEachChart(t *testing.T) {
	s := startServer(t, tokensYAML)
	s.xaddJSON(t, analyticsEvents()...)
	defer func() {
		if t.Failed() {
			t.Log(s.logs.String())
		}
	}()
	s.waitForAnalytics(t, 5)

	// A reader may view analytics.
	v := s.signIn(t, ritaToken)
	status, body := v.get("/ui/analytics?" + analyticsRange)
	if status != http.StatusOK {
		t.Fatalf("analytics page: %d\n%s", status, body)
	}
	mustContain(t, body,
		"<h1>Analytics</h1>", `value="2026-11-20"`, `value="2026-11-21"`,
		"5: 2 approved, 1 approved with changes, 2 rejected",
		// First attempts: an-1 (approved), an-2, an-4, an-5; an-3 is T2's second.
		"25.0% (first attempts: 4)",
		`<figure class="chart" id="acceptance">`, `<figure class="chart" id="verdicts">`, `<figure class="chart" id="edits">`,
		`<figure class="chart" id="durations">`, `<figure class="chart" id="categories">`, `<figure class="chart" id="lessons">`,
		`role="img" aria-labelledby="verdicts-title verdicts-desc"`,
		`<summary>Data<span class="visually-hidden"> of Verdict mix</span></summary>`,
		`<th scope="col">approved_with_changes</th>`, `<th scope="row">2026-11-21</th>`,
		`href="/ui/analytics/verdicts?by=day&amp;from=2026-11-20&amp;to=2026-11-21&amp;format=png"`,
	)
	if styleAttr.MatchString(body) {
		t.Error("the analytics page has a style attribute, which the CSP refuses")
	}

	want := map[string][][]string{
		"verdicts": {
			{"period", "approved", "approved_with_changes", "rejected", "decisions"},
			{"2026-11-20", "1", "0", "1", "2"},
			{"2026-11-21", "1", "1", "1", "3"},
		},
		"acceptance": {
			{"period", "series", "first_attempts", "first_pass_accepted", "first_pass_acceptance"},
			{"2026-11-20", "all", "2", "1", "0.5000"},
			{"2026-11-21", "all", "2", "0", "0.0000"},
		},
		"edits": {
			{"period", "series", "decisions_with_outputs", "edit_distance_mean_percent"},
			{"2026-11-20", "all", "0", ""},
			{"2026-11-21", "all", "1", strconv.Itoa(int(precept.EditDistancePercent("abcdefghij", "abcdefghiX"))) + ".0"},
		},
		"durations": {
			{"period", "reviews", "p50_seconds", "p90_seconds"},
			// Exact below 12 s (docs/analytics.md, "Review durations").
			{"2026-11-20", "2", "5.0", "9.0"},
			{"2026-11-21", "1", "11.0", "11.0"},
		},
		"categories": {
			{"error_category", "decisions"},
			{"naming", "3"},
			{"security", "1"},
		},
	}
	for _, chart := range []string{"acceptance", "verdicts", "edits", "durations", "categories", "lessons"} {
		base := "/ui/analytics/" + chart + "?" + analyticsRange + "&format="
		svg := v.download(base + "svg")
		if svg.status != http.StatusOK || svg.contentType != "image/svg+xml" {
			t.Fatalf("%s as SVG: %d %s\n%s", chart, svg.status, svg.contentType, svg.body)
		}
		if !strings.HasPrefix(svg.disposition, "attachment; filename=\"analytics-"+chart+"-2026-11-20-2026-11-21.svg") {
			t.Errorf("%s as SVG: Content-Disposition %q", chart, svg.disposition)
		}
		mustParseSVG(t, chart+".svg", svg.body)

		pic := v.download(base + "png")
		if pic.status != http.StatusOK || pic.contentType != "image/png" {
			t.Fatalf("%s as PNG: %d %s", chart, pic.status, pic.contentType)
		}
		img, err := png.Decode(bytes.NewReader(pic.body))
		if err != nil {
			t.Fatalf("%s as PNG: %v", chart, err)
		}
		if b := img.Bounds(); b.Dx() < 520 || b.Dy() < 300 {
			t.Errorf("%s as PNG is %v, smaller than the chart", chart, b)
		}

		data := v.download(base + "csv")
		if data.status != http.StatusOK || !strings.HasPrefix(data.contentType, "text/csv") || !strings.HasSuffix(data.disposition, `.csv"`) {
			t.Fatalf("%s as CSV: %d %s %s", chart, data.status, data.contentType, data.disposition)
		}
		rows := readCSV(t, chart+".csv", data.body)
		if w, ok := want[chart]; ok && !reflect.DeepEqual(rows, w) {
			t.Errorf("%s as CSV:\n got %q\nwant %q", chart, rows, w)
		}
	}

	// Split per agent: a line per agent, in the chart and its data.
	status, body = v.get("/ui/analytics?" + analyticsRange + "&split=agent")
	if status != http.StatusOK {
		t.Fatalf("split page: %d\n%s", status, body)
	}
	mustContain(t, body, `<option value="agent" selected>`, ">coder</text>", ">tester</text>")
	rows := readCSV(t, "acceptance split by agent", v.download("/ui/analytics/acceptance?"+analyticsRange+"&split=agent&format=csv").body)
	wantSplit := [][]string{
		{"period", "series", "first_attempts", "first_pass_accepted", "first_pass_acceptance"},
		{"2026-11-20", "coder", "2", "1", "0.5000"},
		{"2026-11-21", "coder", "0", "0", ""},
		{"2026-11-20", "tester", "0", "0", ""},
		{"2026-11-21", "tester", "2", "0", "0.0000"},
	}
	if !reflect.DeepEqual(rows, wantSplit) {
		t.Errorf("acceptance split by agent:\n got %q\nwant %q", rows, wantSplit)
	}

	// Filters keep one agent, by month.
	rows = readCSV(t, "verdicts of tester by month", v.download("/ui/analytics/verdicts?"+analyticsRange+"&agent=tester&by=month&format=csv").body)
	wantTester := [][]string{
		{"period", "approved", "approved_with_changes", "rejected", "decisions"},
		{"2026-11", "0", "1", "1", "2"},
	}
	if !reflect.DeepEqual(rows, wantTester) {
		t.Errorf("verdicts of tester by month:\n got %q\nwant %q", rows, wantTester)
	}
}

func TestAnalyticsDefaultsToTheLastThirtyDays(t *testing.T) {
	s := startServer(t, tokensYAML)
	v := s.signIn(t, ritaToken)
	status, body := v.get("/ui/analytics")
	if status != http.StatusOK {
		t.Fatalf("analytics page: %d\n%s", status, body)
	}
	today := time.Now().UTC()
	mustContain(t, body,
		`name="from" type="date" value="`+today.AddDate(0, 0, -29).Format(time.DateOnly)+`"`,
		`name="to" type="date" value="`+today.Format(time.DateOnly)+`"`,
		"no first attempts", "No decisions to measure in this range", "No data in this range.")
}

func TestAnalyticsRefusesBadFiltersNamingTheField(t *testing.T) {
	s := startServer(t, tokensYAML)
	v := s.signIn(t, aliceToken)
	for _, tc := range []struct {
		query, want string
	}{
		{"from=2026-13-01", `from: &#34;2026-13-01&#34; is not a date (YYYY-MM-DD)`},
		{"to=yesterday", `to: &#34;yesterday&#34; is not a date`},
		{"from=2026-11-05&to=2026-11-01", "from: 2026-11-05 is after to (2026-11-01)"},
		{"by=year", `granularity: &#34;year&#34; is not day, week or month`},
		{"split=reviewer", `split: &#34;reviewer&#34; is not agent or gate`},
		{"from=1990-01-01&to=1990-01-02", "2000"},
		{"from=2020-01-01&to=2026-11-01&by=month", "longer than the limit of 731 days"},
		{"from=2026-01-01&to=2026-06-30", "by: day covers at most 92 days; choose week or month"},
	} {
		for _, path := range []string{"/ui/analytics?", "/ui/analytics/verdicts?format=csv&"} {
			status, body := v.get(path + tc.query)
			if status != http.StatusBadRequest {
				t.Errorf("%s%s: %d, want 400", path, tc.query, status)
				continue
			}
			mustContain(t, body, tc.want)
		}
	}
}

func TestChartExportsRefuseUnknownChartsFormatsAndRules(t *testing.T) {
	s := startServer(t, tokensYAML)
	v := s.signIn(t, ritaToken)
	for _, tc := range []struct {
		path   string
		status int
		want   string
	}{
		{"/ui/analytics/pie?format=svg", http.StatusNotFound, "there is no analytics chart named &#34;pie&#34;"},
		{"/ui/analytics/verdicts?format=gif", http.StatusBadRequest, "format must be svg, png or csv, got &#34;gif&#34;"},
		{"/ui/analytics/verdicts", http.StatusBadRequest, "format must be svg, png or csv, got &#34;&#34;"},
		{"/ui/rules/r-no-such-rule/effect?format=svg", http.StatusNotFound, "r-no-such-rule"},
		{"/ui/rules/r-no-such-rule/effect?format=pdf", http.StatusBadRequest, "format must be svg, png or csv"},
		{"/ui/rules/not-a-rule/effect?format=csv", http.StatusBadRequest, "is not a rule id"},
	} {
		status, body := v.get(tc.path)
		if status != tc.status {
			t.Errorf("%s: %d, want %d\n%s", tc.path, status, tc.status, body)
			continue
		}
		mustContain(t, body, tc.want)
	}
}

func TestAnalyticsEscapesHostileFilterValues(t *testing.T) {
	s := startServer(t, tokensYAML)
	v := s.signIn(t, ritaToken)
	hostile := `"><script>x</script>&'`
	status, body := v.get("/ui/analytics?" + analyticsRange + "&gate=" + url.QueryEscape(hostile))
	if status != http.StatusOK {
		t.Fatalf("analytics page: %d\n%s", status, body)
	}
	if strings.Contains(body, "<script>x") {
		t.Fatalf("a filter value reached the page unescaped:\n%s", body)
	}
	mustContain(t, body, `value="&#34;&gt;&lt;script&gt;x&lt;/script&gt;&amp;&#39;"`,
		// The export links carry it URL-encoded.
		"gate=%22%3E%3Cscript%3Ex%3C%2Fscript%3E%26%27")
}

// TestAnalyticsPageShowsWhatBecameOfUnclearFeedback: two unclear
// rejections on a day of their own, one clarified an hour and a half
// after it arrived, the other left for needs-review. The page shows the
// counts, the resolution rate, the time to promotion and a fill-rate row
// per rubric attribute, each as GetAnalytics gives it.
func TestAnalyticsPageShowsWhatBecameOfUnclearFeedback(t *testing.T) {
	s := startServer(t, tokensYAML)
	s.xaddJSON(t,
		event("uf-1", "reviewer_comment", "hmm no", "timestamp", "2026-11-22T09:00:00Z", "task_id", "T1"),
		event("uf-2", "reviewer_comment", "nope", "timestamp", "2026-11-22T10:00:00Z", "task_id", "T2"),
	)
	ctx := context.Background()
	clar := clarification.New(s.app.Feedback, s.app.Evaluator, clarification.Options{}, nil)
	eventually(t, "both decisions to wait for clarification", 30*time.Second, func() bool {
		p, err := clar.Pending(ctx)
		return err == nil && len(p) == 2
	})
	arrived, err := s.app.Feedback.Get(ctx, "uf-1")
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range []string{"uf-1", "uf-2"} {
		if _, err := clar.Asked(ctx, id, fmt.Sprintf("C1:%d.1", i), feedbackstore.Question{Attempt: 1, Kind: clarification.KindFirst}); err != nil {
			t.Fatal(err)
		}
	}
	next, _, _, err := clar.Reply(ctx, "uf-1", feedbackstore.Reply{TS: "9.1", User: "U1",
		Text: "The handler in server.go drops the error; return it wrapped because callers cannot tell failure from success.",
		At:   arrived.ReceivedAt.Add(90 * time.Minute)})
	if err != nil || next.Action != clarification.Thank {
		t.Fatalf("the answer to uf-1: %v, %v", next.Action, err)
	}
	if err := clar.Resolve(ctx, "uf-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := clar.Leave(ctx, "uf-2"); err != nil {
		t.Fatal(err)
	}
	req := &preceptv1.GetAnalyticsRequest{
		From: timestamppb.New(time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)),
		To:   timestamppb.New(time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)),
	}
	var totals *preceptv1.AnalyticsFigures
	eventually(t, "analytics to count the clarifications", 30*time.Second, func() bool {
		resp, err := s.analyticsClient().GetAnalytics(ctx, connect.NewRequest(req))
		if err != nil {
			return false
		}
		totals = resp.Msg.GetTotals()
		return totals.GetUnclear().GetResolved() == 1 && totals.GetUnclear().GetNeedsReview() == 1
	})
	v := s.signIn(t, ritaToken)
	status, body := v.get("/ui/analytics?from=2026-11-22&to=2026-11-22")
	if status != http.StatusOK {
		t.Fatalf("analytics page: %d\n%s", status, body)
	}
	mustContain(t, body,
		`<h2 id="unclear-h">Unclear feedback</h2>`,
		"2: 1 resolved by clarification, 1 left for needs-review, 0 still open",
		"<dt>Resolution rate</dt>",
		"50.0% (resolved: 1, left for needs-review: 1; the target is 70%)",
		// One promotion: its bin's value, within 4.4% of 90 minutes.
		"(promoted decisions: 1)",
		fmt.Sprintf("over %d evaluations</caption>", totals.GetRubricEvaluations()),
	)
	if p50 := totals.GetUnclear().GetPromotionP50Seconds(); p50 < 0.956*5400 || p50 > 1.044*5400 {
		t.Errorf("time to promotion %.0fs, want 5400s within 4.4%%", p50)
	}
	if len(totals.GetRubricFill()) == 0 {
		t.Fatal("GetAnalytics reports no rubric fill rates")
	}
	for _, f := range totals.GetRubricFill() {
		mustContain(t, body, fmt.Sprintf(`<tr><th scope="row">%s</th><td>%d of %d</td><td>%.1f%%</td></tr>`, f.GetAttribute(), f.GetMet(), f.GetEvaluations(), 100*f.GetRate()))
	}
}
