package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/precept-dev/precept/lib/testenv"
)

// emptyRemote is a bare repository with no branch yet, served by srv.
func emptyRemote(t *testing.T, srv *testenv.GitServer, name string) string {
	t.Helper()
	testenv.Git(t, srv.Root, "init", "--quiet", "--bare", "--initial-branch=main", srv.Dir(name))
	return srv.URL(name)
}

// upstreamTo opens a fresh repository writing through url.
func upstreamTo(t *testing.T, url string, auth Auth) (*Repo, *Upstream) {
	t.Helper()
	r := openTemp(t, Options{})
	if err := r.AddRemote("origin", url); err != nil {
		t.Fatal(err)
	}
	return r, NewUpstream(r, "origin", auth, UpstreamOptions{Attempts: 50, Backoff: 5 * time.Millisecond})
}

// increment adds a file of its own and adds one to the shared counter
// file, read from the snapshot it is given: an update committed on a
// tip it did not read loses an increment.
func increment(own string) func(*Snapshot) (*CommitSpec, error) {
	return func(snap *Snapshot) (*CommitSpec, error) {
		n := 0
		if b, err := snap.ReadFile("count"); err == nil {
			if n, err = strconv.Atoi(string(b)); err != nil {
				return nil, err
			}
		} else if !errors.Is(err, ErrNotFound) {
			return nil, err
		}
		return &CommitSpec{Message: own, Changes: []Change{
			{Path: "count", Data: []byte(strconv.Itoa(n + 1))},
			{Path: "own/" + own, Data: []byte(own)},
		}}, nil
	}
}

