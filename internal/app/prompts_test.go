package app

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/precept-dev/precept"
	preceptv1 "github.com/precept-dev/precept/gen/precept/v1"
	"github.com/precept-dev/precept/gen/precept/v1/preceptv1connect"
	"github.com/precept-dev/precept/lib/gitrepo"
	"github.com/precept-dev/precept/lib/testenv"
	"github.com/precept-dev/precept/rules"
	"github.com/precept-dev/precept/rules/rulefmt"
)

func promptServiceClient(base, protocol string) preceptv1connect.PromptServiceClient {
	return promptServiceClientAs(base, protocol, "")
}

func promptServiceClientAs(base, protocol, token string) preceptv1connect.PromptServiceClient {
	var opts []connect.ClientOption
	if protocol == "grpc" {
		opts = append(opts, connect.WithGRPC())
	}
	return preceptv1connect.NewPromptServiceClient(protocols(base, token)[protocol], base, opts...)
}

// commitRulesRepo commits files to the rules repository's main as the
// rule manager does; an empty content deletes the path.
func commitRulesRepo(t testing.TB, repo *gitrepo.Repo, msg string, files map[string]string) gitrepo.Hash {
	t.Helper()
	var changes []gitrepo.Change
	for p, c := range files {
		changes = append(changes, gitrepo.Change{Path: p, Data: []byte(c), Delete: c == ""})
	}
	h, err := repo.Update(context.Background(), "main", func(*gitrepo.Snapshot) (*gitrepo.CommitSpec, error) {
		return &gitrepo.CommitSpec{Message: msg, Changes: changes}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func activeRule(t testing.TB, agent, id, text string, importance rulefmt.Importance, confidence float64) map[string]string {
	t.Helper()
	b, err := rulefmt.Rule{ID: id, ProposalID: "p-" + strings.TrimPrefix(id, "r-"), Agents: []string{agent}, Type: rulefmt.Guideline,
		Status: rulefmt.Active, Importance: importance, Confidence: confidence, Content: text,
		Approvals: []rulefmt.Approval{{Approver: "alice", Via: "api"}, {Approver: "bob", Via: "slack"}}}.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{rulefmt.ActiveRulePath(agent, id): string(b)}
}

// promptGit runs the git CLI as a curator would.
func promptGit(t testing.TB, dir string, args ...string) string {
	t.Helper()
	return testenv.GitAs(t, dir, "Curator", "curator@example.com", args...)
}

// writeAndPush commits files in a clone with the git CLI and pushes main.
func writeAndPush(t testing.TB, clone, msg string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		full := filepath.Join(clone, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	promptGit(t, clone, "add", ".")
	promptGit(t, clone, "commit", "-q", "-m", msg)
	promptGit(t, clone, "push", "-q", "origin", "HEAD:main")
}

// promptWatch is an open WatchPrompt stream whose messages arrive on a
// channel.
type promptWatch struct {
	msgs chan *preceptv1.WatchPromptResponse
	err  chan error
}

func openPromptWatch(t *testing.T, c preceptv1connect.PromptServiceClient, req *preceptv1.WatchPromptRequest) *promptWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stream, err := c.WatchPrompt(ctx, connect.NewRequest(req))
	if err != nil {
		t.Fatal(err)
	}
	w := &promptWatch{msgs: make(chan *preceptv1.WatchPromptResponse, 64), err: make(chan error, 1)}
	go func() {
		defer stream.Close()
		for stream.Receive() {
			w.msgs <- stream.Msg()
		}
		w.err <- stream.Err()
	}()
	return w
}

func (w *promptWatch) next(t testing.TB, timeout time.Duration) *preceptv1.WatchPromptResponse {
	t.Helper()
	select {
	case m := <-w.msgs:
		return m
	case err := <-w.err:
		t.Fatalf("watch ended: %v", err)
	case <-time.After(timeout):
		t.Fatalf("no prompt update within %s", timeout)
	}
	return nil
}

func TestPromptsFollowRulesCommittedToMainOverConnectAndGRPC(t *testing.T) {
	// Polling is off in effect: Notify alone brings the commits in.
	r := start(t, "prompts: {watch_poll: 1h, max_rules: 2}")
	commitRulesRepo(t, r.app.RulesRepo, "prompts and rules", mergeFiles(
		map[string]string{"prompts/implement.md": "You implement tasks.", "prompts/_rules.md": "Write tests first."},
		activeRule(t, "coding-agent", "r-crit", "Never swallow context errors.", rulefmt.Critical, 0.8),
		activeRule(t, "coding-agent", "r-norm", "Prefer table tests.", rulefmt.Normal, 0.9),
		activeRule(t, "coding-agent", "r-low", "Keep functions short.", rulefmt.Normal, 0.2),
	))
	r.app.Prompts.Notify()

	for _, protocol := range []string{"connect", "grpc"} {
		t.Run(protocol, func(t *testing.T) {
			c := promptServiceClient(r.app.URL(), protocol)
			var m *preceptv1.BuildPromptResponse
			eventually(t, "the committed rules in BuildPrompt", 5*time.Second, func() bool {
				resp, err := c.BuildPrompt(context.Background(), connect.NewRequest(&preceptv1.BuildPromptRequest{
					Agent: "coding-agent", Stage: "implement", ScopePath: "src/main.go"}))
				if err != nil {
					return false
				}
				m = resp.Msg
				return len(m.RuleIds) > 0
			})
			want := "You implement tasks.\n\n## Directory Rules (prompts/_rules.md)\n\nWrite tests first.\n\n" +
				"## Learned Rules (from feedback)\n\n- [r-crit] Never swallow context errors.\n- [r-norm] Prefer table tests.\n"
			if m.Prompt != want || len(m.Excluded) != 1 || m.Excluded[0].RuleId != "r-low" || m.Excluded[0].Reason != "budget" {
				t.Fatalf("prompt:\n%s\nexcluded %+v", m.Prompt, m.Excluded)
			}
			tip, _ := r.app.RulesRepo.Tip("main")
			if m.Commit != tip.String() {
				t.Fatalf("commit %s, main is at %s", m.Commit, tip)
			}

			e, err := c.ExplainPrompt(context.Background(), connect.NewRequest(&preceptv1.ExplainPromptRequest{
				Agent: "coding-agent", Stage: "implement", ScopePath: "src/main.go"}))
			if err != nil {
				t.Fatal(err)
			}
			if e.Msg.Version != m.Version || len(e.Msg.Rules) != 3 || !strings.HasPrefix(e.Msg.Rules[2].Reason, "budget: ranked 3 of 3") {
				t.Fatalf("explain = %+v", e.Msg)
			}

			_, err = c.BuildPrompt(context.Background(), connect.NewRequest(&preceptv1.BuildPromptRequest{Agent: "coding-agent", Stage: "implement", ScopePath: "/abs"}))
			if connect.CodeOf(err) != connect.CodeInvalidArgument {
				t.Fatalf("absolute scope_path: %v", err)
			}
		})
	}

	resp, err := http.Get(r.app.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, metric := range []string{"precept_prompt_cache_hits_total", "precept_prompt_index_rebuilds_total 2", "precept_prompt_watchers 0"} {
		if !strings.Contains(string(body), metric) {
			t.Fatalf("/metrics lacks %q", metric)
		}
	}
}

// The approval and rollback commits are made the way the rule manager
// makes them (a rule file added to main, then removed) followed by the
// Notify it calls after each commit.
func TestAWatcherSeesAnApprovedRuleAndItsRollback(t *testing.T) {
	r := start(t, "prompts: {watch_poll: 1h}")
	repo := r.app.RulesRepo
	commitRulesRepo(t, repo, "stage prompt", map[string]string{"prompts/review.md": "Review the change."})
	r.app.Prompts.Notify()
	c := promptServiceClient(r.app.URL(), "grpc")
	eventually(t, "the stage prompt", 5*time.Second, func() bool {
		_, err := c.BuildPrompt(context.Background(), connect.NewRequest(&preceptv1.BuildPromptRequest{Agent: "review-agent", Stage: "review"}))
		return err == nil
	})

	w := openPromptWatch(t, c, &preceptv1.WatchPromptRequest{Agent: "review-agent", Stage: "review"})
	first := w.next(t, 5*time.Second)
	if first.Reason != "initial" {
		t.Fatalf("first = %+v", first)
	}

	commitRulesRepo(t, repo, "Approve p-1\n\nApproved-by: alice", activeRule(t, "review-agent", "r-1", "Ask for a rollback plan on migrations.", rulefmt.Important, 0.8))
	approved := time.Now()
	r.app.Prompts.Notify()
	added := w.next(t, 5*time.Second)
	t.Logf("approval commit to watcher: %s", time.Since(approved))
	if added.Reason != "changed" || !slices.Equal(added.Prompt.RuleIds, []string{"r-1"}) || !strings.Contains(added.Prompt.Prompt, "- [r-1] Ask for a rollback plan") {
		t.Fatalf("after approval = %+v", added)
	}

	commitRulesRepo(t, repo, "Roll back r-1\n\nRolled-back-by: bob", map[string]string{rulefmt.ActiveRulePath("review-agent", "r-1"): ""})
	r.app.Prompts.Notify()
	removed := w.next(t, 5*time.Second)
	if removed.Reason != "changed" || len(removed.Prompt.RuleIds) != 0 || removed.Prompt.Version != first.Prompt.Version {
		t.Fatalf("after rollback = %+v", removed)
	}
}

// The full learning loop through the production wiring: decisions on the
// Redis stream, the evaluator's cluster, the drafted proposal, two
// approvals and a rollback through RuleService. Polling is off in effect,
// so the watcher hears of main's changes only through the rule manager's
// change hook.
func TestDecisionsBecomeAPromptRuleThroughTwoApprovalsAndLeaveOnRollback(t *testing.T) {
	r := start(t, ruleTokensYAML+"rules: {propose_interval: 200ms}\nprompts: {watch_poll: 1h}\n")
	ctx := context.Background()
	commitRulesRepo(t, r.app.RulesRepo, "stage prompt", map[string]string{"prompts/implement.md": "You implement tasks."})
	r.app.Prompts.Notify()
	prompts := promptServiceClientAs(r.app.URL(), "grpc", viewerToken)
	req := &preceptv1.BuildPromptRequest{Agent: "coding-agent", Stage: "implement", ScopePath: "src/retry/retry.go"}
	eventually(t, "the stage prompt", 5*time.Second, func() bool {
		_, err := prompts.BuildPrompt(ctx, connect.NewRequest(req))
		return err == nil
	})
	w := openPromptWatch(t, prompts, &preceptv1.WatchPromptRequest{Agent: req.Agent, Stage: req.Stage, ScopePath: req.ScopePath})
	first := w.next(t, 5*time.Second)

	xaddAll(t, r.rdb, clusterEvents())
	p := pendingProposal(t, ruleClient(r.app.URL(), "connect", viewerToken))
	if _, err := ruleClient(r.app.URL(), "grpc", aliceToken).ApproveRule(ctx, connect.NewRequest(&preceptv1.ApproveRuleRequest{ProposalId: p.GetProposalId(), Note: "yes"})); err != nil {
		t.Fatal(err)
	}
	resp, err := ruleClient(r.app.URL(), "connect", bobToken).ApproveRule(ctx, connect.NewRequest(&preceptv1.ApproveRuleRequest{ProposalId: p.GetProposalId()}))
	if err != nil {
		t.Fatal(err)
	}
	rule := resp.Msg.GetRule()

	added := w.next(t, 5*time.Second)
	if added.Reason != "changed" || !slices.Equal(added.Prompt.RuleIds, []string{rule.GetRuleId()}) ||
		!strings.Contains(added.Prompt.Prompt, "## Learned Rules (from feedback)\n\n- ["+rule.GetRuleId()+"] ") {
		t.Fatalf("after two approvals the watcher got %+v", added.Prompt)
	}
	built, err := prompts.BuildPrompt(ctx, connect.NewRequest(req))
	if err != nil || built.Msg.Version != added.Prompt.Version {
		t.Fatalf("BuildPrompt after approval: %v, %v", built, err)
	}

	if _, err := ruleClient(r.app.URL(), "connect", aliceToken).RollbackRule(ctx, connect.NewRequest(&preceptv1.RollbackRuleRequest{RuleId: rule.GetRuleId(), Reason: "it fires on generated code"})); err != nil {
		t.Fatal(err)
	}
	removed := w.next(t, 5*time.Second)
	if removed.Prompt.Version != first.Prompt.Version || len(removed.Prompt.RuleIds) != 0 {
		t.Fatalf("after the rollback the watcher got %+v", removed.Prompt)
	}
	built, err = prompts.BuildPrompt(ctx, connect.NewRequest(req))
	if err != nil || strings.Contains(built.Msg.Prompt, rule.GetRuleId()) {
		t.Fatalf("BuildPrompt after rollback: %v, %v", built, err)
	}
}

// The rule manager's API directly, with and without a shadow period
// (rules.shadow_period), through the production change hook.
func TestApprovedRulesEnterThePromptOrItsShadowAndRollbackTakesThemOut(t *testing.T) {
	tests := []struct {
		name   string
		shadow time.Duration
	}{
		{"active at once", 0},
		{"shadow period", time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := start(t, fmt.Sprintf("prompts: {watch_poll: 1h}\nrules: {shadow_period: %s}\n", tt.shadow))
			commitRulesRepo(t, r.app.RulesRepo, "stage prompt", map[string]string{"prompts/implement.md": "You implement tasks."})
			r.app.Prompts.Notify()
			m := r.app.Rules
			c := promptServiceClient(r.app.URL(), "grpc")
			build := func() *preceptv1.BuildPromptResponse {
				resp, err := c.BuildPrompt(context.Background(), connect.NewRequest(&preceptv1.BuildPromptRequest{Agent: "coding-agent", Stage: "implement", ScopePath: "src/x.go"}))
				if err != nil {
					t.Fatal(err)
				}
				return resp.Msg
			}
			eventually(t, "the stage prompt", 5*time.Second, func() bool {
				_, err := c.BuildPrompt(context.Background(), connect.NewRequest(&preceptv1.BuildPromptRequest{Agent: "coding-agent", Stage: "implement"}))
				return err == nil
			})
			w := openPromptWatch(t, c, &preceptv1.WatchPromptRequest{Agent: "coding-agent", Stage: "implement", ScopePath: "src/x.go"})
			first := w.next(t, 5*time.Second)

			const text = "Wrap every error returned from a retry loop with the operation name and the attempt count."
			p, err := m.Propose(context.Background(), rules.ManualProposal{Agents: []string{"coding-agent"}, Content: text,
				Rationale: "Reviewers asked for wrapped retry errors in five reviews."}, precept.Identity{Name: "carol", Role: precept.RoleApprover})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := m.Approve(context.Background(), rules.ApproveRequest{ProposalID: p.ID, By: "alice", Via: rulefmt.ViaAPI}); err != nil {
				t.Fatal(err)
			}
			if got := build(); got.Version != first.Prompt.Version {
				t.Fatalf("one approval changed the prompt:\n%s", got.Prompt)
			}
			approved := time.Now()
			if _, err := m.Approve(context.Background(), rules.ApproveRequest{ProposalID: p.ID, By: "bob", Note: "good rule", Via: rulefmt.ViaSlack}); err != nil {
				t.Fatal(err)
			}
			added := w.next(t, 5*time.Second)
			t.Logf("second approval to watcher: %s", time.Since(approved))
			ruleID := "r-" + strings.TrimPrefix(p.ID, "p-")
			got := build()
			if tt.shadow == 0 {
				if !slices.Equal(added.Prompt.RuleIds, []string{ruleID}) || !strings.Contains(added.Prompt.Prompt, "- ["+ruleID+"] "+text) || got.Version != added.Prompt.Version {
					t.Fatalf("after approval: %+v", added.Prompt)
				}
			} else {
				if len(added.Prompt.RuleIds) != 0 || added.Prompt.Version != first.Prompt.Version || !slices.Equal(added.Prompt.ShadowRuleIds, []string{ruleID}) ||
					!strings.Contains(added.Prompt.ShadowPrompt, "- ["+ruleID+"] "+text) || got.Excluded[0].Reason != "shadow" {
					t.Fatalf("after approval with a shadow period: %+v", added.Prompt)
				}
			}

			if _, err := m.Rollback(context.Background(), rules.RollbackRequest{RuleID: ruleID, By: "bob", Reason: "it fired on generated code"}); err != nil {
				t.Fatal(err)
			}
			removed := w.next(t, 5*time.Second)
			if removed.Prompt.Version != first.Prompt.Version || removed.Prompt.ShadowVersion != "" || strings.Contains(build().Prompt+build().ShadowPrompt, ruleID) {
				t.Fatalf("after rollback: %+v", removed.Prompt)
			}
		})
	}
}

func TestRulesFilesPushedOrFetchedWithTheGitCLIReachBuildAndWatchers(t *testing.T) {
	r := start(t, "prompts: {watch_poll: 20ms}")
	repo := r.app.RulesRepo
	commitRulesRepo(t, repo, "stage prompt", map[string]string{"prompts/implement.md": "You implement tasks."})
	c := promptServiceClient(r.app.URL(), "connect")
	req := &preceptv1.WatchPromptRequest{Agent: "coding-agent", Stage: "implement", ScopePath: "src/api/handler.go"}
	eventually(t, "the stage prompt", 5*time.Second, func() bool {
		_, err := c.BuildPrompt(context.Background(), connect.NewRequest(&preceptv1.BuildPromptRequest{Agent: req.Agent, Stage: req.Stage}))
		return err == nil
	})
	w := openPromptWatch(t, c, req)
	base := w.next(t, 5*time.Second)

	// A curator pushes a _rules.md straight to the rules repository.
	clone := filepath.Join(t.TempDir(), "clone")
	promptGit(t, t.TempDir(), "clone", "-q", repo.Path(), clone)
	writeAndPush(t, clone, "Add src rules", map[string]string{"prompts/src/_rules.md": "Never log request bodies.\n"})
	pushed := w.next(t, 5*time.Second)
	if !strings.Contains(pushed.Prompt.Prompt, "## Directory Rules (prompts/src/_rules.md)\n\nNever log request bodies.") ||
		pushed.Prompt.Commit != promptGit(t, clone, "rev-parse", "HEAD") {
		t.Fatalf("after the push = %+v", pushed.Prompt)
	}

	// The curator reverts it with the git CLI.
	promptGit(t, clone, "revert", "--no-edit", "HEAD")
	promptGit(t, clone, "push", "-q", "origin", "HEAD:main")
	reverted := w.next(t, 5*time.Second)
	if reverted.Prompt.Version != base.Prompt.Version {
		t.Fatalf("after the revert: version %s, want %s\n%s", reverted.Prompt.Version, base.Prompt.Version, reverted.Prompt.Prompt)
	}

	// A _rules.md merged on the remote arrives when main is brought up to
	// the fetched remote main (what the rule manager's remote sync does).
	remote := filepath.Join(t.TempDir(), "remote.git")
	promptGit(t, t.TempDir(), "init", "-q", "--bare", "-b", "main", remote)
	promptGit(t, clone, "push", "-q", remote, "HEAD:main")
	other := filepath.Join(t.TempDir(), "other")
	promptGit(t, t.TempDir(), "clone", "-q", remote, other)
	writeAndPush(t, other, "Add API rules on the remote", map[string]string{"prompts/src/api/_rules.md": "Version every endpoint.\n"})
	if err := repo.AddRemote("origin", remote); err != nil {
		t.Fatal(err)
	}
	if _, err := repo.Fetch(context.Background(), "origin", gitrepo.Auth{}); err != nil {
		t.Fatal(err)
	}
	fetched, err := repo.RemoteBranches("origin", "main")
	if err != nil || len(fetched) != 1 {
		t.Fatalf("remote branches %v, %v", fetched, err)
	}
	local, _ := repo.Tip("main")
	if err := repo.SetBranch("main", local, fetched[0].Tip); err != nil {
		t.Fatal(err)
	}
	r.app.Prompts.Notify()
	merged := w.next(t, 5*time.Second)
	if !strings.Contains(merged.Prompt.Prompt, "## Directory Rules (prompts/src/api/_rules.md)\n\nVersion every endpoint.") || merged.Prompt.Commit != fetched[0].Tip.String() {
		t.Fatalf("after the fetch = %+v", merged.Prompt)
	}
}

// grpcurlBinary finds grpcurl on PATH or where `make tools` installs it.
func grpcurlBinary(t *testing.T) string {
	if p, err := exec.LookPath("grpcurl"); err == nil {
		return p
	}
	root, _ := filepath.Abs("../..")
	p := filepath.Join(root, ".tmp", "bin", "grpcurl")
	if _, err := os.Stat(p); err != nil {
		t.Fatal("grpcurl not found: run `make tools` (make test installs it) or put grpcurl on PATH")
	}
	return p
}

func TestGrpcurlBuildsExplainsAndWatchesPrompts(t *testing.T) {
	grpcurl := grpcurlBinary(t)
	r := start(t, "")
	commitRulesRepo(t, r.app.RulesRepo, "rules", mergeFiles(
		map[string]string{"prompts/implement.md": "You implement tasks.", "prompts/src/_rules.md": "Wrap errors."},
		activeRule(t, "coding-agent", "r-1", "Check Close errors.", rulefmt.Normal, 0.7),
	))
	if _, err := r.app.Prompts.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	call := func(method, body string, extra ...string) string {
		t.Helper()
		args := append([]string{"-plaintext"}, extra...)
		args = append(args, "-d", body, r.app.Addr(), "precept.v1.PromptService/"+method)
		out, err := exec.Command(grpcurl, args...).CombinedOutput()
		if err != nil && !strings.Contains(string(out), "DeadlineExceeded") {
			t.Fatalf("grpcurl %s: %v\n%s", method, err, out)
		}
		return string(out)
	}
	req := `{"agent":"coding-agent","stage":"implement","scope_path":"src/x.go"}`
	built := call("BuildPrompt", req)
	for _, want := range []string{`"version": "v1:`, `- [r-1] Check Close errors.`, `"ruleIds": [`, `"ref": "prompts/src/_rules.md"`} {
		if !strings.Contains(built, want) {
			t.Fatalf("BuildPrompt via grpcurl lacks %q:\n%s", want, built)
		}
	}
	explained := call("ExplainPrompt", req)
	if !strings.Contains(explained, `"included": true`) || !strings.Contains(explained, "1 learned rule;") {
		t.Fatalf("ExplainPrompt via grpcurl:\n%s", explained)
	}
	watched := call("WatchPrompt", req, "-max-time", "1")
	if !strings.Contains(watched, `"reason": "initial"`) || !strings.Contains(watched, "Check Close errors.") {
		t.Fatalf("WatchPrompt via grpcurl:\n%s", watched)
	}
	bad := exec.Command(grpcurl, "-plaintext", "-d", `{"agent":"coding-agent","stage":"implement","scope_path":"../x"}`, r.app.Addr(), "precept.v1.PromptService/BuildPrompt")
	out, err := bad.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "InvalidArgument") {
		t.Fatalf("invalid request via grpcurl: %v\n%s", err, out)
	}
}

func mergeFiles(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}
