package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/precept-dev/precept/lib/fakeslack"
	"github.com/precept-dev/precept/lib/testenv"
)

// The files under deploy/ (docs/operations.md), from this package's
// folder.
var (
	alertsFile     = filepath.Join("..", "..", "deploy", "prometheus", "precept-alerts.yml")
	alertTestsFile = filepath.Join("..", "..", "deploy", "prometheus", "precept-alerts_test.yml")
	dashboardFile  = filepath.Join("..", "..", "deploy", "grafana", "precept-dashboard.json")
	operationsDoc  = filepath.Join("..", "..", "docs", "operations.md")
)

// promtool returns the path of promtool, or fails the test saying how to
// install it.
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool is not installed: run .ci/install-deps (it installs Debian's prometheus package, which provides promtool)")
	}
	return p
}

func TestAlertRulesPassPromtoolCheckAndTheirUnitTests(t *testing.T) {
	bin := promtool(t)
	for _, args := range [][]string{{"check", "rules", alertsFile}, {"test", "rules", alertTestsFile}} {
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// alertRules is what the tests read of a Prometheus rule file.
type alertRules struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Record      string            `yaml:"record"`
			Expr        string            `yaml:"expr"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

func readAlerts(t *testing.T) alertRules {
	t.Helper()
	data, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	var rules alertRules
	if err := yaml.Unmarshal(data, &rules); err != nil {
		t.Fatalf("%s: %v", alertsFile, err)
	}
	return rules
}

func TestEveryAlertSaysWhatAndPointsAtItsRunbook(t *testing.T) {
	doc, err := os.ReadFile(operationsDoc)
	if err != nil {
		t.Fatal(err)
	}
	headings := map[string]bool{}
	for _, line := range strings.Split(string(doc), "\n") {
		if h, ok := strings.CutPrefix(line, "### "); ok {
			headings["#"+strings.ToLower(strings.TrimSpace(h))] = true
		}
	}
	n := 0
	for _, g := range readAlerts(t).Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			n++
			for _, key := range []string{"summary", "description", "runbook_url"} {
				if strings.TrimSpace(r.Annotations[key]) == "" {
					t.Errorf("alert %s has no %s annotation", r.Alert, key)
				}
			}
			_, anchor, _ := strings.Cut(r.Annotations["runbook_url"], "docs/operations.md")
			if want := "#" + strings.ToLower(r.Alert); anchor != want || !headings[want] {
				t.Errorf("alert %s: runbook_url %q should point at docs/operations.md%s, a heading \"### %s\" there", r.Alert, r.Annotations["runbook_url"], want, r.Alert)
			}
		}
	}
	if n == 0 {
		t.Fatalf("no alerts in %s", alertsFile)
	}
}

// referencedMetrics returns the metric names the alert rules and the
// dashboard's queries read, each with where it is read.
func referencedMetrics(t *testing.T, alerts alertRules, dashboard []byte) map[string]string {
	t.Helper()
	refs := map[string]string{}
	for _, g := range alerts.Groups {
		for _, r := range g.Rules {
			for _, m := range metricNames(r.Expr) {
				refs[m] = cmpOr(refs[m], "alert "+r.Alert+r.Record)
			}
		}
	}
	var dash any
	if err := json.Unmarshal(dashboard, &dash); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			title, _ := x["title"].(string)
			if title != "" {
				path = "panel " + title
			}
			for k, c := range x {
				s, ok := c.(string)
				switch {
				case ok && k == "expr":
					for _, m := range metricNames(s) {
						refs[m] = cmpOr(refs[m], "dashboard "+path)
					}
				case ok && (k == "query" || k == "definition"):
					// Template variables: label_values(metric, label).
					for _, sub := range labelValuesMetric.FindAllStringSubmatch(s, -1) {
						refs[sub[1]] = cmpOr(refs[sub[1]], "dashboard variable")
					}
				default:
					walk(path, c)
				}
			}
		case []any:
			for _, c := range x {
				walk(path, c)
			}
		}
	}
	walk("", dash)
	return refs
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

var proposalID = regexp.MustCompile(`p-[0-9a-z]{20,}`)

var labelValuesMetric = regexp.MustCompile(`label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*[,)]`)

var (
	grafanaVariable = regexp.MustCompile(`\$\{[^}]*\}|\$[A-Za-z_][A-Za-z0-9_]*`)
	promqlString    = regexp.MustCompile("\"(?:[^\"\\\\]|\\\\.)*\"|'(?:[^'\\\\]|\\\\.)*'|`[^`]*`")
	labelMatchers   = regexp.MustCompile(`\{[^{}]*\}`)
	rangesSubquery  = regexp.MustCompile(`\[[^\[\]]*\]`)
	grouping        = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)`)
	identifier      = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*`)
)