// Three nodes writing through one git server at once: every update
// lands exactly once, none is lost to a race (each was computed on the
// tip it was pushed onto), history stays linear, and every node's branch
// is one the server held.
func TestWritersThroughOneRemoteLandEveryUpdateOnce(t *testing.T) {
	ctx := context.Background()
	srv := testenv.StartGitServerWithAuth(t, "node", "push-token-1")
	url := emptyRemote(t, srv, "feedback")
	auth := Auth{Username: "node", Password: "push-token-1"}
	const nodes, each = 3, 12
	repos := make([]*Repo, nodes)
	ups := make([]*Upstream, nodes)
	for i := range nodes {
		repos[i], ups[i] = upstreamTo(t, url, auth)
	}
	var wg sync.WaitGroup
	errs := make(chan error, nodes*each)
	for i := range nodes {
		for j := range each {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := ups[i].Update(ctx, "main", increment(fmt.Sprintf("n%d-%d", i, j))); err != nil {
					errs <- err
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	remote := srv.Dir("feedback")
	if got, _ := srv.ReadFile(t, "feedback", "main", "count"); got != strconv.Itoa(nodes*each) {
		t.Errorf("count on the remote = %s, want %d: an update was computed on a tip it was not pushed onto", got, nodes*each)
	}
	if files := strings.Fields(testenv.Git(t, remote, "ls-tree", "--name-only", "main", "own/")); len(files) != nodes*each {
		t.Errorf("the remote holds %d updates, want %d", len(files), nodes*each)
	}
	if merges := testenv.Git(t, remote, "rev-list", "--min-parents=2", "main"); merges != "" {
		t.Errorf("merges on the remote: %s", merges)
	}
	if n := testenv.Git(t, remote, "rev-list", "--count", "main"); n != strconv.Itoa(nodes*each) {
		t.Errorf("the remote's main has %s commits, want one per update (%d)", n, nodes*each)
	}
	testenv.Git(t, remote, "fsck", "--strict", "--no-dangling")
	tip := plumbing.NewHash(testenv.Git(t, remote, "rev-parse", "main"))
	held := testenv.Git(t, remote, "rev-list", "main")
	for i, r := range repos {
		ours, err := r.Tip("main")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(held, ours.String()) {
			t.Errorf("node %d's main %s is not one the remote held", i, ours)
		}
		if _, err := ups[i].Pull(ctx, "main"); err != nil {
			t.Fatal(err)
		}
		if ours, _ = r.Tip("main"); ours != tip {
			t.Errorf("node %d after Pull at %s, remote at %s", i, ours, tip)
		}
	}
}

// A push the server refuses for any reason but a moved ref fails the
// update at once, and the local branch stays where it was: nothing is
// taken as written that the remote did not take.
func TestAnUpdateTheServerRefusesLeavesTheLocalBranchAlone(t *testing.T) {
	ctx := context.Background()
	srv := testenv.StartGitServer(t)
	url := emptyRemote(t, srv, "feedback")
	r, up := upstreamTo(t, url, Auth{})
	first, err := up.Update(ctx, "main", increment("first"))
	if err != nil {
		t.Fatal(err)
	}
	hook := srv.Dir("feedback") + "/hooks/pre-receive"
	if err := os.WriteFile(hook, []byte("#!/bin/sh\necho quota exceeded >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := up.Update(ctx, "main", increment("second")); err == nil || errors.Is(err, ErrRefChanged) {
		t.Fatalf("update refused by a hook: %v", err)
	}
	if tip, _ := r.Tip("main"); tip != first {
		t.Fatalf("local main moved to %s after a refused push; want %s", tip, first)
	}

	// An unreachable server: the same.
	if err := os.Remove(hook); err != nil {
		t.Fatal(err)
	}
	if err := r.AddRemote("origin", "http://127.0.0.1:1/feedback.git"); err != nil {
		t.Fatal(err)
	}
	if _, err := up.Update(ctx, "main", increment("third")); err == nil {
		t.Fatal("update through an unreachable remote succeeded")
	}
	if tip, _ := r.Tip("main"); tip != first {
		t.Fatalf("local main moved to %s with the remote away; want %s", tip, first)
	}
}

// A branch with history of its own joining a remote that moved on is
// reported, not merged or reset; a branch merely ahead of an empty
// remote is pushed.
func TestDivergedHistoriesAreReportedNotMerged(t *testing.T) {
	ctx := context.Background()
	srv := testenv.StartGitServer(t)
	url := emptyRemote(t, srv, "feedback")
	a, upA := upstreamTo(t, url, Auth{})
	own := write(t, a, "main", "before the remote", Change{Path: "a", Data: []byte("a")})
	if _, err := upA.Pull(ctx, "main"); err != nil {
		t.Fatal(err)
	}
	if got := testenv.Git(t, srv.Dir("feedback"), "rev-parse", "main"); got != own.String() {
		t.Fatalf("an empty remote was given %s, want the local history %s", got, own)
	}
	b, upB := upstreamTo(t, url, Auth{})
	mine := write(t, b, "main", "elsewhere", Change{Path: "b", Data: []byte("b")})
	if _, err := upB.Pull(ctx, "main"); !errors.Is(err, ErrDiverged) {
		t.Fatalf("Pull of a diverged branch: %v", err)
	}
	if tip, _ := b.Tip("main"); tip != mine {
		t.Fatalf("a diverged branch moved to %s", tip)
	}
	if _, err := upB.Update(ctx, "main", increment("b")); !errors.Is(err, ErrDiverged) {
		t.Fatalf("Update on a diverged branch: %v", err)
	}
}

// A write that changes nothing on the remote's tip (another node wrote
// the same content first, as nodes evaluating alike do with edge-case
// documents) succeeds without a push; it must not push the staging ref,
// which still holds this node's refused attempt.
func TestAWriteAnotherNodeAlreadyMadeSucceedsWithoutAPush(t *testing.T) {
	ctx := context.Background()
	srv := testenv.StartGitServer(t)
	url := emptyRemote(t, srv, "feedback")
	_, upA := upstreamTo(t, url, Auth{})
	b, _ := upstreamTo(t, url, Auth{})
	upB := NewUpstream(b, "origin", Auth{}, UpstreamOptions{Backoff: time.Millisecond})
	// The same document, written by each node under its own message, so
	// the two nodes' commits differ.
	same := func(node string) func(*Snapshot) (*CommitSpec, error) {
		return func(*Snapshot) (*CommitSpec, error) {
			return &CommitSpec{Message: "edge case from " + node, Changes: []Change{{Path: "edge/d-1.md", Data: []byte("same")}}}, nil
		}
	}
	if _, err := upA.Update(ctx, "main", increment("a")); err != nil {
		t.Fatal(err)
	}
	if _, err := upB.Pull(ctx, "main"); err != nil {
		t.Fatal(err)
	}
	tip, err := upA.Update(ctx, "main", same("a"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := upB.Update(ctx, "main", same("b"))
	if err != nil {
		t.Fatalf("a write the remote already holds: %v", err)
	}
	if got != tip {
		t.Fatalf("Update = %s, want the remote's tip %s", got, tip)
	}
	if remote := testenv.Git(t, srv.Dir("feedback"), "rev-parse", "main"); remote != tip.String() {
		t.Fatalf("the remote moved to %s", remote)
	}
	if local, _ := b.Tip("main"); local != tip {
		t.Fatalf("node B at %s, want %s", local, tip)
	}
}
