package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/precept-dev/precept/lib/testenv"
)

// gitCLI runs the git CLI against dir as a curator and returns its trimmed
// output.
func gitCLI(t testing.TB, dir string, args ...string) string {
	t.Helper()
	return testenv.GitAs(t, dir, "Curator", "curator@example.com", args...)
}

func openTemp(t testing.TB, opts Options) *Repo {
	t.Helper()
	r, err := Open(filepath.Join(t.TempDir(), "repo.git"), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func write(t testing.TB, r *Repo, branch, msg string, changes ...Change) Hash {
	t.Helper()
	h, err := r.Update(context.Background(), branch, func(*Snapshot) (*CommitSpec, error) {
		return &CommitSpec{Message: msg, Changes: changes}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestOpenCreatesBareRepositoryTheCLIAccepts(t *testing.T) {
	r := openTemp(t, Options{})
	if got := gitCLI(t, r.Path(), "rev-parse", "--is-bare-repository"); got != "true" {
		t.Fatalf("is-bare-repository = %q", got)
	}
	if got := gitCLI(t, r.Path(), "symbolic-ref", "HEAD"); got != "refs/heads/main" {
		t.Fatalf("HEAD = %q", got)
	}
	if _, err := r.Tip("main"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Tip of unborn branch: %v", err)
	}
	// Reopening an existing repository keeps it.
	h := write(t, r, "main", "first", Change{Path: "a.txt", Data: []byte("a")})
	r2, err := Open(r.Path(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	if tip, _ := r2.Tip("main"); tip != h {
		t.Fatalf("reopened tip %s, want %s", tip, h)
	}
}

func TestOpenRefusesNonEmptyNonRepositoryDirectory(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "stray.txt"), []byte("x"), 0o644)
	if _, err := Open(dir, Options{}); err == nil {
		t.Fatal("Open of a non-empty non-repository directory succeeded")
	}
}

func TestCommitsReadBackWithTheCLIAndFsckClean(t *testing.T) {
	r := openTemp(t, Options{})
	// Names chosen to exercise git's tree order: "a.b" < "a/" < "a0" and a
	// directory "a" beside files "a-b" and "a.b".
	write(t, r, "main", "add files",
		Change{Path: "a/x.md", Data: []byte("in a\n")},
		Change{Path: "a-b", Data: []byte("dash\n")},
		Change{Path: "a.b", Data: []byte("dot\n")},
		Change{Path: "a0", Data: []byte("zero\n")},
		Change{Path: "deep/er/still/file.json", Data: []byte(`{"k":1}`)},
	)
	h, err := r.Update(context.Background(), "main", func(s *Snapshot) (*CommitSpec, error) {
		return &CommitSpec{
			Message:  "Approve rule r-1\n\nBody line.",
			Trailers: []Trailer{{"Approved-by", "alice"}, {"Approved-by", "bob"}, {"Proposal-Id", "p-1"}},
			Changes:  []Change{{Path: "a.b", Delete: true}, {Path: "a0", Data: []byte("changed\n")}},
		}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	gitCLI(t, r.Path(), "fsck", "--strict", "--no-dangling")
	if got := gitCLI(t, r.Path(), "show", "main:a/x.md"); got != "in a" {
		t.Fatalf("show a/x.md = %q", got)
	}
	if got := gitCLI(t, r.Path(), "show", "main:a0"); got != "changed" {
		t.Fatalf("show a0 = %q", got)
	}
	if got := gitCLI(t, r.Path(), "ls-tree", "--name-only", "main"); got != "a-b\na\ndeep\na0" && got != strings.Join([]string{"a-b", "a", "a0", "deep"}, "\n") {
		t.Fatalf("ls-tree = %q", got)
	}
	if got := gitCLI(t, r.Path(), "log", "-1", "--format=%(trailers:key=Approved-by,valueonly,separator=%x2C)", "main"); got != "alice,bob" {
		t.Fatalf("trailers = %q", got)
	}
	if got := gitCLI(t, r.Path(), "rev-parse", "main"); got != h.String() {
		t.Fatalf("rev-parse main = %s, want %s", got, h)
	}
	info, err := r.CommitInfo(h)
	if err != nil {
		t.Fatal(err)
	}
	if info.Subject != "Approve rule r-1" || info.Trailer("Proposal-Id") != "p-1" || len(info.TrailerValues("approved-by")) != 2 {
		t.Fatalf("CommitInfo = %+v", info)
	}
}

func TestLargeCommitIsOnePackfileTheCLIReads(t *testing.T) {
	r := openTemp(t, Options{PackThreshold: 10})
	var changes []Change
	for i := range 300 {
		changes = append(changes, Change{Path: fmt.Sprintf("d/%02x/%d.json", i%16, i), Data: []byte(fmt.Sprintf(`{"i":%d}`, i))})
	}
	write(t, r, "main", "batch", changes...)
	if st, _ := r.Stats(); st.Packs != 1 {
		t.Fatalf("packs = %d, want 1", st.Packs)
	}
	gitCLI(t, r.Path(), "fsck", "--strict", "--no-dangling")
	if got := gitCLI(t, r.Path(), "show", "main:d/07/263.json"); got != `{"i":263}` {
		t.Fatalf("show = %q", got)
	}
	if got := gitCLI(t, r.Path(), "ls-tree", "-r", "--name-only", "main"); len(strings.Split(got, "\n")) != 300 {
		t.Fatalf("ls-tree lists %d files", len(strings.Split(got, "\n")))
	}
}

func TestDeletingTheLastFileRemovesItsDirectory(t *testing.T) {
	r := openTemp(t, Options{})
	write(t, r, "main", "add", Change{Path: "x/y/z.md", Data: []byte("z")}, Change{Path: "keep.md", Data: []byte("k")})
	write(t, r, "main", "remove", Change{Path: "x/y/z.md", Delete: true})
	s, _ := r.Snapshot("main")
	entries, err := s.List("")
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name != "keep.md" {
		t.Fatalf("root = %+v", entries)
	}
	gitCLI(t, r.Path(), "fsck", "--strict", "--no-dangling")
}

func TestUpdateWithoutChangesMakesNoCommit(t *testing.T) {
	r := openTemp(t, Options{})
	h1 := write(t, r, "main", "add", Change{Path: "f", Data: []byte("same")})
	h2 := write(t, r, "main", "again", Change{Path: "f", Data: []byte("same")})
	if h1 != h2 {
		t.Fatalf("an unchanged tree made commit %s", h2)
	}
}

func TestInvalidPathsAreRefused(t *testing.T) {
	r := openTemp(t, Options{})
	for _, p := range []string{"", "/abs", "a/../b", "a//b", "./a", "a/", ".git/config", "a/.GIT/x", "nul\x00", `back\slash`} {
		_, err := r.Update(context.Background(), "main", func(*Snapshot) (*CommitSpec, error) {
			return &CommitSpec{Message: "bad", Changes: []Change{{Path: p, Data: []byte("x")}}}, nil
		})
		if !errors.Is(err, ErrInvalidPath) {
			t.Errorf("path %q: err = %v, want ErrInvalidPath", p, err)
		}
	}
	write(t, r, "main", "file", Change{Path: "f", Data: []byte("x")})
	_, err := r.Update(context.Background(), "main", func(*Snapshot) (*CommitSpec, error) {
		return &CommitSpec{Message: "bad", Changes: []Change{{Path: "f/g", Data: []byte("x")}}}, nil
	})
	if !errors.Is(err, ErrInvalidPath) {
		t.Errorf("writing under a file: err = %v", err)
	}
}

// Two Repo values on one directory behave like two preceptd processes
// sharing a data directory: every commit of both must survive.
func TestConcurrentWritersFromTwoHandlesLoseNoCommit(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "shared.git")
	a, err := Open(dir, Options{NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(dir, Options{NoFsync: true, PackThreshold: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var wg sync.WaitGroup
	const perWriter = 25
	for w, r := range []*Repo{a, b, a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				p := fmt.Sprintf("w%d/%03d", w, i)
				_, err := r.Update(context.Background(), "main", func(s *Snapshot) (*CommitSpec, error) {
					// Also rewrite a shared file from the snapshot, so a lost
					// update would show as a wrong count.
					n := 0
					if b, err := s.ReadFile("count"); err == nil {
						fmt.Sscan(string(b), &n)
					} else if !errors.Is(err, ErrNotFound) {
						return nil, err
					}
					return &CommitSpec{Message: "add " + p, Changes: []Change{
						{Path: p, Data: []byte(p)}, {Path: "count", Data: []byte(fmt.Sprint(n + 1))},
					}}, nil
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	s, err := a.Snapshot("main")
	if err != nil {
		t.Fatal(err)
	}
	count, err := s.ReadFile("count")
	if err != nil {
		t.Fatal(err)
	}
	if string(count) != fmt.Sprint(4*perWriter) {
		t.Fatalf("count = %s, want %d", count, 4*perWriter)
	}
	var files int
	s.Walk("", func(string, Hash) error { files++; return nil })
	if files != 4*perWriter+1 {
		t.Fatalf("%d files, want %d", files, 4*perWriter+1)
	}
	if got := gitCLI(t, dir, "rev-list", "--count", "main"); got != fmt.Sprint(4*perWriter) {
		t.Fatalf("rev-list --count = %s", got)
	}
	gitCLI(t, dir, "fsck", "--strict", "--no-dangling")
}

func TestSetBranchIsACompareAndSwap(t *testing.T) {
	r := openTemp(t, Options{})
	h1 := write(t, r, "main", "one", Change{Path: "f", Data: []byte("1")})
	h2 := write(t, r, "main", "two", Change{Path: "f", Data: []byte("2")})
	if err := r.SetBranch("other", ZeroHash, h1); err != nil {
		t.Fatal(err)
	}
	if err := r.SetBranch("other", ZeroHash, h2); !errors.Is(err, ErrRefChanged) {
		t.Fatalf("create over existing: %v", err)
	}
	if err := r.SetBranch("other", h2, h1); !errors.Is(err, ErrRefChanged) {
		t.Fatalf("update from wrong old: %v", err)
	}
	if err := r.SetBranch("other", h1, h2); err != nil {
		t.Fatal(err)
	}
	if err := r.DeleteBranch("other", h1); !errors.Is(err, ErrRefChanged) {
		t.Fatalf("delete from wrong old: %v", err)
	}
	if err := r.DeleteBranch("other", h2); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Tip("other"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted branch still resolves: %v", err)
	}
	for _, bad := range []string{"", "a..b", "x.lock", "has space", "/lead", "trail/"} {
		if err := r.SetBranch(bad, ZeroHash, h1); !errors.Is(err, ErrInvalidPath) {
			t.Errorf("branch %q: %v", bad, err)
		}
	}
}

func TestAStaleLockLeftByACrashIsBroken(t *testing.T) {
	r := openTemp(t, Options{})
	h := write(t, r, "main", "one", Change{Path: "f", Data: []byte("1")})
	lock := filepath.Join(r.Path(), "refs", "heads", "main.lock")
	if err := os.WriteFile(lock, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	os.Chtimes(lock, old, old)
	h2 := write(t, r, "main", "two", Change{Path: "f", Data: []byte("2")})
	if h2 == h {
		t.Fatal("no commit after a stale lock")
	}
}

func TestPackedRefsAreReadUpdatedAndDeleted(t *testing.T) {
	r := openTemp(t, Options{})
	h1 := write(t, r, "main", "one", Change{Path: "f", Data: []byte("1")})
	if err := r.SetBranch("proposal/p-1", ZeroHash, h1); err != nil {
		t.Fatal(err)
	}
	gitCLI(t, r.Path(), "pack-refs", "--all")
	if _, err := os.Stat(filepath.Join(r.Path(), "refs", "heads", "main")); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("pack-refs left a loose ref")
	}
	if tip, err := r.Tip("main"); err != nil || tip != h1 {
		t.Fatalf("Tip after pack-refs = %s, %v", tip, err)
	}
	h2 := write(t, r, "main", "two", Change{Path: "f", Data: []byte("2")})
	if got := gitCLI(t, r.Path(), "rev-parse", "main"); got != h2.String() {
		t.Fatalf("CLI sees main at %s, want %s", got, h2)
	}
	if err := r.DeleteBranch("proposal/p-1", h1); err != nil {
		t.Fatal(err)
	}
	if out := gitCLI(t, r.Path(), "branch", "--list"); strings.Contains(out, "proposal/p-1") {
		t.Fatalf("deleted packed branch still listed: %s", out)
	}
}

func TestCommitsMadeWithTheCLIAreRead(t *testing.T) {
	r := openTemp(t, Options{})
	write(t, r, "main", "seed", Change{Path: "prompts/_rules.md", Data: []byte("root rules\n")})
	work := filepath.Join(t.TempDir(), "work")
	gitCLI(t, filepath.Dir(work), "clone", "-q", r.Path(), work)
	os.MkdirAll(filepath.Join(work, "prompts", "api"), 0o755)
	os.WriteFile(filepath.Join(work, "prompts", "api", "_rules.md"), []byte("api rules\n"), 0o644)
	gitCLI(t, work, "add", ".")
	gitCLI(t, work, "commit", "-q", "-m", "Add api rules")
	gitCLI(t, work, "push", "-q", "origin", "main")

	s, err := r.Snapshot("main")
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.ReadFile("prompts/api/_rules.md")
	if err != nil || string(b) != "api rules\n" {
		t.Fatalf("ReadFile = %q, %v", b, err)
	}
	log, err := r.Log(s.Commit, LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(log) != 2 || log[0].Subject != "Add api rules" || log[0].CommitterName != "Curator" {
		t.Fatalf("log = %+v", log)
	}
}

func TestDiffReportsAddedModifiedDeletedUnderADirectory(t *testing.T) {
	r := openTemp(t, Options{})
	h1 := write(t, r, "main", "one",
		Change{Path: "d/a", Data: []byte("a")}, Change{Path: "d/b", Data: []byte("b")}, Change{Path: "d/sub/c", Data: []byte("c")}, Change{Path: "other", Data: []byte("o")})
	h2 := write(t, r, "main", "two",
		Change{Path: "d/a", Data: []byte("A")}, Change{Path: "d/b", Delete: true}, Change{Path: "d/sub/new", Data: []byte("n")}, Change{Path: "other", Data: []byte("O")})
	got, err := r.Diff(h1, h2, "d")
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, c := range got {
		lines = append(lines, c.Kind.String()+" "+c.Path)
	}
	sort.Strings(lines)
	want := []string{"added d/sub/new", "deleted d/b", "modified d/a"}
	if strings.Join(lines, ",") != strings.Join(want, ",") {
		t.Fatalf("diff = %v, want %v", lines, want)
	}
	all, _ := r.Diff(ZeroHash, h1, "")
	if len(all) != 4 {
		t.Fatalf("diff from nothing = %v", all)
	}
}

func TestFirstParentRangeIsOldestFirstAndDetectsRewrites(t *testing.T) {
	r := openTemp(t, Options{})
	h1 := write(t, r, "main", "one", Change{Path: "f", Data: []byte("1")})
	h2 := write(t, r, "main", "two", Change{Path: "f", Data: []byte("2")})
	h3 := write(t, r, "main", "three", Change{Path: "f", Data: []byte("3")})
	rng, err := r.FirstParentRange(h1, h3)
	if err != nil {
		t.Fatal(err)
	}
	if len(rng) != 2 || rng[0].Hash != h2 || rng[1].Hash != h3 {
		t.Fatalf("range = %v", rng)
	}
	other := openTemp(t, Options{})
	foreign := write(t, other, "main", "foreign", Change{Path: "g", Data: []byte("g")})
	_ = foreign
	if _, err := r.FirstParentRange(h3, h1); !errors.Is(err, ErrNotAncestor) {
		t.Fatalf("backwards range: %v", err)
	}
}

func TestMergeCommitKeepsBothParents(t *testing.T) {
	r := openTemp(t, Options{})
	write(t, r, "main", "base", Change{Path: "README", Data: []byte("r")})
	mainSnap, _ := r.Snapshot("main")
	prop, err := r.Commit("proposal/p-1", ZeroHash, mainSnap, CommitSpec{Message: "Propose p-1", Changes: []Change{{Path: "rules/proposals/p-1.md", Data: []byte("p")}}})
	if err != nil {
		t.Fatal(err)
	}
	merged, err := r.Update(context.Background(), "main", func(s *Snapshot) (*CommitSpec, error) {
		return &CommitSpec{Message: "Approve p-1", MergeParents: []Hash{prop}, Changes: []Change{{Path: "rules/active/a/r-1.md", Data: []byte("rule")}}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := gitCLI(t, r.Path(), "log", "--merges", "--format=%s", "main"); got != "Approve p-1" {
		t.Fatalf("merges = %q", got)
	}
	if ok, _ := r.IsAncestor(prop, merged); !ok {
		t.Fatal("proposal is not an ancestor of the merge")
	}
	gitCLI(t, r.Path(), "fsck", "--strict", "--no-dangling")
}

func TestPushAndFetchWithABareRemote(t *testing.T) {
	ctx := context.Background()
	r := openTemp(t, Options{})
	remoteDir := filepath.Join(t.TempDir(), "remote.git")
	gitCLI(t, filepath.Dir(remoteDir), "init", "-q", "--bare", "-b", "main", remoteDir)
	if err := r.AddRemote("origin", remoteDir); err != nil {
		t.Fatal(err)
	}
	h := write(t, r, "main", "one", Change{Path: "f", Data: []byte("1")})
	if err := r.SetBranch("proposal/p-1", ZeroHash, h); err != nil {
		t.Fatal(err)
	}
	if err := r.Push(ctx, "origin", Auth{}, PushSpec{Branch: "main"}, PushSpec{Branch: "proposal/p-1"}); err != nil {
		t.Fatal(err)
	}
	if got := gitCLI(t, remoteDir, "rev-parse", "proposal/p-1"); got != h.String() {
		t.Fatalf("remote proposal at %s", got)
	}

	// A curator commits on the remote's main.
	work := filepath.Join(t.TempDir(), "w")
	gitCLI(t, filepath.Dir(work), "clone", "-q", remoteDir, work)
	os.WriteFile(filepath.Join(work, "g"), []byte("g"), 0o644)
	gitCLI(t, work, "add", ".")
	gitCLI(t, work, "commit", "-q", "-m", "curator change")
	gitCLI(t, work, "push", "-q", "origin", "main", ":proposal/p-1")

	changed, err := r.Fetch(ctx, "origin", Auth{})
	if err != nil || !changed {
		t.Fatalf("Fetch = %v, %v", changed, err)
	}
	branches, err := r.RemoteBranches("origin", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(branches) != 1 || branches[0].Name != "main" {
		t.Fatalf("remote branches after prune = %+v", branches)
	}
	s, err := r.SnapshotAt(branches[0].Tip)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := s.ReadFile("g"); err != nil || string(b) != "g" {
		t.Fatalf("fetched file = %q, %v", b, err)
	}
	// Our main is now behind: a non-fast-forward push is ErrRefChanged.
	write(t, r, "main", "diverge", Change{Path: "f", Data: []byte("2")})
	if err := r.Push(ctx, "origin", Auth{}, PushSpec{Branch: "main"}); !errors.Is(err, ErrRefChanged) {
		t.Fatalf("non-fast-forward push: %v", err)
	}
	if changed, err := r.Fetch(ctx, "origin", Auth{}); err != nil || changed {
		t.Fatalf("second Fetch = %v, %v", changed, err)
	}
}

func TestParseTrailers(t *testing.T) {
	tests := []struct {
		msg  string
		want int
	}{
		{"subject\n\nApproved-by: a\nRejected-by: b\n", 2},
		{"subject only", 0},
		{"subject\n\nbody that is prose\n", 0},
		{"subject\n\nbody\n\nFeedback-Ids: d1 d2\n", 1},
		{"subject\n\nKey: v\nnot a trailer\n", 0},
	}
	for _, tt := range tests {
		if got := ParseTrailers(tt.msg); len(got) != tt.want {
			t.Errorf("ParseTrailers(%q) = %v, want %d", tt.msg, got, tt.want)
		}
	}
}

func TestRedactHidesURLCredentials(t *testing.T) {
	got := redact(errors.New(`unable to access 'https://user:s3cret@git.example.com/r.git': 403`))
	if strings.Contains(got, "s3cret") || !strings.Contains(got, "https://***@git.example.com") {
		t.Fatalf("redact = %q", got)
	}
}

func TestGitLessMatchesGitsTreeOrder(t *testing.T) {
	// Tree entry names never contain "/" and are never empty.
	names := []string{"a", "a-b", "a.b", "a0", "ab", "b", "a.", "zz", "a_b", "a.b.c", "a0/"[:2]}
	var entries []treeEntry
	for _, n := range names {
		entries = append(entries, treeEntry{name: n, mode: filemode.Regular}, treeEntry{name: n, mode: filemode.Dir})
	}
	for _, x := range entries {
		for _, y := range entries {
			if got, want := gitLess(x, y), gitSortKey(x) < gitSortKey(y); got != want {
				t.Errorf("gitLess(%q dir=%v, %q dir=%v) = %v, want %v", x.name, x.isDir(), y.name, y.isDir(), got, want)
			}
		}
	}
}

func TestBranchListingsIgnoreLockFilesAndIncludePackedRefs(t *testing.T) {
	r := openTemp(t, Options{})
	h := write(t, r, "main", "one", Change{Path: "f", Data: []byte("1")})
	for _, b := range []string{"proposal/p-1", "proposal/p-2"} {
		if err := r.SetBranch(b, ZeroHash, h); err != nil {
			t.Fatal(err)
		}
	}
	gitCLI(t, r.Path(), "pack-refs", "--all")
	if err := r.SetBranch("proposal/p-3", ZeroHash, h); err != nil {
		t.Fatal(err)
	}
	// Another writer holds the lock of a ref it is about to create.
	if err := os.WriteFile(filepath.Join(r.Path(), "refs", "heads", "proposal", "p-4.lock"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := r.Branches("proposal/")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, b := range got {
		names = append(names, b.Name)
		if b.Tip != h {
			t.Fatalf("%s at %s", b.Name, b.Tip)
		}
	}
	if strings.Join(names, ",") != "proposal/p-1,proposal/p-2,proposal/p-3" {
		t.Fatalf("branches = %v", names)
	}
}
