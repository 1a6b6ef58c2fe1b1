package console_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"connectrpc.com/connect"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
)

// TestAProposalIsReviewedApprovedAndRolledBackInTheConsole walks the
// review flow through the console's forms, as a browser without
// JavaScript would, with the policy the API enforces.
func TestAProposalIsReviewedApprovedAndRolledBackInTheConsole(t *testing.T) {
	s := startServer(t, tokensYAML)
	s.xadd(t, clusterEvents()...)
	p := s.pendingProposal(t, ritaToken)
	id := p.GetProposalId()

	alice := s.signIn(t, aliceToken)
	status, body := alice.get("/ui/queue")
	if status != http.StatusOK {
		t.Fatalf("queue: %d\n%s", status, body)
	}
	mustContain(t, body, `id="proposal-`+id+`"`, `href="/ui/proposals/`+id+`"`, "3 decisions", "0 of 2")

	status, body = alice.get("/ui/proposals/" + id)
	if status != http.StatusOK {
		t.Fatalf("proposal: %d\n%s", status, body)
	}
	mustContain(t, body, `id="status">PENDING`, p.GetRuleContent(), "3 distinct reviewers", "2 distinct epics",
		"missing unit tests for the new retry helper", `href="/ui/decisions/rule-d1"`, p.GetBranch(), `id="approve"`, `id="reject"`,
		// Where each clause of the rule came from.
		`id="clauses"`, "Where each clause comes from")
	rev := revisionOf(t, body)

	// A reader sees the proposal but no forms, and cannot post one.
	rita := s.signIn(t, ritaToken)
	status, body = rita.get("/ui/proposals/" + id)
	if status != http.StatusOK || strings.Contains(body, `id="approve"`) {
		t.Fatalf("reader's proposal page: %d, approve form shown: %v", status, strings.Contains(body, `id="approve"`))
	}
	if status, body := rita.post("/ui/proposals/"+id+"/approve", url.Values{"revision": {rev}}); status != http.StatusForbidden {
		t.Fatalf("reader approved: %d\n%s", status, body)
	}
	// A form without the CSRF token is refused before anything happens.
	if status, _ := alice.post("/ui/proposals/"+id+"/approve", url.Values{"revision": {rev}, "csrf": {""}}); status != http.StatusForbidden {
		t.Fatalf("CSRF-less approval: %d", status)
	}

	// alice approves with a note.
	status, loc := alice.post("/ui/proposals/"+id+"/approve", url.Values{"revision": {rev}, "note": {"reads well"}})
	if status != http.StatusSeeOther || loc != "/ui/proposals/"+id+"?done=approved" {
		t.Fatalf("approve: %d %q", status, loc)
	}
	_, body = alice.get(loc)
	mustContain(t, body, "Your approval was recorded.", "alice via console", "reads well", "You approved this revision already")
	// A second approval by alice is what the API makes of it: a no-op,
	// still one of two distinct approvers.
	if status, _ := alice.post("/ui/proposals/"+id+"/approve", url.Values{"revision": {revisionOf(t, body)}}); status != http.StatusSeeOther {
		t.Fatalf("alice's repeated approval: %d", status)
	}
	_, body = alice.get("/ui/proposals/" + id)
	mustContain(t, body, "1 of 2 required", `id="status">PENDING`)

	// A form for a revision the proposal never had is refused by the
	// revision check, with what to do.
	bob := s.signIn(t, bobToken)
	status, body = bob.post("/ui/proposals/"+id+"/approve", url.Values{"revision": {"99"}})
	if status != http.StatusConflict {
		t.Fatalf("approval of an unknown revision: %d\n%s", status, body)
	}
	mustContain(t, body, "revision 99", `id="back" href="/ui/proposals/`+id+`"`)

	status, body = bob.get("/ui/proposals/" + id)
	if status != http.StatusOK {
		t.Fatalf("proposal: %d", status)
	}
	if status, loc := bob.post("/ui/proposals/"+id+"/approve", url.Values{"revision": {revisionOf(t, body)}}); status != http.StatusSeeOther {
		t.Fatalf("bob's approval: %d %q", status, loc)
	}
	_, body = bob.get("/ui/proposals/" + id)
	mustContain(t, body, `id="status">APPROVED`, `id="rule-link"`)
	ruleID := regexp.MustCompile(`id="rule-link" href="/ui/rules/(r-[^"]+)"`).FindStringSubmatch(body)
	if ruleID == nil {
		t.Fatalf("no rule link:\n%s", body)
	}
	rule := ruleID[1]

	// The API agrees: the console's approvals are the API's.
	got, err := s.rules(ritaToken).GetRule(context.Background(), connect.NewRequest(&preceptv1.GetRuleRequest{RuleId: rule}))
	if err != nil {
		t.Fatal(err)
	}
	if a := got.Msg.GetRule().GetApprovals(); len(a) != 2 || a[0].GetApprover() != "alice" || a[1].GetApprover() != "bob" || a[0].GetNote() != "reads well" {
		t.Fatalf("approvals = %v", a)
	}

	_, body = alice.get("/ui/rules")
	mustContain(t, body, `id="rule-`+rule+`"`, "ACTIVE")
	status, body = alice.get("/ui/rules/" + rule)
	if status != http.StatusOK {
		t.Fatalf("rule page: %d\n%s", status, body)
	}
	mustContain(t, body, `id="status">ACTIVE`, `id="effect"`, `id="history"`, "Approved-by", `id="rollback-link"`)
	if _, body := rita.get("/ui/rules/" + rule); strings.Contains(body, `id="rollback-link"`) {
		t.Error("a reader is offered a rollback")
	}

	// Rollback: a confirmation page, then the POST with a reason.
	status, body = alice.get("/ui/rules/" + rule + "/rollback")
	if status != http.StatusOK {
		t.Fatalf("rollback page: %d", status)
	}
	mustContain(t, body, `id="rollback"`, p.GetRuleContent())
	if status, _ := alice.post("/ui/rules/"+rule+"/rollback", url.Values{"reason": {" "}}); status != http.StatusBadRequest {
		t.Fatalf("rollback without a reason: %d", status)
	}
	if status, loc := alice.post("/ui/rules/"+rule+"/rollback", url.Values{"reason": {"too broad"}}); status != http.StatusSeeOther || loc != "/ui/rules/"+rule+"?done=rolledback" {
		t.Fatalf("rollback: %d %q", status, loc)
	}
	_, body = alice.get("/ui/rules/" + rule)
	mustContain(t, body, `id="status">ROLLED BACK`, "too broad")
	_, body = alice.get("/ui/rules?status=retired")
	mustContain(t, body, `id="rule-`+rule+`"`)
	if _, body := alice.get("/ui/rules"); strings.Contains(body, `id="rule-`+rule+`"`) {
		t.Error("a rolled-back rule is listed as active")
	}
	if status, _ := alice.get("/ui/rules/" + rule + "/rollback"); status != http.StatusConflict {
		t.Fatalf("rollback page of a rolled-back rule: %d", status)
	}
}

