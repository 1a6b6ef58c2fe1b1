package testenv

import (
	"crypto/subtle"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// GitServer is a git server on loopback speaking git's smart HTTP
// protocol: `git http-backend` run through net/http/cgi behind an
// httptest server, serving the bare repositories under Root with both
// upload-pack (fetch, clone) and receive-pack (push) enabled. Replica and
// sync tests push and fetch through it as they would through a hosted
// remote.
type GitServer struct {
	// Root holds the bare repositories; <Root>/<name>.git is served at
	// URL(name).
	Root string
	// Username and Password, when Password is set, are required as HTTP
	// basic auth on every request.
	Username string
	Password string

	srv  *httptest.Server
	down atomic.Bool
}

// StartGitServer starts a git server serving bare repositories from a
// fresh temporary directory; it stops when the test ends. A missing git
// or git-http-backend fails the test with what installs it.
func StartGitServer(t testing.TB) *GitServer {
	t.Helper()
	return startGitServer(t, "", "")
}

// StartGitServerWithAuth is StartGitServer requiring HTTP basic auth with
// user and password on every request.
func StartGitServerWithAuth(t testing.TB, user, password string) *GitServer {
	t.Helper()
	return startGitServer(t, user, password)
}

func startGitServer(t testing.TB, user, password string) *GitServer {
	t.Helper()
	backend := gitHTTPBackend(t)
	s := &GitServer{Root: t.TempDir(), Username: user, Password: password}
	handler := &cgi.Handler{
		Path: backend,
		Root: "/",
		Env: []string{
			"GIT_PROJECT_ROOT=" + s.Root,
			"GIT_HTTP_EXPORT_ALL=1",
			"GIT_CONFIG_NOSYSTEM=1",
			// http.receivepack enables push for unauthenticated
			// requests; the server's own basic auth guards it instead.
			"GIT_CONFIG_COUNT=1",
			"GIT_CONFIG_KEY_0=http.receivepack",
			"GIT_CONFIG_VALUE_0=true",
			"HOME=" + s.Root,
		},
	}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.down.Load() {
			// An outage: the connection ends without an answer.
			if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
				c.Close()
			}
			return
		}
		if s.Password != "" {
			u, p, ok := r.BasicAuth()
			if !ok || subtle.ConstantTimeCompare([]byte(u), []byte(s.Username)) != 1 ||
				subtle.ConstantTimeCompare([]byte(p), []byte(s.Password)) != 1 {
				w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
		}
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// gitHTTPBackend finds git-http-backend in git's exec path.
func gitHTTPBackend(t testing.TB) string {
	t.Helper()
	out, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatalf("git is not installed (.ci/install-deps installs it): %v", err)
	}
	p := filepath.Join(strings.TrimSpace(string(out)), "git-http-backend")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("git-http-backend not found at %s (.ci/install-deps installs git): %v", p, err)
	}
	return p
}

// Outage makes the server end every connection without an answer, as a
// git host that went away does, until restore is called.
func (s *GitServer) Outage() (restore func()) {
	s.down.Store(true)
	s.srv.CloseClientConnections()
	return func() { s.down.Store(false) }
}

// URL is the clone URL of repository name, without credentials.
func (s *GitServer) URL(name string) string { return s.srv.URL + "/" + name + ".git" }

// Dir is the bare repository of name on disk, for assertions only: tests
// of a remote read and write it through URL.
func (s *GitServer) Dir(name string) string { return filepath.Join(s.Root, name+".git") }

// CreateRepo makes the bare repository name with branch holding one
// commit of files (path → content, written byte for byte), and returns its
// URL.
func (s *GitServer) CreateRepo(t testing.TB, name, branch string, files map[string]string) string {
	t.Helper()
	dir := s.Dir(name)
	Git(t, s.Root, "init", "--quiet", "--bare", "--initial-branch="+branch, dir)
	work := t.TempDir()
	Git(t, work, "init", "--quiet", "--initial-branch="+branch)
	for p, content := range files {
		full := filepath.Join(work, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// core.autocrlf=false: the files are committed as written.
	Git(t, work, "-c", "core.autocrlf=false", "add", "--all")
	GitAs(t, work, "Test Author", "author@example.com", "commit", "--quiet", "--allow-empty", "-m", "initial commit")
	Git(t, work, "push", "--quiet", dir, branch)
	return s.URL(name)
}

// ReadFile returns path as committed on branch of repository name, byte
// for byte, read with the git CLI (`git cat-file blob`, which applies no filters); ok is false when the
// branch or the path does not exist.
func (s *GitServer) ReadFile(t testing.TB, name, branch, path string) (content string, ok bool) {
	t.Helper()
	cmd := exec.Command("git", "--git-dir="+s.Dir(name), "cat-file", "blob", branch+":"+path)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+s.Root)
	out, err := cmd.Output()
	if err != nil {
		return "", false
	}
	return string(out), true
}
