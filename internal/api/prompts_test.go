package api

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/precept-dev/precept"
	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
	"github.com/precept-dev/precept/gen/precept/v1/preceptv1connect"
	"github.com/precept-dev/precept/lib/gitrepo"
	"github.com/precept-dev/precept/prompts"
	"github.com/precept-dev/precept/rules/rulefmt"
)

const readerToken = "reader-token-0123456789"

type promptServer struct {
	url       string
	repo      *gitrepo.Repo
	assembler *prompts.Assembler
	versions  *prompts.Versions
}

// startPromptServer serves PromptService with the production interceptors
// over HTTP/1.1 and h2c, backed by a real rules repository.
func startPromptServer(t *testing.T) *promptServer {
	t.Helper()
	repo, err := gitrepo.Open(filepath.Join(t.TempDir(), "rules.git"), gitrepo.Options{NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { repo.Close() })
	commitFiles(t, repo, map[string]string{
		"prompts/implement.md":  "Implement the task.",
		"prompts/_rules.md":     "Write tests first.",
		"prompts/src/_rules.md": "Wrap errors.",
	})
	commitRules(t, repo, "coding-agent",
		rulefmt.Rule{ID: "r-1", Status: rulefmt.Active, Importance: rulefmt.Critical, Confidence: 0.9, Content: "Check Close errors.",
			FeedbackIDs: []string{"d-1", "d-2"}, Approvals: []rulefmt.Approval{{Approver: "alice"}, {Approver: "bob"}}},
		rulefmt.Rule{ID: "r-2", Status: rulefmt.Active, Confidence: 0.5, Content: "Prefer table tests."},
		rulefmt.Rule{ID: "r-3", Status: rulefmt.Shadow, Importance: rulefmt.Important, Confidence: 0.7, Content: "Name goroutines' owners."},
		rulefmt.Rule{ID: "r-4", Status: rulefmt.Active, Confidence: 0.3, Content: "Keep functions short."},
	)
	versions := prompts.NewVersions(repo, nil, nil)
	a, err := prompts.New(repo, prompts.Options{MaxRules: 2, OnAssembled: versions.Observe})
	if err != nil {
		t.Fatal(err)
	}
	auth, err := NewAuthenticator([]precept.Credential{credential("agent", precept.RoleReader, readerToken)})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(preceptv1connect.NewPromptServiceHandler(&PromptService{Prompts: a, Versions: versions, Log: slog.New(slog.DiscardHandler)},
		connect.WithInterceptors(NewMetricsInterceptor(nil), &AuthInterceptor{Auth: auth}), PromptCompression()))
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(srv.Close)
	return &promptServer{url: srv.URL, repo: repo, assembler: a, versions: versions}
}

func commitFiles(t *testing.T, repo *gitrepo.Repo, fs map[string]string) {
	t.Helper()
	var changes []gitrepo.Change
	for p, c := range fs {
		changes = append(changes, gitrepo.Change{Path: p, Data: []byte(c), Delete: c == ""})
	}
	_, err := repo.Update(context.Background(), "main", func(*gitrepo.Snapshot) (*gitrepo.CommitSpec, error) {
		return &gitrepo.CommitSpec{Message: "test change", Changes: changes}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func commitRules(t *testing.T, repo *gitrepo.Repo, agent string, rs ...rulefmt.Rule) {
	t.Helper()
	fs := map[string]string{}
	for _, r := range rs {
		b, err := r.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		fs[rulefmt.ActiveRulePath(agent, r.ID)] = string(b)
	}
	commitFiles(t, repo, fs)
}

func promptClient(base, protocol, token string) preceptv1connect.PromptServiceClient {
	p := new(http.Protocols)
	var opts []connect.ClientOption
	if protocol == "grpc" {
		p.SetUnencryptedHTTP2(true)
		opts = append(opts, connect.WithGRPC())
	} else {
		p.SetHTTP1(true)
	}
	hc := &http.Client{Transport: &tokenTransport{token: token, next: &http.Transport{Protocols: p}}}
	return preceptv1connect.NewPromptServiceClient(hc, base, opts...)
}

type tokenTransport struct {
	token string
	next  http.RoundTripper
}

func (t *tokenTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if t.token != "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+t.token)
	}
	return t.next.RoundTrip(r)
}

var bothProtocols = []string{"connect", "grpc"}

func TestBuildPromptReturnsThePromptItsSourcesAndExclusions(t *testing.T) {
	s := startPromptServer(t)
	for _, protocol := range bothProtocols {
		t.Run(protocol, func(t *testing.T) {
			c := promptClient(s.url, protocol, readerToken)
			resp, err := c.BuildPrompt(context.Background(), connect.NewRequest(&preceptv1.BuildPromptRequest{
				Agent: "coding-agent", Stage: "implement", ScopePath: "src/main.go"}))
			if err != nil {
				t.Fatal(err)
			}
			m := resp.Msg
			want := "Implement the task.\n\n## Directory Rules (prompts/_rules.md)\n\nWrite tests first.\n\n" +
				"## Directory Rules (prompts/src/_rules.md)\n\nWrap errors.\n\n## Learned Rules (from feedback)\n\n- [r-1] Check Close errors.\n- [r-2] Prefer table tests.\n"
			if m.Prompt != want {
				t.Fatalf("prompt:\n%s\nwant:\n%s", m.Prompt, want)
			}
			tip, _ := s.repo.Tip("main")
			// promptVersionPattern: anonymized exports keep versions of this form.
			if !promptVersionPattern.MatchString(m.Version) || m.Commit != tip.String() || !slices.Equal(m.RuleIds, []string{"r-1", "r-2"}) {
				t.Fatalf("version %q commit %q rules %q", m.Version, m.Commit, m.RuleIds)
			}
			var sources []string
			for _, src := range m.Sources {
				sources = append(sources, src.Kind+":"+src.Ref)
			}
			if !slices.Equal(sources, []string{"base_prompt:prompts/implement.md", "rules_md:prompts/_rules.md", "rules_md:prompts/src/_rules.md", "rule:r-1", "rule:r-2"}) {
				t.Fatalf("sources = %q", sources)
			}
			var excluded []string
			for _, x := range m.Excluded {
				excluded = append(excluded, x.RuleId+":"+x.Reason)
			}
			if !slices.Equal(excluded, []string{"r-4:budget", "r-3:shadow"}) {
				t.Fatalf("excluded = %q", excluded)
			}
			if !slices.Equal(m.ShadowRuleIds, []string{"r-3"}) || !strings.Contains(m.ShadowPrompt, "- [r-1] Check Close errors.\n- [r-3] Name goroutines' owners.\n") || m.ShadowVersion == m.Version {
				t.Fatalf("shadow: %q %q\n%s", m.ShadowRuleIds, m.ShadowVersion, m.ShadowPrompt)
			}

			// A base prompt in the request replaces the stage prompt.
			base := "My own instructions."
			resp, err = c.BuildPrompt(context.Background(), connect.NewRequest(&preceptv1.BuildPromptRequest{
				Agent: "coding-agent", Stage: "no-such-stage", BasePrompt: &base}))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(resp.Msg.Prompt, "My own instructions.\n\n") || resp.Msg.Sources[0].Ref != "request" {
				t.Fatalf("with base_prompt: %+v", resp.Msg)
			}
		})
	}
}

func TestPromptServiceErrorsCarryTheirConnectCodes(t *testing.T) {
	s := startPromptServer(t)
	tests := []struct {
		name  string
		token string
		req   *preceptv1.BuildPromptRequest
		code  connect.Code
		msg   string
	}{
		{"dot-dot scope", readerToken, &preceptv1.BuildPromptRequest{Agent: "coding-agent", Stage: "implement", ScopePath: "../secrets"}, connect.CodeInvalidArgument, "scope_path: must not contain .."},
		{"absolute scope", readerToken, &preceptv1.BuildPromptRequest{Agent: "coding-agent", Stage: "implement", ScopePath: "/etc"}, connect.CodeInvalidArgument, "scope_path: must be relative"},
		{"unsafe agent", readerToken, &preceptv1.BuildPromptRequest{Agent: "../x", Stage: "implement"}, connect.CodeInvalidArgument, "agent: "},
		{"missing stage prompt", readerToken, &preceptv1.BuildPromptRequest{Agent: "coding-agent", Stage: "review"}, connect.CodeFailedPrecondition, "prompts/review.md does not exist"},
		{"no token", "", &preceptv1.BuildPromptRequest{Agent: "coding-agent", Stage: "implement"}, connect.CodeUnauthenticated, "missing bearer token"},
	}
	for _, tt := range tests {
		for _, protocol := range bothProtocols {
			t.Run(tt.name+"/"+protocol, func(t *testing.T) {
				c := promptClient(s.url, protocol, tt.token)
				_, err := c.BuildPrompt(context.Background(), connect.NewRequest(tt.req))
				if connect.CodeOf(err) != tt.code || !strings.Contains(err.Error(), tt.msg) {
					t.Fatalf("BuildPrompt error = %v, want %s containing %q", err, tt.code, tt.msg)
				}
				_, err = c.ExplainPrompt(context.Background(), connect.NewRequest(&preceptv1.ExplainPromptRequest{
					Agent: tt.req.Agent, Stage: tt.req.Stage, ScopePath: tt.req.ScopePath}))
				wantExplain := tt.code
				if tt.code == connect.CodeFailedPrecondition {
					wantExplain = 0 // Explain explains what BuildPrompt refuses.
				}
				if connect.CodeOf(err) != wantExplain && !(wantExplain == 0 && err == nil) {
					t.Fatalf("ExplainPrompt error = %v, want %s", err, wantExplain)
				}
			})
		}
	}
}

func TestWatchPromptStreamsEachNewVersionAndResumesFromTheLastOne(t *testing.T) {
	s := startPromptServer(t)
	for _, protocol := range bothProtocols {
		t.Run(protocol, func(t *testing.T) {
			c := promptClient(s.url, protocol, readerToken)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			req := &preceptv1.WatchPromptRequest{Agent: "coding-agent", Stage: "implement", ScopePath: "src/api/x.go"}
			stream, err := c.WatchPrompt(ctx, connect.NewRequest(req))
			if err != nil {
				t.Fatal(err)
			}
			receive := func() *preceptv1.WatchPromptResponse {
				t.Helper()
				if !stream.Receive() {
					t.Fatalf("stream ended: %v", stream.Err())
				}
				return stream.Msg()
			}
			first := receive()
			if first.Reason != "initial" || !strings.Contains(first.Prompt.Prompt, "[r-1]") {
				t.Fatalf("first = %+v", first)
			}

			commitFiles(t, s.repo, map[string]string{"prompts/src/api/_rules.md": "Version endpoints (" + protocol + ")."})
			if _, err := s.assembler.Refresh(ctx); err != nil {
				t.Fatal(err)
			}
			second := receive()
			if second.Reason != "changed" || !strings.Contains(second.Prompt.Prompt, "Version endpoints ("+protocol+").") || second.Prompt.Version == first.Prompt.Version {
				t.Fatalf("second = %+v", second)
			}
			stream.Close()

			// Reconnecting with the last version seen: nothing missed.
			req.LastVersion = second.Prompt.Version
			again, err := c.WatchPrompt(ctx, connect.NewRequest(req))
			if err != nil {
				t.Fatal(err)
			}
			if !again.Receive() || again.Msg().Reason != "initial" || again.Msg().Prompt.Version != second.Prompt.Version {
				t.Fatalf("reconnect: %+v %v", again.Msg(), again.Err())
			}
			again.Close()

			// Reconnecting with an older version: the update it missed.
			req.LastVersion = first.Prompt.Version
			missed, err := c.WatchPrompt(ctx, connect.NewRequest(req))
			if err != nil {
				t.Fatal(err)
			}
			if !missed.Receive() || missed.Msg().Reason != "changed" || missed.Msg().Prompt.Version != second.Prompt.Version {
				t.Fatalf("reconnect after a miss: %+v %v", missed.Msg(), missed.Err())
			}
			missed.Close()

			bad, err := c.WatchPrompt(ctx, connect.NewRequest(&preceptv1.WatchPromptRequest{Agent: "coding-agent", Stage: "implement", ScopePath: "a/../../b"}))
			if err == nil {
				if bad.Receive() {
					t.Fatal("an invalid watch sent a prompt")
				}
				err = bad.Err()
			}
			if connect.CodeOf(err) != connect.CodeInvalidArgument {
				t.Fatalf("invalid watch: %v", err)
			}
		})
	}
}

func TestExplainPromptConvertsEveryRuleAndRulesFile(t *testing.T) {
	s := startPromptServer(t)
	commitRules(t, s.repo, "docs-agent", rulefmt.Rule{ID: "r-docs", Status: rulefmt.Active, Content: "Use sentence case."})
	if _, err := s.assembler.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	resp, err := promptClient(s.url, "grpc", readerToken).ExplainPrompt(context.Background(), connect.NewRequest(&preceptv1.ExplainPromptRequest{
		Agent: "coding-agent", Stage: "implement", ScopePath: "src/x.go"}))
	if err != nil {
		t.Fatal(err)
	}
	m := resp.Msg
	if !strings.HasPrefix(m.Version, "v1:") || m.BasePromptRef != "prompts/implement.md" || !strings.Contains(m.Summary, "2 learned rules;") {
		t.Fatalf("header = %+v", m)
	}
	if len(m.RulesFiles) != 2 || !m.RulesFiles[1].Exists || m.RulesFiles[1].Path != "prompts/src/_rules.md" {
		t.Fatalf("rules files = %+v", m.RulesFiles)
	}
	var got []string
	for _, r := range m.Rules {
		got = append(got, r.RuleId+"|"+strings.SplitN(r.Reason, ":", 2)[0])
	}
	if !slices.Equal(got, []string{"r-1|included at position 1", "r-2|included at position 2", "r-4|budget", "r-3|shadow", "r-docs|other_agent"}) {
		t.Fatalf("rules = %q", got)
	}
	r1 := m.Rules[0]
	if !r1.Included || r1.Position != 1 || r1.Status != "ACTIVE" || r1.Importance != "CRITICAL" || r1.Confidence != 0.9 ||
		r1.Content != "Check Close errors." || !slices.Equal(r1.FeedbackIds, []string{"d-1", "d-2"}) || !slices.Equal(r1.Approvers, []string{"alice", "bob"}) {
		t.Fatalf("r-1 = %+v", r1)
	}
}

func TestBuildPromptResponsesAreEncodedOncePerPrompt(t *testing.T) {
	s := startPromptServer(t)
	svc := &PromptService{Prompts: s.assembler, Log: slog.New(slog.DiscardHandler)}
	req := connect.NewRequest(&preceptv1.BuildPromptRequest{Agent: "coding-agent", Stage: "implement"})
	a, err := svc.BuildPrompt(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := svc.BuildPrompt(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if a.Msg != b.Msg {
		t.Fatal("two requests for a cached prompt got two response messages")
	}
}

func TestAPromptsResponseIsBuiltOnceAndForgottenWithThePrompt(t *testing.T) {
	s := startPromptServer(t)
	var memo responseMemo
	p, err := s.assembler.Build(context.Background(), prompts.Request{Agent: "coding-agent", Stage: "implement"})
	if err != nil {
		t.Fatal(err)
	}
	got := make([]*preceptv1.BuildPromptResponse, 8)
	var wg sync.WaitGroup
	for i := range got {
		wg.Go(func() { got[i] = memo.get(p) })
	}
	wg.Wait()
	for _, r := range got {
		if r != got[0] || r.GetVersion() != p.Version {
			t.Fatalf("racing first calls got different messages (%p, %p) or the wrong one (%s)", r, got[0], r.GetVersion())
		}
	}
	if allocs := testing.AllocsPerRun(100, func() { memo.get(p) }); allocs != 0 {
		t.Fatalf("a remembered response costs %v allocations", allocs)
	}

	// A prompt the assembler no longer holds takes its entry with it.
	other := *p
	memo.get(&other)
	if n := memo.len(); n != 2 {
		t.Fatalf("%d entries, want 2", n)
	}
	for i := 0; memo.len() > 1; i++ {
		if i == 100 {
			t.Fatalf("the entry of a collected prompt stayed: %d entries", memo.len())
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	if memo.get(p) != got[0] {
		t.Fatal("the live prompt's entry went too")
	}
}

func TestWatchPromptEndsQuietlyWhenTheClientLeaves(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	svc := &PromptService{Prompts: fakeWatch{send: func() { cancel() }}, Log: slog.New(slog.DiscardHandler)}
	err := svc.WatchPrompt(ctx, connect.NewRequest(&preceptv1.WatchPromptRequest{Agent: "coding-agent", Stage: "implement"}), nil)
	if err != nil {
		t.Fatalf("WatchPrompt after the client left = %v", err)
	}
}

// fakeWatch fails its watch as a broken connection does, after calling
// send.
type fakeWatch struct {
	PromptAssembler
	send func()
}

func (f fakeWatch) Watch(ctx context.Context, req prompts.Request, last string, send func(prompts.Update) error) error {
	f.send()
	return errors.New("write: broken pipe")
}

func gunzip(t *testing.T, b []byte) string {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func TestGzipMemoCompressesEachDistinctPayloadOnce(t *testing.T) {
	m := &gzipMemo{seed: maphash.MakeSeed(), entries: map[uint64]gzipEntry{}, max: 2}
	compress := func(payload string) []byte {
		t.Helper()
		var dst bytes.Buffer
		c := &memoCompressor{memo: m}
		c.Reset(&dst)
		io.WriteString(c, payload[:len(payload)/2])
		io.WriteString(c, payload[len(payload)/2:])
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		c.Reset(io.Discard)
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if got := gunzip(t, dst.Bytes()); got != payload {
			t.Fatalf("round trip gave %q, want %q", got, payload)
		}
		return dst.Bytes()
	}
	prompt := strings.Repeat("- [r-1] Check Close errors.\n", 200)
	compress(prompt)
	// Plant a distinguishable encoding of the same payload: a repeat
	// must send it instead of compressing again.
	h := maphash.Bytes(m.seed, []byte(prompt))
	var marked bytes.Buffer
	zw := gzip.NewWriter(&marked)
	zw.Name = "from-the-memo"
	io.WriteString(zw, prompt)
	zw.Close()
	m.entries[h] = gzipEntry{raw: m.entries[h].raw, gz: marked.Bytes()}
	if again := compress(prompt); !bytes.Equal(again, marked.Bytes()) {
		t.Fatal("a repeated payload was compressed again instead of answered from the memo")
	}

	// A payload whose hash is taken by other bytes is compressed afresh.
	other := "another prompt entirely"
	m.entries[maphash.Bytes(m.seed, []byte(other))] = m.entries[h]
	compress(other)

	for i := range 5 {
		compress(fmt.Sprintf("prompt %d", i))
	}
	if len(m.entries) > 2 {
		t.Fatalf("the memo holds %d entries, more than its bound", len(m.entries))
	}
}

// len returns how many prompts have a remembered response.
func (r *responseMemo) len() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.m)
}