func TestPagesAnswerUnknownIdsAndBadInputWithTheRightStatus(t *testing.T) {
	s := startServer(t, tokensYAML)
	alice := s.signIn(t, aliceToken)
	alice.get("/ui/queue")
	for _, tc := range []struct {
		method, path string
		want         int
	}{
		{"GET", "/ui/proposals/p-doesnotexist", http.StatusNotFound},
		{"GET", "/ui/proposals/..%2f..%2fetc", http.StatusBadRequest},
		{"GET", "/ui/rules/r-doesnotexist", http.StatusNotFound},
		{"GET", "/ui/rules/not-a-rule-id", http.StatusBadRequest},
		{"GET", "/ui/rules/r-doesnotexist/rollback", http.StatusNotFound},
		{"GET", "/ui/decisions/nope", http.StatusNotFound},
		{"GET", "/ui/rules?status=everything", http.StatusBadRequest},
		{"GET", "/ui/queue?after=@@@", http.StatusBadRequest},
		{"GET", "/ui/queue?after=cC11bmtub3du", http.StatusBadRequest},
		{"GET", "/ui/nothing-here", http.StatusNotFound},
		{"GET", "/ui/static/nothing.js", http.StatusNotFound},
		{"POST", "/ui/proposals/p-doesnotexist/approve", http.StatusNotFound},
		{"POST", "/ui/proposals/p-doesnotexist/reject", http.StatusNotFound},
		{"POST", "/ui/rules/r-doesnotexist/rollback", http.StatusNotFound},
	} {
		var status int
		var body string
		if tc.method == "GET" {
			status, body = alice.get(tc.path)
		} else {
			status, body = alice.post(tc.path, url.Values{"revision": {"1"}, "reason": {"because"}})
		}
		if status != tc.want {
			t.Errorf("%s %s: %d, want %d\n%s", tc.method, tc.path, status, tc.want, body)
		}
		if strings.Contains(body, "panic") || strings.Contains(body, "goroutine") {
			t.Errorf("%s %s leaks internals:\n%s", tc.method, tc.path, body)
		}
	}
	// A form that does not say which revision was reviewed is refused.
	if status, _ := alice.post("/ui/proposals/p-doesnotexist/approve", url.Values{"revision": {"x"}}); status != http.StatusBadRequest {
		t.Errorf("approval without a revision: %d", status)
	}
}

