package main

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/redis/go-redis/v9"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
	"github.com/precept-dev/precept/gen/precept/v1/preceptv1connect"
	"github.com/precept-dev/precept/lib/testenv"
	"github.com/precept-dev/precept/rules/rulefmt"
)

// Tokens of the three-node test's approvers.
const (
	aliceTok = "alice-approver-token-0123"
	bobTok   = "bob-approver-token-012345"
	carolTok = "carol-approver-token-0123"
)

// produceConfirmed sends n decisions through a failover client in
// batches, each confirmed by WAIT on one replica; a batch that fails or
// is not confirmed is sent again (the decision ids make a second copy
// harmless). sent counts the confirmed ones.
func produceConfirmed(rdb *redis.Client, n int, sent *atomic.Int64) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		ctx := context.Background()
		const batch = 250
		for start := 0; start < n; {
			pipe := rdb.Pipeline()
			for i := start; i < min(n, start+batch); i++ {
				pipe.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: map[string]any{
					"decision_id": fmt.Sprintf("three-%06d", i), "gate_id": "HITL-2", "epic_id": fmt.Sprintf("E-%d", i%37),
					"agent": fmt.Sprintf("agent-%d", i%3), "decision": []string{"REJECTED", "APPROVED"}[i%2], "reviewer_id": fmt.Sprintf("r-%d", i%11),
					"timestamp": "2026-11-20T10:00:00Z", "reviewer_comment": []string{"please cover the error path with tests", ""}[i%2],
				}})
			}
			_, err := pipe.Exec(ctx)
			if err == nil {
				var acked int64
				acked, err = rdb.Do(ctx, "WAIT", 1, 1000).Int64()
				if err == nil && acked < 1 {
					err = fmt.Errorf("no replica acknowledged")
				}
			}
			if err != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			sent.Store(int64(min(n, start+batch)))
			start += batch
		}
	}()
	return done
}

