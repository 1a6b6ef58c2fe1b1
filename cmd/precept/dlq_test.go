package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/precept-dev/precept/internal/app"
	"github.com/precept-dev/precept/internal/config"
	"github.com/precept-dev/precept/lib/testenv"
)

// launchApp runs an in-process preceptd on cfg until the returned stop
// is called or the test ends.
func launchApp(t *testing.T, yaml string) (addr string, stop func()) {
	t.Helper()
	cfg, err := config.Parse(yaml, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.New(t.Context(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
			a.Close()
		}
	}
	t.Cleanup(stop)
	return a.URL(), stop
}

// dlqListing is `precept -o json dlq list` as far as the tests read it.
type dlqListing struct {
	DeadLetters []struct {
		ID     string `json:"id"`
		Reason string `json:"reason"`
		Whole  bool   `json:"whole"`
	} `json:"dead_letters"`
}

func listDLQ(t *testing.T, auth []string) dlqListing {
	t.Helper()
	r := run("", append(auth, "-o", "json", "dlq", "list")...)
	var l dlqListing
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &l) != nil {
		t.Fatalf("dlq list: %+v", r)
	}
	return l
}

func TestDLQReplayReingestsAFixedEntryAndDropRemovesOne(t *testing.T) {
	redisAddr, dataDir := testenv.Redis(t), t.TempDir()
	rdb := testenv.RedisClient(t, redisAddr)
	yaml := func(extra string) string {
		return fmt.Sprintf(`
listen: 127.0.0.1:0
data_dir: %s
redis: {addr: %q, block: 100ms}
feedback: {batch_wait: 5ms, fsync: false}
auth:
  tokens:
    - {name: ops, role: admin, token: %s}
    - {name: alice, role: approver, token: approver-token-0123456789}
    - {name: viewer, role: reader, token: reader-token-0123456789}
%s`, dataDir, redisAddr, adminToken, extra)
	}
	addr, stop := launchApp(t, yaml(""))
	admin := []string{"--addr", addr, "--token", adminToken}
	ctx := context.Background()
	add := func(values ...any) {
		if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: "asdlc:events:hitl_decisions", Values: values}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	event := func(id, gate, comment string) string {
		return fmt.Sprintf(`{"decision_id":%q,"gate_id":%q,"epic_id":"EPIC-3","decision":"REJECTED","reviewer_id":"erin","timestamp":"2026-11-20T10:00:00Z","reviewer_comment":%q}`, id, gate, comment)
	}
	// HITL-9 maps to no agent yet; and "twice" is sent twice with
	// different comments.
	add("data", event("gateless", "HITL-9", "the retry loop has no backoff"))
	add("data", strings.Replace(event("twice", "HITL-2", "first version"), `"gate_id"`, `"agent":"coding-agent","gate_id"`, 1))
	add("data", strings.Replace(event("twice", "HITL-2", "second version"), `"gate_id"`, `"agent":"coding-agent","gate_id"`, 1))
	var l dlqListing
	deadline := time.Now().Add(15 * time.Second)
	for len(l.DeadLetters) < 2 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		l = listDLQ(t, admin)
	}
	ids := map[string]string{}
	for _, d := range l.DeadLetters {
		switch {
		case strings.Contains(d.Reason, "agent: required"):
			ids["gateless"] = d.ID
		case d.Reason == "decision_id reused with different content":
			ids["twice"] = d.ID
		}
	}
	if len(ids) != 2 || !l.DeadLetters[0].Whole {
		t.Fatalf("dead letters = %+v", l.DeadLetters)
	}

	// Neither a reader nor an approver may replay or drop.
	for _, token := range []string{"reader-token-0123456789", "approver-token-0123456789"} {
		for _, verb := range []string{"replay", "drop"} {
			r := run("", "--addr", addr, "--token", token, "dlq", verb, ids["gateless"])
			if r.code != 1 || !strings.Contains(r.stderr, "permission_denied") || !strings.Contains(r.stderr, "needs admin") {
				t.Errorf("%s by %s: %+v", verb, token, r)
			}
		}
	}

	// The operator maps the gate, restarts and replays.
	stop()
	addr, _ = launchApp(t, yaml("ingest: {gate_agents: {HITL-9: coding-agent}}\n"))
	admin = []string{"--addr", addr, "--token", adminToken}
	r := run("", append(admin, "dlq", "replay", ids["gateless"])...)
	if r.code != 0 || !strings.Contains(r.stdout, ids["gateless"]+": replayed as stream entry ") {
		t.Fatalf("replay: %+v", r)
	}
	deadline = time.Now().Add(15 * time.Second)
	for r = run("", append(admin, "feedback", "get", "gateless")...); r.code != 0 && time.Now().Before(deadline); r = run("", append(admin, "feedback", "get", "gateless")...) {
		time.Sleep(50 * time.Millisecond)
	}
	if r.code != 0 || !strings.Contains(r.stdout, "coding-agent") || !strings.Contains(r.stdout, "no backoff") {
		t.Fatalf("the replayed decision: %+v", r)
	}
	r = run("", append(admin, "dlq", "replay", ids["gateless"])...)
	if r.code != 1 || !strings.Contains(r.stdout, "not replayed") || !strings.Contains(r.stderr, "1 of 1 dead letters not replayed") {
		t.Fatalf("second replay: %+v", r)
	}
	r = run("", append(admin, "dlq", "drop", ids["twice"])...)
	if r.code != 0 || strings.TrimSpace(r.stdout) != ids["twice"]+": dropped" {
		t.Fatalf("drop: %+v", r)
	}
	if l := listDLQ(t, admin); len(l.DeadLetters) != 0 {
		t.Fatalf("left: %+v", l.DeadLetters)
	}
	audit, err := rdb.XRange(ctx, "asdlc:events:hitl_decisions:dlq:audit", "-", "+").Result()
	if err != nil || len(audit) != 2 || audit[0].Values["action"] != "replay" || audit[1].Values["action"] != "drop" || audit[1].Values["by"] != "ops" {
		t.Fatalf("audit = %+v, %v", audit, err)
	}
}