// promqlWords are the identifiers of PromQL that name no metric.
var promqlWords = map[string]bool{
	"and": true, "or": true, "unless": true, "bool": true, "offset": true, "by": true, "without": true, "on": true,
	"ignoring": true, "group_left": true, "group_right": true, "inf": true, "nan": true, "atan2": true,
}

// metricNames returns the metric names a PromQL expression reads, sorted:
// the identifiers left once strings, label matchers, ranges, grouping
// clauses, function calls, keywords and numbers are taken out. Grafana's
// variables ($__rate_interval, ${datasource}) are read as plain text.
func metricNames(expr string) []string {
	s := grafanaVariable.ReplaceAllString(expr, "5m")
	s = promqlString.ReplaceAllString(s, `""`)
	s = labelMatchers.ReplaceAllString(s, "{}")
	for {
		next := rangesSubquery.ReplaceAllString(s, "[]")
		if next == s {
			break
		}
		s = next
	}
	s = grouping.ReplaceAllString(s, " ")
	var names []string
	for _, loc := range identifier.FindAllStringIndex(s, -1) {
		word := s[loc[0]:loc[1]]
		if loc[0] > 0 && strings.ContainsAny(s[loc[0]-1:loc[0]], "0123456789.") {
			continue // the exponent or unit of a number: 1e18, 5m
		}
		if rest := strings.TrimLeft(s[loc[1]:], " \t\n"); strings.HasPrefix(rest, "(") || promqlWords[strings.ToLower(word)] {
			continue // a function, an aggregation or a keyword
		}
		if !slices.Contains(names, word) {
			names = append(names, word)
		}
	}
	slices.Sort(names)
	return names
}

func TestMetricNamesAreReadFromPromQL(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{`precept_stream_lag > 1000`, []string{"precept_stream_lag"}},
		{`sum by (result) (rate(precept_stream_decisions_total{instance=~"$instance",result!="ok"}[$__rate_interval]))`, []string{"precept_stream_decisions_total"}},
		{`increase(a_total{x="y"}[15m]) > 0 unless ignoring(result) increase(b_total{result="ok"}[15m]) > 0`, []string{"a_total", "b_total"}},
		{`(go_memstats_sys_bytes - go_memstats_heap_released_bytes) / go_gc_gomemlimit_bytes > 0.9`, []string{"go_gc_gomemlimit_bytes", "go_memstats_heap_released_bytes", "go_memstats_sys_bytes"}},
		{`histogram_quantile(0.99, sum by (le) (rate(h_bucket{procedure="/a.B/C"}[5m])))`, []string{"h_bucket"}},
		{`go_gc_gomemlimit_bytes < 1e18 and on (instance) up offset 5m`, []string{"go_gc_gomemlimit_bytes", "up"}},
		{`max_over_time(x[1h:5m]) or vector(0)`, []string{"x"}},
		{`label_replace(m, "dst", "$1", "src", "(.*)")`, []string{"m"}},
	} {
		if got := metricNames(tc.expr); !slices.Equal(got, tc.want) {
			t.Errorf("metricNames(%q) = %v, want %v", tc.expr, got, tc.want)
		}
	}
}

// missingMetrics returns, sorted, each referenced metric the scrape does
// not export, with where it is read.
func missingMetrics(refs map[string]string, exported map[string]bool) []string {
	var missing []string
	for m, where := range refs {
		if !exported[m] {
			missing = append(missing, m+" (read by "+where+")")
		}
	}
	slices.Sort(missing)
	return missing
}

// scrape returns the names of the samples preceptd's /metrics exports.
func scrape(t *testing.T, addr string) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	for name := range scrapeSamples(t, addr) {
		names[name] = true
	}
	return names
}

// scrapeSamples returns the label sets of the samples preceptd's /metrics
// exports, by metric name.
func scrapeSamples(t *testing.T, addr string) map[string][]map[string]string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d %v", resp.StatusCode, err)
	}
	samples := map[string][]map[string]string{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.IndexAny(line, "{ ")
		if i <= 0 {
			continue
		}
		labels := map[string]string{}
		if line[i] == '{' {
			end := strings.LastIndexByte(line, '}')
			for _, m := range exposedLabel.FindAllStringSubmatch(line[i+1:max(end, i+1)], -1) {
				labels[m[1]] = unquote(m[2])
			}
		}
		samples[line[:i]] = append(samples[line[:i]], labels)
	}
	return samples
}

// exposedLabel is one label="value" of a sample in the text format.
var exposedLabel = regexp.MustCompile(`([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"`)

