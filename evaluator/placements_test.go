package evaluator

import (
	"context"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// checkPlacements checks that every evaluation's placement reads back as
// the evaluation says, and returns how many there were.
func checkPlacements(t *testing.T, e *env, ids []string) int {
	t.Helper()
	ctx := context.Background()
	// EachPlacement reads the same as Placement, in the order asked.
	type got struct {
		cluster, category string
		ok                bool
	}
	each := make([]got, len(ids))
	seen := 0
	keys := make([][]byte, len(ids))
	for i, id := range ids {
		keys[i] = []byte(id)
	}
	err := e.svc.Placements().EachPlacement(ctx, keys, func(i int, cluster, category []byte, ok bool) {
		if i != seen {
			t.Fatalf("EachPlacement gave %d after %d", i, seen-1)
		}
		seen++
		each[i] = got{string(cluster), string(category), ok}
	})
	if err != nil || seen != len(ids) {
		t.Fatalf("EachPlacement: %d of %d, err %v", seen, len(ids), err)
	}
	n := 0
	for i, id := range ids {
		ev, found, err := getJSON[Evaluation](e.svc.state, bEvals, id)
		if err != nil {
			t.Fatal(err)
		}
		cl, cat, ok, err := e.svc.Placements().Placement(ctx, id)
		if err != nil || ok != found {
			t.Fatalf("placement of %s: ok %v err %v; evaluation found %v", id, ok, err, found)
		}
		if each[i] != (got{cl, cat, ok}) {
			t.Fatalf("EachPlacement of %s = %+v, Placement %q %q %v", id, each[i], cl, cat, ok)
		}
		if !found {
			continue
		}
		n++
		want := ""
		if ev.Lesson != nil {
			want = ev.Lesson.Category
		}
		if cl != ev.ClusterID || cat != want {
			t.Fatalf("placement of %s = %q %q, evaluation %q %q", id, cl, cat, ev.ClusterID, want)
		}
	}
	return n
}

func TestPlacementsFollowEvaluationsAndAreFilledForAnOlderState(t *testing.T) {
	feed := labelledFeed(t)
	dir := t.TempDir()
	e := newEnv(t, dir, feed, Options{})
	e.drain(t)
	if _, err := e.svc.Recluster(context.Background()); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, f := range feed.items {
		ids = append(ids, f.Feedback.DecisionID)
	}
	ids = append(ids, "nobody")
	n := checkPlacements(t, e, ids)
	if n < 100 {
		t.Fatalf("only %d evaluations", n)
	}

	// A state written before placements were kept: no bucket, no mark.
	e.close()
	db, err := bolt.Open(dir+"/evaluator.db", 0o644, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket(bPlacements); err != nil {
			return err
		}
		return tx.Bucket(bMeta).Delete(kPlaced)
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer func(b int) { fillBatch = b }(fillBatch)
	fillBatch = 7 // many transactions, the last one partial
	e = newEnv(t, dir, feed, Options{})
	if got := checkPlacements(t, e, ids); got != n {
		t.Fatalf("after filling, %d placements, want %d", got, n)
	}
}

// BenchmarkPlacement reads every evaluated decision's placement from the
// placements bucket, and, in the same run, by decoding the evaluation as
// it was read before the bucket: what an effects pass does per negative
// decision.
func BenchmarkPlacement(b *testing.B) {
	feed := labelledFeed(b)
	e := newEnv(b, b.TempDir(), feed, Options{})
	e.drain(b)
	var ids []string
	for _, f := range feed.items {
		ids = append(ids, f.Feedback.DecisionID)
	}
	ctx := context.Background()
	b.Run("bucket", func(b *testing.B) {
		for i := range b.N {
			if _, _, _, err := e.svc.Placements().Placement(ctx, ids[i%len(ids)]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("evaluation", func(b *testing.B) {
		for i := range b.N {
			if _, _, err := getJSON[placement](e.svc.state, bEvals, ids[i%len(ids)]); err != nil {
				b.Fatal(err)
			}
		}
	})
}
