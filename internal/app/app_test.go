package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/types/known/timestamppb"

	healthv1 "github.com/precept-dev/precept/gen/grpc/health/v1"
	"github.com/precept-dev/precept/gen/grpc/health/v1/healthv1connect"
	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
	"github.com/precept-dev/precept/gen/precept/v1/preceptv1connect"
	"github.com/precept-dev/precept/internal/config"
	"github.com/precept-dev/precept/lib/testenv"
)

type running struct {
	app  *App
	logs *testenv.SyncBuffer
	rdb  *redis.Client
	stop func()
}

// start runs a preceptd in-process against a real redis-server, with
// the given YAML on top of test defaults.
func start(t *testing.T, yaml string) *running {
	t.Helper()
	return launch(t, t.TempDir(), testenv.Redis(t), "{batch_wait: 5ms, fsync: false}", yaml)
}

// launch runs a preceptd in-process on dataDir and the Redis server at
// redisAddr, with feedback settings and yaml on top of test defaults,
// and stops it when the test ends (or when its stop is called).
func launch(t *testing.T, dataDir, redisAddr, feedback, yaml string) *running {
	t.Helper()
	return launchWith(t, dataDir, fmt.Sprintf("{addr: %q, block: 100ms, claim_interval: 200ms}", redisAddr), testenv.RedisClient(t, redisAddr), feedback, yaml)
}

// launchWith is launch with the redis section of the configuration and
// the client the test uses given.
func launchWith(t *testing.T, dataDir, redisYAML string, rdb *redis.Client, feedback, yaml string) *running {
	t.Helper()
	cfg, err := config.Parse(fmt.Sprintf(`
listen: 127.0.0.1:0
data_dir: %s
node: test-node
redis: %s
feedback: %s
log: {level: debug}
%s`, dataDir, redisYAML, feedback, yaml), nil)
	if err != nil {
		t.Fatal(err)
	}
	logs := &testenv.SyncBuffer{}
	a, err := New(t.Context(), cfg, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var once sync.Once
	stop := func() {
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
	}
	t.Cleanup(stop)
	return &running{app: a, logs: logs, rdb: rdb, stop: stop}
}

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

func protoDecision(id string) *preceptv1.HITLDecision {
	return &preceptv1.HITLDecision{
		DecisionId: id, GateId: "HITL-2", EpicId: "EPIC-7", Agent: "coding-agent",
		Decision: preceptv1.Verdict_VERDICT_REJECTED, ReviewerId: "bob",
		Timestamp:       timestamppb.New(time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)),
		ReviewerComment: "the migration is missing a rollback step",
	}
}

// clients for both wire protocols: Connect over HTTP/1.1 and gRPC over h2c.
func protocols(base string, token string) map[string]connect.HTTPClient {
	h1 := new(http.Protocols)
	h1.SetHTTP1(true)
	h2 := new(http.Protocols)
	h2.SetUnencryptedHTTP2(true)
	mk := func(p *http.Protocols) connect.HTTPClient {
		return &http.Client{Transport: bearer{token, &http.Transport{Protocols: p}}}
	}
	return map[string]connect.HTTPClient{"connect": mk(h1), "grpc": mk(h2), "grpcweb": mk(h1)}
}

type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	if b.token != "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return b.next.RoundTrip(r)
}