// unquote undoes the escapes of the text format and of PromQL strings
// (\\, \", \n).
func unquote(s string) string {
	return strings.NewReplacer(`\\`, `\`, `\"`, `"`, `\n`, "\n").Replace(s)
}

// selector is a metric name with its label matchers in PromQL.
var (
	selector = regexp.MustCompile(`([A-Za-z_:][A-Za-z0-9_:]*)\s*\{([^{}]*)\}`)
	matcher  = regexp.MustCompile(`([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!=|!~|=)\s*"((?:[^"\\]|\\.)*)"`)
	// plainAlternatives is a regex matcher that only lists values:
	// result=~"stored|duplicate".
	plainAlternatives = regexp.MustCompile(`^[A-Za-z0-9_:./-]+(\|[A-Za-z0-9_:./-]+)*$`)
)

// targetLabels are added by Prometheus to every series it scrapes, not
// exported by preceptd.
var targetLabels = map[string]bool{"instance": true, "job": true}

// labelRef is a label value the alerts or the dashboard select.
type labelRef struct{ metric, label, value string }

// referencedLabelValues returns the label values the alert rules and the
// dashboard's queries select, each with where it is read. An equality
// matcher (result="failed") selects its value; a regex matcher that only
// lists values (result=~"stored|duplicate") selects each of them. Other
// regex matchers (instance=~"$instance") and negative ones (code!="ok")
// select no value in particular and are not checked, nor are the target
// labels Prometheus adds (instance, job).
func referencedLabelValues(t *testing.T, alerts alertRules, dashboard []byte) map[labelRef]string {
	t.Helper()
	refs := map[labelRef]string{}
	add := func(expr, where string) {
		for _, sel := range selector.FindAllStringSubmatch(expr, -1) {
			for _, m := range matcher.FindAllStringSubmatch(sel[2], -1) {
				label, op, value := m[1], m[2], unquote(m[3])
				if targetLabels[label] {
					continue
				}
				var values []string
				switch {
				case op == "=":
					values = []string{value}
				case op == "=~" && plainAlternatives.MatchString(value):
					values = strings.Split(value, "|")
				}
				for _, v := range values {
					r := labelRef{sel[1], label, v}
					refs[r] = cmpOr(refs[r], where)
				}
			}
		}
	}
	for _, g := range alerts.Groups {
		for _, r := range g.Rules {
			add(r.Expr, "alert "+r.Alert+r.Record)
		}
	}
	var dash any
	if err := json.Unmarshal(dashboard, &dash); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			if title, _ := x["title"].(string); title != "" {
				path = "panel " + title
			}
			for k, c := range x {
				if s, ok := c.(string); ok && k == "expr" {
					add(s, "dashboard "+path)
				} else {
					walk(path, c)
				}
			}
		case []any:
			for _, c := range x {
				walk(path, c)
			}
		}
	}
	walk("", dash)
	return refs
}

// missingLabelValues returns, sorted, each selected label value no
// scraped sample of its metric has, with where it is read.
func missingLabelValues(refs map[labelRef]string, samples map[string][]map[string]string) []string {
	var missing []string
	for r, where := range refs {
		if !slices.ContainsFunc(samples[r.metric], func(l map[string]string) bool { return l[r.label] == r.value }) {
			missing = append(missing, fmt.Sprintf("%s{%s=%q} (read by %s)", r.metric, r.label, r.value, where))
		}
	}
	slices.Sort(missing)
	return missing
}

func TestLabelValuesAreReadFromPromQL(t *testing.T) {
	var alerts alertRules
	rule := `{alert: A, expr: 'increase(a_total{result="failed", instance="p1"}[5m]) unless b{result=~"stored|duplicate",code!="ok",x=~"$instance",y=~"a.*"}'}`
	if err := yaml.Unmarshal([]byte("groups: [{name: g, rules: ["+rule+"]}]"), &alerts); err != nil {
		t.Fatal(err)
	}
	dashboard := []byte(`{"panels":[{"title":"P","targets":[{"expr":"h_bucket{procedure=\"/a.B/C\",job=\"precept\"}"}]}]}`)
	got := referencedLabelValues(t, alerts, dashboard)
	want := map[labelRef]string{
		{"a_total", "result", "failed"}:     "alert A",
		{"b", "result", "stored"}:           "alert A",
		{"b", "result", "duplicate"}:        "alert A",
		{"h_bucket", "procedure", "/a.B/C"}: "dashboard panel P",
	}
	if !maps.Equal(got, want) {
		t.Errorf("referencedLabelValues = %v, want %v", got, want)
	}
}

