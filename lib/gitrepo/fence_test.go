package gitrepo

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/precept-dev/precept/lib/testenv"
)

// decide is a fenced update of main that records a decision about the
// proposal on branch, read at at.
func decide(what, branch string, at Hash) func(*Snapshot) (*CommitSpec, *Fence, error) {
	return func(s *Snapshot) (*CommitSpec, *Fence, error) {
		if ok, err := s.Exists("decided"); err != nil || ok {
			return nil, nil, errors.Join(err, errors.New("decided already"))
		}
		return &CommitSpec{Message: what, Changes: []Change{{Path: "decided", Data: []byte(what)}}}, &Fence{Branch: branch, At: at}, nil
	}
}

// Two nodes decide about the same proposal at once, each fencing the
// proposal branch it read: the remote takes exactly one decision, and
// the branch is gone with it. Then a decision read from a branch that
// another node moved lands nothing.
func TestAFencedDecisionLandsWithItsFenceOrNotAtAll(t *testing.T) {
	ctx := context.Background()
	srv := testenv.StartGitServer(t)
	url := emptyRemote(t, srv, "rules")
	a, upA := upstreamTo(t, url, Auth{})
	_, upB := upstreamTo(t, url, Auth{})
	if _, err := upA.Update(ctx, "main", increment("root")); err != nil {
		t.Fatal(err)
	}
	base, err := a.Snapshot("main")
	if err != nil {
		t.Fatal(err)
	}
	at, created, err := upA.Create(ctx, "proposal/p-1", base, CommitSpec{Message: "propose", Changes: []Change{{Path: "p-1.md", Data: []byte("v1")}}})
	if err != nil || !created {
		t.Fatalf("Create = %v, %v", created, err)
	}
	if _, err := upB.Pull(ctx, "main"); err != nil {
		t.Fatal(err)
	}
	if _, created, err := upB.Create(ctx, "proposal/p-1", base, CommitSpec{Message: "propose again", Changes: []Change{{Path: "p-1.md", Data: []byte("other")}}}); err != nil || created {
		t.Fatalf("a second Create of a branch the remote holds = %v, %v", created, err)
	}

	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, up := range []*Upstream{upA, upB} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = up.UpdateFenced(ctx, "main", decide([]string{"approve", "reject"}[i], "proposal/p-1", at))
		}()
	}
	wg.Wait()
	if (errs[0] == nil) == (errs[1] == nil) {
		t.Fatalf("both or neither decision landed: %v / %v", errs[0], errs[1])
	}
	dir := srv.Dir("rules")
	if got := testenv.Git(t, dir, "for-each-ref", "--format=%(refname)", "refs/heads/proposal/"); got != "" {
		t.Fatalf("the decided proposal's branch is still on the remote: %s", got)
	}
	if n := testenv.Git(t, dir, "rev-list", "--count", "main"); n != "2" {
		t.Fatalf("main holds %s commits, want the root and one decision", n)
	}

	// A branch another node moved after this one read it: nothing lands.
	at2, _, err := upA.Create(ctx, "proposal/p-2", base, CommitSpec{Message: "propose", Changes: []Change{{Path: "p-2.md", Data: []byte("v1")}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := upB.Pull(ctx, "proposal/p-2"); err != nil {
		t.Fatal(err)
	}
	if _, err := upB.Update(ctx, "proposal/p-2", func(*Snapshot) (*CommitSpec, error) {
		return &CommitSpec{Message: "edit", Changes: []Change{{Path: "p-2.md", Data: []byte("v2")}}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	before := testenv.Git(t, dir, "rev-parse", "main")
	if _, err := upA.UpdateFenced(ctx, "main", func(*Snapshot) (*CommitSpec, *Fence, error) {
		return &CommitSpec{Message: "decide on v1", Changes: []Change{{Path: "p-2-decided", Data: []byte("v1")}}}, &Fence{Branch: "proposal/p-2", At: at2}, nil
	}); !errors.Is(err, ErrFenceMoved) || !errors.Is(err, ErrRefChanged) {
		t.Fatalf("a decision on a moved branch: %v", err)
	}
	if after := testenv.Git(t, dir, "rev-parse", "main"); after != before {
		t.Fatalf("main moved to %s", after)
	}
	if !strings.Contains(testenv.Git(t, dir, "for-each-ref", "refs/heads/proposal/p-2"), "proposal/p-2") {
		t.Fatal("the moved branch was deleted")
	}
}

// A branch another node deleted on the remote is not made again by an
// update of it, even when an earlier fetch already pruned it (no trace
// of it is left locally but the branch itself); a branch that is not
// among those that must exist is pushed as it is, and a remote emptied
// is given the history again; a fast-forward Accept refuses is not taken.
func TestAnUpdateNeitherRevivesADeletedBranchNorFollowsARefusedTip(t *testing.T) {
	ctx := context.Background()
	srv := testenv.StartGitServer(t)
	url := emptyRemote(t, srv, "rules")
	r := openTemp(t, Options{})
	if err := r.AddRemote("origin", url); err != nil {
		t.Fatal(err)
	}
	upA := NewUpstream(r, "origin", Auth{}, UpstreamOptions{Backoff: time.Millisecond, MustExist: func(b string) bool { return strings.HasPrefix(b, "proposal/") }})
	if _, err := upA.Update(ctx, "main", increment("root")); err != nil {
		t.Fatal(err)
	}
	base, err := r.Snapshot("main")
	if err != nil {
		t.Fatal(err)
	}
	if _, created, err := upA.Create(ctx, "proposal/p-1", base, CommitSpec{Message: "propose", Changes: []Change{{Path: "p-1.md", Data: []byte("v1")}}}); err != nil || !created {
		t.Fatalf("Create = %v, %v", created, err)
	}
	testenv.Git(t, srv.Dir("rules"), "update-ref", "-d", "refs/heads/proposal/p-1")
	// Another write's fetch prunes the branch's tracking ref first.
	if _, err := upA.Pull(ctx, "main"); err != nil {
		t.Fatal(err)
	}
	if _, err := upA.Update(ctx, "proposal/p-1", increment("approve")); !errors.Is(err, ErrBranchGone) {
		t.Fatalf("an update of a branch deleted on the remote: %v", err)
	}
	if got := testenv.Git(t, srv.Dir("rules"), "for-each-ref", "refs/heads/proposal/"); got != "" {
		t.Fatalf("the deleted branch came back: %s", got)
	}
	// A records branch the remote has never seen is pushed.
	if _, err := upA.Update(ctx, "records", increment("first record")); err != nil {
		t.Fatalf("the first write of a new branch: %v", err)
	}
	// A remote emptied by hand is given the history again.
	for _, b := range []string{"main", "records"} {
		testenv.Git(t, srv.Dir("rules"), "update-ref", "-d", "refs/heads/"+b)
	}
	if _, err := upA.Update(ctx, "main", increment("after the reset")); err != nil {
		t.Fatalf("a write to an emptied remote: %v", err)
	}
	if got := testenv.Git(t, srv.Dir("rules"), "rev-list", "--count", "main"); got != "2" {
		t.Fatalf("the emptied remote's main holds %s commits, want 2", got)
	}

	b, _ := upstreamTo(t, url, Auth{})
	var asked []string
	upB := NewUpstream(b, "origin", Auth{}, UpstreamOptions{Accept: func(branch string, ours, theirs Hash) (bool, error) {
		asked = append(asked, branch)
		return false, nil
	}})
	if _, err := upB.Update(ctx, "main", increment("b")); !errors.Is(err, ErrUntrusted) {
		t.Fatalf("an update needing a refused fast-forward: %v", err)
	}
	if tip, err := b.Tip("main"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the refused tip was taken: %s, %v", tip, err)
	}
	if len(asked) == 0 || asked[0] != "main" {
		t.Fatalf("Accept asked about %v", asked)
	}
}
