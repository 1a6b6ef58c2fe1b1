package console_test

// Tests written in review (ui-review): each demonstrates a defect and
// fails on the code it was written against; see
// /work/helpers/ui-review-report.md.

import (
	"bufio"
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// A server without tokens makes a Redis session for every cookie-less
// GET under /ui/, including cross-site ones (an <img> on any page the
// local admin visits): nothing bounds them but their idle TTL and, for
// the index, the 7-day maximum age.
func TestCookielessGetsDoNotEachStoreASession(t *testing.T) {
	s := startServer(t, "")
	for range 50 {
		req, err := http.NewRequest(http.MethodGet, s.url+"/ui/no-such-page", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Sec-Fetch-Site", "cross-site")
		req.Header.Set("Sec-Fetch-Dest", "image")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	ctx := context.Background()
	keys, err := s.rdb.Keys(ctx, s.app.Config.Redis.Stream+":ui:session:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	indexed, err := s.rdb.ZCard(ctx, s.app.Config.Redis.Stream+":ui:sessions").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) > 1 || indexed > 1 {
		t.Fatalf("50 cross-site cookie-less GETs stored %d sessions (%d in the index)", len(keys), indexed)
	}
}

// sessions.get re-saves a session once a minute with a plain SET: a
// revocation (DEL + ZREM) that lands between its GET and its SET is
// undone, and the revived session is no longer in the index, so the
// sessions page cannot show or revoke it.
func TestARevocationDuringARequestStaysRevoked(t *testing.T) {
	s := startServer(t, tokensYAML)
	rita := s.signIn(t, ritaToken)
	ctx := context.Background()
	keys, err := s.rdb.Keys(ctx, s.app.Config.Redis.Stream+":ui:session:*").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("session keys = %v, %v", keys, err)
	}
	key := keys[0]
	// The session was last seen two minutes ago, so the next request
	// touches it.
	data, err := s.rdb.Get(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-2 * time.Minute).UTC().Format(time.RFC3339Nano)
	i := strings.Index(data, `"seen":"`)
	j := strings.Index(data[i+8:], `"`)
	data = data[:i+8] + old + data[i+8+j:]
	if err := s.rdb.Set(ctx, key, data, time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	// An admin revokes it while rita's request is between reading and
	// re-saving her session.
	var revoked atomic.Bool
	rdb, ok := s.app.Redis.(*redis.Client)
	if !ok {
		t.Fatalf("app Redis is %T", s.app.Redis)
	}
	rdb.AddHook(revokeBeforeSet{key: key, index: s.app.Config.Redis.Stream + ":ui:sessions", other: s.rdb, done: &revoked})
	rita.get("/ui/queue")
	if !revoked.Load() {
		t.Fatal("the session was not re-saved; the test did not exercise the race")
	}
	if status, _ := rita.get("/ui/queue"); status != http.StatusSeeOther {
		t.Fatalf("a session revoked during a request opens pages afterwards: %d", status)
	}
}

// revokeBeforeSet deletes a session, as sessions.revoke does, just
// before the console's SET of that session reaches Redis.
type revokeBeforeSet struct {
	key, index string
	other      *redis.Client
	done       *atomic.Bool
}

func (h revokeBeforeSet) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h revokeBeforeSet) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h revokeBeforeSet) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		if len(args) > 1 && strings.EqualFold(cmd.Name(), "set") && args[1] == h.key && !h.done.Load() {
			h.done.Store(true)
			h.other.Del(ctx, h.key)
			h.other.ZRem(ctx, h.index, strings.TrimPrefix(h.key, strings.TrimSuffix(h.index, "sessions")+"session:"))
		}
		return next(ctx, cmd)
	}
}

// One signed-in reader can take every event-stream slot (256, shared by
// the whole server): no other visitor's page updates live any more.
func TestOneSessionCannotTakeEveryEventSlot(t *testing.T) {
	s := startServer(t, tokensYAML)
	rita := s.signIn(t, ritaToken)
	var open []*http.Response
	t.Cleanup(func() {
		for _, r := range open {
			r.Body.Close()
		}
	})
	for range 256 {
		resp, err := rita.hc.Get(s.url + "/ui/events")
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, resp)
		if resp.StatusCode != http.StatusOK {
			break
		}
	}
	alice := s.signIn(t, aliceToken)
	resp, err := alice.hc.Get(s.url + "/ui/events")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("after one reader opened %d streams, another visitor's events: %d", len(open), resp.StatusCode)
	}
}

// Revoking a session does not end the event stream it opened: the
// revoked browser keeps being told of every change.
func TestRevokingASessionEndsItsEventStream(t *testing.T) {
	s := startServer(t, tokensYAML)
	rita := s.signIn(t, ritaToken)
	resp, err := rita.hc.Get(s.url + "/ui/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	root := s.signIn(t, rootToken)
	_, body := root.get("/ui/sessions")
	var ritaKey string
	for _, row := range strings.Split(body, "<tr>") {
		if strings.Contains(row, "rita") {
			if m := sessionField.FindStringSubmatch(row); m != nil {
				ritaKey = m[1]
			}
		}
	}
	if ritaKey == "" {
		t.Fatalf("no session of rita on the sessions page:\n%s", body)
	}
	if status, _ := root.post("/ui/sessions/revoke", url.Values{"session": {ritaKey}}); status != http.StatusSeeOther {
		t.Fatalf("revoke: %d", status)
	}
	s.app.Console.Changed("rules")
	got := make(chan bool, 1)
	go func() {
		br := bufio.NewReader(resp.Body)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				got <- false
				return
			}
			if strings.HasPrefix(line, "data: rules") {
				got <- true
				return
			}
		}
	}()
	select {
	case delivered := <-got:
		if delivered {
			t.Fatal("a revoked session's event stream still delivers changes")
		}
	case <-time.After(2 * time.Second):
	}
}

// Invalid UTF-8 in a path id, a query filter or a form field cannot be
// marshalled into the RPC's protobuf request: the in-process client fails
// with an internal error and the visitor gets a 500 for their own bad
// input.
func TestInvalidUTF8InputIsAClientError(t *testing.T) {
	s := startServer(t, tokensYAML)
	alice := s.signIn(t, aliceToken)
	for _, path := range []string{"/ui/proposals/p-%ff", "/ui/rules/r-%ff", "/ui/decisions/%ff", "/ui/queue?agent=%ff", "/ui/rules?agent=%ff"} {
		if status, _ := alice.get(path); status >= 500 {
			t.Errorf("GET %s: %d", path, status)
		}
	}
	alice.get("/ui/queue")
	if status, _ := alice.post("/ui/proposals/p-01m8c1gnjyjkr8ecp1jxss5fps/reject", url.Values{"revision": {"1"}, "reason": {"\xff"}}); status >= 500 {
		t.Errorf("POST reject with an invalid UTF-8 reason: %d", status)
	}
}