func feedbackClient(base, protocol, token string) preceptv1connect.FeedbackServiceClient {
	var opts []connect.ClientOption
	switch protocol {
	case "grpc":
		opts = append(opts, connect.WithGRPC())
	case "grpcweb":
		opts = append(opts, connect.WithGRPCWeb())
	}
	return preceptv1connect.NewFeedbackServiceClient(protocols(base, token)[protocol], base, opts...)
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

func TestFeedbackRPCsOverConnectGRPCAndGRPCWeb(t *testing.T) {
	r := start(t, "")
	ctx := context.Background()
	for _, protocol := range []string{"connect", "grpc", "grpcweb"} {
		t.Run(protocol, func(t *testing.T) {
			c := feedbackClient(r.app.URL(), protocol, "")
			id := "api-" + protocol
			rec, err := c.RecordFeedback(ctx, connect.NewRequest(&preceptv1.RecordFeedbackRequest{Decision: protoDecision(id)}))
			if err != nil {
				t.Fatal(err)
			}
			if !rec.Msg.Created || rec.Msg.Feedback.GetCommit() == "" || rec.Msg.Feedback.GetSource() != "api:local" {
				t.Fatalf("RecordFeedback = %v", rec.Msg)
			}
			again, err := c.RecordFeedback(ctx, connect.NewRequest(&preceptv1.RecordFeedbackRequest{Decision: protoDecision(id)}))
			if err != nil || again.Msg.Created {
				t.Fatalf("second RecordFeedback created=%v err=%v", again.Msg.GetCreated(), err)
			}
			got, err := c.GetFeedback(ctx, connect.NewRequest(&preceptv1.GetFeedbackRequest{DecisionId: id}))
			if err != nil {
				t.Fatal(err)
			}
			if got.Msg.Feedback.GetDecision().GetReviewerComment() != "the migration is missing a rollback step" {
				t.Fatalf("GetFeedback = %v", got.Msg)
			}
			list, err := c.ListFeedbackForAgent(ctx, connect.NewRequest(&preceptv1.ListFeedbackForAgentRequest{Agent: "coding-agent"}))
			if err != nil || len(list.Msg.Feedback) == 0 {
				t.Fatalf("ListFeedbackForAgent = %v, %v", list, err)
			}

			bad := protoDecision("")
			bad.Decision = preceptv1.Verdict_VERDICT_UNSPECIFIED
			_, err = c.RecordFeedback(ctx, connect.NewRequest(&preceptv1.RecordFeedbackRequest{Decision: bad}))
			if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "decision_id: required") || !strings.Contains(err.Error(), "decision: required") {
				t.Fatalf("invalid decision: %v", err)
			}
			_, err = c.GetFeedback(ctx, connect.NewRequest(&preceptv1.GetFeedbackRequest{DecisionId: "missing"}))
			if connect.CodeOf(err) != connect.CodeNotFound {
				t.Fatalf("missing decision: %v", err)
			}
			_, err = c.ListFeedbackForAgent(ctx, connect.NewRequest(&preceptv1.ListFeedbackForAgentRequest{Agent: "coding-agent", PageSize: 5000}))
			if connect.CodeOf(err) != connect.CodeInvalidArgument {
				t.Fatalf("oversized page: %v", err)
			}
			_, err = c.ListFeedbackForAgent(ctx, connect.NewRequest(&preceptv1.ListFeedbackForAgentRequest{Agent: "coding-agent", PageToken: "forged"}))
			if connect.CodeOf(err) != connect.CodeInvalidArgument {
				t.Fatalf("forged page token: %v", err)
			}
		})
	}
}

func TestStreamEntriesInBothEncodingsAreStoredAndBadOnesDeadLettered(t *testing.T) {
	r := start(t, "")
	ctx := context.Background()
	stream := "asdlc:events:hitl_decisions"
	flat := event("flat-1", "tags", `["tests","style"]`)
	if err := r.rdb.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: flat}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := r.rdb.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: map[string]any{"data": `{"decision_id":"json-1","gate_id":"HITL-1","epic_id":"E","agent":"docs-agent","decision":"APPROVED","reviewer_id":"carol","timestamp":"2026-11-20T11:00:00Z"}`}}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := r.rdb.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: map[string]any{"data": "{not json"}}).Err(); err != nil {
		t.Fatal(err)
	}
	c := feedbackClient(r.app.URL(), "connect", "")
	for _, id := range []string{"flat-1", "json-1"} {
		eventually(t, id+" stored", 10*time.Second, func() bool {
			_, err := c.GetFeedback(ctx, connect.NewRequest(&preceptv1.GetFeedbackRequest{DecisionId: id}))
			return err == nil
		})
	}
	got, _ := c.GetFeedback(ctx, connect.NewRequest(&preceptv1.GetFeedbackRequest{DecisionId: "flat-1"}))
	if tags := got.Msg.Feedback.GetDecision().GetTags(); len(tags) != 2 || tags[0] != "style" {
		t.Fatalf("tags = %v", tags)
	}
	eventually(t, "dead letter", 10*time.Second, func() bool {
		dl, err := c.ListDeadLetters(ctx, connect.NewRequest(&preceptv1.ListDeadLettersRequest{}))
		return err == nil && dl.Msg.Total == 1 && strings.Contains(dl.Msg.DeadLetters[0].Reason, "invalid JSON") &&
			string(dl.Msg.DeadLetters[0].Fields[0].Value) == "{not json"
	})
}

