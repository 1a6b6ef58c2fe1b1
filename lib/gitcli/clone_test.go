package gitcli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/precept-dev/precept/lib/testenv"
)

func open(t *testing.T, url string, auth Auth, branches ...string) *Clone {
	t.Helper()
	c, err := Open(context.Background(), url, auth, Options{Env: []string{"HOME=" + t.TempDir(), "GIT_CONFIG_NOSYSTEM=1"}}, branches...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestCloneReadsCommitsAndPushesUnderALease(t *testing.T) {
	ctx := context.Background()
	srv := testenv.StartGitServer(t)
	url := srv.CreateRepo(t, "r", "trunk", map[string]string{"a.txt": "a\r\n", "dir/b.txt": "b"})
	c := open(t, url, Auth{}, "trunk", "absent")
	if c.Tip("absent") != "" || c.Tip("trunk") == "" {
		t.Fatalf("tips: trunk %q, absent %q", c.Tip("trunk"), c.Tip("absent"))
	}
	if b, err := c.DefaultBranch(ctx); err != nil || b != "trunk" {
		t.Fatalf("default branch %q, %v", b, err)
	}
	mode, content, err := c.ReadFile(ctx, c.Tip("trunk"), "a.txt")
	if err != nil || mode != "100644" || string(content) != "a\r\n" {
		t.Fatalf("a.txt: %s %q %v", mode, content, err)
	}
	if mode, _, err := c.ReadFile(ctx, c.Tip("trunk"), "dir"); err != nil || mode != "040000" {
		t.Fatalf("dir: %s %v", mode, err)
	}
	if _, _, err := c.ReadFile(ctx, c.Tip("trunk"), "nope.txt"); !c.IsNotFound(err) {
		t.Fatalf("missing file: %v", err)
	}

	commit, tree, err := c.Commit(ctx, c.Tip("trunk"), map[string][]byte{"new/c.txt": []byte("c\r\nno newline")}, "add c\n\nX-Trailer: 1\n")
	if err != nil || commit == "" || tree == "" {
		t.Fatalf("commit: %v", err)
	}
	if err := c.Push(ctx, commit, "feature", ""); err != nil {
		t.Fatal(err)
	}
	if got, ok := srv.ReadFile(t, "r", "feature", "new/c.txt"); !ok || got != "c\r\nno newline" {
		t.Fatalf("pushed c.txt: %q", got)
	}
	if got, _ := srv.ReadFile(t, "r", "feature", "dir/b.txt"); got != "b" {
		t.Fatalf("b.txt on the pushed branch: %q", got)
	}

	// The branch exists now: a push expecting it absent loses the lease.
	other, _, err := c.Commit(ctx, c.Tip("trunk"), map[string][]byte{"d.txt": []byte("d")}, "add d")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Push(ctx, other, "feature", ""); !errors.Is(err, ErrRefChanged) {
		t.Fatalf("push against a moved branch: %v", err)
	}
	// And a push expecting an old tip does too.
	if err := c.Push(ctx, other, "trunk", strings.Repeat("1", 40)); !errors.Is(err, ErrRefChanged) {
		t.Fatalf("push with a stale lease: %v", err)
	}
	if got, _ := srv.ReadFile(t, "r", "feature", "new/c.txt"); got != "c\r\nno newline" {
		t.Fatal("a push that lost its lease changed the branch")
	}
}

func TestCommitKeepsAnExecutableFileExecutable(t *testing.T) {
	ctx := context.Background()
	srv := testenv.StartGitServer(t)
	url := srv.CreateRepo(t, "r", "main", map[string]string{"run.sh": "#!/bin/sh\n"})
	work := t.TempDir()
	testenv.Git(t, work, "clone", "--quiet", url, "c")
	if err := os.Chmod(work+"/c/run.sh", 0o755); err != nil {
		t.Fatal(err)
	}
	testenv.Git(t, work+"/c", "-c", "core.fileMode=true", "update-index", "--chmod=+x", "run.sh")
	testenv.GitAs(t, work+"/c", "T", "t@example.com", "commit", "--quiet", "-m", "exec")
	testenv.Git(t, work+"/c", "push", "--quiet", "origin", "main")

	c := open(t, url, Auth{}, "main")
	commit, _, err := c.Commit(ctx, c.Tip("main"), map[string][]byte{"run.sh": []byte("#!/bin/sh\necho hi\n")}, "edit")
	if err != nil {
		t.Fatal(err)
	}
	if mode, _, err := c.ReadFile(ctx, commit, "run.sh"); err != nil || mode != "100755" {
		t.Fatalf("mode %s, %v", mode, err)
	}
}

// echoingRemote answers git's first request, once it carries basic
// auth, with a protocol error quoting the password, so git prints it:
// only redaction keeps it out of the error.
func echoingRemote(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, pw, ok := r.BasicAuth()
		if !ok {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		pkt := func(s string) string { return fmt.Sprintf("%04x%s", len(s)+4, s) }
		w.Header().Set("Content-Type", "application/x-git-upload-pack-advertisement")
		_, _ = fmt.Fprint(w, pkt("# service=git-upload-pack\n")+"0000"+pkt("ERR no access for password "+pw+"\n"))
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/r.git"
}

func TestErrorsNeverShowCredentials(t *testing.T) {
	_, err := Open(context.Background(), echoingRemote(t), Auth{Password: "flag-secret"}, testOptions(t), "main")
	if err == nil {
		t.Fatal("a refusing remote was accepted")
	}
	if strings.Contains(err.Error(), "flag-secret") || !strings.Contains(err.Error(), "no access for password ***") {
		t.Fatalf("the error shows the secret, or not git's message: %v", err)
	}
}
