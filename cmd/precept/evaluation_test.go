package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestEvaluatorCommands(t *testing.T) {
	addr, rdb := server(t)
	comments := []struct{ id, reviewer, epic, text string }{
		{"s-1", "alice", "E1", "Hardcoded API key in config.go; load secrets from the environment."},
		{"s-2", "bob", "E2", "API key is hardcoded in the config file, read it from an env var instead."},
		{"s-3", "carol", "E3", "Do not hardcode the API key; use environment variables for secrets."},
		{"s-4", "dave", "E4", "nope"},
	}
	// One transaction, so the consumer reads the four in one batch and
	// stores them in one commit in stream order: two batches stored
	// concurrently may commit in either order, and the members listed
	// below are in the order they joined.
	_, err := rdb.TxPipelined(context.Background(), func(p redis.Pipeliner) error {
		for _, c := range comments {
			p.XAdd(context.Background(), &redis.XAddArgs{Stream: "asdlc:events:hitl_decisions", Values: map[string]any{
				"decision_id": c.id, "gate_id": "HITL-2", "epic_id": c.epic, "agent": "coding-agent", "decision": "REJECTED",
				"reviewer_id": c.reviewer, "timestamp": "2026-11-20T10:00:00Z", "reviewer_comment": c.text,
			}})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	auth := []string{"--addr", addr, "--token", adminToken}
	var r result
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if r = run("", append(auth, "evaluation", "get", "s-4")...); r.code == 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(r.stdout, "AMBIGUOUS") || !strings.Contains(r.stdout, "clarity rubric failed") {
		t.Fatalf("evaluation get s-4: %+v", r)
	}
	r = run("", append(auth, "evaluation", "get", "s-3")...)
	if r.code != 0 || !strings.Contains(r.stdout, "GENERALIZABLE_HIGH") || !strings.Contains(r.stdout, "3 decisions, 3 distinct reviewers, 3 distinct epics") {
		t.Fatalf("evaluation get s-3: %+v", r)
	}
	r = run("", append(auth, "similar", "api key hardcoded in code", "--agent", "coding-agent")...)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "SIMILARITY") || strings.Count(r.stdout, "s-") != 3 {
		t.Fatalf("similar: %+v", r)
	}
	r = run("", append(auth, "clusters", "list", "--agent", "coding-agent")...)
	if r.code != 0 || !strings.Contains(r.stdout, "GENERALIZABLE_HIGH") {
		t.Fatalf("clusters list: %+v", r)
	}
	id := strings.Fields(strings.Split(r.stdout, "\n")[1])[0]
	r = run("", append(auth, "clusters", "show", id)...)
	if r.code != 0 || !strings.Contains(r.stdout, "most central comments") || !strings.Contains(r.stdout, "s-1, s-2, s-3") {
		t.Fatalf("clusters show %s: %+v", id, r)
	}
	r = run("", append(auth, "review", "list")...)
	if r.code != 0 || !strings.Contains(r.stdout, "s-4") || !strings.Contains(r.stdout, "what was wrong") {
		t.Fatalf("review list: %+v", r)
	}
	for _, bad := range [][]string{{"similar"}, {"similar", "x", "--decision", "y"}, {"clusters", "show"}} {
		if r := run("", append(auth, bad...)...); r.code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", bad, r.code, r.stderr)
		}
	}
}
