package feedbackstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/lib/gitrepo"
	"github.com/precept-dev/precept/lib/testenv"
)

// sequence is a node's numbering of every decision it indexed.
func sequence(t *testing.T, f *fixture) []string {
	t.Helper()
	recs, err := f.store.Since(0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = fmt.Sprintf("%d %s", r.Seq, r.DecisionID)
	}
	return out
}

// Three nodes store on branches of their own through one git server,
// some decisions sent to two nodes: no push is refused for another
// node's, main holds each decision once, ordered by merges only, and
// every node numbers every decision alike (docs/decisions/0009-replicas.md,
// "Per-node branches"). A node restarted from an empty data directory
// takes its branch back from the server and orders what it held.
func TestNodeBranchesOrderEveryDecisionOnceAndAlikeOnEveryNode(t *testing.T) {
	ctx := context.Background()
	srv := testenv.StartGitServer(t)
	testenv.Git(t, srv.Root, "init", "--quiet", "--bare", "--initial-branch=main", srv.Dir("feedback"))
	url := srv.URL("feedback")
	var nodes []*fixture
	for _, name := range []string{"a", "b", "c"} {
		nodes = append(nodes, openRemoteIn(t, t.TempDir(), url, gitrepo.Auth{}, NodeBranchPrefix+name))
	}
	runCtx, stop := context.WithCancel(ctx)
	var followers sync.WaitGroup
	for _, n := range nodes {
		followers.Go(func() { n.store.Run(runCtx) })
	}
	defer func() { stop(); followers.Wait() }()

	const batches, per = 8, 25
	var wg sync.WaitGroup
	for i, n := range nodes {
		for b := range batches {
			wg.Go(func() {
				var recs []precept.Feedback
				for k := range per {
					id := fmt.Sprintf("d-%d-%d-%d", i, b, k)
					if k%2 == 1 {
						id = fmt.Sprintf("d-%d-%d-%d", (i+len(nodes)-1)%len(nodes), b, k)
					}
					recs = append(recs, decision(id, "coder", t0.Add(time.Duration(b*per+k)*time.Second)))
				}
				if _, err := n.store.Store(ctx, recs); err != nil {
					t.Error(err)
				}
			})
		}
	}
	wg.Wait()
	want := len(nodes) * batches * (per/2 + 1 + per/2)
	remote := srv.Dir("feedback")
	awaitIndexed(t, nodes, want, 30*time.Second)
	files := strings.Fields(testenv.Git(t, remote, "ls-tree", "-r", "--name-only", "main", DecisionsDir))
	if len(files) != want {
		t.Errorf("main on the remote holds %d decision files, want %d", len(files), want)
	}
	if direct := strings.Fields(testenv.Git(t, remote, "rev-list", "--first-parent", "--no-merges", "main")); len(direct) != 1 {
		t.Errorf("%d commits on main are not merges of node branches, want 1 (the layout)", len(direct))
	}
	for _, name := range []string{"a", "b", "c"} {
		if testenv.Git(t, remote, "rev-parse", "--verify", "--quiet", "refs/heads/"+NodeBranchPrefix+name) == "" {
			t.Errorf("the remote has no branch %s%s", NodeBranchPrefix, name)
		}
	}
	testenv.Git(t, remote, "fsck", "--strict", "--no-dangling")
	var refused uint64
	for _, n := range nodes {
		st, err := n.repo.Stats()
		if err != nil {
			t.Fatal(err)
		}
		refused += st.Writes.PushesRejected
	}
	first := sequence(t, nodes[0])
	for i, n := range nodes[1:] {
		if got := sequence(t, n); !slices.Equal(got, first) {
			t.Errorf("node %d numbers the decisions otherwise than node 0", i+1)
		}
	}
	t.Logf("%d decisions, %d merges on main, %d pushes refused", want,
		len(strings.Fields(testenv.Git(t, remote, "rev-list", "--first-parent", "--merges", "main"))), refused)

	// Node a restarts from an empty data directory and stores a decision
	// its branch holds already, and a new one.
	stop()
	followers.Wait()
	nodes[0].close()
	again := openRemoteIn(t, t.TempDir(), url, gitrepo.Auth{}, NodeBranchPrefix+"a")
	got, err := again.store.Store(ctx, []precept.Feedback{decision("d-0-0-0", "coder", t0), decision("d-new", "coder", t0)})
	if err != nil {
		t.Fatal(err)
	}
	if got[0] || !got[1] {
		t.Fatalf("created = %v, want [false true]: the restarted node did not take its branch or the order back", got)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := again.store.Get(ctx, "d-new"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the restarted node never ordered its new decision")
		}
	}
	if seq := sequence(t, again); !slices.Equal(seq[:len(first)], first) {
		t.Error("the restarted node numbers the earlier decisions otherwise")
	}
	testenv.Git(t, remote, "fsck", "--strict", "--no-dangling")
}
