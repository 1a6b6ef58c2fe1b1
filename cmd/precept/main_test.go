package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/precept-dev/precept/internal/app"
	"github.com/precept-dev/precept/internal/config"
	"github.com/precept-dev/precept/lib/testenv"
)

const adminToken = "admin-token-0123456789abcdef"

// server starts an in-process preceptd with one admin token and a reader.
func server(t *testing.T) (addr string, rdb *redis.Client) {
	t.Helper()
	redisAddr := testenv.Redis(t)
	cfg, err := config.Parse(fmt.Sprintf(`
listen: 127.0.0.1:0
data_dir: %s
redis: {addr: %q, block: 100ms}
feedback: {batch_wait: 5ms, fsync: false}
auth:
  tokens:
    - {name: ops, role: admin, token: %s}
    - {name: viewer, role: reader, token: reader-token-0123456789}
`, t.TempDir(), redisAddr, adminToken), nil)
	if err != nil {
		t.Fatal(err)
	}
	a := startApp(t, cfg)
	return a.URL(), testenv.RedisClient(t, redisAddr)
}

// startApp runs an in-process preceptd on cfg until the test ends.
func startApp(t *testing.T, cfg config.Config) *app.App {
	t.Helper()
	a, err := app.New(t.Context(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done; a.Close() })
	return a
}

type result struct {
	code           int
	stdout, stderr string
}

func run(stdin string, args ...string) result {
	var out, errb bytes.Buffer
	code := Main(args, strings.NewReader(stdin), &out, &errb)
	return result{code, out.String(), errb.String()}
}

const sampleEvent = `{"decision_id":"cli-1","gate_id":"HITL-2","epic_id":"EPIC-3","agent":"coding-agent",
"decision":"APPROVED_WITH_CHANGES","reviewer_id":"erin","timestamp":"2026-11-20T10:00:00Z",
"reviewer_comment":"use the shared retry helper instead of a hand-written loop","tags":["reuse"]}`

func TestRecordGetListRoundTripInTextAndJSON(t *testing.T) {
	addr, _ := server(t)
	file := filepath.Join(t.TempDir(), "event.json")
	os.WriteFile(file, []byte(sampleEvent), 0o644)
	auth := []string{"--addr", addr, "--token", adminToken}

	r := run("", append(auth, "feedback", "record", "-f", file)...)
	if r.code != 0 || !strings.Contains(r.stdout, "recorded cli-1 in commit") {
		t.Fatalf("record: %+v", r)
	}
	r = run(sampleEvent, append(auth, "feedback", "record", "-f", "-")...)
	if r.code != 0 || !strings.Contains(r.stdout, "already recorded") {
		t.Fatalf("record again from stdin: %+v", r)
	}
	r = run("", append(auth, "feedback", "get", "cli-1")...)
	if r.code != 0 || !strings.Contains(r.stdout, "APPROVED_WITH_CHANGES by erin") || !strings.Contains(r.stdout, "shared retry helper") {
		t.Fatalf("get: %+v", r)
	}
	r = run("", append(auth, "-o", "json", "--protocol", "grpc", "feedback", "get", "cli-1")...)
	var got struct {
		Feedback struct {
			Decision struct {
				DecisionID string   `json:"decision_id"`
				Tags       []string `json:"tags"`
			} `json:"decision"`
		} `json:"feedback"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &got) != nil || got.Feedback.Decision.DecisionID != "cli-1" || got.Feedback.Decision.Tags[0] != "reuse" {
		t.Fatalf("get -o json over gRPC: %+v", r)
	}
	r = run("", append(auth, "feedback", "list", "--agent", "coding-agent")...)
	if r.code != 0 || !strings.Contains(r.stdout, "cli-1") || !strings.HasPrefix(r.stdout, "TIME") {
		t.Fatalf("list: %+v", r)
	}
}

func TestDeadLettersAreListedWithTheirReason(t *testing.T) {
	addr, rdb := server(t)
	rdb.XAdd(context.Background(), &redis.XAddArgs{Stream: "asdlc:events:hitl_decisions", Values: map[string]any{"decision_id": "x", "decision": "PERHAPS"}})
	var r result
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		r = run("", "--addr", addr, "--token", adminToken, "dlq", "list")
		if strings.Contains(r.stdout, "1 dead-lettered") {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if r.code != 0 || !strings.Contains(r.stdout, `got "PERHAPS"`) || !strings.Contains(r.stdout, "decision=PERHAPS") {
		t.Fatalf("dlq list: %+v", r)
	}
}

func TestFailuresPrintOneLineAndExitNonZero(t *testing.T) {
	addr, _ := server(t)
	tests := []struct {
		name  string
		stdin string
		args  []string
		code  int
		want  string
	}{
		{"not found", "", []string{"--addr", addr, "--token", adminToken, "feedback", "get", "nope"}, 1, `not_found: decision "nope" not found`},
		{"no token", "", []string{"--addr", addr, "feedback", "get", "nope"}, 1, "unauthenticated: missing bearer token"},
		{"reader records", sampleEvent, []string{"--addr", addr, "--token", "reader-token-0123456789", "feedback", "record", "-f", "-"}, 1, "permission_denied: viewer has role reader"},
		{"bad event file", `{"decision_id": 1}`, []string{"--addr", addr, "feedback", "record", "-f", "-"}, 1, "decision_id: wrong type"},
		{"invalid decision", `{"decision_id":"v","decision":"NO"}`, []string{"--addr", addr, "--token", adminToken, "feedback", "record", "-f", "-"}, 1, "invalid_argument: invalid decision"},
		{"server down", "", []string{"--addr", "http://127.0.0.1:1", "feedback", "get", "x"}, 1, "unavailable"},
		{"missing arg", "", []string{"feedback", "get"}, 2, "get needs one DECISION_ID"},
		{"missing agent", "", []string{"feedback", "list"}, 2, "--agent"},
		{"bad output", "", []string{"-o", "yaml", "feedback", "get", "x"}, 2, "-o must be text or json"},
		{"unknown flag", "", []string{"feedback", "get", "--frob", "x"}, 2, "unknown flag"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := run(tt.stdin, tt.args...)
			if r.code != tt.code || !strings.Contains(r.stderr, tt.want) {
				t.Fatalf("exit %d, stderr %q; want exit %d containing %q", r.code, r.stderr, tt.code, tt.want)
			}
			if strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
				t.Fatalf("error is not one line: %q", r.stderr)
			}
		})
	}
}

func TestEnvironmentSuppliesAddressAndToken(t *testing.T) {
	addr, _ := server(t)
	t.Setenv("PRECEPT_ADDR", addr)
	t.Setenv("PRECEPT_TOKEN", adminToken)
	r := run("", "ping")
	if r.code != 0 || !strings.Contains(r.stdout, "as ops (admin)") {
		t.Fatalf("ping with env: %+v", r)
	}
}