func TestAnExpiredSessionSignsInAgainAndItsFormsAreRefused(t *testing.T) {
	s := startServer(t, tokensYAML+"ui: {session_idle: 1m, session_max: 2m}\n")
	alice := s.signIn(t, aliceToken)
	alice.get("/ui/queue")
	// Expire it in Redis as time would.
	keys, err := s.rdb.Keys(context.Background(), s.app.Config.Redis.Stream+":ui:session:*").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("session keys = %v, %v", keys, err)
	}
	if err := s.rdb.Del(context.Background(), keys...).Err(); err != nil {
		t.Fatal(err)
	}
	if status, loc := alice.get("/ui/rules?status=shadow"); status != http.StatusSeeOther || loc != "/ui/signin?next=%2Fui%2Frules%3Fstatus%3Dshadow" {
		t.Fatalf("expired session, GET: %d %q", status, loc)
	}
	status, body := alice.post("/ui/proposals/p-x/approve", url.Values{"revision": {"1"}})
	if status != http.StatusUnauthorized {
		t.Fatalf("expired session, POST: %d", status)
	}
	mustContain(t, body, "sign in again")
}

var revisionField = regexp.MustCompile(`name="revision" value="(\d+)"`)

// revisionOf reads the revision a proposal page's forms carry.
func revisionOf(t *testing.T, body string) string {
	t.Helper()
	m := revisionField.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no revision in the page:\n%s", body)
	}
	if _, err := strconv.Atoi(m[1]); err != nil {
		t.Fatal(err)
	}
	return m[1]
}

func TestTheQueueShowsTheMostEvidenceFirstOnePageAtATime(t *testing.T) {
	s := startServer(t, tokensYAML)
	ctx := context.Background()
	texts := []string{
		"Name every exported function after what it returns.",
		"Return errors wrapped with the operation that failed.",
		"Close every file you open, on every path.",
	}
	// Evidence 1, 3 and 2, proposed in that order.
	evidence := [][]string{{"q-1"}, {"q-2", "q-3", "q-4"}, {"q-5", "q-6"}}
	var ids []string
	for i, text := range texts {
		resp, err := s.rules(aliceToken).ProposeRule(ctx, connect.NewRequest(&preceptv1.ProposeRuleRequest{
			AffectedAgents: []string{"coding-agent"}, RuleContent: text, Rationale: "seen in review", FeedbackIds: evidence[i],
		}))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, resp.Msg.GetProposal().GetProposalId())
	}
	v := s.signIn(t, ritaToken)
	_, body := v.get("/ui/queue")
	mustContain(t, body, "3 pending")
	at := func(id string) int { return strings.Index(body, `id="proposal-`+id+`"`) }
	if !(at(ids[1]) >= 0 && at(ids[1]) < at(ids[2]) && at(ids[2]) < at(ids[0])) {
		t.Fatalf("queue order: 3 decisions at %d, 2 at %d, 1 at %d; want most evidence first", at(ids[1]), at(ids[2]), at(ids[0]))
	}
	if strings.Contains(body, "Next page") {
		t.Fatal("a next page with 3 proposals")
	}
	if got := strings.Count(body, `class="card proposal"`); got != 3 {
		t.Fatalf("%d cards", got)
	}
}
