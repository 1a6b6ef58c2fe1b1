package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestGitServerClonesAndAcceptsPushesOverHTTP(t *testing.T) {
	s := StartGitServer(t)
	url := s.CreateRepo(t, "target", "trunk", map[string]string{"README.md": "hello\r\nno final newline"})
	if !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("URL %q is not on loopback HTTP", url)
	}

	work := t.TempDir()
	Git(t, work, "clone", "--quiet", url, "c")
	clone := filepath.Join(work, "c")
	got, err := os.ReadFile(filepath.Join(clone, "README.md"))
	if err != nil || string(got) != "hello\r\nno final newline" {
		t.Fatalf("cloned README.md = %q, %v", got, err)
	}
	if err := os.WriteFile(filepath.Join(clone, "NEW.md"), []byte("pushed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	Git(t, clone, "add", "NEW.md")
	GitAs(t, clone, "T", "t@example.com", "commit", "--quiet", "-m", "add NEW.md")
	Git(t, clone, "push", "--quiet", "origin", "trunk:refs/heads/feature")

	if c, ok := s.ReadFile(t, "target", "feature", "NEW.md"); !ok || c != "pushed\n" {
		t.Fatalf("NEW.md on feature = %q, %v", c, ok)
	}
	if _, ok := s.ReadFile(t, "target", "trunk", "NEW.md"); ok {
		t.Fatal("NEW.md reached trunk, which nobody pushed")
	}
	if c, ok := s.ReadFile(t, "target", "trunk", "README.md"); !ok || c != "hello\r\nno final newline" {
		t.Fatalf("README.md on trunk = %q, %v", c, ok)
	}
}

func TestGitServerWithAuthRefusesRequestsWithoutCredentials(t *testing.T) {
	s := StartGitServerWithAuth(t, "bot", "s3cret-token")
	url := s.CreateRepo(t, "target", "main", map[string]string{"a": "a\n"})

	cmd := exec.Command("git", "ls-remote", url)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+t.TempDir(), "GIT_TERMINAL_PROMPT=0")
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Fatalf("ls-remote without credentials succeeded:\n%s", out)
	}
	withCreds := strings.Replace(url, "http://", "http://bot:s3cret-token@", 1)
	if out := Git(t, t.TempDir(), "ls-remote", withCreds); !strings.Contains(out, "refs/heads/main") {
		t.Fatalf("ls-remote with credentials: %s", out)
	}
}
