package feedbackstore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/precept-dev/precept"
)

func addReply(r Reply) func(*Clarification) bool {
	return func(c *Clarification) bool { return c.AddReply(r) }
}

func TestQuestionsAndRepliesAreRecordedOnceInGit(t *testing.T) {
	f := open(t, t.TempDir(), "n1")
	ctx := context.Background()
	if _, err := f.store.Store(ctx, []precept.Feedback{decision("v", "coding-agent", t0)}); err != nil {
		t.Fatal(err)
	}
	empty, err := f.store.Clarification(ctx, "v")
	if err != nil || empty.DecisionID != "v" || len(empty.Questions) != 0 || empty.Attempts() != 0 {
		t.Fatalf("record before any question = %+v, %v", empty, err)
	}
	ask := func(c *Clarification) bool {
		if !c.AddQuestion(Question{Attempt: 1, Kind: "first", AskedAt: t0}) {
			return false
		}
		c.Thread, c.Status = "C1:100.1", "pending-clarification"
		return true
	}
	reply := Reply{TS: "100.2", User: "U1", Text: "the export drops the header", At: t0.Add(time.Minute)}
	for range 2 {
		for _, fn := range []func(*Clarification) bool{ask, addReply(reply)} {
			if _, _, err := f.store.UpdateClarification(ctx, "v", fn); err != nil {
				t.Fatal(err)
			}
		}
	}
	rec, err := f.store.Clarification(ctx, "v")
	if err != nil || len(rec.Questions) != 1 || len(rec.Replies) != 1 || rec.Thread != "C1:100.1" || rec.Attempts() != 1 || !rec.LastAsked().Equal(t0) {
		t.Fatalf("record = %+v, %v", rec, err)
	}
	repo := f.repo.Path()
	gitCLI(t, repo, "fsck", "--strict", "--no-dangling")
	if got := gitCLI(t, repo, "log", "--format=%s", "main"); got != "Clarify decision v: 1 reply recorded\nClarify decision v: question 1 asked, now pending-clarification\nRecord decision v" {
		t.Fatalf("log =\n%s", got)
	}
	if got := gitCLI(t, repo, "log", "-1", "--format=%(trailers)", "main"); !strings.Contains(got, "Decision-Id: v") {
		t.Fatalf("trailers = %q", got)
	}
	show := gitCLI(t, repo, "show", "main:"+LayoutCurrent.ClarificationPath("v"))
	want := `{
  "decision_id": "v",
  "status": "pending-clarification",
  "thread": "C1:100.1",
  "questions": [
    {
      "attempt": 1,
      "kind": "first",
      "asked_at": "2026-11-01T09:00:00Z"
    }
  ],
  "replies": [
    {
      "ts": "100.2",
      "user": "U1",
      "text": "the export drops the header",
      "at": "2026-11-01T09:01:00Z",
      "absorbed": false
    }
  ]
}`
	if show != want {
		t.Fatalf("record file =\n%s\nwant\n%s", show, want)
	}
	if strings.TrimPrefix(LayoutCurrent.ClarificationPath("v"), ClarificationsDir) != strings.TrimPrefix(LayoutCurrent.DecisionPath("v"), DecisionsDir) {
		t.Fatalf("clarification %s is not sharded like its decision %s", LayoutCurrent.ClarificationPath("v"), LayoutCurrent.DecisionPath("v"))
	}
	if id, ok, err := f.store.ClarificationThread(ctx, "C1:100.1"); err != nil || !ok || id != "v" {
		t.Fatalf("thread owner = %q %v %v", id, ok, err)
	}
	if _, ok, err := f.store.ClarificationThread(ctx, "C1:999.9"); err != nil || ok {
		t.Fatalf("unknown thread = %v %v", ok, err)
	}
	if _, _, err := f.store.UpdateClarification(ctx, "../escape", ask); err == nil {
		t.Fatal("a record outside its directory was written")
	}
}

// Two replicas record questions and replies about the same decision at
// the same time, each twice: every reply is recorded once, and both
// replicas' indexes number the records' versions identically.
func TestTwoReplicasRecordEveryReplyOnceAndNumberTheRecordsAlike(t *testing.T) {
	dir := t.TempDir()
	a := open(t, dir, "a")
	b := open(t, dir, "b")
	ctx := context.Background()
	if _, err := a.store.Store(ctx, []precept.Feedback{decision("v", "coding-agent", t0), decision("w", "coding-agent", t0)}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for _, f := range []*fixture{a, b, a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 10 {
				for _, id := range []string{"v", "w"} {
					r := Reply{TS: fmt.Sprintf("100.%02d", i), User: "U1", Text: fmt.Sprintf("reply %d", i)}
					if _, _, err := f.store.UpdateClarification(ctx, id, addReply(r)); err != nil {
						t.Error(err)
					}
				}
			}
		}()
	}
	wg.Wait()
	for _, f := range []*fixture{a, b} {
		if _, err := f.store.CatchUp(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"v", "w"} {
		rec, err := a.store.Clarification(ctx, id)
		if err != nil || len(rec.Replies) != 10 {
			t.Fatalf("%s: %d replies, %v", id, len(rec.Replies), err)
		}
	}
	ea, _ := a.store.Entries(0, 1000)
	eb, _ := b.store.Entries(0, 1000)
	if len(ea) != 2+20 || !reflect.DeepEqual(ea, eb) {
		t.Fatalf("replica a has %d entries, b %d; equal: %v", len(ea), len(eb), reflect.DeepEqual(ea, eb))
	}
	// Each entry is the record as its commit wrote it: v's replies grow
	// one at a time.
	n := 0
	for _, e := range ea {
		if e.Clarification != nil && e.Clarification.DecisionID == "v" {
			n++
			if len(e.Clarification.Replies) != n {
				t.Fatalf("entry %d holds %d replies of v, want %d", e.Seq, len(e.Clarification.Replies), n)
			}
		}
	}
	// Decisions alone are still listed without the records.
	if recs, _ := a.store.Since(0, 1000); len(recs) != 2 {
		t.Fatalf("Since lists %d decisions", len(recs))
	}
	gitCLI(t, a.repo.Path(), "fsck", "--strict", "--no-dangling")
}

func TestARebuiltIndexNumbersDecisionsAndRecordsAsBefore(t *testing.T) {
	dir := t.TempDir()
	f := open(t, dir, "n1")
	ctx := context.Background()
	for i := range 3 {
		id := fmt.Sprintf("d-%d", i)
		if _, err := f.store.Store(ctx, []precept.Feedback{decision(id, "coding-agent", t0)}); err != nil {
			t.Fatal(err)
		}
		r := Reply{TS: fmt.Sprint(i), Text: "reply to " + id, At: t0}
		if _, _, err := f.store.UpdateClarification(ctx, "d-0", addReply(r)); err != nil {
			t.Fatal(err)
		}
	}
	before, _ := f.store.Entries(0, 100)
	f.close()
	if err := os.Remove(filepath.Join(dir, "nodes", "n1", "feedback.db")); err != nil {
		t.Fatal(err)
	}
	f = open(t, dir, "n1")
	after, _ := f.store.Entries(0, 100)
	if len(before) != 6 || !reflect.DeepEqual(before, after) {
		t.Fatalf("before the rebuild %d entries, after %d; equal: %v", len(before), len(after), reflect.DeepEqual(before, after))
	}
	if id, ok, _ := f.store.ClarificationThread(ctx, "none"); ok {
		t.Fatalf("thread owner %q from nowhere", id)
	}
}
