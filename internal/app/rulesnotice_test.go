package app

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/redis/go-redis/v9"

	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
	"github.com/precept-dev/precept/lib/testenv"
	"github.com/precept-dev/precept/rules/rulefmt"
)

// Two nodes writing the rules repository through one git server fetch it
// only once an hour, yet a proposal made on node a is on node b within
// 2 s, and a rule approved on a is in b's prompt, at a's version, within
// 2 s: a's changes reach b as notices over the Redis they share
// (docs/deploy.md, "How decisions reach every node").
func TestARulesChangeOnOneNodeReachesTheOtherAtOnceThroughRedis(t *testing.T) {
	ctx := context.Background()
	srv := testenv.StartGitServer(t)
	url := srv.CreateRepo(t, "rules", "main", map[string]string{"prompts/implement.md": "You implement tasks.\n"})
	redisAddr := testenv.Redis(t)
	yaml := fmt.Sprintf(`
auth:
  tokens:
    - {name: alice, role: approver, token: %s}
    - {name: carol, role: approver, token: %s}
rules:
  required_approvals: 1
  git: {remote_url: %q, fetch_interval: 1h, write_through: true, signing_key: %q}
`, aliceToken, carolToken, url, "one deployment's key, shared by its nodes")
	a := launch(t, t.TempDir(), redisAddr, "{batch_wait: 5ms, fsync: false}", yaml)
	b := launch(t, t.TempDir(), redisAddr, "{batch_wait: 5ms, fsync: false}", yaml)
	req := connect.NewRequest(&preceptv1.BuildPromptRequest{Agent: "coding-agent", Stage: "implement"})
	build := func(n *running) (prompt, version string) {
		resp, err := promptServiceClientAs(n.app.URL(), "connect", carolToken).BuildPrompt(ctx, req)
		if err != nil {
			return "", ""
		}
		return resp.Msg.GetPrompt(), resp.Msg.GetVersion()
	}
	for name, n := range map[string]*running{"a": a, "b": b} {
		eventually(t, "node "+name+" serves the stage prompt it fetched at start", 20*time.Second, func() bool {
			p, _ := build(n)
			return p != ""
		})
	}

	resp, err := ruleClient(a.app.URL(), "connect", carolToken).ProposeRule(ctx, connect.NewRequest(&preceptv1.ProposeRuleRequest{
		AffectedAgents: []string{"coding-agent"}, RuleContent: "Log every retried request with its attempt number and the error that caused it.",
		Rationale: "Reviewers keep asking for it.",
	}))
	if err != nil {
		t.Fatal(err)
	}
	id := resp.Msg.GetProposal().GetProposalId()
	proposed := time.Now()
	eventually(t, "node b has node a's proposal", 10*time.Second, func() bool {
		_, err := ruleClient(b.app.URL(), "connect", carolToken).GetProposal(ctx, connect.NewRequest(&preceptv1.GetProposalRequest{ProposalId: id}))
		return err == nil
	})
	if took := time.Since(proposed); took > 2*time.Second {
		t.Errorf("node b had the proposal %s after it was made on a; want within 2 s", took.Round(time.Millisecond))
	}

	if _, err := ruleClient(a.app.URL(), "connect", aliceToken).ApproveRule(ctx, connect.NewRequest(&preceptv1.ApproveRuleRequest{ProposalId: id})); err != nil {
		t.Fatal(err)
	}
	approved := time.Now()
	var version string
	eventually(t, "node a serves the rule", 10*time.Second, func() bool {
		p, v := build(a)
		version = v
		return strings.Contains(p, "attempt number")
	})
	eventually(t, "node b serves node a's version", 10*time.Second, func() bool {
		_, v := build(b)
		return v == version
	})
	if took := time.Since(approved); took > 2*time.Second {
		t.Errorf("node b served the rule %s after the approval on a returned; want within 2 s", took.Round(time.Millisecond))
	}
	t.Logf("node b served the rule %s after the approval on a returned", time.Since(approved).Round(time.Millisecond))
}

// A notice Redis refused is published again once Redis takes it, so the
// other nodes need not wait for their next fetch: here the node's Redis
// user may not publish until an operator grants it.
func TestARulesNoticeRedisRefusedIsPublishedAgain(t *testing.T) {
	addr := testenv.Redis(t)
	admin := testenv.RedisClient(t, addr)
	ctx := context.Background()
	if err := admin.Do(ctx, "ACL", "SETUSER", "node", "on", ">node-secret", "~*", "&*", "+@all", "-publish").Err(); err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr, Username: "node", Password: "node-secret"})
	defer rdb.Close()
	n := newRulesNotice(rdb, "precept:notice-test", slog.New(slog.DiscardHandler))
	listener := admin.Subscribe(ctx, n.channel)
	defer listener.Close()
	if _, err := listener.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); n.run(runCtx) }()
	defer func() { cancel(); <-done }()

	n.changed(rulefmt.Change{Kind: rulefmt.ProposalCreated, Commit: "c0ffee"})
	time.Sleep(300 * time.Millisecond) // refused: NOPERM
	if err := admin.Do(ctx, "ACL", "SETUSER", "node", "+publish").Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-listener.Channel():
		if !strings.HasSuffix(m.Payload, " c0ffee") {
			t.Fatalf("notice %q, want the change c0ffee", m.Payload)
		}
	case <-time.After(8 * time.Second):
		t.Fatal("the notice Redis refused was never published again")
	}
}
