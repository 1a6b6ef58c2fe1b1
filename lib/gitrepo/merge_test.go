package gitrepo

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestMergeBaseMatchesTheCLI(t *testing.T) {
	r := openTemp(t, Options{})
	base := write(t, r, "main", "base", Change{Path: "a", Data: []byte("a")})
	if err := r.SetBranch("side", ZeroHash, base); err != nil {
		t.Fatal(err)
	}
	ours := write(t, r, "main", "ours", Change{Path: "b", Data: []byte("b")})
	theirs := write(t, r, "side", "theirs", Change{Path: "c", Data: []byte("c")})

	got, err := r.MergeBase(ours, theirs)
	if err != nil {
		t.Fatal(err)
	}
	if want := gitCLI(t, r.Path(), "merge-base", ours.String(), theirs.String()); got.String() != want || got != base {
		t.Fatalf("MergeBase = %s, git says %s, base is %s", got, want, base)
	}
	if got, _ := r.MergeBase(base, ours); got != base {
		t.Fatalf("MergeBase of an ancestor = %s, want %s", got, base)
	}

	lone, err := r.Commit("lone", ZeroHash, &Snapshot{repo: r}, CommitSpec{Message: "unrelated", Changes: []Change{{Path: "z", Data: []byte("z")}}})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := r.MergeBase(ours, lone); err != nil || !got.IsZero() {
		t.Fatalf("MergeBase of unrelated histories = %s, %v; want ZeroHash", got, err)
	}
}

func TestMergeFilesTakesEachSidesChangesAndPrefersTheirsOnConflict(t *testing.T) {
	r := openTemp(t, Options{})
	base := write(t, r, "main", "base",
		Change{Path: "keep", Data: []byte("k")},
		Change{Path: "ours-edits", Data: []byte("1")},
		Change{Path: "theirs-edits", Data: []byte("1")},
		Change{Path: "both-same", Data: []byte("1")},
		Change{Path: "both-differ", Data: []byte("1")},
		Change{Path: "ours-deletes-theirs-edits", Data: []byte("1")},
		Change{Path: "theirs-deletes", Data: []byte("1")},
		Change{Path: "dir/theirs-deletes-last", Data: []byte("1")},
	)
	if err := r.SetBranch("remote", ZeroHash, base); err != nil {
		t.Fatal(err)
	}
	write(t, r, "main", "ours",
		Change{Path: "ours-edits", Data: []byte("ours")},
		Change{Path: "both-same", Data: []byte("same")},
		Change{Path: "both-differ", Data: []byte("ours")},
		Change{Path: "ours-deletes-theirs-edits", Delete: true},
		Change{Path: "ours-adds", Data: []byte("new")},
	)
	theirs := write(t, r, "remote", "theirs",
		Change{Path: "theirs-edits", Data: []byte("theirs")},
		Change{Path: "both-same", Data: []byte("same")},
		Change{Path: "both-differ", Data: []byte("theirs")},
		Change{Path: "ours-deletes-theirs-edits", Data: []byte("theirs")},
		Change{Path: "theirs-deletes", Delete: true},
		Change{Path: "dir/theirs-deletes-last", Delete: true},
		Change{Path: "prompts/_rules.md", Data: []byte("curated")},
	)
	ours, _ := r.Tip("main")

	res, err := r.MergeFiles(ours, theirs)
	if err != nil {
		t.Fatal(err)
	}
	if res.Base != base {
		t.Fatalf("base = %s, want %s", res.Base, base)
	}
	slices.Sort(res.Conflicts)
	if want := []string{"both-differ", "ours-deletes-theirs-edits"}; !slices.Equal(res.Conflicts, want) {
		t.Fatalf("conflicts = %v, want %v", res.Conflicts, want)
	}
	merged, err := r.Update(context.Background(), "main", func(s *Snapshot) (*CommitSpec, error) {
		return &CommitSpec{Message: "Merge remote", Changes: res.Changes, MergeParents: []Hash{theirs}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	s, _ := r.SnapshotAt(merged)
	want := map[string]string{
		"keep": "k", "ours-edits": "ours", "theirs-edits": "theirs", "both-same": "same",
		"both-differ": "theirs", "ours-deletes-theirs-edits": "theirs", "ours-adds": "new",
		"prompts/_rules.md": "curated",
	}
	got := map[string]string{}
	s.Walk("", func(p string, blob Hash) error {
		b, _ := r.ReadBlob(blob)
		got[p] = string(b)
		return nil
	})
	if len(got) != len(want) {
		t.Fatalf("merged tree = %v, want %v", got, want)
	}
	for p, w := range want {
		if got[p] != w {
			t.Errorf("%s = %q, want %q", p, got[p], w)
		}
	}
	if parents := gitCLI(t, r.Path(), "log", "-1", "--format=%P", "main"); parents != ours.String()+" "+theirs.String() {
		t.Fatalf("merge parents = %q", parents)
	}
	gitCLI(t, r.Path(), "fsck", "--strict", "--no-dangling")
}

func TestMergeFilesOfAnAncestorChangesNothing(t *testing.T) {
	r := openTemp(t, Options{})
	old := write(t, r, "main", "one", Change{Path: "a", Data: []byte("1")})
	tip := write(t, r, "main", "two", Change{Path: "a", Data: []byte("2")})
	res, err := r.MergeFiles(tip, old)
	if err != nil || len(res.Changes) != 0 || len(res.Conflicts) != 0 {
		t.Fatalf("MergeFiles(tip, ancestor) = %+v, %v", res, err)
	}
}

func TestMergeFilesReadsCommitsTheCLIMade(t *testing.T) {
	r := openTemp(t, Options{})
	write(t, r, "main", "base", Change{Path: "rules/active/a/r-1.md", Data: []byte("r1")})
	work := filepath.Join(t.TempDir(), "w")
	gitCLI(t, filepath.Dir(work), "clone", "-q", r.Path(), work)
	os.MkdirAll(filepath.Join(work, "prompts"), 0o755)
	os.WriteFile(filepath.Join(work, "prompts", "_rules.md"), []byte("Keep headings short.\n"), 0o644)
	gitCLI(t, work, "add", ".")
	gitCLI(t, work, "commit", "-q", "-m", "curator adds _rules.md")
	gitCLI(t, work, "push", "-q", "origin", "main:curated")

	ours := write(t, r, "main", "precept", Change{Path: "rules/active/a/r-2.md", Data: []byte("r2")})
	theirs, err := r.Tip("curated")
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.MergeFiles(ours, theirs)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Changes) != 1 || res.Changes[0].Path != "prompts/_rules.md" || string(res.Changes[0].Data) != "Keep headings short.\n" {
		t.Fatalf("changes = %+v", res.Changes)
	}
	if _, err := r.MergeFiles(ours, Hash{1}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("merging a missing commit: %v", err)
	}
}
