package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"google.golang.org/protobuf/types/known/timestamppb"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
	"github.com/precept-dev/precept/lib/testenv"
)

// TestConsoleInARealBrowser drives Debian's chromium against a real
// preceptd on real Redis (docs/console.md, "Tests in a real browser"):
// approvers sign in through the form in browsers of their own, approve a
// drafted proposal twice, see the rule and its effect chart, roll it
// back; forms without the session's CSRF token and a reader's approval
// are refused; an open queue follows a decision made through the API;
// every page is photographed at 1280 and 390 px and must fit a phone and
// be usable from the keyboard.
func TestConsoleInARealBrowser(t *testing.T) {
	began := time.Now()
	s := startServer(t, tokensYAML)
	browser := testenv.Chromium(t, 1280, 900)
	dir := screenshots(t)

	alice := s.newTab(t, browser, "alice")
	bob := s.newTab(t, browser, "bob")
	rita := s.newTab(t, browser, "rita")
	root := s.newTab(t, browser, "root")
	for _, v := range []struct {
		tab   *tab
		token string
	}{{alice, aliceToken}, {bob, bobToken}, {rita, ritaToken}, {root, rootToken}} {
		v.tab.signIn(t, v.token)
	}

	s.xadd(t, clusterEvents()...)
	s.xadd(t, reviewEvents("live", "the parser error does not name the file that failed",
		"parser errors should name the file that failed to parse",
		"the error from the parser never names the failing file")...)
	s.xadd(t, reviewEvents("wait", "the changelog has no entry for this user-facing change",
		"a user-facing change like this needs a changelog entry",
		"add a changelog entry: users will notice this change")...)
	// flow is approved and rolled back, live is rejected while the queue
	// is open, waiting stays pending for the screenshots.
	drafted := s.proposalsFrom(t, "rule-d", "live-d", "wait-d")
	flow, live, waiting := drafted[0], drafted[1], drafted[2]
	t.Run("the queue shows drafted proposals", func(t *testing.T) {
		alice.open(t, "/ui/queue")
		alice.eventually(t, "the proposals in the queue", 10*time.Second, func() bool {
			return alice.has(t, "#proposal-"+flow.GetProposalId()) && alice.has(t, "#proposal-"+live.GetProposalId()) && alice.has(t, "#proposal-"+waiting.GetProposalId())
		})
	})

	t.Run("forms without the CSRF token are refused", func(t *testing.T) {
		approve := "/ui/proposals/" + flow.GetProposalId() + "/approve"
		if status := alice.fetchPost(t, approve, `{note: 'x'}`); status != http.StatusForbidden {
			t.Errorf("a script's POST without the CSRF field: %d, want 403", status)
		}
		jar := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		cookie := alice.cookie(t)
		get, _ := http.NewRequest(http.MethodGet, s.url+"/ui/proposals/"+flow.GetProposalId(), nil)
		get.AddCookie(cookie)
		if resp, err := jar.Do(get); err != nil {
			t.Fatal(err)
		} else if resp.Body.Close(); resp.StatusCode != http.StatusOK {
			t.Errorf("the copied session cookie opens the proposal with %d, want 200", resp.StatusCode)
		}
		post, _ := http.NewRequest(http.MethodPost, s.url+approve, strings.NewReader(url.Values{"note": {"x"}}.Encode()))
		post.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		post.AddCookie(cookie)
		resp, err := jar.Do(post)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("a POST with the session cookie and no CSRF field: %d, want 403", resp.StatusCode)
		}
		s.mustHaveApprovals(t, flow.GetProposalId(), 0)
	})

	t.Run("a reader sees no Approve button and cannot approve", func(t *testing.T) {
		if status := rita.open(t, "/ui/proposals/"+flow.GetProposalId()); status != http.StatusOK || !rita.has(t, "#status") {
			t.Fatalf("rita opens the proposal: %d, status shown: %v", status, rita.has(t, "#status"))
		}
		for _, sel := range []string{"#approve", "#approve-button", "#reject-button"} {
			if rita.has(t, sel) {
				t.Errorf("a reader's proposal page has %s", sel)
			}
		}
		csrf := rita.csrf(t)
		if csrf == "" {
			t.Fatal("rita's page has no CSRF token in its sign-out form")
		}
		status := rita.fetchPost(t, "/ui/proposals/"+flow.GetProposalId()+"/approve", fmt.Sprintf(`{csrf: %q, note: 'x'}`, csrf))
		if status != http.StatusForbidden {
			t.Errorf("a reader's approval with her valid CSRF token: %d, want 403", status)
		}
		s.mustHaveApprovals(t, flow.GetProposalId(), 0)
	})

	t.Run("an open queue follows a decision made elsewhere", func(t *testing.T) {
		alice.followsRejection(t, s, live)
	})

	var ruleID string
	t.Run("two approvals make a rule that can be rolled back", func(t *testing.T) {
		approveAndRollBack(t, alice, bob, flow, &ruleID)
	})

	t.Run("every page at 1280 and 390 px", func(t *testing.T) {
		guest := s.newTab(t, browser, "guest")
		pages := []struct{ name, path string }{
			{"queue", "/ui/queue"},
			{"proposal", "/ui/proposals/" + waiting.GetProposalId()},
			{"proposal-approved", "/ui/proposals/" + flow.GetProposalId()},
			{"rules", "/ui/rules"},
			{"rule", "/ui/rules/" + ruleID},
			{"clusters", "/ui/clusters"},
			{"cluster", "/ui/clusters/" + flow.GetClusterId()},
			{"prompts", "/ui/prompts"},
			{"prompt", "/ui/prompts?agent=coding-agent&stage=implementation&path=src/api/handler.go"},
			{"analytics", "/ui/analytics"},
			{"needs-review", "/ui/review"},
			{"dead-letters", "/ui/deadletters"},
			{"sessions", "/ui/sessions"},
		}
		for _, width := range []int{1280, 390} {
			root.viewport(t, width)
			for _, p := range pages {
				if p.name == "rule" && ruleID == "" {
					t.Errorf("rule page at %d px: no rule was made", width)
					continue
				}
				root.checkPage(t, dir, p.name, p.path, width)
			}
			guest.viewport(t, width)
			guest.checkSignInPage(t, dir, width)
		}
	})
	t.Run("analytics shows the rubric fill rates GetAnalytics reports, on a phone", func(t *testing.T) {
		rita.viewport(t, 390)
		defer rita.viewport(t, 1280)
		if status := rita.open(t, "/ui/analytics?from=2026-11-01&to=2026-11-30&by=week"); status != http.StatusOK {
			t.Fatalf("analytics page answers %d", status)
		}
		resp, err := s.analyticsClient().GetAnalytics(context.Background(), connect.NewRequest(&preceptv1.GetAnalyticsRequest{
			From: timestamppb.New(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)), To: timestamppb.New(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)),
		}))
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, f := range resp.Msg.GetTotals().GetRubricFill() {
			want = append(want, fmt.Sprintf("%s|%d of %d|%.1f%%", f.GetAttribute(), f.GetMet(), f.GetEvaluations(), 100*f.GetRate()))
		}
		got := eval[[]string](t, rita, `[...document.querySelectorAll('#rubric-fill tbody tr')].map(r => [...r.cells].map(c => c.innerText.trim()).join('|'))`)
		if len(want) == 0 || !slices.Equal(got, want) {
			t.Errorf("the fill-rate table reads %q, GetAnalytics reports %q", got, want)
		}
		if h := eval[string](t, rita, `document.querySelector('#unclear-h').innerText`); h != "Unclear feedback" {
			t.Errorf("the unclear-feedback heading reads %q", h)
		}
		if sw, iw := eval[int](t, rita, "document.documentElement.scrollWidth"), eval[int](t, rita, "window.innerWidth"); sw > iw+1 {
			t.Errorf("analytics with the fill rates scrolls sideways at 390 px: %d px wide; widest: %s", sw, eval[string](t, rita, widestJS))
		}
	})
	t.Logf("browser test took %s", time.Since(began).Round(time.Millisecond))
}