func TestTokensMapToRolesAndNeverReachTheLogs(t *testing.T) {
	const (
		readerToken   = "reader-secret-0123456789"
		recorderToken = "recorder-secret-0123456789"
	)
	r := start(t, fmt.Sprintf(`
auth:
  tokens:
    - {name: dashboard, role: reader, token: %s}
    - {name: pipeline, role: recorder, token: %s}
`, readerToken, recorderToken))
	ctx := context.Background()
	base := r.app.URL()
	rec := func(token string) error {
		_, err := feedbackClient(base, "connect", token).RecordFeedback(ctx, connect.NewRequest(&preceptv1.RecordFeedbackRequest{Decision: protoDecision("tok-" + strings.SplitN(token, "-", 2)[0])}))
		return err
	}
	if err := rec(""); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("no token: %v", err)
	}
	if err := rec("wrong-token-0123456789"); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("wrong token: %v", err)
	}
	if err := rec(readerToken); connect.CodeOf(err) != connect.CodePermissionDenied || !strings.Contains(err.Error(), "dashboard has role reader") {
		t.Fatalf("reader recording: %v", err)
	}
	if err := rec(recorderToken); err != nil {
		t.Fatalf("recorder recording: %v", err)
	}
	got, err := feedbackClient(base, "grpc", readerToken).GetFeedback(ctx, connect.NewRequest(&preceptv1.GetFeedbackRequest{DecisionId: "tok-recorder"}))
	if err != nil {
		t.Fatalf("reader reading: %v", err)
	}
	if got.Msg.Feedback.GetSource() != "api:pipeline" {
		t.Fatalf("source = %q: the caller's identity was not recorded", got.Msg.Feedback.GetSource())
	}
	ping := preceptv1connect.NewPingServiceClient(protocols(base, readerToken)["connect"], base)
	p, err := ping.Ping(ctx, connect.NewRequest(&preceptv1.PingRequest{Message: "hi"}))
	if err != nil || p.Msg.Identity != "dashboard" || p.Msg.Role != "reader" {
		t.Fatalf("Ping = %v, %v", p, err)
	}
	r.stop()
	logs := r.logs.String()
	for _, secret := range []string{readerToken, recorderToken, "wrong-token-0123456789"} {
		if strings.Contains(logs, secret) {
			t.Fatalf("a token reached the logs")
		}
	}
}

