package gitrepo

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"testing"
)

func TestWriteStatsCountCommitsAndPushesByOutcome(t *testing.T) {
	ctx := context.Background()
	r := openTemp(t, Options{})
	h := write(t, r, "main", "one", Change{Path: "f", Data: []byte("1")})
	write(t, r, "main", "two", Change{Path: "f", Data: []byte("2")})
	// A compare-and-swap lost to another writer is a race, not a failure.
	base, err := r.SnapshotAt(h)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Commit("main", h, base, CommitSpec{Message: "late", Changes: []Change{{Path: "f", Data: []byte("3")}}}); !errors.Is(err, ErrRefChanged) {
		t.Fatalf("stale commit: %v", err)
	}
	// A commit that cannot be built fails.
	if _, err := r.Commit("main", ZeroHash, &Snapshot{}, CommitSpec{Message: "bad", Changes: []Change{{Path: "../escape", Data: []byte("x")}}}); err == nil || errors.Is(err, ErrRefChanged) {
		t.Fatalf("a commit of a path outside the tree: %v", err)
	}

	remoteDir := filepath.Join(t.TempDir(), "remote.git")
	gitCLI(t, filepath.Dir(remoteDir), "init", "-q", "--bare", "-b", "main", remoteDir)
	if err := r.AddRemote("origin", remoteDir); err != nil {
		t.Fatal(err)
	}
	if err := r.Push(ctx, "origin", Auth{}, PushSpec{Branch: "main"}); err != nil {
		t.Fatal(err)
	}
	if err := r.AddRemote("gone", filepath.Join(t.TempDir(), "missing.git")); err != nil {
		t.Fatal(err)
	}
	if err := r.Push(ctx, "gone", Auth{}, PushSpec{Branch: "main"}); err == nil {
		t.Fatal("a push to a missing remote succeeded")
	}

	st, err := r.Stats()
	if err != nil {
		t.Fatal(err)
	}
	got := st.Writes
	if h := got.PushSeconds; h.Count != 2 || h.Sum <= 0 || h.Buckets[len(h.Buckets)-1] != 2 {
		t.Errorf("PushSeconds = %+v, want both pushes", h)
	}
	got.PushSeconds = Histogram{}
	want := WriteStats{Commits: 2, CommitsRaced: 1, CommitsFailed: 1, Pushes: 1, PushesFailed: 1}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("WriteStats = %+v, want %+v", got, want)
	}
}