// reviewEvents are three reviews of one recurring problem, worded as
// comments, by three reviewers in two epics: enough for a proposal. Their
// decision ids start with prefix-d.
func reviewEvents(prefix string, comments ...string) []map[string]any {
	var out []map[string]any
	for i, c := range comments {
		out = append(out, event(fmt.Sprintf("%s-d%d", prefix, i+1),
			"reviewer_id", fmt.Sprintf("%s-rev-%d", prefix, i+1),
			"epic_id", fmt.Sprintf("EPIC-%s-%d", prefix, i%2),
			"reviewer_comment", c))
	}
	return out
}

// proposalsFrom waits for a pending proposal drafted from the decisions
// whose ids start with each prefix, and returns them in that order.
func (s *server) proposalsFrom(t *testing.T, prefixes ...string) []*preceptv1.Proposal {
	t.Helper()
	found := make([]*preceptv1.Proposal, len(prefixes))
	eventually(t, fmt.Sprintf("proposals drafted from %v", prefixes), 30*time.Second, func() bool {
		resp, err := s.rules(aliceToken).ListProposals(context.Background(), connect.NewRequest(&preceptv1.ListProposalsRequest{Status: preceptv1.ProposalStatus_PROPOSAL_STATUS_PENDING}))
		if err != nil {
			return false
		}
		for _, p := range resp.Msg.GetProposals() {
			for i, prefix := range prefixes {
				if slices.ContainsFunc(p.GetCreatedFromFeedbackIds(), func(id string) bool { return strings.HasPrefix(id, prefix) }) {
					found[i] = p
				}
			}
		}
		return !slices.Contains(found, nil)
	})
	return found
}

