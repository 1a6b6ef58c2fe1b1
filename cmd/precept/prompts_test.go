package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/precept-dev/precept/internal/app"
	"github.com/precept-dev/precept/internal/config"
	"github.com/precept-dev/precept/lib/gitrepo"
	"github.com/precept-dev/precept/lib/testenv"
	"github.com/precept-dev/precept/rules/rulefmt"
)

const promptReaderToken = "agent-reader-token-0123456789"

// promptApp starts an in-process preceptd with a reader token and a rules
// repository holding a stage prompt, _rules.md files and three rules.
func promptApp(t *testing.T) *app.App {
	t.Helper()
	cfg, err := config.Parse(fmt.Sprintf(`
listen: 127.0.0.1:0
data_dir: %s
redis: {addr: %q, block: 100ms}
feedback: {batch_wait: 5ms, fsync: false}
prompts: {max_rules: 2, watch_poll: 1h}
auth:
  tokens:
    - {name: agent, role: reader, token: %s}
`, t.TempDir(), testenv.Redis(t), promptReaderToken), nil)
	if err != nil {
		t.Fatal(err)
	}
	a := startApp(t, cfg)

	files := map[string]string{
		"prompts/implement.md":  "You implement tasks.",
		"prompts/src/_rules.md": "Wrap errors.",
	}
	for _, r := range []rulefmt.Rule{
		{ID: "r-1", Status: rulefmt.Active, Importance: rulefmt.Critical, Confidence: 0.9, Content: "Check Close errors.", Approvals: []rulefmt.Approval{{Approver: "alice"}}},
		{ID: "r-2", Status: rulefmt.Active, Confidence: 0.6, Content: "Prefer table tests."},
		{ID: "r-3", Status: rulefmt.Active, Confidence: 0.1, Content: "Keep functions short."},
		{ID: "r-4", Status: rulefmt.Shadow, Importance: rulefmt.Important, Confidence: 0.5, Content: "Log with request ids."},
	} {
		b, err := r.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		files[rulefmt.ActiveRulePath("coding-agent", r.ID)] = string(b)
	}
	commitRules(t, a, files)
	return a
}

