package console_test

import (
	"context"
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
	"github.com/precept-dev/precept/lib/gitrepo"
)

// commitRules commits files to the rules repository's main branch as a
// curator would, and has prompts follow at once.
func (s *server) commitRules(t *testing.T, msg string, files map[string]string) {
	t.Helper()
	var changes []gitrepo.Change
	for p, c := range files {
		changes = append(changes, gitrepo.Change{Path: p, Data: []byte(c)})
	}
	_, err := s.app.RulesRepo.Update(context.Background(), s.app.RulesRepo.DefaultBranch(), func(*gitrepo.Snapshot) (*gitrepo.CommitSpec, error) {
		return &gitrepo.CommitSpec{Message: msg, Changes: changes}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.app.Prompts.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// approvedRule drafts a rule from clusterEvents and approves it twice;
// it returns the rule's id once prompts serve it.
func (s *server) approvedRule(t *testing.T) string {
	t.Helper()
	p := s.pendingProposal(t, aliceToken)
	ctx := context.Background()
	var rule *preceptv1.Rule
	for _, token := range []string{aliceToken, bobToken} {
		resp, err := s.rules(token).ApproveRule(ctx, connect.NewRequest(&preceptv1.ApproveRuleRequest{ProposalId: p.GetProposalId()}))
		if err != nil {
			t.Fatal(err)
		}
		rule = resp.Msg.GetRule()
	}
	if rule.GetRuleId() == "" {
		t.Fatal("two approvals made no rule")
	}
	eventually(t, "prompts to serve the approved rule", 10*time.Second, func() bool {
		s.app.Prompts.Refresh(ctx)
		return slices.Contains(s.app.Prompts.Agents(), "coding-agent")
	})
	return rule.GetRuleId()
}

var promptVersion = regexp.MustCompile(`<dt>Version</dt><dd><code>(v1:[0-9a-f]{16})</code>`)

// shownVersion is the version the explorer shows for the request.
func shownVersion(t *testing.T, body string) string {
	t.Helper()
	m := promptVersion.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("the page shows no prompt version:\n%s", body)
	}
	return m[1]
}

func TestPromptExplorerShowsTheRulesOfAPromptAndDiffsTwoVersions(t *testing.T) {
	s := startServer(t, tokensYAML)
	s.commitRules(t, "stage prompts", map[string]string{
		"prompts/implement.md": "You implement the task you are given.",
		"prompts/review.md":    "You review a change.",
	})
	v := s.signIn(t, ritaToken)

	const page = "/ui/prompts?agent=coding-agent&stage=implement&path=src%2Fapi%2Fhandler.go"
	status, body := v.get(page)
	if status != http.StatusOK {
		t.Fatalf("explorer: %d\n%s", status, body)
	}
	before := shownVersion(t, body)
	mustContain(t, body, "You implement the task you are given.", "No learned rule is in this prompt.", "prompts/implement.md")

	s.xadd(t, clusterEvents()...)
	ruleID := s.approvedRule(t)
	var after string
	eventually(t, "the explorer to show the rule", 10*time.Second, func() bool {
		status, body = v.get(page)
		return status == http.StatusOK && strings.Contains(body, "["+ruleID+"]")
	})
	after = shownVersion(t, body)
	if after == before {
		t.Fatalf("the prompt with a rule kept version %s", before)
	}
	mustContain(t, body,
		`<a href="/ui/rules/`+ruleID+`">`+ruleID+`</a>`,
		"included at position 1",
		"alice, bob",        // approvers
		"1 learned rule",    // the summary
		"prompts/_rules.md", // a _rules.md place on the path, explained
		"no _rules.md here (optional)",
		"served now", // the version list marks the current one
		`name="from" value="`+before+`"`,
	)

	// A _rules.md on the path makes a third version.
	s.commitRules(t, "api rules", map[string]string{"prompts/src/api/_rules.md": "Handlers validate input first."})
	eventually(t, "the explorer to apply the new _rules.md", 10*time.Second, func() bool {
		status, body = v.get(page)
		return status == http.StatusOK && strings.Contains(body, "Handlers validate input first.")
	})
	third := shownVersion(t, body)
	mustContain(t, body, `<span class="badge good">applied</span>`)

	// The rule added: its line with a + marker, and the structural diff.
	status, body = v.get(page + "&from=" + url.QueryEscape(before) + "&to=" + url.QueryEscape(after))
	if status != http.StatusOK {
		t.Fatalf("diff: %d\n%s", status, body)
	}
	// html/template writes "+" as "&#43;".
	mustContain(t, body, "<ins>&#43; ## Learned Rules (from feedback)</ins>", "<ins>&#43; - ["+ruleID+"] ",
		"+ added <a href=\"/ui/rules/"+ruleID+"\">", "The same <code>_rules.md</code> files apply")
	if strings.Contains(body, "<del>") {
		t.Errorf("adding a rule removed lines:\n%s", body)
	}
	// The _rules.md added, and the rule unchanged.
	status, body = v.get(page + "&from=" + url.QueryEscape(after) + "&to=" + url.QueryEscape(third))
	if status != http.StatusOK {
		t.Fatalf("diff: %d\n%s", status, body)
	}
	mustContain(t, body, "+ added <code>prompts/src/api/_rules.md</code>", "<ins>&#43; Handlers validate input first.</ins>",
		"No learned rule was added, removed or moved.")

	// A version nobody served; a version of another stage.
	if status, body = v.get(page + "&from=v1:0000000000000000&to=" + url.QueryEscape(after)); status != http.StatusNotFound {
		t.Errorf("unknown version: %d\n%s", status, body)
	}
	mustContain(t, body, "no prompt version v1:0000000000000000 is recorded")
	status, body = v.get("/ui/prompts?agent=coding-agent&stage=review")
	if status != http.StatusOK {
		t.Fatalf("review stage: %d\n%s", status, body)
	}
	review := shownVersion(t, body)
	if status, body = v.get(page + "&from=" + url.QueryEscape(before) + "&to=" + url.QueryEscape(review)); status != http.StatusBadRequest {
		t.Errorf("a version of another stage: %d\n%s", status, body)
	}
	mustContain(t, body, "is a prompt of agent coding-agent, stage review, not of agent coding-agent, stage implement")

	// An agent that sends its own base prompt: only its digest is
	// recorded, so the diff is structural.
	hc := &http.Client{Transport: bearer{aliceToken}}
	own := "Your own instructions."
	resp, err := preceptv1connect.NewPromptServiceClient(hc, s.url).BuildPrompt(context.Background(),
		connect.NewRequest(&preceptv1.BuildPromptRequest{Agent: "coding-agent", Stage: "implement", ScopePath: "src/api/handler.go", BasePrompt: &own}))
	if err != nil {
		t.Fatal(err)
	}
	status, body = v.get(page + "&from=" + url.QueryEscape(third) + "&to=" + url.QueryEscape(resp.Msg.GetVersion()))
	if status != http.StatusOK {
		t.Fatalf("diff with a client's base prompt: %d\n%s", status, body)
	}
	mustContain(t, body, "Changed: <code>prompts/implement.md</code>", "then <code>request</code>",
		"The texts cannot be compared line by line", "only its digest is recorded")
	if strings.Contains(body, `<pre class="diff"`) {
		t.Errorf("a text that cannot be rebuilt was diffed:\n%s", body)
	}
}

func TestPromptExplorerWithoutRecordedVersionsSaysTheDiffIsUnavailable(t *testing.T) {
	s := startServer(t, tokensYAML+"effects: {enabled: false}\n")
	s.commitRules(t, "stage prompt", map[string]string{"prompts/implement.md": "You implement the task you are given."})
	v := s.signIn(t, ritaToken)
	status, body := v.get("/ui/prompts?agent=coding-agent&stage=implement")
	if status != http.StatusOK {
		t.Fatalf("explorer: %d\n%s", status, body)
	}
	mustContain(t, body, "Versions are not recorded on this server (effects.enabled is off)")
	status, body = v.get("/ui/prompts?agent=coding-agent&stage=implement&from=" + url.QueryEscape(shownVersion(t, body)) + "&to=v1:0000000000000000")
	if status != http.StatusServiceUnavailable {
		t.Errorf("diff without versions: %d\n%s", status, body)
	}
	mustContain(t, body, "so two cannot be compared")
	// So is a comparison missing a version.
	if status, body = v.get("/ui/prompts?agent=coding-agent&stage=implement&from=&to=v1:0000000000000000"); status != http.StatusServiceUnavailable {
		t.Errorf("diff of one version without versions: %d\n%s", status, body)
	}
}

func TestPromptExplorerAnswersABadRequestWithTheFormAndTheProblem(t *testing.T) {
	s := startServer(t, tokensYAML)
	v := s.signIn(t, ritaToken)
	for _, tc := range []struct {
		path, want string
		status     int
	}{
		{"/ui/prompts?agent=..%2Fetc&stage=implement", `agent: &#34;../etc&#34; may only hold letters`, http.StatusBadRequest},
		{"/ui/prompts?agent=coding-agent&stage=implement&path=..%2Fsecret", "scope_path", http.StatusBadRequest},
		{"/ui/prompts?agent=coding-agent", "stage: required", http.StatusBadRequest},
		{"/ui/prompts?agent=coding-agent&stage=implement&xpage=0", "xpage: &#34;0&#34; is not a page number", http.StatusBadRequest},
		// No base prompt: the page explains, it does not fail.
		{"/ui/prompts?agent=coding-agent&stage=implement", `no base prompt for stage &#34;implement&#34;`, http.StatusOK},
	} {
		status, body := v.get(tc.path)
		if status != tc.status {
			t.Errorf("%s: %d, want %d\n%s", tc.path, status, tc.status, body)
		}
		mustContain(t, body, tc.want)
		if tc.status == http.StatusBadRequest && !strings.Contains(tc.want, "xpage") {
			mustContain(t, body, `<form class="filters" method="get" action="/ui/prompts">`, `role="alert"`)
		}
	}
	// The empty form.
	status, body := v.get("/ui/prompts")
	if status != http.StatusOK || strings.Contains(body, "Assembled prompt") {
		t.Errorf("the empty form: %d\n%s", status, body)
	}
	mustContain(t, body, `<label for="agent">Agent</label>`, `<label for="stage">Stage</label>`, `<label for="path">`)
}
