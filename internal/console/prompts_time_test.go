package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
	"github.com/precept-dev/precept/gen/precept/v1/preceptv1connect"
	"github.com/precept-dev/precept/rules/rulefmt"
)

// The explorer with 200 rules and a thousand recorded
// versions of the agent's prompt (docs/console.md, "Page time").
func TestPromptExplorerPagesWith200RulesAndManyVersions(t *testing.T) {
	s := startServer(t, tokensYAML)
	files := map[string]string{"prompts/implement.md": "You implement the task you are given.", "prompts/src/_rules.md": "Keep functions short."}
	for i := range 200 {
		agent := "coding-agent"
		if i >= 30 {
			agent = fmt.Sprintf("agent-%d", i%9)
		}
		id := fmt.Sprintf("r-%03d", i)
		b, err := rulefmt.Rule{ID: id, ProposalID: "p-" + id, Agents: []string{agent}, Type: rulefmt.Guideline, Status: rulefmt.Active,
			Importance: rulefmt.Normal, Confidence: 0.5 + float64(i%50)/100,
			Content:   "When a retry loop gives up, return the last error wrapped with the attempt count so callers can tell a timeout from a refusal.",
			Approvals: []rulefmt.Approval{{Approver: "alice", Via: "api"}, {Approver: "bob", Via: "slack"}}}.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		files[rulefmt.ActiveRulePath(agent, id)] = string(b)
	}
	s.commitRules(t, "200 rules", files)
	v := s.signIn(t, ritaToken)
	const page = "/ui/prompts?agent=coding-agent&stage=implement&path=src%2Fapi%2Fx.go"
	status, body := v.get(page)
	if status != http.StatusOK {
		t.Fatalf("explorer: %d\n%s", status, body)
	}
	old := shownVersion(t, body)
	s.commitRules(t, "one more _rules.md", map[string]string{"prompts/src/api/_rules.md": "Validate input first."})
	status, body = v.get(page)
	if status != http.StatusOK {
		t.Fatalf("explorer: %d\n%s", status, body)
	}
	now := shownVersion(t, body)

	// Agents sending their own base prompts make a version each.
	prompts := preceptv1connect.NewPromptServiceClient(&http.Client{Transport: bearer{aliceToken}}, s.url)
	for i := range 1000 {
		base := fmt.Sprintf("Base prompt %d.", i)
		if _, err := prompts.BuildPrompt(context.Background(), connect.NewRequest(&preceptv1.BuildPromptRequest{
			Agent: "coding-agent", Stage: "implement", BasePrompt: &base})); err != nil {
			t.Fatal(err)
		}
	}

	// Past the first page the form still picks two versions to compare:
	// the newest two of the page shown.
	_, last := v.get(page + "&vpage=51")
	if strings.Count(last, `name="to" value="v1:`) != 2 || strings.Count(last, " checked>") != 2 ||
		!regexp.MustCompile(`id="to-0" name="to" value="[^"]+" checked>`).MatchString(last) ||
		!regexp.MustCompile(`id="from-1" name="from" value="[^"]+" checked>`).MatchString(last) {
		t.Errorf("the last page of versions does not pick two versions to compare:\n%s", last)
	}
	// A page past the end shows the last (ListPromptVersions is asked
	// again from the last page's offset).
	toVersion := regexp.MustCompile(`id="to-0" name="to" value="([^"]+)"`)
	_, past := v.get(page + "&vpage=9999")
	if m, want := toVersion.FindStringSubmatch(past), toVersion.FindStringSubmatch(last); m == nil || want == nil || m[1] != want[1] ||
		!strings.Contains(past, "Page 51 of 51") {
		t.Errorf("a page of versions past the end is not the last page:\n%s", past)
	}

	measure := func(what, path string) time.Duration {
		var times []time.Duration
		for range 30 {
			start := time.Now()
			status, body := v.get(path)
			times = append(times, time.Since(start))
			if status != http.StatusOK {
				t.Fatalf("%s: %d\n%s", what, status, body)
			}
		}
		slices.Sort(times)
		t.Logf("%s: median %s, max %s over %d requests", what, times[len(times)/2].Round(time.Microsecond), times[len(times)-1].Round(time.Microsecond), len(times))
		return times[len(times)/2]
	}
	// The pages answer with many versions; their times are logged for a
	// person to read, and held to the budget by BenchmarkConsolePages
	// (a unit test on a busy machine would only be flaky).
	for _, tc := range []struct{ what, path string }{
		{"explorer, 200 rules, 1002 versions", page},
		{"explorer, last page of versions", page + "&vpage=51"},
		{"diff of two versions, 200 rules", page + "&from=" + url.QueryEscape(old) + "&to=" + url.QueryEscape(now)},
	} {
		measure(tc.what, tc.path)
	}
}
