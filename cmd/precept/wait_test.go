package main

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestWaitRidesOutAServerNotUpYetAndAnEntryNotThereYet(t *testing.T) {
	// A port with nothing on it: without --wait, ping fails at once;
	// with a short wait, it fails when the wait is over.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + l.Addr().String()
	l.Close()
	start := time.Now()
	if r := run("", "--addr", down, "ping"); r.code != 1 || !strings.Contains(r.stderr, "unavailable") || time.Since(start) > 5*time.Second {
		t.Fatalf("ping without --wait: %+v after %s", r, time.Since(start))
	}
	start = time.Now()
	if r := run("", "--addr", down, "ping", "--wait", "600ms"); r.code != 1 || time.Since(start) < 600*time.Millisecond {
		t.Fatalf("ping --wait 600ms against nothing: %+v after %s", r, time.Since(start))
	}

	addr, rdb := server(t)
	auth := []string{"--addr", addr, "--token", adminToken}
	if r := run("", append(auth, "ping", "--wait", "10s")...); r.code != 0 || !strings.HasPrefix(r.stdout, "ok: ") {
		t.Fatalf("ping --wait: %+v", r)
	}
	// Not found is final without --wait, and waited out with it.
	if r := run("", append(auth, "feedback", "get", "late-1")...); r.code != 1 || !strings.Contains(r.stderr, "not_found") {
		t.Fatalf("get of a decision not sent: %+v", r)
	}
	time.AfterFunc(700*time.Millisecond, func() {
		rdb.XAdd(context.Background(), &redis.XAddArgs{Stream: "asdlc:events:hitl_decisions", Values: map[string]any{
			"decision_id": "late-1", "gate_id": "HITL-2", "epic_id": "E1", "agent": "coding-agent", "decision": "REJECTED",
			"reviewer_id": "ann", "timestamp": "2026-11-20T10:00:00Z", "reviewer_comment": "the client has no timeout",
		}})
		rdb.XAdd(context.Background(), &redis.XAddArgs{Stream: "asdlc:events:hitl_decisions", Values: map[string]any{"decision_id": "x", "decision": "PERHAPS"}})
	})
	if r := run("", append(auth, "feedback", "get", "late-1", "--wait", "20s")...); r.code != 0 || !strings.Contains(r.stdout, "REJECTED by ann") {
		t.Fatalf("feedback get --wait: %+v", r)
	}
	if r := run("", append(auth, "evaluation", "get", "late-1", "--wait", "20s")...); r.code != 0 || !strings.Contains(r.stdout, "decision  late-1") {
		t.Fatalf("evaluation get --wait: %+v", r)
	}
	if r := run("", append(auth, "dlq", "list", "--wait", "20s")...); r.code != 0 || !strings.Contains(r.stdout, `got "PERHAPS"`) {
		t.Fatalf("dlq list --wait: %+v", r)
	}
	// A list with nothing to show waits out its time and prints the
	// empty list; an error waiting cannot cure ends the wait at once.
	start = time.Now()
	if r := run("", append(auth, "proposals", "list", "--wait", "500ms")...); r.code != 0 || !strings.HasPrefix(r.stdout, "PROPOSAL") || time.Since(start) < 500*time.Millisecond {
		t.Fatalf("proposals list --wait with none: %+v after %s", r, time.Since(start))
	}
	start = time.Now()
	if r := run("", "--addr", addr, "--token", "wrong-token-0123456789", "ping", "--wait", "30s"); r.code != 1 || !strings.Contains(r.stderr, "unauthenticated") || time.Since(start) > 10*time.Second {
		t.Fatalf("ping --wait with a wrong token: %+v after %s", r, time.Since(start))
	}
}