func commitRules(t *testing.T, a *app.App, files map[string]string) {
	t.Helper()
	var changes []gitrepo.Change
	for p, c := range files {
		changes = append(changes, gitrepo.Change{Path: p, Data: []byte(c), Delete: c == ""})
	}
	if _, err := a.RulesRepo.Update(context.Background(), "main", func(*gitrepo.Snapshot) (*gitrepo.CommitSpec, error) {
		return &gitrepo.CommitSpec{Message: "test rules", Changes: changes}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Prompts.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestPromptBuildPrintsThePromptAndItsVersionAndSources(t *testing.T) {
	a := promptApp(t)
	auth := []string{"--addr", a.URL(), "--token", promptReaderToken}
	target := []string{"--agent", "coding-agent", "--stage", "implement", "--path", "src/main.go"}

	r := run("", append(append(auth, "prompt", "build"), target...)...)
	want := "You implement tasks.\n\n## Directory Rules (prompts/src/_rules.md)\n\nWrap errors.\n\n" +
		"## Learned Rules (from feedback)\n\n- [r-1] Check Close errors.\n- [r-2] Prefer table tests.\n"
	if r.code != 0 || r.stdout != want {
		t.Fatalf("build: %+v\nwant stdout:\n%s", r, want)
	}
	if !strings.Contains(r.stderr, "version v1:") || !strings.Contains(r.stderr, "rules: r-1, r-2") || !strings.Contains(r.stderr, "left out: r-3 (budget), r-4 (shadow)") {
		t.Fatalf("build stderr: %q", r.stderr)
	}

	r = run("", append(append(auth, "prompt", "build", "--shadow"), target...)...)
	if r.code != 0 || !strings.Contains(r.stdout, "- [r-1] Check Close errors.\n- [r-4] Log with request ids.\n") || !strings.Contains(r.stderr, "shadow rules: r-4") {
		t.Fatalf("build --shadow: %+v", r)
	}

	r = run("", append(append(auth, "-o", "json", "--protocol", "grpc", "prompt", "build"), target...)...)
	var got struct {
		Version string   `json:"version"`
		RuleIDs []string `json:"rule_ids"`
		Sources []struct {
			Kind, Ref string
		} `json:"sources"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &got) != nil || !strings.HasPrefix(got.Version, "v1:") || len(got.RuleIDs) != 2 || len(got.Sources) != 4 {
		t.Fatalf("build -o json over gRPC: %+v -> %+v", r, got)
	}

	r = run("Instructions from stdin.", append(auth, "prompt", "build", "--agent", "coding-agent", "--stage", "custom", "--base-file", "-")...)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "Instructions from stdin.\n\n## Learned Rules") {
		t.Fatalf("build --base-file -: %+v", r)
	}
}

func TestPromptExplainShowsWhyEachRuleAndRulesFileApplies(t *testing.T) {
	a := promptApp(t)
	r := run("", "--addr", a.URL(), "--token", promptReaderToken, "prompt", "explain", "--agent", "coding-agent", "--stage", "implement", "--path", "src/api/x.go")
	if r.code != 0 {
		t.Fatalf("explain: %+v", r)
	}
	for _, want := range []string{
		"summary  agent coding-agent, stage implement, scope src/api/: base prompt prompts/implement.md, 1 _rules.md file, 2 learned rules; left out: 1 budget, 1 shadow.",
		"prompts/_rules.md          no      no _rules.md here (optional)",
		"prompts/src/_rules.md      yes     applies: on the path to src/api/",
		"1    r-1   ACTIVE  CRITICAL    0.90  Check Close errors.",
		"-    r-3   ACTIVE  NORMAL      0.10  Keep functions short.  budget: ranked 3 of 3 active rules",
		"-    r-4   SHADOW  IMPORTANT   0.50  Log with request ids.  shadow: in its shadow period; only in the shadow prompt",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("explain output lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(r.stdout)
	}
}

func TestPromptWatchPrintsALinePerVersion(t *testing.T) {
	a := promptApp(t)
	pr, pw := io.Pipe()
	done := make(chan result, 1)
	go func() {
		var errb strings.Builder
		code := Main([]string{"--addr", a.URL(), "--token", promptReaderToken, "-o", "json", "prompt", "watch",
			"--agent", "coding-agent", "--stage", "implement", "--count", "2"}, strings.NewReader(""), pw, &errb)
		pw.Close()
		done <- result{code: code, stderr: errb.String()}
	}()
	lines := bufio.NewScanner(pr)
	next := func() map[string]any {
		t.Helper()
		got := make(chan map[string]any, 1)
		go func() {
			var m map[string]any
			if lines.Scan() && json.Unmarshal(lines.Bytes(), &m) == nil {
				got <- m
			}
			close(got)
		}()
		select {
		case m, ok := <-got:
			if !ok {
				t.Fatalf("watch output ended: %+v", <-done)
			}
			return m
		case <-time.After(10 * time.Second):
			t.Fatal("no watch line within 10s")
		}
		return nil
	}
	first := next()
	if first["reason"] != "initial" {
		t.Fatalf("first line = %v", first)
	}
	b, _ := rulefmt.Rule{ID: "r-0", Status: rulefmt.Active, Importance: rulefmt.Critical, Confidence: 1, Content: "Newly approved."}.Marshal()
	commitRules(t, a, map[string]string{rulefmt.ActiveRulePath("coding-agent", "r-0"): string(b)})
	second := next()
	prompt, _ := second["prompt"].(map[string]any)
	if second["reason"] != "changed" || !strings.Contains(fmt.Sprint(prompt["prompt"]), "- [r-0] Newly approved.") {
		t.Fatalf("second line = %v", second)
	}
	if r := <-done; r.code != 0 {
		t.Fatalf("watch exited %d: %s", r.code, r.stderr)
	}

	// In text mode a line names the reason, version and rules.
	r := run("", "--addr", a.URL(), "--token", promptReaderToken, "prompt", "watch", "--agent", "coding-agent", "--stage", "implement", "--count", "1", "--last-version", "v1:0000000000000000")
	if r.code != 0 || !strings.Contains(r.stdout, "changed  v1:") || !strings.Contains(r.stdout, "rules r-0,r-1") || !strings.Contains(r.stdout, "shadow v1:") {
		t.Fatalf("watch text: %+v", r)
	}
}

func TestPromptCommandsFailWithOneLineAndTheRightStatus(t *testing.T) {
	a := promptApp(t)
	auth := []string{"--addr", a.URL(), "--token", promptReaderToken}
	missing := filepath.Join(t.TempDir(), "missing.md")
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no agent", []string{"prompt", "build", "--stage", "implement"}, 2, "build needs --agent NAME and --stage STAGE"},
		{"no stage", []string{"prompt", "explain", "--agent", "a"}, 2, "explain needs --agent NAME and --stage STAGE"},
		{"negative count", []string{"prompt", "watch", "--agent", "a", "--stage", "s", "--count", "-1"}, 2, "--count must not be negative"},
		{"dot-dot path", append(auth, "prompt", "build", "--agent", "coding-agent", "--stage", "implement", "--path", "../x"), 1, "invalid_argument: scope_path: must not contain .."},
		{"absolute path in a watch", append(auth, "prompt", "watch", "--agent", "coding-agent", "--stage", "implement", "--path", "/etc/x"), 1, "invalid_argument: scope_path: must be relative"},
		{"missing stage prompt", append(auth, "prompt", "build", "--agent", "coding-agent", "--stage", "review"), 1, "failed_precondition: no base prompt for stage \"review\": prompts/review.md does not exist"},
		{"no shadow rules", append(auth, "prompt", "build", "--agent", "docs-agent", "--stage", "implement", "--shadow"), 1, "docs-agent has no shadow rules"},
		{"missing base file", append(auth, "prompt", "build", "--agent", "a", "--stage", "s", "--base-file", missing), 1, "read base prompt"},
		{"no token", []string{"--addr", a.URL(), "prompt", "build", "--agent", "a", "--stage", "implement"}, 1, "unauthenticated"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := run("", tt.args...)
			if r.code != tt.code || !strings.Contains(r.stderr, tt.want) {
				t.Fatalf("exit %d, stderr %q; want exit %d containing %q", r.code, r.stderr, tt.code, tt.want)
			}
			if strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
				t.Fatalf("error is not one line: %q", r.stderr)
			}
		})
	}
}
