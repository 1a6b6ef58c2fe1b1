package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/precept-dev/precept/instructions"
	"github.com/precept-dev/precept/lib/testenv"
)

// TestInstructionsSyncPushesTheBuiltPromptAndItsVersion runs the CLI
// against a real preceptd and a git server on loopback: the file read
// back with the git CLI holds exactly what BuildPrompt returned, under
// its version, after the target's own text.
func TestInstructionsSyncPushesTheBuiltPromptAndItsVersion(t *testing.T) {
	a := promptApp(t)
	srv := testenv.StartGitServerWithAuth(t, "ci-bot", "git-token-abc")
	own := "# Our agents\r\n\r\nBe kind.\r\n"
	url := srv.CreateRepo(t, "service", "develop", map[string]string{"AGENTS.md": own})
	t.Setenv("HOME", t.TempDir())
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	t.Setenv("GIT_CONFIG_GLOBAL", "/dev/null")
	t.Setenv(envGitUsername, "ci-bot")
	t.Setenv(envGitToken, "")
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("git-token-abc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	auth := []string{"--addr", a.URL(), "--token", promptReaderToken}
	built := run("", append(auth, "-o", "json", "prompt", "build", "--agent", "coding-agent", "--stage", "implement", "--path", "src/")...)
	var prompt struct{ Prompt, Version string }
	if built.code != 0 || json.Unmarshal([]byte(built.stdout), &prompt) != nil || prompt.Version == "" {
		t.Fatalf("prompt build: %+v", built)
	}

	sync := append(auth, "instructions", "sync", "--agent", "coding-agent", "--stage", "implement", "--path", "src/",
		"--remote", url, "--formats", "agents,cursor", "--token-file", tokenFile)
	r := run("", sync...)
	if r.code != 0 || !strings.Contains(r.stdout, "pushed ") || !strings.Contains(r.stdout, "precept/instructions/coding-agent") ||
		!strings.Contains(r.stdout, "into develop") || !strings.Contains(r.stdout, prompt.Version) {
		t.Fatalf("sync: %+v", r)
	}
	if strings.Contains(r.stdout+r.stderr, "git-token-abc") {
		t.Fatal("the token was printed")
	}
	got, ok := srv.ReadFile(t, "service", "precept/instructions/coding-agent", "AGENTS.md")
	if !ok || !strings.HasPrefix(got, own) {
		t.Fatalf("AGENTS.md: %q", got)
	}
	if v, err := instructions.Recorded([]byte(got), "coding-agent"); err != nil || v != prompt.Version {
		t.Fatalf("recorded version %q, %v; BuildPrompt said %s", v, err, prompt.Version)
	}
	body := strings.ReplaceAll(strings.TrimRight(prompt.Prompt, "\n"), "\n", "\r\n") + "\r\n<!-- precept:end -->"
	if !strings.Contains(got, body) {
		t.Fatalf("AGENTS.md does not hold the built prompt:\n%q\nwant within it\n%q", got, body)
	}
	if mdc, ok := srv.ReadFile(t, "service", "precept/instructions/coding-agent", ".cursor/rules/precept-coding-agent.mdc"); !ok ||
		!strings.Contains(mdc, "globs: src/**\n") {
		t.Fatalf("cursor rule: %q", mdc)
	}
	if _, ok := srv.ReadFile(t, "service", "precept/instructions/coding-agent", "CLAUDE.md"); ok {
		t.Fatal("CLAUDE.md was written though --formats left it out")
	}

	r = run("", append(sync, "-o", "json")...)
	var res struct {
		UpToDate bool   `json:"up_to_date"`
		Commit   string `json:"commit"`
		Version  string `json:"prompt_version"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &res) != nil || !res.UpToDate || res.Commit != "" || res.Version != prompt.Version {
		t.Fatalf("second sync: %+v", r)
	}

	bad := run("", append(auth, "instructions", "sync", "--agent", "coding-agent", "--stage", "implement", "--remote", url)...)
	if bad.code != 1 || strings.Count(strings.TrimSpace(bad.stderr), "\n") != 0 || strings.Contains(bad.stderr, "git-token-abc") {
		t.Fatalf("sync without credentials: %+v", bad)
	}
	usage := run("", append(auth, "instructions", "sync", "--agent", "coding-agent", "--stage", "implement", "--remote", url, "--formats", "windsurf")...)
	if usage.code != 2 || !strings.Contains(usage.stderr, "windsurf") {
		t.Fatalf("unknown format: %+v", usage)
	}
	usage = run("", append(auth, "instructions", "sync", "--agent", "coding-agent", "--remote", url)...)
	if usage.code != 2 {
		t.Fatalf("usage: %+v", usage)
	}
	// A password in the URL would show in git's process arguments.
	withPassword := strings.Replace(url, "http://", "http://ci-bot:pw-in-url@", 1)
	usage = run("", append(auth, "instructions", "sync", "--agent", "coding-agent", "--stage", "implement", "--remote", withPassword)...)
	if usage.code != 2 || !strings.Contains(usage.stderr, envGitToken) || strings.Contains(usage.stderr, "pw-in-url") {
		t.Fatalf("a password in the URL: %+v", usage)
	}
	// A token is never sent over plain http to another host.
	t.Setenv(envGitToken, "git-token-abc")
	usage = run("", append(auth, "instructions", "sync", "--agent", "coding-agent", "--stage", "implement", "--remote", "http://git.example.com/r.git")...)
	if usage.code != 2 || !strings.Contains(usage.stderr, "plain http") {
		t.Fatalf("a token over plain http: %+v", usage)
	}
}