func TestHealthReflectionAndMetricsAreServed(t *testing.T) {
	r := start(t, "")
	ctx := context.Background()
	base := r.app.URL()
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get(base + path)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET %s: %v %v", path, resp, err)
		}
		resp.Body.Close()
	}
	health := healthv1connect.NewHealthClient(protocols(base, "")["grpc"], base, connect.WithGRPC())
	hc, err := health.Check(ctx, connect.NewRequest(&healthv1.HealthCheckRequest{}))
	if err != nil || hc.Msg.Status != healthv1.HealthCheckResponse_SERVING {
		t.Fatalf("health Check = %v, %v", hc, err)
	}
	hc, _ = health.Check(ctx, connect.NewRequest(&healthv1.HealthCheckRequest{Service: "no.such.Service"}))
	if hc.Msg.Status != healthv1.HealthCheckResponse_SERVICE_UNKNOWN {
		t.Fatalf("unknown service status = %v", hc.Msg.Status)
	}

	if err := r.rdb.XAdd(ctx, &redis.XAddArgs{Stream: "asdlc:events:hitl_decisions", Values: event("m-1")}).Err(); err != nil {
		t.Fatal(err)
	}
	c := feedbackClient(base, "connect", "")
	eventually(t, "m-1 stored", 10*time.Second, func() bool {
		_, err := c.GetFeedback(ctx, connect.NewRequest(&preceptv1.GetFeedbackRequest{DecisionId: "m-1"}))
		return err == nil
	})
	want := []string{
		`precept_stream_decisions_total{result="stored"} 1`,
		"precept_stream_lag ", "precept_stream_pending ", "precept_stream_dlq_length ",
		"precept_feedback_batch_commit_seconds_count", "precept_feedback_decisions 1",
		`precept_rpc_requests_total{code="ok",procedure="/precept.v1.FeedbackService/GetFeedback"}`,
	}
	var body string
	// The decision is readable a moment before the consumer counts it, and
	// the gauges refresh on a timer: wait for all of them.
	missing := func() []string {
		var out []string
		for _, w := range want {
			if !strings.Contains(body, w) {
				out = append(out, w)
			}
		}
		return out
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(base + "/metrics")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body = string(b)
		}
		if len(missing()) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics lack %q", missing())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestGitCLIReadsTheFeedbackRepositoryAfterStreamBatches(t *testing.T) {
	r := start(t, "")
	ctx := context.Background()
	pipe := r.rdb.Pipeline()
	for i := range 1200 {
		pipe.XAdd(ctx, &redis.XAddArgs{Stream: "asdlc:events:hitl_decisions", Values: event(fmt.Sprintf("g-%04d", i))})
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, "1200 stored", 30*time.Second, func() bool {
		n, _ := r.app.Feedback.Count()
		return n == 1200
	})
	repo := r.app.FeedbackRepo.Path()
	run := func(args ...string) string {
		out, err := exec.Command("git", append([]string{"-C", repo}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	run("fsck", "--strict", "--no-dangling")
	log := run("log", "--format=%s", "main")
	if !strings.Contains(log, "decisions") {
		t.Fatalf("git log = %s", log)
	}
	commits := strings.Count(log, "\n")
	if commits >= 1200 || commits < 2 {
		t.Fatalf("%d commits for 1200 decisions: not batched", commits)
	}
	if n := strings.Count(run("ls-tree", "-r", "--name-only", "main", "feedback/decisions"), "\n"); n != 1200 {
		t.Fatalf("git lists %d decision files", n)
	}
	t.Logf("1200 stream decisions stored in %d commits", commits)
}

func TestRunStopsGracefullyAndKeepsWhatWasAcknowledged(t *testing.T) {
	r := start(t, "")
	ctx := context.Background()
	for i := range 50 {
		r.rdb.XAdd(ctx, &redis.XAddArgs{Stream: "asdlc:events:hitl_decisions", Values: event(fmt.Sprintf("s-%d", i))})
	}
	eventually(t, "stored", 10*time.Second, func() bool { n, _ := r.app.Feedback.Count(); return n == 50 })
	start := time.Now()
	r.stop()
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("shutdown took %s", took)
	}
	pending, err := r.rdb.XPending(ctx, "asdlc:events:hitl_decisions", "precept-evaluator").Result()
	if err != nil {
		t.Fatal(err)
	}
	if pending.Count != 0 {
		t.Fatalf("%d entries left pending after a graceful stop", pending.Count)
	}
	if _, err := http.Get(r.app.URL() + "/healthz"); err == nil {
		t.Fatal("server still answers after stop")
	}
}

func TestNewRunsOnDefaultWithoutValidate(t *testing.T) {
	cfg := config.Default()
	cfg.Listen = "127.0.0.1:0"
	cfg.DataDir = t.TempDir()
	cfg.Redis.EmbeddedAddr = "127.0.0.1:0"
	a, err := New(t.Context(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, err := os.Stat(filepath.Join(cfg.DataDir, "nodes", config.DefaultNode(), "feedback.db")); err != nil {
		t.Fatalf("the node's index is not under its host name: %v", err)
	}
	if f := a.Rules.Features(); !f.Proposing || !f.AutoMerge {
		t.Fatalf("rule features = %+v, want the defaults (on)", f)
	}
}

func TestNewStopsWhenItsContextIsCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	cfg, err := config.Parse(fmt.Sprintf("listen: 127.0.0.1:0\ndata_dir: %s\nredis: {addr: %q}\n", t.TempDir(), testenv.Redis(t)), nil)
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(ctx, cfg, slog.New(slog.DiscardHandler))
	if err == nil {
		a.Close()
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("New with a cancelled context = %v, want context.Canceled", err)
	}
}
