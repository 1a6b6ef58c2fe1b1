package gitrepo

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/precept-dev/precept/lib/testenv"
)

// TestPushAndFetchOverSmartHTTPWithBasicAuth runs go-git's HTTP
// transport against git http-backend on loopback, as a hosted remote
// would serve it: the server replica tests and the instruction sync use.
func TestPushAndFetchOverSmartHTTPWithBasicAuth(t *testing.T) {
	ctx := context.Background()
	srv := testenv.StartGitServerWithAuth(t, "replica", "http-token-123")
	url := srv.CreateRepo(t, "rules", "main", map[string]string{"README.md": "rules\n"})
	r := openTemp(t, Options{})
	if err := r.AddRemote("origin", url); err != nil {
		t.Fatal(err)
	}
	auth := Auth{Username: "replica", Password: "http-token-123"}

	if _, err := r.Fetch(ctx, "origin", Auth{Username: "replica", Password: "wrong"}); err == nil || strings.Contains(err.Error(), "wrong") {
		t.Fatalf("fetch with a wrong token: %v", err)
	}
	changed, err := r.Fetch(ctx, "origin", auth)
	if err != nil || !changed {
		t.Fatalf("Fetch = %v, %v", changed, err)
	}
	remote, err := r.RemoteBranches("origin", "")
	if err != nil || len(remote) != 1 || remote[0].Name != "main" {
		t.Fatalf("remote branches %+v, %v", remote, err)
	}
	if err := r.SetBranch("main", ZeroHash, remote[0].Tip); err != nil {
		t.Fatal(err)
	}
	h := write(t, r, "main", "add f", Change{Path: "f", Data: []byte("1")})
	if err := r.Push(ctx, "origin", auth, PushSpec{Branch: "main"}, PushSpec{Branch: "main", RemoteBranch: "proposal/p-1"}); err != nil {
		t.Fatal(err)
	}
	if got := testenv.Git(t, srv.Dir("rules"), "rev-parse", "main", "proposal/p-1"); got != h.String()+"\n"+h.String() {
		t.Fatalf("remote refs: %s", got)
	}
	if got, ok := srv.ReadFile(t, "rules", "main", "f"); !ok || got != "1" {
		t.Fatalf("pushed f = %q", got)
	}

	// Someone else pushes main; ours is behind, and the push says so.
	work := t.TempDir()
	testenv.Git(t, work, "clone", "--quiet", strings.Replace(url, "http://", "http://replica:http-token-123@", 1), "c")
	testenv.GitAs(t, work+"/c", "P", "p@example.com", "commit", "--quiet", "--allow-empty", "-m", "elsewhere")
	testenv.Git(t, work+"/c", "push", "--quiet", "origin", "main")
	write(t, r, "main", "diverge", Change{Path: "f", Data: []byte("2")})
	if err := r.Push(ctx, "origin", auth, PushSpec{Branch: "main"}); !errors.Is(err, ErrRefChanged) {
		t.Fatalf("non-fast-forward push over HTTP: %v", err)
	}
}

// A push of several refs lands whole or not at all, over smart HTTP and
// to a path on disk: a git server whose update hook refuses one ref keeps
// the others as they were. A server that does not advertise "atomic" is
// refused before anything is sent, with an error naming the capability.
func TestAPushOfSeveralRefsLandsWholeOrNotAtAll(t *testing.T) {
	ctx := context.Background()
	srv := testenv.StartGitServer(t)
	url := srv.CreateRepo(t, "rules", "main", map[string]string{"README.md": "rules\n"})
	hook := srv.Dir("rules") + "/hooks/update"
	if err := os.WriteFile(hook, []byte("#!/bin/sh\ncase \"$1\" in refs/heads/proposal/locked) echo locked >&2; exit 1;; esac\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	before := testenv.Git(t, srv.Dir("rules"), "rev-parse", "main")
	r := openTemp(t, Options{})
	for name, u := range map[string]string{"http": url, "disk": srv.Dir("rules")} {
		if err := r.AddRemote(name, u); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.Fetch(ctx, "http", Auth{}); err != nil {
		t.Fatal(err)
	}
	remote, err := r.RemoteBranches("http", "")
	if err != nil || len(remote) != 1 {
		t.Fatalf("remote branches %+v, %v", remote, err)
	}
	if err := r.SetBranch("main", ZeroHash, remote[0].Tip); err != nil {
		t.Fatal(err)
	}
	h := write(t, r, "main", "approve", Change{Path: "f", Data: []byte("1")})
	if err := r.SetBranch("proposal/locked", ZeroHash, h); err != nil {
		t.Fatal(err)
	}
	urls := map[string]string{"http": url, "disk": srv.Dir("rules")}
	for _, name := range []string{"http", "disk"} {
		if err := CheckAtomicPush(ctx, urls[name], Auth{}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		err := r.Push(ctx, name, Auth{}, PushSpec{Branch: "main"}, PushSpec{Branch: "proposal/locked"})
		if err == nil {
			t.Fatalf("%s: a push with a refused ref succeeded", name)
		}
		if got := testenv.Git(t, srv.Dir("rules"), "rev-parse", "main"); got != before {
			t.Fatalf("%s: main moved to %s although proposal/locked was refused (%v)", name, got, err)
		}
	}

	testenv.Git(t, srv.Dir("rules"), "config", "receive.advertiseAtomic", "false")
	for _, name := range []string{"http", "disk"} {
		if err := CheckAtomicPush(ctx, urls[name], Auth{}); !errors.Is(err, ErrNoAtomicPush) || !strings.Contains(err.Error(), `"atomic"`) {
			t.Fatalf("%s: CheckAtomicPush on a server without atomic: %v", name, err)
		}
		err := r.Push(ctx, name, Auth{}, PushSpec{Branch: "main"}, PushSpec{Branch: "main", RemoteBranch: "proposal/p-1"})
		if !errors.Is(err, ErrNoAtomicPush) {
			t.Fatalf("%s: a push of two refs to a server without atomic: %v", name, err)
		}
		if got := testenv.Git(t, srv.Dir("rules"), "rev-parse", "main"); got != before {
			t.Fatalf("%s: main moved to %s", name, got)
		}
	}
}