func TestDeployReferencesOnlyMetricsPreceptdExports(t *testing.T) {
	preceptd, precept := binaries(t)
	redisAddr := testenv.Redis(t)
	ws := fakeslack.New(t)
	dir := t.TempDir()
	addr := testenv.FreeAddr(t)
	// Slack is on (against a fake workspace) so its metrics are exported
	// as in a deployment that posts proposals; effects passes run every
	// second so a rule's effect series appear soon.
	cfg := writeConfig(t, dir, fmt.Sprintf(`
listen: %s
data_dir: %s
node: deploy-node
redis: {addr: %q}
auth:
  tokens:
    - {name: erin, role: approver, token: erin-token-000000001}
    - {name: alice, role: approver, token: alice-token-00000001}
    - {name: bob, role: approver, token: bob-token-000000001}
effects: {interval: 1s}
slack: {bot_token: %q, signing_secret: "e3b0c44298fc1c149afbf4c8996fb924", channel: C0RULES, api_url: %q}
`, addr, filepath.Join(dir, "data"), redisAddr, fakeslack.Token, ws.APIURL()))
	d := startDaemon(t, preceptd, cfg, addr)

	// The per-rule series (precept_rule_*{rule_id}) exist while a rule is
	// on main: erin proposes one, alice and bob approve it, and it merges.
	cli := func(token string, args ...string) string {
		t.Helper()
		out, err := exec.Command(precept, append([]string{"--addr", "http://" + addr, "--token", token, "-o", "json"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("precept %s: %v\n%s\npreceptd output:\n%s", strings.Join(args, " "), err, out, d.output())
		}
		return string(out)
	}
	id := proposalID.FindString(cli("erin-token-000000001", "proposals", "propose", "--agent", "coding-agent",
		"--text", "Cover every error path of a change with a unit test.", "--rationale", "Reviewers asked for it in three epics."))
	if id == "" {
		t.Fatal("precept proposals propose printed no proposal id")
	}
	cli("alice-token-00000001", "proposals", "approve", id)
	cli("bob-token-000000001", "proposals", "approve", id)
	waitFor(t, "the rule's effect series", 60*time.Second, func() bool { return scrape(t, addr)["precept_rule_change_upper"] }, d.output)

	alerts := readAlerts(t)
	dashboard, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	refs := referencedMetrics(t, alerts, dashboard)
	if len(refs) < 10 {
		t.Fatalf("only %d metrics referenced by the alerts and the dashboard: %v", len(refs), refs)
	}
	samples := scrapeSamples(t, addr)
	exported := map[string]bool{}
	for name := range samples {
		exported[name] = true
	}
	if missing := missingMetrics(refs, exported); len(missing) > 0 {
		t.Errorf("deploy/ reads metrics preceptd does not export (a labelled vector exports nothing until a child exists: create the known label values):\n  %s\npreceptd output:\n%s",
			strings.Join(missing, "\n  "), d.output())
	}

	// The check itself catches a name nothing exports.
	doctored := strings.Replace(string(dashboard), "precept_stream_lag{", "precept_stream_lagg{", 1)
	if missing := missingMetrics(referencedMetrics(t, alerts, []byte(doctored)), exported); len(missing) != 1 || !strings.HasPrefix(missing[0], "precept_stream_lagg ") {
		t.Errorf("a dashboard reading precept_stream_lagg: missing = %v, want it alone", missing)
	}

	// Every label value an equality matcher selects is one a scraped
	// sample has: a typo, or a value never created, would select nothing.
	values := referencedLabelValues(t, alerts, dashboard)
	if len(values) < 5 {
		t.Fatalf("only %d label values selected by the alerts and the dashboard: %v", len(values), values)
	}
	if missing := missingLabelValues(values, samples); len(missing) > 0 {
		t.Errorf("deploy/ selects label values no sample preceptd exports has (create the known label values when preceptd starts):\n  %s\npreceptd output:\n%s",
			strings.Join(missing, "\n  "), d.output())
	}
	// The check itself catches a mistyped label value.
	doctoredAlerts := readAlerts(t)
	for gi, g := range doctoredAlerts.Groups {
		for ri, r := range g.Rules {
			doctoredAlerts.Groups[gi].Rules[ri].Expr = strings.ReplaceAll(r.Expr, `verdict="not_improving"`, `verdict="not_improvingg"`)
		}
	}
	if missing := missingLabelValues(referencedLabelValues(t, doctoredAlerts, dashboard), samples); len(missing) != 1 || !strings.HasPrefix(missing[0], `precept_rules_verdicts{verdict="not_improvingg"} `) {
		t.Errorf("an alert selecting verdict=\"not_improvingg\": missing = %v, want it alone", missing)
	}
}
