package console_test

// A test of the probe's finding (h5) that one identity could fill the
// replica's event-stream slots: it failed before the hub counted streams
// per identity (map[200:256 503:8], and alice got 503).

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// quickSignIn signs a new visitor in with token without opening a page
// afterwards: what a script flooding sign-ins does.
func (s *server) quickSignIn(t *testing.T, token string) *visitor {
	t.Helper()
	v := s.visitor(t)
	v.get("/ui/signin")
	if status, loc := v.post("/ui/signin", url.Values{"token": {token}, "next": {"/ui/queue"}}); status != http.StatusSeeOther || loc != "/ui/queue" {
		t.Fatalf("sign in: %d %q", status, loc)
	}
	return v
}

// 33 sessions of one reader × 8 event streams filled the replica's 256
// stream slots: alice's live page then got an error.
func TestOneIdentityCannotTakeEveryEventSlot(t *testing.T) {
	s := startServer(t, tokensYAML)
	var open []*http.Response
	t.Cleanup(func() {
		for _, r := range open {
			r.Body.Close()
		}
	})
	statuses := map[int]int{}
	var refusal string
	for range 33 {
		rita := s.quickSignIn(t, ritaToken)
		for range 8 {
			resp, err := rita.hc.Get(s.url + "/ui/events")
			if err != nil {
				t.Fatal(err)
			}
			statuses[resp.StatusCode]++
			if resp.StatusCode == http.StatusOK {
				open = append(open, resp)
				continue
			}
			status, body := rita.read(resp)
			if status == http.StatusTooManyRequests && refusal == "" {
				refusal = body
			}
		}
	}
	t.Logf("rita's 264 streams: %v", statuses)
	if statuses[http.StatusOK] > 16 {
		t.Errorf("one identity holds %d event streams; the cap is 16", statuses[http.StatusOK])
	}
	if statuses[http.StatusTooManyRequests] != 264-statuses[http.StatusOK] {
		t.Errorf("streams past the identity's cap were not refused with 429: %v", statuses)
	}
	if !strings.Contains(refusal, "16") {
		t.Errorf("the refusal does not say what the limit is:\n%s", refusal)
	}
	alice := s.signIn(t, aliceToken)
	resp, err := alice.hc.Get(s.url + "/ui/events")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("after rita tried 264 streams, alice's events: %d", resp.StatusCode)
	}
}
