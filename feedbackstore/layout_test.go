package feedbackstore

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/precept-dev/precept"
	"github.com/precept-dev/precept/lib/gitrepo"
)

func TestLayoutShardsByOneHexDigitPerLevel(t *testing.T) {
	for _, c := range []struct {
		l    Layout
		want string
	}{
		// SHA-256("d-1") starts 0741…
		{LayoutLegacy, "feedback/decisions/0/7/4/d-1.json"},
		{LayoutCurrent, "feedback/decisions/0/7/4/1/d-1.json"},
		{Layout{Levels: 1}, "feedback/decisions/0/d-1.json"},
	} {
		if got := c.l.DecisionPath("d-1"); got != c.want {
			t.Errorf("%d levels: %s, want %s", c.l.Levels, got, c.want)
		}
		if got, want := c.l.ClarificationPath("d-1"), strings.Replace(c.want, "decisions", "clarifications", 1); got != want {
			t.Errorf("%d levels: clarification %s, want %s", c.l.Levels, got, want)
		}
	}
}

func TestANewRepositoryRecordsItsLayoutWithTheFirstBatch(t *testing.T) {
	f := open(t, t.TempDir(), "n1")
	ctx := context.Background()
	if _, err := f.store.Store(ctx, []precept.Feedback{decision("d-1", "coding-agent", t0)}); err != nil {
		t.Fatal(err)
	}
	if got := gitCLI(t, f.repo.Path(), "show", "main:"+LayoutPath); got != `{"decision_shard_levels":4}` {
		t.Fatalf("%s = %q", LayoutPath, got)
	}
	gitCLI(t, f.repo.Path(), "cat-file", "-e", "main:feedback/decisions/0/7/4/1/d-1.json")
	if _, err := f.store.Store(ctx, []precept.Feedback{decision("d-2", "coding-agent", t0)}); err != nil {
		t.Fatal(err)
	}
	if got := gitCLI(t, f.repo.Path(), "log", "--format=%s", "--", LayoutPath); got != "Record decision d-1" {
		t.Fatalf("commits touching the layout file: %q", got)
	}
	if l, err := f.store.Layout(); err != nil || l != LayoutCurrent {
		t.Fatalf("Layout = %+v, %v", l, err)
	}
}

// legacyRepo is a feedback repository written before the layout file:
// decision d-1 at three levels, no layout.json.
func legacyRepo(t *testing.T, dir string) {
	t.Helper()
	repo, err := gitrepo.Open(filepath.Join(dir, "feedback.git"), gitrepo.Options{NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer repo.Close()
	data, err := encodeFeedback(decision("d-1", "coding-agent", t0))
	if err != nil {
		t.Fatal(err)
	}
	_, err = repo.Update(context.Background(), Branch, func(*gitrepo.Snapshot) (*gitrepo.CommitSpec, error) {
		return &gitrepo.CommitSpec{Message: "Record decision d-1", Changes: []gitrepo.Change{{Path: "feedback/decisions/0/7/4/d-1.json", Data: data}}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestALegacyRepositoryKeepsThreeLevelsAndStoresEachDecisionOnce(t *testing.T) {
	dir := t.TempDir()
	legacyRepo(t, dir)
	f := open(t, dir, "n1")
	ctx := context.Background()
	if _, err := f.store.Get(ctx, "d-1"); err != nil {
		t.Fatalf("the legacy decision is not indexed: %v", err)
	}
	created, err := f.store.Store(ctx, []precept.Feedback{decision("d-1", "coding-agent", t0), decision("d-2", "coding-agent", t0)})
	if err != nil {
		t.Fatal(err)
	}
	if created[0] || !created[1] {
		t.Fatalf("created = %v: want d-1 known and d-2 new", created)
	}
	gitCLI(t, f.repo.Path(), "cat-file", "-e", "main:"+LayoutLegacy.DecisionPath("d-2"))
	if got := gitCLI(t, f.repo.Path(), "ls-tree", "-r", "--name-only", "main"); strings.Contains(got, LayoutPath) || strings.Count(got, "\n") != 1 {
		t.Fatalf("tree:\n%s", got)
	}
	if _, _, err := f.store.UpdateClarification(ctx, "d-2", func(c *Clarification) bool { c.Thread = "C1:1.1"; return true }); err != nil {
		t.Fatal(err)
	}
	gitCLI(t, f.repo.Path(), "cat-file", "-e", "main:"+LayoutLegacy.ClarificationPath("d-2"))
	if c, err := f.store.Clarification(ctx, "d-2"); err != nil || c.Thread != "C1:1.1" {
		t.Fatalf("Clarification = %+v, %v", c, err)
	}
}

func TestALayoutFileOutOfRangeRefusesTheBatchAndKeepsIt(t *testing.T) {
	dir := t.TempDir()
	f := open(t, dir, "n1")
	ctx := context.Background()
	_, err := f.repo.Update(ctx, Branch, func(*gitrepo.Snapshot) (*gitrepo.CommitSpec, error) {
		return &gitrepo.CommitSpec{Message: "hand edit", Changes: []gitrepo.Change{{Path: LayoutPath, Data: []byte(`{"decision_shard_levels": 40}`)}}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.store.Store(ctx, []precept.Feedback{decision("d-1", "coding-agent", t0)})
	if err == nil || !strings.Contains(err.Error(), "decision_shard_levels 40") {
		t.Fatalf("Store = %v, want the layout file refused", err)
	}
	if _, err := f.store.Layout(); err == nil {
		t.Fatal("Layout read an out-of-range file")
	}
	_, err = f.repo.Update(ctx, Branch, func(*gitrepo.Snapshot) (*gitrepo.CommitSpec, error) {
		return &gitrepo.CommitSpec{Message: "repair", Changes: []gitrepo.Change{{Path: LayoutPath, Data: []byte(`{"decision_shard_levels": 2}`)}}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if created, err := f.store.Store(ctx, []precept.Feedback{decision("d-1", "coding-agent", t0)}); err != nil || !created[0] {
		t.Fatalf("Store after the repair = %v, %v", created, err)
	}
	gitCLI(t, f.repo.Path(), "cat-file", "-e", "main:feedback/decisions/0/7/d-1.json")
}
