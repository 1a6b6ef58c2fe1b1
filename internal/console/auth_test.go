package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestSignInExchangesATokenForAStrictHttpOnlySession(t *testing.T) {
	s := startServer(t, tokensYAML)
	v := s.visitor(t)
	if status, loc := v.get("/ui/queue"); status != http.StatusSeeOther || loc != "/ui/signin?next=%2Fui%2Fqueue" {
		t.Fatalf("unsigned visit: %d %q; want a redirect to sign in", status, loc)
	}
	v.get("/ui/signin")
	resp, err := v.hc.PostForm(s.url+"/ui/signin", url.Values{"token": {aliceToken}, "csrf": {v.csrf}, "next": {"/ui/rules"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/rules" {
		t.Fatalf("sign in: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	var cookie string
	for _, c := range resp.Header.Values("Set-Cookie") {
		if strings.HasPrefix(c, "precept_session=") {
			cookie = c
		}
	}
	for _, want := range []string{"HttpOnly", "SameSite=Strict", "Path=/ui/"} {
		if !strings.Contains(cookie, want) {
			t.Errorf("session cookie %q lacks %s", cookie, want)
		}
	}
	if strings.Contains(cookie, "Secure") {
		t.Errorf("session cookie %q is Secure over plain HTTP without ui.secure_cookies", cookie)
	}
	if strings.Contains(s.logs.String(), aliceToken) {
		t.Error("the token reached the logs")
	}
	status, body := v.get("/ui/sessions")
	if status != http.StatusForbidden {
		t.Fatalf("an approver opened the sessions page: %d", status)
	}
	mustContain(t, body, "alice has role approver")

	// Signing out revokes the session on the server: the old cookie no
	// longer works, even replayed.
	old := v.hc.Jar.Cookies(mustURL(t, s.url+"/ui/"))
	v.get("/ui/queue")
	if status, loc := v.post("/ui/signout", nil); status != http.StatusSeeOther || loc != "/ui/signin" {
		t.Fatalf("sign out: %d %q", status, loc)
	}
	replay := s.visitor(t)
	replay.hc.Jar.SetCookies(mustURL(t, s.url+"/ui/"), old)
	if status, _ := replay.get("/ui/queue"); status != http.StatusSeeOther {
		t.Fatalf("a signed-out session still opens pages: %d", status)
	}
}

func TestSignInRefusesUnknownTokensAndForgedForms(t *testing.T) {
	s := startServer(t, tokensYAML)
	v := s.visitor(t)
	v.get("/ui/signin")
	status, body := v.post("/ui/signin", url.Values{"token": {"not-a-token"}})
	if status != http.StatusUnauthorized {
		t.Fatalf("unknown token: %d", status)
	}
	mustContain(t, body, "That token is not known.")
	// A form posted without the sign-in page's token (login CSRF).
	other := s.visitor(t)
	if status, _ := other.post("/ui/signin", url.Values{"token": {aliceToken}, "csrf": {"made-up"}}); status != http.StatusForbidden {
		t.Fatalf("forged sign-in form: %d", status)
	}
	// A redirect after sign-in stays in the console.
	v.get("/ui/signin")
	if status, loc := v.post("/ui/signin", url.Values{"token": {aliceToken}, "next": {"//evil.example/ui/"}}); status != http.StatusSeeOther || loc != "/ui/queue" {
		t.Fatalf("open redirect: %d %q", status, loc)
	}
}

func TestAdminsRevokeOtherSessions(t *testing.T) {
	s := startServer(t, tokensYAML)
	alice := s.signIn(t, aliceToken)
	root := s.signIn(t, rootToken)
	status, body := root.get("/ui/sessions")
	if status != http.StatusOK {
		t.Fatalf("sessions page: %d\n%s", status, body)
	}
	mustContain(t, body, "alice", "root <strong>(this browser)</strong>")
	key := sessionKeyOf(t, body, "alice")
	if status, loc := root.post("/ui/sessions/revoke", url.Values{"session": {key}}); status != http.StatusSeeOther || loc != "/ui/sessions?done=revoked" {
		t.Fatalf("revoke: %d %q", status, loc)
	}
	if status, _ := alice.get("/ui/queue"); status != http.StatusSeeOther {
		t.Fatalf("a revoked session still opens pages: %d", status)
	}
	if status, body := alice.post("/ui/signout", nil); status != http.StatusUnauthorized {
		t.Fatalf("a revoked session posted: %d\n%s", status, body)
	}
}

func TestWithoutTokensTheLocalAdminNeedsNoSignIn(t *testing.T) {
	s := startServer(t, "")
	v := s.visitor(t)
	status, body := v.get("/ui/sessions")
	if status != http.StatusOK {
		t.Fatalf("sessions page: %d\n%s", status, body)
	}
	mustContain(t, body, "local <small>(admin)</small>", "There are no sessions to list or revoke")
	if n, err := s.rdb.Keys(context.Background(), "*:ui:*").Result(); err != nil || len(n) != 0 {
		t.Fatalf("the local admin's visit stored %v (%v)", n, err)
	}
	if status, loc := v.get("/ui/signin"); status != http.StatusSeeOther || loc != "/ui/queue" {
		t.Fatalf("sign-in page without tokens: %d %q", status, loc)
	}
	// The local admin's forms still need the CSRF token: a page on another
	// site could otherwise post to 127.0.0.1.
	if status, _ := v.post("/ui/signout", url.Values{"csrf": {""}}); status != http.StatusForbidden {
		t.Fatalf("CSRF-less post as the local admin: %d", status)
	}
}

func TestCrossSiteFormsAreRefusedEvenWithTheToken(t *testing.T) {
	s := startServer(t, tokensYAML)
	v := s.signIn(t, aliceToken)
	v.get("/ui/queue")
	req, err := http.NewRequest(http.MethodPost, s.url+"/ui/signout", strings.NewReader(url.Values{"csrf": {v.csrf}}.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	resp, err := v.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-site post: %d", resp.StatusCode)
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// sessionKeyOf finds the revoke form of name's session on the sessions
// page.
func sessionKeyOf(t *testing.T, body, name string) string {
	t.Helper()
	i := strings.Index(body, "<td>"+name+"</td>")
	if i < 0 {
		t.Fatalf("no session of %s:\n%s", name, body)
	}
	m := sessionField.FindStringSubmatch(body[i:])
	if m == nil {
		t.Fatalf("no revoke form for %s", name)
	}
	return m[1]
}

func TestTheConsoleIsOffWithUIEnabledFalse(t *testing.T) {
	s := startServer(t, "ui: {enabled: false}\n")
	v := s.visitor(t)
	if status, _ := v.get("/ui/queue"); status != http.StatusNotFound {
		t.Fatalf("/ui/queue with ui.enabled false: %d", status)
	}
	if s.app.Console != nil {
		t.Fatal("a console was built")
	}
}

func TestChangesReachOpenPagesAsEvents(t *testing.T) {
	s := startServer(t, "")
	v := s.visitor(t)
	v.get("/ui/queue")
	resp, err := v.hc.Get(s.url + "/ui/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != "text/event-stream" {
		t.Fatalf("events: %d %s", resp.StatusCode, ct)
	}
	// A decision drafted into a proposal by the server is a change.
	s.xadd(t, clusterEvents()...)
	got := make(chan string, 1)
	go func() {
		buf := make([]byte, 4096)
		var all strings.Builder
		for {
			n, err := resp.Body.Read(buf)
			all.Write(buf[:n])
			if strings.Contains(all.String(), "event: change\ndata: rules\n") || err != nil {
				got <- all.String()
				return
			}
		}
	}()
	select {
	case text := <-got:
		if !strings.Contains(text, "data: rules") {
			t.Fatalf("events: %q", text)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no change event after a proposal was drafted")
	}
	// Without a session cookie, the local admin's form is a forged one.
	if status, _ := s.visitor(t).post("/ui/signout", nil); status != http.StatusForbidden {
		t.Fatalf("post without session: %d", status)
	}
}

func TestRepeatedFailedSignInsAreThrottled(t *testing.T) {
	s := startServer(t, tokensYAML)
	v := s.visitor(t)
	for i := range 10 {
		v.get("/ui/signin")
		if status, _ := v.post("/ui/signin", url.Values{"token": {"guess-" + strconv.Itoa(i)}}); status != http.StatusUnauthorized {
			t.Fatalf("failure %d: %d", i, status)
		}
	}
	v.get("/ui/signin")
	status, body := v.post("/ui/signin", url.Values{"token": {"guess-11"}})
	if status != http.StatusTooManyRequests {
		t.Fatalf("11th failed sign-in: %d", status)
	}
	mustContain(t, body, "Too many failed sign-ins")
	// A valid token still signs in: people behind one NAT must not lock
	// each other out.
	v.get("/ui/signin")
	if status, _ := v.post("/ui/signin", url.Values{"token": {aliceToken}}); status != http.StatusSeeOther {
		t.Fatalf("a valid token after 11 failures: %d", status)
	}
}