// Three preceptd processes, each with its own data directory, share a
// git server (git http-backend) for both repositories and Redis with
// Sentinel. While 20,000 decisions arrive, one node is killed with
// SIGKILL, the Redis primary is killed so that Sentinel fails over, and
// the git server goes away for 10 s; then everything is back. The server
// holds every decision once, every repository passes git fsck --strict,
// an approval raced against a rejection on another node ends with one
// outcome on every node, and a rule approved on one node is served by
// all three within 2 s (docs/deploy.md).
func TestThreeNodesSurviveAKillAFailoverAndAGitOutage(t *testing.T) {
	preceptd, _ := binaries(t)
	set := testenv.RedisWithSentinel(t)
	srv := testenv.StartGitServer(t)
	for _, name := range []string{"feedback", "rules"} {
		testenv.Git(t, srv.Root, "init", "--quiet", "--bare", "--initial-branch=main", srv.Dir(name))
	}
	dir := t.TempDir()
	const n = 20000
	type node struct {
		name, addr, cfg, data string
		d                     *daemon
	}
	var nodes []*node
	for _, name := range []string{"a", "b", "c"} {
		nd := &node{name: name, addr: testenv.FreeAddr(t), data: filepath.Join(dir, name)}
		nd.cfg = writeConfig(t, dir, fmt.Sprintf(`
listen: %s
data_dir: %s
node: node-%s
auth:
  tokens:
    - {name: alice, role: approver, token: %s}
    - {name: bob, role: approver, token: %s}
    - {name: carol, role: approver, token: %s}
redis:
  sentinel: {master_name: %s, addrs: [%s]}
  block: 100ms
  batch_size: 500
  claim_idle: 3s
  claim_interval: 500ms
feedback:
  batch_size: 500
  batch_wait: 20ms
  follow_interval: 500ms
  git: {remote_url: %q}
rules:
  required_approvals: 1
  git: {remote_url: %q, fetch_interval: 10s, write_through: true, signing_key: %q}
prompts: {watch_poll: 200ms}
`, nd.addr, nd.data, name, aliceTok, bobTok, carolTok, testenv.SentinelMaster, strings.Join(set.SentinelAddrs(), ", "),
			srv.URL("feedback"), srv.URL("rules"), "one deployment's signing key, shared by its three nodes"))
		nd.d = startDaemon(t, preceptd, nd.cfg, nd.addr)
		nodes = append(nodes, nd)
	}
	logs := func() string {
		var b strings.Builder
		for _, nd := range nodes {
			out := nd.d.output()
			fmt.Fprintf(&b, "--- node %s (last 3000 bytes):\n%s\n", nd.name, out[max(0, len(out)-3000):])
		}
		return b.String()
	}

	var sent atomic.Int64
	producer := set.Client(t)
	done := produceConfirmed(producer, n, &sent)
	waitFor(t, "a fifth sent", 120*time.Second, func() bool { return sent.Load() >= n/5 }, logs)
	nodes[1].d.kill()
	t.Logf("node b killed at %d sent", sent.Load())

	waitFor(t, "two fifths sent", 120*time.Second, func() bool { return sent.Load() >= 2*n/5 }, logs)
	set.Primary.Kill()
	waitFor(t, "the replica promoted", 30*time.Second, func() bool {
		m, err := set.Master(context.Background())
		return err == nil && m == set.Replica.Addr
	}, logs)
	set.Primary.Restart(t)
	t.Logf("Redis failed over at %d sent", sent.Load())

	waitFor(t, "three fifths sent", 120*time.Second, func() bool { return sent.Load() >= 3*n/5 }, logs)
	restore := srv.Outage()
	t.Logf("git server away at %d sent", sent.Load())
	time.Sleep(10 * time.Second)
	restore()
	nodes[1].d = startDaemon(t, preceptd, nodes[1].cfg, nodes[1].addr)
	t.Logf("git server back and node b restarted at %d sent", sent.Load())
	<-done

	rdb := set.Client(t)
	start := time.Now()
	waitFor(t, "every decision on the git server and in every node", 5*time.Minute, func() bool {
		if gitCount(t, srv.Dir("feedback")) != n {
			return false
		}
		for _, nd := range nodes {
			if nd.d.stored() != n {
				return false
			}
		}
		p, err := rdb.XPending(context.Background(), stream, "precept-evaluator").Result()
		return err == nil && p.Count == 0
	}, logs)
	t.Logf("settled %s after the last decision was sent", time.Since(start).Round(time.Millisecond))
	ids := strings.Fields(testenv.Git(t, srv.Dir("feedback"), "ls-tree", "-r", "--name-only", "main", "feedback/decisions"))
	seen := map[string]bool{}
	for _, p := range ids {
		seen[strings.TrimSuffix(filepath.Base(p), filepath.Ext(p))] = true
	}
	for i := range n {
		if id := fmt.Sprintf("three-%06d", i); !seen[id] {
			t.Fatalf("%s is not on the git server", id)
		}
	}
	if dl, _ := rdb.XLen(context.Background(), stream+":dlq").Result(); dl != 0 {
		t.Fatalf("%d entries dead-lettered", dl)
	}
	for _, repo := range []string{srv.Dir("feedback"), srv.Dir("rules")} {
		testenv.Git(t, repo, "fsck", "--strict", "--no-dangling")
	}
	for _, nd := range nodes {
		for _, repo := range []string{"feedback.git", "rules.git"} {
			testenv.Git(t, filepath.Join(nd.data, repo), "fsck", "--strict")
		}
	}

	// An approval on a raced against a rejection on b.
	ctx := context.Background()
	propose := func(content string) string {
		t.Helper()
		resp, err := rulesAs(nodes[0].addr, carolTok).ProposeRule(ctx, connect.NewRequest(&preceptv1.ProposeRuleRequest{
			AffectedAgents: []string{"agent-0"}, RuleContent: content, Rationale: "Reviewers keep asking for it.",
		}))
		if err != nil {
			t.Fatal(err)
		}
		id := resp.Msg.GetProposal().GetProposalId()
		for _, nd := range nodes[1:] {
			waitFor(t, "node "+nd.name+" follows "+id, 30*time.Second, func() bool {
				_, err := rulesAs(nd.addr, carolTok).GetProposal(ctx, connect.NewRequest(&preceptv1.GetProposalRequest{ProposalId: id}))
				return err == nil
			}, logs)
		}
		return id
	}
	id := propose("Write a unit test for every retry path, including the give-up case.")
	var wg sync.WaitGroup
	var errA, errB error
	wg.Add(2)
	go func() {
		defer wg.Done()
		_, errA = rulesAs(nodes[0].addr, aliceTok).ApproveRule(ctx, connect.NewRequest(&preceptv1.ApproveRuleRequest{ProposalId: id}))
	}()
	go func() {
		defer wg.Done()
		_, errB = rulesAs(nodes[1].addr, bobTok).RejectRule(ctx, connect.NewRequest(&preceptv1.RejectRuleRequest{ProposalId: id, Reason: "too broad for us"}))
	}()
	wg.Wait()
	files := testenv.Git(t, srv.Dir("rules"), "ls-tree", "-r", "--name-only", "main")
	rule, rejected := strings.Contains(files, rulefmt.RuleIDFor(id)+".md"), strings.Contains(files, rulefmt.RejectedPath(id))
	t.Logf("approve on a: %v; reject on b: %v", errA, errB)
	if rule == rejected {
		t.Fatalf("the server holds rule=%v rejection=%v for %s", rule, rejected, id)
	}
	want := preceptv1.ProposalStatus_PROPOSAL_STATUS_APPROVED
	if rejected {
		want = preceptv1.ProposalStatus_PROPOSAL_STATUS_REJECTED
	}
	for _, nd := range nodes {
		waitFor(t, fmt.Sprintf("node %s sees %s", nd.name, want), 20*time.Second, func() bool {
			got, err := rulesAs(nd.addr, carolTok).GetProposal(ctx, connect.NewRequest(&preceptv1.GetProposalRequest{ProposalId: id}))
			return err == nil && got.Msg.GetProposal().GetStatus() == want
		}, logs)
	}

	// A curator pushes the stage prompt; then a rule approved on a is in
	// every node's prompt, at one version, within 2 s.
	clone := filepath.Join(t.TempDir(), "curator")
	testenv.Git(t, filepath.Dir(clone), "clone", "--quiet", srv.URL("rules"), clone)
	if err := os.MkdirAll(filepath.Join(clone, "prompts"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(clone, "prompts", "implement.md"), []byte("You implement tasks.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	testenv.GitAs(t, clone, "Jane Curator", "jane@example.com", "add", ".")
	testenv.GitAs(t, clone, "Jane Curator", "jane@example.com", "commit", "--quiet", "-m", "stage prompt")
	testenv.GitAs(t, clone, "Jane Curator", "jane@example.com", "push", "--quiet", "origin", "main")
	build := connect.NewRequest(&preceptv1.BuildPromptRequest{Agent: "agent-0", Stage: "implement"})
	for _, nd := range nodes {
		waitFor(t, "node "+nd.name+" has the stage prompt", 30*time.Second, func() bool {
			_, err := promptsAs(nd.addr, carolTok).BuildPrompt(ctx, build)
			return err == nil
		}, logs)
	}
	id2 := propose("Log every retried request with its attempt number and the error that caused it.")
	if _, err := rulesAs(nodes[0].addr, aliceTok).ApproveRule(ctx, connect.NewRequest(&preceptv1.ApproveRuleRequest{ProposalId: id2})); err != nil {
		t.Fatal(err)
	}
	approved := time.Now()
	versions := map[string]string{}
	for len(versions) < len(nodes) && time.Since(approved) < 30*time.Second {
		for _, nd := range nodes {
			if _, ok := versions[nd.name]; ok {
				continue
			}
			resp, err := promptsAs(nd.addr, carolTok).BuildPrompt(ctx, build)
			if err == nil && strings.Contains(resp.Msg.GetPrompt(), "attempt number") {
				versions[nd.name] = resp.Msg.GetVersion()
				t.Logf("node %s serves the rule %s after the approval returned", nd.name, time.Since(approved).Round(time.Millisecond))
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	took := time.Since(approved)
	if len(versions) < len(nodes) {
		t.Fatalf("after 30 s only %v serve the rule\n%s", versions, logs())
	}
	if took > 2*time.Second {
		t.Errorf("the last node served the rule %s after the approval; want within 2 s", took.Round(time.Millisecond))
	}
	vs := slices.Compact(slices.Sorted(maps.Values(versions)))
	if len(vs) != 1 {
		t.Errorf("the nodes serve different versions: %v", versions)
	}
	for _, nd := range nodes {
		nd.d.stop(t)
	}
}

func promptsAs(addr, token string) preceptv1connect.PromptServiceClient {
	return preceptv1connect.NewPromptServiceClient(&http.Client{Transport: tokenTransport{token}}, "http://"+addr)
}