// mustHaveApprovals fails unless the proposal has n approvals.
func (s *server) mustHaveApprovals(t *testing.T, proposalID string, n int) {
	t.Helper()
	resp, err := s.rules(aliceToken).GetProposal(context.Background(), connect.NewRequest(&preceptv1.GetProposalRequest{ProposalId: proposalID}))
	if err != nil {
		t.Fatal(err)
	}
	if got := len(resp.Msg.GetProposal().GetApprovals()); got != n {
		t.Errorf("proposal %s has %d approvals, want %d", proposalID, got, n)
	}
}

// followsRejection opens the queue, has bob reject p through the API as
// if in Slack, and waits for the card to leave the page without a
// reload.
func (b *tab) followsRejection(t *testing.T, s *server, p *preceptv1.Proposal) {
	t.Helper()
	// The page must be following changes before bob decides: wait for
	// its event stream to be answered.
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	responses := chromedp.Events(ctx, network.ResponseReceived)
	if status := b.open(t, "/ui/queue"); status != http.StatusOK {
		t.Fatalf("queue: %d", status)
	}
	for ev, err := range responses {
		if err != nil {
			t.Fatalf("the queue never opened /ui/events: %v", err)
		}
		if strings.HasSuffix(ev.Response.URL, "/ui/events") {
			break
		}
	}
	card := "#proposal-" + p.GetProposalId()
	if !b.has(t, card) || !eval[bool](t, b, "(document.body.dataset.live || '').split(' ').includes('rules')") {
		t.Fatalf("the queue lacks %s or does not follow rule changes (data-live %q)", card, eval[string](t, b, "document.body.dataset.live || ''"))
	}
	// A navigation would drop this mark; a content reload keeps it.
	eval[bool](t, b, "window.stillHere = true")
	_, err := s.rules(bobToken).RejectRule(context.Background(), connect.NewRequest(&preceptv1.RejectRuleRequest{
		ProposalId: p.GetProposalId(), Reason: "covered by the linter already",
	}))
	if err != nil {
		t.Fatalf("bob rejects through the API: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for b.has(t, card) || eval[string](t, b, "document.body.dataset.updated || ''") == "" {
		if time.Now().After(deadline) {
			t.Fatalf("the open queue still shows %s 10 s after the rejection (data-updated %q)", card, eval[string](t, b, "document.body.dataset.updated || ''"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !eval[bool](t, b, "window.stillHere === true") {
		t.Error("the queue was reloaded as a whole, not updated in place")
	}
}

// approveAndRollBack has alice approve p from the keyboard and bob with
// the mouse, follows the proposal to its rule and rolls the rule back;
// it sets *ruleID as soon as the rule is made.
func approveAndRollBack(t *testing.T, alice, bob *tab, p *preceptv1.Proposal, ruleID *string) {
	id := p.GetProposalId()
	page := "/ui/proposals/" + id
	alice.open(t, "/ui/queue")
	link := fmt.Sprintf(`#proposal-%s a[href="%s"]`, id, page)
	if !alice.has(t, link) {
		t.Fatalf("the queue has no %s", link)
	}
	if status := alice.followLink(t, "open the proposal from the queue", link); status != http.StatusOK || alice.path(t) != page {
		t.Fatalf("the queue's link leads to %s (%d), want %s", alice.path(t), status, page)
	}
	if st := alice.text(t, "#status"); !strings.Contains(st, "PENDING") {
		t.Fatalf("a new proposal's status reads %q", st)
	}

	// Alice, keyboard only: Tab to the note, type it, Tab to Approve,
	// press Enter.
	alice.open(t, page)
	if path, err := alice.tabTo(t, "#approve-note", 80); err != nil {
		t.Fatal(err)
	} else if path[0].String() != `a[#main]` {
		t.Errorf("the first Tab on the proposal page reaches %s, want the skip link", path[0])
	}
	alice.do(t, "type a note", chromedp.KeyEvent("Checked all three reviews."))
	if _, err := alice.tabTo(t, "#approve-button", 5); err != nil {
		t.Fatal(err)
	}
	if status := alice.follow(t, "press Enter on Approve", chromedp.KeyEvent(kb.Enter)); status != http.StatusOK {
		t.Fatalf("alice's approval leads to a %d page", status)
	}
	alice.open(t, page)
	if a := alice.text(t, "#approvals"); !strings.Contains(a, "alice") {
		t.Fatalf("after alice's approval the approvals read %q", a)
	}
	if st := alice.text(t, "#status"); !strings.Contains(st, "PENDING") {
		t.Errorf("after one of two approvals the status reads %q", st)
	}

	// Bob, in his own browser, with the mouse.
	bob.open(t, page)
	bob.do(t, "write a note", chromedp.SendKeys(chromedp.ID("approve-note"), "Agreed."))
	if status := bob.follow(t, "click Approve", chromedp.Click(chromedp.ID("approve-button"))); status != http.StatusOK {
		t.Fatalf("bob's approval leads to a %d page", status)
	}
	bob.open(t, page)
	bob.eventually(t, "the rule link", 20*time.Second, func() bool { return bob.has(t, "#rule-link") })
	if st := bob.text(t, "#status"); !strings.Contains(st, "APPROVED") {
		t.Errorf("after two approvals the status reads %q", st)
	}
	if a := bob.text(t, "#approvals"); !strings.Contains(a, "alice") || !strings.Contains(a, "bob") {
		t.Errorf("the approvals read %q, want alice and bob", a)
	}
	href := eval[string](t, bob, `document.getElementById('rule-link').getAttribute('href')`)
	id, ok := strings.CutPrefix(href, "/ui/rules/")
	if !ok || id == "" {
		t.Fatalf("the rule link points to %q", href)
	}
	*ruleID = id
	rule := "/ui/rules/" + id

	// The rule in the list and on its own page, with its effect chart.
	bob.open(t, "/ui/rules")
	if !bob.has(t, "#rule-"+id) {
		t.Errorf("the rules page lacks #rule-%s", id)
	}
	if status := bob.open(t, rule); status != http.StatusOK {
		t.Fatalf("rule page: %d", status)
	}
	for _, sel := range []string{"#status", "#effect svg", "#history", "#rollback-link"} {
		if !bob.has(t, sel) {
			t.Errorf("the rule page lacks %s", sel)
		}
	}

	// Alice rolls it back through the confirmation page.
	alice.open(t, rule)
	if status := alice.follow(t, "follow the rollback link", chromedp.Click(chromedp.ID("rollback-link"))); status != http.StatusOK || alice.path(t) != rule+"/rollback" {
		t.Fatalf("the rollback link leads to %s (%d)", alice.path(t), status)
	}
	alice.do(t, "give a reason", chromedp.SendKeys(chromedp.ID("rollback-reason"), "Too broad for the parser package."))
	if status := alice.follow(t, "confirm the rollback", chromedp.Click(chromedp.ID("rollback-button"))); status != http.StatusOK {
		t.Fatalf("the rollback leads to a %d page", status)
	}
	alice.open(t, rule)
	alice.eventually(t, "ROLLED BACK", 10*time.Second, func() bool {
		return strings.Contains(alice.text(t, "#status"), "ROLLED BACK")
	})
}

// navLinks are the console's menu entries an admin sees.
var navLinks = []string{"/ui/queue", "/ui/clusters", "/ui/rules", "/ui/prompts", "/ui/analytics", "/ui/review", "/ui/deadletters", "/ui/sessions"}

// checkPage opens a page at width px, photographs it, and checks that it
// answers 200, fits a phone without scrolling sideways (at 390 px), and
// that Tab from the top reaches the skip link first, then every menu
// entry, and that the skip link moves the focus to the content.
func (b *tab) checkPage(t *testing.T, dir, name, path string, width int) {
	t.Helper()
	if status := b.open(t, path); status != http.StatusOK {
		t.Errorf("%s (%s) at %d px answers %d", name, path, width, status)
	}
	b.screenshot(t, dir, name, width)
	if width < 600 {
		if sw, iw := eval[int](t, b, "document.documentElement.scrollWidth"), eval[int](t, b, "window.innerWidth"); sw > iw+1 {
			t.Errorf("%s (%s) scrolls sideways at %d px: %d px wide; widest: %s", name, path, width, sw, eval[string](t, b, widestJS))
		}
	}
	first := b.press(t, kb.Tab)
	if first.Tag != "a" || first.Href != "#main" {
		t.Errorf("%s at %d px: the first Tab reaches %s, want the skip link", name, width, first)
	}
	reached := []string{}
	for range 2 * len(navLinks) {
		reached = append(reached, b.press(t, kb.Tab).Href)
	}
	for _, l := range navLinks {
		if !slices.Contains(reached, l) {
			t.Errorf("%s at %d px: Tab from the top never reaches the menu entry %s (reached %v)", name, width, l, reached)
		}
	}
	b.open(t, path)
	b.press(t, kb.Tab)
	if f := b.press(t, kb.Enter); f.Tag != "main" {
		t.Errorf("%s at %d px: the skip link leaves the focus on %s, want main", name, width, f)
	}
}

// checkSignInPage photographs the sign-in page of a visitor who has not
// signed in, and checks it as checkPage does; the token field has the
// focus from the start, and the keyboard reaches the button from it.
func (b *tab) checkSignInPage(t *testing.T, dir string, width int) {
	t.Helper()
	if status := b.open(t, "/ui/signin"); status != http.StatusOK {
		t.Errorf("sign-in page at %d px answers %d", width, status)
	}
	b.screenshot(t, dir, "signin", width)
	if sw, iw := eval[int](t, b, "document.documentElement.scrollWidth"), eval[int](t, b, "window.innerWidth"); sw > iw+1 {
		t.Errorf("the sign-in page scrolls sideways at %d px: %d px wide; widest: %s", width, sw, eval[string](t, b, widestJS))
	}
	if f := eval[focused](t, b, focusedJS); f.ID != "token" {
		t.Errorf("sign-in page at %d px: the focus starts on %s, want the token field", width, f)
	}
	if _, err := b.tabTo(t, `form.signin button[type="submit"]`, 3); err != nil {
		t.Errorf("sign-in page at %d px: %v", width, err)
	}
}

// widestJS names the elements that make the page wider than the
// viewport, innermost first: those whose box or content (an unbroken
// word) reaches past its right edge, where no scrolling box clips them
// (an absolutely placed element escapes a scrolling box that is not its
// containing block).
const widestJS = `(() => {
  const clipped = e => {
    if (['absolute', 'fixed'].includes(getComputedStyle(e).position)) return false;
    for (let a = e.parentElement; a && a !== document.body; a = a.parentElement) {
      if (getComputedStyle(a).overflowX !== 'visible') return true;
    }
    return false;
  };
  const right = e => {
    const r = e.getBoundingClientRect();
    // A scrolling box keeps its content's overflow to itself.
    return getComputedStyle(e).overflowX !== 'visible' ? r.right : Math.max(r.right, r.left + e.scrollWidth);
  };
  const depth = e => { let d = 0; for (; e; e = e.parentElement) d++; return d; };
  const name = e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') +
    (typeof e.className === 'string' && e.className.trim() ? '.' + e.className.trim().split(/\s+/).join('.') : '');
  return Array.from(document.querySelectorAll('body *'))
    .filter(e => right(e) > window.innerWidth + 1 && !clipped(e))
    .sort((a, b) => depth(b) - depth(a))
    .slice(0, 3)
    .map(e => name(e) + ' "' + (e.innerText || '').trim().slice(0, 40) + '…" (to ' + Math.round(right(e)) + ' px)')
    .join('; ') || 'none found';
})()`
