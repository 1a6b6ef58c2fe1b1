package console_test

// Tests of the probe's flood findings (h5): each failed on the code it was
// written against.

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// storedSessions counts the sessions Redis holds per identity.
func (s *server) storedSessions(t *testing.T) map[string]int {
	t.Helper()
	ctx := context.Background()
	keys, err := s.rdb.Keys(ctx, s.app.Config.Redis.Stream+":ui:session:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, k := range keys {
		data, err := s.rdb.Get(ctx, k).Bytes()
		if err != nil {
			continue
		}
		var rec struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal(data, &rec); err != nil {
			t.Fatalf("session %s: %v", k, err)
		}
		out[rec.Name]++
	}
	return out
}

// One reader signing in 505 times filled the sessions page (500 rows)
// with their own sessions: everyone else's vanished from it, the page did
// not say it was cut, and Redis kept all 505.
func TestASignInFloodKeepsOneIdentitysSessionsCapped(t *testing.T) {
	s := startServer(t, tokensYAML)
	alice := s.quickSignIn(t, aliceToken)
	first := s.quickSignIn(t, ritaToken)
	var last *visitor
	for range 504 {
		last = s.quickSignIn(t, ritaToken)
	}
	// The cap ends the oldest sessions, not the newest.
	if status, _ := first.get("/ui/queue"); status != http.StatusSeeOther {
		t.Errorf("rita's first session after 504 more: %d, want a redirect to sign in", status)
	}
	if status, _ := last.get("/ui/queue"); status != http.StatusOK {
		t.Errorf("rita's newest session: %d", status)
	}
	root := s.signIn(t, rootToken)
	stored := s.storedSessions(t)
	if stored["rita"] > 20 {
		t.Errorf("rita has %d sessions in Redis after 505 sign-ins; the cap is 20", stored["rita"])
	}
	if stored["rita"] < 20 {
		t.Errorf("rita has %d sessions in Redis; the cap should keep her 20 newest", stored["rita"])
	}
	// Alice's session survived the flood.
	if status, _ := alice.get("/ui/queue"); status != http.StatusOK {
		t.Errorf("alice's session after rita's flood: %d", status)
	}
	status, body := root.get("/ui/sessions")
	if status != http.StatusOK {
		t.Fatalf("sessions page: %d\n%s", status, body)
	}
	mustContain(t, body, "22 sessions", "root <strong>(this browser)</strong>")
	if !strings.Contains(body, "<td>alice") {
		t.Errorf("alice's session is not on the first page of sessions:\n%s", body)
	}
	_, body = root.get("/ui/sessions?identity=alice")
	mustContain(t, body, "1 session matching, showing 1–1", "<td>alice")
	if strings.Contains(body, "<td>rita") {
		t.Errorf("filtered by alice, the page lists rita:\n%s", body)
	}
	_, body = root.get("/ui/sessions?identity=rita")
	mustContain(t, body, "20 sessions matching, showing 1–20")
}

// The sessions page is paged: past 50 it says how many there are and
// links to the rest.
func TestTheSessionsPageIsPagedAndSaysItsTotal(t *testing.T) {
	s := startServer(t, tokensYAML+"ui: {max_sessions_per_identity: 60}\n")
	s.quickSignIn(t, aliceToken)
	for range 60 {
		s.quickSignIn(t, ritaToken)
	}
	root := s.signIn(t, rootToken)
	_, body := root.get("/ui/sessions")
	mustContain(t, body, "62 sessions, showing 1–50", `href="/ui/sessions?page=2"`)
	if n := strings.Count(body, `name="session" value=`); n != 50 {
		t.Errorf("page 1 lists %d sessions, want 50", n)
	}
	_, body = root.get("/ui/sessions?page=2")
	mustContain(t, body, "62 sessions, showing 51–62", `href="/ui/sessions"`)
	if n := strings.Count(body, `name="session" value=`); n != 12 {
		t.Errorf("page 2 lists %d sessions, want 12", n)
	}
	_, body = root.get("/ui/sessions?identity=alice")
	mustContain(t, body, "<td>alice")
	if status, _ := root.get("/ui/sessions?page=x"); status != http.StatusBadRequest {
		t.Errorf("?page=x: %d", status)
	}
}

// Sign-ins of one identity at the same moment, on any replica, cannot
// each find room under the cap and together exceed it.
func TestConcurrentSignInsKeepTheCap(t *testing.T) {
	s := startServer(t, tokensYAML)
	var wg sync.WaitGroup
	var ok atomic.Int32
	for range 60 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			jar, _ := cookiejar.New(nil)
			hc := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
			resp, err := hc.Get(s.url + "/ui/signin")
			if err != nil {
				t.Error(err)
				return
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			m := csrfField.FindSubmatch(body)
			if m == nil {
				t.Error("no CSRF field on the sign-in page")
				return
			}
			resp, err = hc.PostForm(s.url+"/ui/signin", url.Values{"token": {ritaToken}, "csrf": {string(m[1])}})
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode == http.StatusSeeOther {
				ok.Add(1)
			}
		}()
	}
	wg.Wait()
	if ok.Load() != 60 {
		t.Fatalf("%d of 60 sign-ins succeeded", ok.Load())
	}
	if n := s.storedSessions(t)["rita"]; n != 20 {
		t.Errorf("after 60 concurrent sign-ins rita has %d sessions; the cap is 20", n)
	}
	idx, err := s.rdb.ZCard(context.Background(), s.app.Config.Redis.Stream+":ui:sessions").Result()
	if err != nil || idx != 20 {
		t.Errorf("the sessions index holds %d (%v), want 20", idx, err)
	}
}
