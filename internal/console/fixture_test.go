package console_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/redis/go-redis/v9"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
	"github.com/precept-dev/precept/gen/precept/v1/preceptv1connect"
	"github.com/precept-dev/precept/internal/app"
	"github.com/precept-dev/precept/internal/config"
	"github.com/precept-dev/precept/lib/testenv"
)

// Tokens of the console tests: two approvers, a reader and an admin.
const (
	aliceToken = "alice-approver-token-0123"
	bobToken   = "bob-approver-token-012345"
	ritaToken  = "rita-reader-token-0123456"
	rootToken  = "root-admin-token-01234567"
)

const tokensYAML = `
auth:
  tokens:
    - {name: alice, role: approver, token: ` + aliceToken + `}
    - {name: bob, role: approver, token: ` + bobToken + `}
    - {name: rita, role: reader, token: ` + ritaToken + `}
    - {name: root, role: admin, token: ` + rootToken + `}
`

// server is a preceptd running in the test, with real Redis.
type server struct {
	app  *app.App
	url  string
	rdb  *redis.Client
	logs *testenv.SyncBuffer
}

// startServer runs preceptd with the test defaults and yaml on top (use
// tokensYAML for a server with sign-in). yaml with its own rules section
// replaces the default one.
func startServer(t *testing.T, yaml string) *server {
	t.Helper()
	redisAddr := testenv.Redis(t)
	rulesYAML := "rules: {propose_interval: 200ms}"
	if ownRules.MatchString(yaml) {
		rulesYAML = ""
	}
	cfg, err := config.Parse(fmt.Sprintf(`
listen: 127.0.0.1:0
data_dir: %s
node: test-node
redis: {addr: %q, block: 100ms, claim_interval: 200ms}
feedback: {batch_wait: 5ms, fsync: false}
%s
%s`, t.TempDir(), redisAddr, rulesYAML, yaml), nil)
	if err != nil {
		t.Fatal(err)
	}
	logs := &testenv.SyncBuffer{}
	a, err := app.New(t.Context(), cfg, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var once sync.Once
	t.Cleanup(func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(20 * time.Second):
				t.Error("Run did not return after cancel")
			}
			a.Close()
		})
	})
	return &server{app: a, url: a.URL(), rdb: testenv.RedisClient(t, redisAddr), logs: logs}
}

// ownRules finds a rules section in a test's yaml.
var ownRules = regexp.MustCompile(`(?m)^rules:`)

// event is a rejected decision by default; extra overrides fields.
func event(id string, extra ...string) map[string]any {
	m := map[string]any{
		"decision_id": id, "gate_id": "HITL-2", "epic_id": "EPIC-7", "agent": "coding-agent",
		"decision": "REJECTED", "reviewer_id": "alice", "timestamp": "2026-11-20T10:00:00Z",
		"reviewer_comment": "please add unit tests for " + id,
	}
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i]] = extra[i+1]
	}
	return m
}

// xadd writes decisions to the stream as a HITL UI would.
func (s *server) xadd(t *testing.T, events ...map[string]any) {
	t.Helper()
	for _, e := range events {
		if err := s.rdb.XAdd(context.Background(), &redis.XAddArgs{Stream: s.app.Config.Redis.Stream, Values: e}).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// clusterEvents are reviews of one recurring problem by three reviewers
// in two epics: enough for a rule proposal.
func clusterEvents() []map[string]any {
	comments := []string{
		"missing unit tests for the new retry helper",
		"the new retry helper is missing unit tests",
		"unit tests are missing for the new retry helper",
	}
	var out []map[string]any
	for i, c := range comments {
		out = append(out, event(fmt.Sprintf("rule-d%d", i+1),
			"reviewer_id", []string{"rev-ann", "rev-ben", "rev-cat"}[i],
			"epic_id", []string{"EPIC-1", "EPIC-2", "EPIC-1"}[i],
			"reviewer_comment", c))
	}
	return out
}

// bearer adds a token to API calls the test makes directly.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// rules is a RuleService client with token (empty on a server without
// tokens).
func (s *server) rules(token string) preceptv1connect.RuleServiceClient {
	hc := &http.Client{Transport: bearer{token}}
	if token == "" {
		hc = http.DefaultClient
	}
	return preceptv1connect.NewRuleServiceClient(hc, s.url)
}

// pendingProposal waits for the proposer to draft from XADDed decisions.
func (s *server) pendingProposal(t *testing.T, token string) *preceptv1.Proposal {
	t.Helper()
	var p *preceptv1.Proposal
	eventually(t, "a drafted proposal", 30*time.Second, func() bool {
		resp, err := s.rules(token).ListProposals(context.Background(), connect.NewRequest(&preceptv1.ListProposalsRequest{Status: preceptv1.ProposalStatus_PROPOSAL_STATUS_PENDING}))
		if err != nil || len(resp.Msg.GetProposals()) == 0 {
			return false
		}
		p = resp.Msg.GetProposals()[0]
		return true
	})
	return p
}

func eventually(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// visitor is a browser without JavaScript: a cookie jar that does not
// follow redirects, so tests see them.
type visitor struct {
	t    *testing.T
	base string
	hc   *http.Client
	// csrf is the token of the last page that had a form.
	csrf string
}

func (s *server) visitor(t *testing.T) *visitor {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &visitor{t: t, base: s.url, hc: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}
}

// signIn signs the visitor in with token and returns it.
func (s *server) signIn(t *testing.T, token string) *visitor {
	t.Helper()
	v := s.visitor(t)
	if status, body := v.get("/ui/signin"); status != http.StatusOK {
		t.Fatalf("sign-in page: %d\n%s", status, body)
	}
	status, loc := v.post("/ui/signin", url.Values{"token": {token}, "next": {"/ui/queue"}})
	if status != http.StatusSeeOther || loc != "/ui/queue" {
		t.Fatalf("sign in: %d %q", status, loc)
	}
	// The session's CSRF token, for v.post.
	if status, body := v.get(loc); status != http.StatusOK {
		t.Fatalf("%s after sign-in: %d\n%s", loc, status, body)
	}
	return v
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// get fetches a console page; body is the page, or the Location of a
// redirect.
func (v *visitor) get(path string) (int, string) {
	v.t.Helper()
	resp, err := v.hc.Get(v.base + path)
	if err != nil {
		v.t.Fatal(err)
	}
	return v.read(resp)
}

// post submits a form with the last page's CSRF token (unless form has
// one already).
func (v *visitor) post(path string, form url.Values) (int, string) {
	v.t.Helper()
	if form == nil {
		form = url.Values{}
	}
	if _, ok := form["csrf"]; !ok && v.csrf != "" {
		form.Set("csrf", v.csrf)
	}
	resp, err := v.hc.PostForm(v.base+path, form)
	if err != nil {
		v.t.Fatal(err)
	}
	return v.read(resp)
}

func (v *visitor) read(resp *http.Response) (int, string) {
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		v.t.Fatal(err)
	}
	if m := csrfField.FindSubmatch(data); m != nil {
		v.csrf = string(m[1])
	}
	if loc := resp.Header.Get("Location"); loc != "" {
		return resp.StatusCode, loc
	}
	return resp.StatusCode, string(data)
}

// mustContain fails unless body contains every want.
func mustContain(t *testing.T, body string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(body, w) {
			t.Errorf("page lacks %q:\n%s", w, body)
		}
	}
}

var sessionField = regexp.MustCompile(`name="session" value="([0-9a-f]{64})"`)
