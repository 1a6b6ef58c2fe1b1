package feedbackstore

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/lib/gitrepo"
	"github.com/precept-dev/precept/lib/testenv"
)

// openRemote opens a store in a data directory of its own whose every
// write goes through url.
func openRemote(t testing.TB, url string, auth gitrepo.Auth) *fixture {
	t.Helper()
	return openRemoteIn(t, t.TempDir(), url, auth, "")
}

// openRemoteIn is openRemote in dir, storing on nodeBranch when set.
func openRemoteIn(t testing.TB, dir, url string, auth gitrepo.Auth, nodeBranch string) *fixture {
	t.Helper()
	repo, err := gitrepo.Open(filepath.Join(dir, "feedback.git"), gitrepo.Options{NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := repo.AddRemote("origin", url); err != nil {
		t.Fatal(err)
	}
	up := gitrepo.NewUpstream(repo, "origin", auth, gitrepo.UpstreamOptions{Attempts: 50})
	s, err := Open(repo, filepath.Join(dir, "nodes", "n", "feedback.db"), Options{BatchWait: 5 * time.Millisecond, FollowInterval: 50 * time.Millisecond, Upstream: up, NodeBranch: nodeBranch})
	if err != nil {
		repo.Close()
		t.Fatal(err)
	}
	f := &fixture{dir: dir, repo: repo, store: s}
	t.Cleanup(f.close)
	return f
}

// Three nodes with no shared file store decisions through one git
// server, some of them the same decision sent to two nodes: the remote
// holds each exactly once, and every node's index, following the
// remote, ends with all of them.
func TestNodesStoringThroughOneRemoteHoldEachDecisionOnce(t *testing.T) {
	ctx := context.Background()
	srv := testenv.StartGitServerWithAuth(t, "node", "feedback-token")
	testenv.Git(t, srv.Root, "init", "--quiet", "--bare", "--initial-branch=main", srv.Dir("feedback"))
	auth := gitrepo.Auth{Username: "node", Password: "feedback-token"}
	nodes := []*fixture{openRemote(t, srv.URL("feedback"), auth), openRemote(t, srv.URL("feedback"), auth), openRemote(t, srv.URL("feedback"), auth)}
	runCtx, stop := context.WithCancel(ctx)
	var followers sync.WaitGroup
	for _, n := range nodes {
		followers.Go(func() { n.store.Run(runCtx) })
	}
	defer func() { stop(); followers.Wait() }()

	const batches, per = 8, 25
	var wg sync.WaitGroup
	created := make(chan int, len(nodes)*batches)
	for i, n := range nodes {
		for b := range batches {
			wg.Go(func() {
				var recs []precept.Feedback
				for k := range per {
					// Batch b of node i shares its decisions with node
					// (i+1)'s batch b: each is sent to two nodes.
					id := fmt.Sprintf("d-%d-%d-%d", i, b, k)
					if k%2 == 1 {
						id = fmt.Sprintf("d-%d-%d-%d", (i+len(nodes)-1)%len(nodes), b, k)
					}
					recs = append(recs, decision(id, "coder", t0))
				}
				got, err := n.store.Store(ctx, recs)
				if err != nil {
					t.Error(err)
					return
				}
				c := 0
				for _, ok := range got {
					if ok {
						c++
					}
				}
				created <- c
			})
		}
	}
	wg.Wait()
	close(created)
	total := 0
	for c := range created {
		total += c
	}
	// Per batch: 13 even ids of its own, 12 odd ids shared with another
	// node's batch.
	want := len(nodes) * batches * (per/2 + 1 + per/2)
	if total != want {
		t.Errorf("stores report %d decisions created, want %d: a decision was created twice or not at all", total, want)
	}
	remote := srv.Dir("feedback")
	files := strings.Fields(testenv.Git(t, remote, "ls-tree", "-r", "--name-only", "main", DecisionsDir))
	if len(files) != want {
		t.Errorf("the remote holds %d decision files, want %d", len(files), want)
	}
	if merges := testenv.Git(t, remote, "rev-list", "--min-parents=2", "main"); merges != "" {
		t.Errorf("merges on the remote's history: %s", merges)
	}
	testenv.Git(t, remote, "fsck", "--strict", "--no-dangling")
	awaitIndexed(t, nodes, want, 10*time.Second)
}

// With its git server away, a node's Store fails, so the stream entries
// stay unacknowledged, and nothing is indexed as stored; once the server
// is back the same decisions are stored.
func TestAStoreCutFromItsRemoteStoresNothingUntilItReturns(t *testing.T) {
	ctx := context.Background()
	srv := testenv.StartGitServer(t)
	testenv.Git(t, srv.Root, "init", "--quiet", "--bare", "--initial-branch=main", srv.Dir("feedback"))
	n := openRemote(t, srv.URL("feedback"), gitrepo.Auth{})
	if _, err := n.store.Store(ctx, []precept.Feedback{decision("d-1", "coder", t0)}); err != nil {
		t.Fatal(err)
	}
	if err := n.repo.AddRemote("origin", "http://127.0.0.1:1/feedback.git"); err != nil {
		t.Fatal(err)
	}
	if _, err := n.store.Store(ctx, []precept.Feedback{decision("d-2", "coder", t0)}); err == nil {
		t.Fatal("Store succeeded with the remote away")
	}
	if _, err := n.store.Get(ctx, "d-2"); !errors.Is(err, precept.ErrNotFound) {
		t.Fatalf("a decision the remote never took is readable: %v", err)
	}
	if err := n.repo.AddRemote("origin", srv.URL("feedback")); err != nil {
		t.Fatal(err)
	}
	if got, err := n.store.Store(ctx, []precept.Feedback{decision("d-2", "coder", t0)}); err != nil || !got[0] {
		t.Fatalf("Store once the remote is back = %v, %v", got, err)
	}
	if n := testenv.Git(t, srv.Dir("feedback"), "ls-tree", "-r", "--name-only", "main", DecisionsDir); strings.Count(n, "\n")+1 != 2 {
		t.Fatalf("the remote holds %q, want two decisions", n)
	}
}

// awaitIndexed waits until every node's index holds want decisions.
func awaitIndexed(t *testing.T, nodes []*fixture, want int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for i, n := range nodes {
		for {
			c, err := n.store.Count()
			if err != nil {
				t.Fatal(err)
			}
			if c == want {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d indexes %d decisions, want %d", i, c, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}
