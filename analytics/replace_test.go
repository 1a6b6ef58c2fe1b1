package analytics

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/precept-dev/precept"
)

// A decision counted unclear that the evaluator (after its state was
// rebuilt, or a new rubric) now finds clear: the hook reports the
// evaluation, no needs-review record exists any more, and a rebuild
// counts it clear. The report replaces what was counted, so the
// incremental figures move back too.
func TestIncrementalEqualsRebuildWhenADecisionIsNoLongerUnclear(t *testing.T) {
	feed := &memFeed{}
	evs := &evaluations{m: map[string]Facts{}}
	dir := t.TempDir()
	open := func(name string) *Aggregate {
		agg, err := Open(feed, filepath.Join(dir, name), Options{Evaluations: evs.lookup, BatchSize: 10, NoSync: true, Now: func() time.Time { return day2 }})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { agg.Close() })
		return agg
	}
	drain := func(agg *Aggregate) {
		for {
			n, err := agg.Step(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				return
			}
		}
	}
	feed.add(precept.Decision{DecisionID: "x1", Agent: "coder", GateID: "code-review", EpicID: "E1", TaskID: "T1",
		Decision: precept.Rejected, ReviewerID: "r1", Timestamp: day1})
	evs.set("x1", Facts{Rubric: rubric(false, false), Review: Clarifying})
	inc := open("inc.db")
	drain(inc)
	// The evaluator re-evaluates x1 and finds it clear.
	evs.set("x1", Facts{Category: "naming", Rubric: rubric(true, true)})
	inc.Evaluated([]Evaluated{{DecisionID: "x1", Evaluation: true, Category: "naming", Rubric: rubric(true, true)}})
	drain(inc)
	reb := open("rebuild.db")
	drain(reb)
	q := Query{From: day1.Truncate(24 * time.Hour), To: day2.Truncate(24 * time.Hour)}
	a, _ := inc.Query(q)
	b, _ := reb.Query(q)
	if a.Totals.Unclear != b.Totals.Unclear || a.Totals.UnclearOpen != b.Totals.UnclearOpen {
		t.Errorf("incremental unclear=%d open=%d, rebuild unclear=%d open=%d", a.Totals.Unclear, a.Totals.UnclearOpen, b.Totals.Unclear, b.Totals.UnclearOpen)
	}
}

// A layout bump drops the data buckets of earlier versions too, such as the
// "lessons" bucket of version 2 (one record per negative decision).
func TestVersionBumpDropsTheOldLessonsBucket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "analytics.db")
	db, err := bolt.Open(path, 0o644, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		m, _ := tx.CreateBucketIfNotExists(bMeta)
		if err := m.Put(keyVersion, []byte("2")); err != nil {
			return err
		}
		l, _ := tx.CreateBucketIfNotExists([]byte("lessons"))
		return l.Put([]byte("d1"), []byte("x"))
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s, err := openStore(path, true, true)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	s.db.View(func(tx *bolt.Tx) error {
		if tx.Bucket([]byte("lessons")) != nil {
			t.Errorf("the version-2 lessons bucket survives the rebuild")
		}
		return nil
	})
}
