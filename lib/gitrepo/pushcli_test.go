package gitrepo

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A push to a remote on this machine whose receive side never finishes —
// here a pre-receive hook that leaves a child holding its output open,
// as an orphaned git unpack-objects once did in CI — ends when its
// context does, and leaves the repository usable: the push held the
// repository's lock, so a hung push used to hang every commit and Close.
func TestAPushToAHungLocalRemoteEndsWithItsContext(t *testing.T) {
	r := openTemp(t, Options{})
	write(t, r, "main", "one", Change{Path: "f", Data: []byte("1")})
	remoteDir := filepath.Join(t.TempDir(), "remote.git")
	gitCLI(t, filepath.Dir(remoteDir), "init", "-q", "--bare", "-b", "main", remoteDir)
	hook := filepath.Join(remoteDir, "hooks", "pre-receive")
	if err := os.WriteFile(hook, []byte("#!/bin/sh\nsleep 120 &\nsleep 120\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := r.AddRemote("origin", remoteDir); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- r.Push(ctx, "origin", Auth{}, PushSpec{Branch: "main"}) }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a push the remote never accepted succeeded")
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("push = %v, want the context's end", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the push outlived its context by 14 s")
	}
	t.Logf("push ended %s after start", time.Since(start).Round(time.Millisecond))
	write(t, r, "main", "two", Change{Path: "f", Data: []byte("2")})
	os.Remove(hook)
	if err := r.Push(context.Background(), "origin", Auth{}, PushSpec{Branch: "main"}); err != nil {
		t.Fatalf("push after the hung one: %v", err)
	}
	if got := gitCLI(t, remoteDir, "log", "--format=%s", "main"); got != "two\none" {
		t.Fatalf("remote log = %q", got)
	}
}
