package app

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/precept-dev/precept/instructions"
	"github.com/precept-dev/precept/lib/testenv"
	"github.com/precept-dev/precept/prompts"
	"github.com/precept-dev/precept/rules/rulefmt"
)

// TestInstructionTargetsFollowEveryChangeOfThePrompt configures one
// instruction target and checks that preceptd pushes the prompt to it,
// then again after a rule is merged, with BuildPrompt's version each time.
func TestInstructionTargetsFollowEveryChangeOfThePrompt(t *testing.T) {
	srv := testenv.StartGitServerWithAuth(t, "bot", "auto-sync-token")
	url := srv.CreateRepo(t, "service", "main", map[string]string{"AGENTS.md": "# Service\n\nOur notes.\n"})
	t.Setenv("TEST_INSTRUCTIONS_TOKEN", "auto-sync-token")
	t.Setenv("HOME", t.TempDir())
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	r := start(t, fmt.Sprintf(`
prompts: {watch_poll: 50ms}
instructions:
  targets:
    - {agent: coding-agent, stage: implement, remote_url: %q, formats: [agents, claude], username: bot, token_env: TEST_INSTRUCTIONS_TOKEN}
`, url))

	commitRulesRepo(t, r.app.RulesRepo, "base prompt", map[string]string{"prompts/implement.md": "You implement tasks."})
	r.app.Prompts.Notify()
	branch := instructions.Branch("coding-agent")
	waitForVersion := func(want string) string {
		t.Helper()
		var got string
		t.Cleanup(func() {
			if t.Failed() {
				t.Log(r.logs.String())
			}
		})
		eventually(t, "the target's AGENTS.md holds version "+want, 20*time.Second, func() bool {
			content, ok := srv.ReadFile(t, "service", branch, "AGENTS.md")
			if !ok {
				return false
			}
			v, err := instructions.Recorded([]byte(content), "coding-agent")
			got = content
			return err == nil && v == want
		})
		return got
	}
	// built waits for the prompt to build with a version other than old.
	built := func(old string) *prompts.Prompt {
		t.Helper()
		var p *prompts.Prompt
		eventually(t, "a new prompt version", 10*time.Second, func() bool {
			var err error
			p, err = r.app.Prompts.Build(context.Background(), prompts.Request{Agent: "coding-agent", Stage: "implement"})
			return err == nil && p.Version != old
		})
		return p
	}

	first := built("")
	got := waitForVersion(first.Version)
	if !strings.HasPrefix(got, "# Service\n\nOur notes.\n") || !strings.Contains(got, "You implement tasks.") {
		t.Fatalf("AGENTS.md: %q", got)
	}

	commitRulesRepo(t, r.app.RulesRepo, "merge a rule", activeRule(t, "coding-agent", "r-1", "Check the error of every Close call.", rulefmt.Critical, 0.9))
	r.app.Prompts.Notify()
	second := built(first.Version)
	got = waitForVersion(second.Version)
	if !strings.HasPrefix(got, "# Service\n\nOur notes.\n") || !strings.Contains(got, "Check the error of every Close call.") {
		t.Fatalf("AGENTS.md after the merge: %q", got)
	}
	if claude, ok := srv.ReadFile(t, "service", branch, "CLAUDE.md"); !ok || !strings.Contains(claude, "version="+second.Version) {
		t.Fatalf("CLAUDE.md: %q", claude)
	}
	if _, ok := srv.ReadFile(t, "service", branch, ".github/copilot-instructions.md"); ok {
		t.Fatal("a format the target left out was written")
	}
	if log := testenv.Git(t, srv.Dir("service"), "log", "--format=%s", branch); strings.Count(log, "\n") != 1 {
		t.Fatalf("want the base commit and one sync commit on the branch, got:\n%s", log)
	}
	if strings.Contains(r.logs.String(), "auto-sync-token") {
		t.Fatal("the token reached the log")
	}
	if !strings.Contains(r.logs.String(), "instruction files pushed") {
		t.Fatalf("no log line for the push:\n%s", r.logs.String())
	}
}

// TestInstructionTargetsStopWhileARemoteStalls points a target at
// a server that accepts connections and never answers: stopping preceptd
// mid-sync must not wait for it.
func TestInstructionTargetsStopWhileARemoteStalls(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c // held open, never answered
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		for len(accepted) > 0 {
			_ = (<-accepted).Close()
		}
	})
	t.Setenv("TEST_INSTRUCTIONS_TOKEN", "stall-token")
	t.Setenv("HOME", t.TempDir())
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	r := start(t, fmt.Sprintf(`
prompts: {watch_poll: 50ms}
instructions:
  targets:
    - {agent: coding-agent, stage: implement, remote_url: "http://%s/service.git", token_env: TEST_INSTRUCTIONS_TOKEN}
`, ln.Addr()))
	commitRulesRepo(t, r.app.RulesRepo, "base prompt", map[string]string{"prompts/implement.md": "You implement tasks."})
	r.app.Prompts.Notify()
	select {
	case c := <-accepted:
		accepted <- c
	case <-time.After(20 * time.Second):
		t.Fatalf("the sync never reached the remote:\n%s", r.logs.String())
	}
	stopped := make(chan struct{})
	began := time.Now()
	go func() { r.stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("preceptd still stopping 10 s into a stalled sync")
	}
	if d := time.Since(began); d > 10*time.Second {
		t.Fatalf("stopping took %v", d)
	}
}
