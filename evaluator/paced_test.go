package evaluator

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/precept-dev/precept"
)

// commitsOf draws decisions as a busy deployment sends them — the
// fixtures' comments again and again, over 3 agents, 40 reviewers and
// 200 epics, so that groups grow large — and cuts them into commits of
// uneven sizes, as nodes storing batches of different lengths make them.
func commitsOf(t *testing.T, n int) [][]Item {
	t.Helper()
	var comments []string
	for _, name := range []string{"labelled.jsonl", "dev-1.jsonl", "holdout-3.jsonl", "holdout-4.jsonl", "holdout-5.jsonl"} {
		for _, l := range loadFixture(t, name) {
			if c := l.Feedback.ReviewerComment; len(c) > 15 {
				comments = append(comments, c)
			}
		}
	}
	rng := rand.New(rand.NewPCG(7, 7))
	var all []Item
	for i := range n {
		d := precept.Decision{
			DecisionID: fmt.Sprintf("d-%05d", i), GateID: "HITL-2", EpicID: fmt.Sprintf("E-%d", rng.IntN(200)),
			Agent: fmt.Sprintf("agent-%d", rng.IntN(3)), Decision: precept.Rejected, ReviewerID: fmt.Sprintf("r-%d", rng.IntN(40)),
			Timestamp: t0, ReviewerComment: comments[rng.IntN(len(comments))],
		}
		if err := d.Validate(precept.Limits{}, t0); err != nil {
			t.Fatal(err)
		}
		all = append(all, Item{Feedback: precept.NewFeedback(d, "test", t0.Add(time.Duration(i)*time.Millisecond))})
	}
	sizes := []int{7, 130, 3, 41, 260, 19, 88, 1, 64}
	var out [][]Item
	for i := 0; len(all) > 0; i++ {
		n := min(sizes[i%len(sizes)], len(all))
		c := slices.Clone(all[:n])
		for j := range c {
			c[j].Commit = fmt.Sprintf("commit-%d", i)
		}
		out = append(out, c)
		all = all[n:]
	}
	return out
}

// addCommit makes one commit's decisions visible at once, numbered on.
func (f *memFeed) addCommit(items []Item) {
	f.mu.Lock()
	for _, it := range items {
		it.Seq = uint64(len(f.items) + 1)
		f.items = append(f.items, it)
	}
	close(f.ch)
	f.ch = make(chan struct{})
	f.mu.Unlock()
}

// running runs e's evaluator until the test ends or stop is called.
func running(t *testing.T, e *env) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.svc.Run(ctx)
	}()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	return stop
}

// settled waits until e evaluated everything its feed holds and ran the
// pass owed at that position.
func settled(t *testing.T, e *env, every uint64) {
	t.Helper()
	last, _ := e.feed.Last()
	deadline := time.Now().Add(time.Minute)
	for {
		pos, _, err := e.svc.state.position()
		if err != nil {
			t.Fatal(err)
		}
		var mark uint64
		e.svc.state.db.View(func(tx *bolt.Tx) error { mark = u64(tx.Bucket(bMeta).Get(kPassMark)); return nil })
		if pos == last && mark == last/every {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("evaluated to %d of %d, passes to %d of %d", pos, last, mark, last/every)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// outcome is what nodes must agree on: each decision's evaluation and
// each cluster, but for the times they were written.
func outcome(t *testing.T, e *env, commits [][]Item) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, c := range commits {
		for _, it := range c {
			ev, _, err := e.svc.Evaluation(context.Background(), it.Feedback.DecisionID)
			if err != nil {
				t.Fatal(err)
			}
			// Everything but when: the similar decisions, the class's
			// reasons, the cluster's statistics.
			ev.EvaluatedAt = time.Time{}
			b, err := json.Marshal(ev)
			if err != nil {
				t.Fatal(err)
			}
			out["decision "+it.Feedback.DecisionID] = string(b)
		}
	}
	if err := eachJSON(e.svc.state, bClusters, func(c Cluster) error {
		c.CreatedAt, c.UpdatedAt = time.Time{}, time.Time{}
		b, err := json.Marshal(c)
		out["cluster "+c.ID] = string(b)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// Nodes evaluating one feed see its commits at different moments: the
// node that wrote a commit at once and alone, a follower several at a
// time, a restarted node half before and half after. With passes paced
// by the feed they must reach the same clusters and classes
// (docs/decisions/0019).
func TestNodesThatSawTheFeedInOtherChunksReachTheSameClusters(t *testing.T) {
	commits := commitsOf(t, 3000)
	const every = 500
	opts := Options{PassEvery: every, BatchSize: 64}

	writer := newEnv(t, t.TempDir(), newFeed(), opts)
	running(t, writer)
	for _, c := range commits {
		writer.feed.addCommit(c)
		settled(t, writer, every)
	}
	want := outcome(t, writer, commits)

	follower := newEnv(t, t.TempDir(), newFeed(), opts)
	for _, c := range commits {
		follower.feed.addCommit(c)
	}
	running(t, follower)
	settled(t, follower, every)

	dir, feed := t.TempDir(), newFeed()
	restarted := newEnv(t, dir, feed, opts)
	half := len(commits) / 2
	for _, c := range commits[:half] {
		feed.addCommit(c)
	}
	stop := running(t, restarted)
	settled(t, restarted, every)
	stop()
	restarted.close()
	restarted = newEnv(t, dir, feed, opts)
	for _, c := range commits[half:] {
		feed.addCommit(c)
	}
	running(t, restarted)
	settled(t, restarted, every)

	clusters := 0
	for k := range want {
		if k[:8] == "cluster " {
			clusters++
		}
	}
	if clusters < 20 {
		t.Fatalf("only %d clusters: the fixtures no longer exercise clustering", clusters)
	}
	for name, e := range map[string]*env{"follower": follower, "restarted": restarted} {
		got := outcome(t, e, commits)
		var differ []string
		for _, k := range slices.Sorted(maps.Keys(want)) {
			if got[k] != want[k] {
				differ = append(differ, fmt.Sprintf("%s: writer %q, %s %q", k, want[k], name, got[k]))
			}
		}
		for k := range got {
			if _, ok := want[k]; !ok {
				differ = append(differ, fmt.Sprintf("%s: only the %s has it (%q)", k, name, got[k]))
			}
		}
		if len(differ) > 0 {
			t.Errorf("the %s differs from the writer in %d of %d:\n%v", name, len(differ), len(want), differ[:min(len(differ), 10)])
		}
	}
	if _, err := writer.svc.Recluster(context.Background()); err != ErrPaced {
		t.Errorf("a pass on demand while paced: %v, want ErrPaced", err)
	}
}
