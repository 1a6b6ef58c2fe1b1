package feedbackstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/lib/gitrepo"
)

var t0 = time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)

func decision(id, agent string, at time.Time) precept.Feedback {
	d := precept.Decision{
		DecisionID: id, GateID: "HITL-2", EpicID: "EPIC-1", Agent: agent,
		Decision: precept.Rejected, ReviewerID: "alice", Timestamp: at,
		ReviewerComment: "missing tests for " + id,
	}
	if err := d.Validate(precept.Limits{}, at); err != nil {
		panic(err)
	}
	return precept.NewFeedback(d, "api:test", at)
}

type fixture struct {
	dir   string
	repo  *gitrepo.Repo
	store *Store
}

func open(t testing.TB, dir, node string) *fixture {
	t.Helper()
	repo, err := gitrepo.Open(filepath.Join(dir, "feedback.git"), gitrepo.Options{NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(repo, filepath.Join(dir, "nodes", node, "feedback.db"), Options{BatchWait: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{dir: dir, repo: repo, store: s}
	t.Cleanup(f.close)
	return f
}

func (f *fixture) close() {
	if f.store != nil {
		f.store.Close()
		f.repo.Close()
		f.store = nil
	}
}

func gitCLI(t testing.TB, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func TestStoredDecisionsReadBackAndTheCLISeesTheBatches(t *testing.T) {
	f := open(t, t.TempDir(), "n1")
	ctx := context.Background()
	var batch []precept.Feedback
	for i := range 5 {
		batch = append(batch, decision(fmt.Sprintf("d-%d", i), "coding-agent", t0.Add(time.Duration(i)*time.Minute)))
	}
	created, err := f.store.Store(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range created {
		if !c {
			t.Fatalf("record %d not created", i)
		}
	}
	r, err := f.store.Get(ctx, "d-3")
	if err != nil {
		t.Fatal(err)
	}
	if r.ReviewerComment != "missing tests for d-3" || r.Commit == "" || r.EmbeddingText == "" {
		t.Fatalf("Get = %+v", r)
	}
	if _, err := f.store.Get(ctx, "nope"); !errors.Is(err, precept.ErrNotFound) {
		t.Fatalf("Get missing: %v", err)
	}

	repoDir := f.repo.Path()
	gitCLI(t, repoDir, "fsck", "--strict", "--no-dangling")
	if got := gitCLI(t, repoDir, "log", "--format=%s", "main"); got != "Record 5 decisions" {
		t.Fatalf("log = %q", got)
	}
	show := gitCLI(t, repoDir, "show", "main:"+LayoutCurrent.DecisionPath("d-3"))
	if !strings.Contains(show, `"decision_id": "d-3"`) || !strings.Contains(show, `"reviewer_comment": "missing tests for d-3"`) {
		t.Fatalf("git show = %s", show)
	}
}

func TestListForAgentIsNewestFirstAndPaged(t *testing.T) {
	f := open(t, t.TempDir(), "n1")
	ctx := context.Background()
	var batch []precept.Feedback
	for i := range 7 {
		batch = append(batch, decision(fmt.Sprintf("c-%d", i), "coding-agent", t0.Add(time.Duration(i)*time.Hour)))
	}
	batch = append(batch, decision("t-1", "test-agent", t0))
	if _, err := f.store.Store(ctx, batch); err != nil {
		t.Fatal(err)
	}
	var ids []string
	token := ""
	pages := 0
	for {
		recs, next, err := f.store.ListForAgent(ctx, "coding-agent", 3, token)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, r := range recs {
			ids = append(ids, r.DecisionID)
		}
		if next == "" {
			break
		}
		token = next
	}
	if got := strings.Join(ids, ","); got != "c-6,c-5,c-4,c-3,c-2,c-1,c-0" || pages != 3 {
		t.Fatalf("listing = %s in %d pages", got, pages)
	}
	if _, _, err := f.store.ListForAgent(ctx, "coding-agent", 3, "garbage!"); precept.ErrorCode(err) != precept.Invalid {
		t.Fatalf("bad token: %v", err)
	}
	// A token from another agent's listing is refused, not misread.
	_, next, _ := f.store.ListForAgent(ctx, "coding-agent", 1, "")
	if _, _, err := f.store.ListForAgent(ctx, "test-agent", 1, next); precept.ErrorCode(err) != precept.Invalid {
		t.Fatalf("foreign token: %v", err)
	}
}

func TestRedeliveredDecisionsAreStoredOnce(t *testing.T) {
	f := open(t, t.TempDir(), "n1")
	ctx := context.Background()
	d := decision("dup", "coding-agent", t0)
	created, err := f.store.Store(ctx, []precept.Feedback{d, d})
	if err != nil {
		t.Fatal(err)
	}
	if !created[0] || created[1] {
		t.Fatalf("within one call: created = %v", created)
	}
	created, err = f.store.Store(ctx, []precept.Feedback{d})
	if err != nil || created[0] {
		t.Fatalf("redelivery: created = %v, %v", created, err)
	}
	if n, _ := f.store.Count(); n != 1 {
		t.Fatalf("count = %d", n)
	}
	if got := gitCLI(t, f.repo.Path(), "rev-list", "--count", "main"); got != "1" {
		t.Fatalf("%s commits for one decision", got)
	}
}

func TestConcurrentCallersShareCommits(t *testing.T) {
	f := open(t, t.TempDir(), "n1")
	ctx := context.Background()
	var wg sync.WaitGroup
	for w := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 10 {
				if _, err := f.store.Store(ctx, []precept.Feedback{decision(fmt.Sprintf("w%d-%d", w, i), "coding-agent", t0)}); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if n, _ := f.store.Count(); n != 200 {
		t.Fatalf("count = %d", n)
	}
	commits := gitCLI(t, f.repo.Path(), "rev-list", "--count", "main")
	var c int
	fmt.Sscan(commits, &c)
	if c >= 200 {
		t.Fatalf("%d commits for 200 concurrent decisions: no group commit", c)
	}
	t.Logf("200 decisions from 20 concurrent callers in %d commits", c)
}

func TestIndexSurvivesRestartAndIsRebuiltWhenLost(t *testing.T) {
	dir := t.TempDir()
	f := open(t, dir, "n1")
	ctx := context.Background()
	for i := range 3 {
		var batch []precept.Feedback
		for j := range 4 {
			batch = append(batch, decision(fmt.Sprintf("d-%d-%d", i, j), "coding-agent", t0.Add(time.Duration(i*4+j)*time.Second)))
		}
		if _, err := f.store.Store(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	before, _ := f.store.Since(0, 100)
	f.close()

	f = open(t, dir, "n1")
	if n, _ := f.store.Count(); n != 12 {
		t.Fatalf("after restart count = %d", n)
	}
	f.close()

	os.Remove(filepath.Join(dir, "nodes", "n1", "feedback.db"))
	f = open(t, dir, "n1")
	after, _ := f.store.Since(0, 100)
	if len(after) != 12 {
		t.Fatalf("after rebuild %d records", len(after))
	}
	for i := range before {
		if before[i].DecisionID != after[i].DecisionID || before[i].Seq != after[i].Seq {
			t.Fatalf("rebuild renumbered: %d: %s/%d vs %s/%d", i, before[i].DecisionID, before[i].Seq, after[i].DecisionID, after[i].Seq)
		}
	}
}

// Two replicas share the repository (a shared data volume) but each has
// its own index: both store concurrently, and both end up with every
// decision numbered identically.
func TestTwoReplicasAgreeOnEveryDecisionAndItsNumber(t *testing.T) {
	dir := t.TempDir()
	a := open(t, dir, "a")
	b := open(t, dir, "b")
	ctx := context.Background()
	var wg sync.WaitGroup
	for r, f := range []*fixture{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				// Every decision is sent to both replicas, as after a
				// redelivery: each must be stored exactly once.
				d := decision(fmt.Sprintf("d-%03d", i), "coding-agent", t0.Add(time.Duration(i)*time.Second))
				if _, err := f.store.Store(ctx, []precept.Feedback{d}); err != nil {
					t.Error(err)
				}
				_ = r
			}
		}()
	}
	wg.Wait()
	for _, f := range []*fixture{a, b} {
		if _, err := f.store.CatchUp(ctx); err != nil {
			t.Fatal(err)
		}
	}
	ra, _ := a.store.Since(0, 1000)
	rb, _ := b.store.Since(0, 1000)
	if len(ra) != 50 || len(rb) != 50 {
		t.Fatalf("replica a has %d, b has %d, want 50", len(ra), len(rb))
	}
	for i := range ra {
		if ra[i].DecisionID != rb[i].DecisionID || ra[i].Seq != rb[i].Seq {
			t.Fatalf("replicas disagree at %d: %s/%d vs %s/%d", i, ra[i].DecisionID, ra[i].Seq, rb[i].DecisionID, rb[i].Seq)
		}
	}
	files := gitCLI(t, a.repo.Path(), "ls-tree", "-r", "--name-only", "main", DecisionsDir)
	if n := len(strings.Split(files, "\n")); n != 50 {
		t.Fatalf("%d decision files in git, want 50", n)
	}
	gitCLI(t, a.repo.Path(), "fsck", "--strict", "--no-dangling")
}

func TestGetFindsADecisionAnotherReplicaJustStored(t *testing.T) {
	dir := t.TempDir()
	a := open(t, dir, "a")
	b := open(t, dir, "b")
	ctx := context.Background()
	if _, err := a.store.Store(ctx, []precept.Feedback{decision("x", "coding-agent", t0)}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.Get(ctx, "x"); err != nil {
		t.Fatalf("replica b: %v", err)
	}
}

func TestChangedSignalsNewDecisions(t *testing.T) {
	f := open(t, t.TempDir(), "n1")
	ch := f.store.Changed()
	if _, err := f.store.Store(context.Background(), []precept.Feedback{decision("x", "coding-agent", t0)}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatal("Changed not signalled")
	}
	if seq, _ := f.store.LastSeq(); seq != 1 {
		t.Fatalf("LastSeq = %d", seq)
	}
}

func TestRewrittenHistoryRebuildsTheIndex(t *testing.T) {
	dir := t.TempDir()
	f := open(t, dir, "n1")
	ctx := context.Background()
	f.store.Store(ctx, []precept.Feedback{decision("keep", "coding-agent", t0)})
	first, _ := f.repo.Tip(Branch)
	f.store.Store(ctx, []precept.Feedback{decision("dropped", "coding-agent", t0)})
	second, _ := f.repo.Tip(Branch)
	// An operator resets the branch (e.g. restores a backup).
	if err := f.repo.SetBranch(Branch, second, first); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.Get(ctx, "dropped"); !errors.Is(err, precept.ErrNotFound) {
		t.Fatalf("decision from rewritten history still indexed: %v", err)
	}
	if _, err := f.store.Get(ctx, "keep"); err != nil {
		t.Fatal(err)
	}
	// Numbered again from one, one decision stored, in a new generation.
	if p, err := f.store.Position(); err != nil || p.Seq != 1 || p.Count != 1 || p.Generation != 1 {
		t.Fatalf("Position = %+v, %v; want seq 1, count 1, generation 1", p, err)
	}
}
