package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/precept-dev/precept/lib/testenv"
)

// TestCuratorsCorrectClustersFromTheCLI drives the curator commands
// against a real preceptd with real Redis: decisions arrive on the
// stream, a reader may not correct, an admin merges, splits and marks a
// cluster not a pattern, each correction is a commit in the feedback
// repository saying who and why, and rounds keep what curators decided.
func TestCuratorsCorrectClustersFromTheCLI(t *testing.T) {
	redisAddr, dataDir := testenv.Redis(t), t.TempDir()
	rdb := testenv.RedisClient(t, redisAddr)
	addr, stop := launchApp(t, fmt.Sprintf(`
listen: 127.0.0.1:0
data_dir: %s
redis: {addr: %q, block: 100ms}
feedback: {batch_wait: 5ms, fsync: false}
evaluator: {recluster_every: 0s}
auth:
  tokens:
    - {name: ops, role: admin, token: %s}
    - {name: viewer, role: reader, token: reader-token-0123456789}
`, dataDir, redisAddr, adminToken))
	decisions := []struct{ id, reviewer, epic, text string }{
		{"e1", "ann", "E1", "The error from db.Close() is silently dropped; return it."},
		{"e2", "bob", "E2", "err is swallowed in saveUser, handle it"},
		{"e3", "cat", "E3", "the except block just passes, so import failures vanish; re-raise"},
		{"c1", "dan", "E1", `Wrap the error with context: fmt.Errorf("load config: %w", err)`},
		{"c2", "eve", "E2", "the returned error says nothing about which file failed, add context"},
		{"v1", "fay", "E3", "not sure about this"},
	}
	_, err := rdb.TxPipelined(context.Background(), func(p redis.Pipeliner) error {
		for _, d := range decisions {
			p.XAdd(context.Background(), &redis.XAddArgs{Stream: "asdlc:events:hitl_decisions", Values: map[string]any{
				"decision_id": d.id, "gate_id": "HITL-2", "epic_id": d.epic, "agent": "coding-agent", "decision": "REJECTED",
				"reviewer_id": d.reviewer, "timestamp": "2026-11-20T10:00:00Z", "reviewer_comment": d.text,
			}})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	admin := []string{"--addr", addr, "--token", adminToken}
	reader := []string{"--addr", addr, "--token", "reader-token-0123456789"}
	type evaluation struct {
		Classification string `json:"classification"`
		ClusterID      string `json:"cluster_id"`
		Lesson         struct {
			Category string `json:"category"`
		} `json:"lesson"`
	}
	get := func(id string) (evaluation, bool) {
		var out struct {
			Evaluation evaluation `json:"evaluation"`
		}
		r := run("", append(admin, "-o", "json", "evaluation", "get", id)...)
		if r.code != 0 {
			return out.Evaluation, false
		}
		if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
			t.Fatalf("evaluation get %s: %v\n%s", id, err, r.stdout)
		}
		ev := out.Evaluation
		ev.Classification = strings.TrimPrefix(ev.Classification, "")
		return ev, true
	}
	must := func(id string) evaluation {
		t.Helper()
		ev, ok := get(id)
		if !ok {
			t.Fatalf("no evaluation of %s", id)
		}
		return ev
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, d := range decisions {
		for {
			if _, ok := get(d.id); ok {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s was not evaluated", d.id)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	// Earlier members are re-evaluated when their cluster's class changes.
	settle := func(what string, ok func() bool) {
		t.Helper()
		for end := time.Now().Add(10 * time.Second); !ok(); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("%s: not within 10s", what)
			}
		}
	}
	settle("e1 HIGH", func() bool { return must("e1").Classification == "GENERALIZABLE_HIGH" })
	if ev := must("v1"); ev.Classification != "AMBIGUOUS" || ev.Lesson.Category != "unclear" {
		t.Fatalf("a vague rejection: %+v", ev)
	}
	a, b := must("e1").ClusterID, must("c1").ClusterID
	for _, id := range []string{"e2", "e3"} {
		if ev := must(id); ev.ClusterID != a || ev.Lesson.Category != "errors-ignored" || ev.Classification != "GENERALIZABLE_HIGH" {
			t.Fatalf("%s: %+v, want errors-ignored, HIGH, in %s", id, ev, a)
		}
	}
	if ev := must("c2"); ev.ClusterID != b || a == b || ev.Lesson.Category != "error-context" || ev.Classification != "GENERALIZABLE_LOW" {
		t.Fatalf("c2: %+v; errors-ignored cluster %s", ev, a)
	}

	// Readers look, they do not correct; bad requests say what is wrong.
	if r := run("", append(reader, "clusters", "merge", a, b)...); r.code == 0 || !strings.Contains(r.stderr, "permission_denied") {
		t.Fatalf("a reader merged: %+v", r)
	}
	for _, bad := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"clusters", "merge", a}, 2, "two or more"},
		{[]string{"clusters", "merge", a, "c-missing"}, 1, "not_found"},
		{[]string{"clusters", "categorize", "v1", "--category", "errors-ignored"}, 1, "in no cluster"},
		{[]string{"clusters", "categorize", "e1", "--category", "no-such"}, 1, "not in the taxonomy"},
		{[]string{"clusters", "move", "e1"}, 2, "--to"},
	} {
		if r := run("", append(admin, bad.args...)...); r.code != bad.code || !strings.Contains(r.stderr, bad.says) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", bad.args, r.code, r.stderr, bad.code, bad.says)
		}
	}

	// Merge: one problem, recorded in git with who and why.
	r := run("", append(admin, "clusters", "merge", a, b, "--why", "both are errors not handled")...)
	if r.code != 0 || !strings.Contains(r.stdout, "recorded and applied") {
		t.Fatalf("merge: %+v", r)
	}
	if ev := must("c1"); ev.ClusterID != a || ev.Classification != "GENERALIZABLE_HIGH" {
		t.Fatalf("after the merge c1 is %+v, want in %s and HIGH", ev, a)
	}
	repo := filepath.Join(dataDir, "feedback.git")
	log := gitOut(t, repo, "log", "-1", "--format=%s%n%(trailers)", "main")
	if !strings.Contains(log, "Correct clusters: merge "+a+", "+b) || !strings.Contains(log, "Corrected-By: ops") {
		t.Fatalf("the merge commit reads:\n%s", log)
	}
	files := gitOut(t, repo, "ls-tree", "-r", "--name-only", "main", "feedback/corrections")
	record := gitOut(t, repo, "show", "main:"+strings.Fields(files)[0])
	if !strings.Contains(record, `"by": "ops"`) || !strings.Contains(record, "both are errors not handled") || !strings.Contains(record, `"kind": "merge"`) {
		t.Fatalf("the correction record:\n%s", record)
	}

	// A round keeps the merge.
	if r := run("", append(admin, "clusters", "recluster")...); r.code != 0 || !strings.Contains(r.stdout, "re-clustered") {
		t.Fatalf("recluster: %+v", r)
	}
	if must("c2").ClusterID != a {
		t.Fatal("a round undid the merge")
	}

	// Split the context ones off again: they stay apart after a round.
	if r := run("", append(admin, "clusters", "split", a, "c1", "c2", "--why", "context is its own problem")...); r.code != 0 {
		t.Fatalf("split: %+v", r)
	}
	run("", append(admin, "clusters", "recluster")...)
	if c1, e1 := must("c1"), must("e1"); c1.ClusterID == e1.ClusterID || c1.ClusterID != must("c2").ClusterID {
		t.Fatalf("after the split and a round: c1 in %s, c2 in %s, e1 in %s", c1.ClusterID, must("c2").ClusterID, e1.ClusterID)
	}

	// Not a pattern: the errors-ignored cluster's decisions become edge
	// cases, and stay so after a round and a restart.
	if r := run("", append(admin, "clusters", "not-a-pattern", must("e1").ClusterID, "--why", "a legacy module")...); r.code != 0 {
		t.Fatalf("not-a-pattern: %+v", r)
	}
	run("", append(admin, "clusters", "recluster")...)
	if ev := must("e2"); ev.Classification != "EDGE_CASE" {
		t.Fatalf("not a pattern, e2 is %+v", ev)
	}
	if r := run("", append(admin, "clusters", "suggest")...); r.code != 0 {
		t.Fatalf("suggest: %+v", r)
	}
	if r := run("", append(admin, "taxonomy", "learned")...); r.code != 0 {
		t.Fatalf("taxonomy learned: %+v", r)
	}
	if n := strings.Count(gitOut(t, repo, "log", "--format=%s", "main"), "Correct clusters:"); n != 3 {
		t.Fatalf("%d correction commits, want 3", n)
	}
	stop()
	addr, _ = launchApp(t, fmt.Sprintf(`
listen: 127.0.0.1:0
data_dir: %s
redis: {addr: %q, block: 100ms}
feedback: {batch_wait: 5ms, fsync: false}
auth:
  tokens:
    - {name: ops, role: admin, token: %s}
`, dataDir, redisAddr, adminToken))
	admin = []string{"--addr", addr, "--token", adminToken}
	run("", append(admin, "clusters", "recluster")...)
	if ev := must("e2"); ev.Classification != "EDGE_CASE" {
		t.Fatalf("after a restart and a round, e2 is %+v", ev)
	}
	if c1, e1 := must("c1"), must("e1"); c1.ClusterID == e1.ClusterID {
		t.Fatal("after a restart the split came undone")
	}
}

func gitOut(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"--git-dir", dir}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}
