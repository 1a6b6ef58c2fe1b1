package gitrepo

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// readAll checks that every file written by writeFiles reads back.
func readAll(t *testing.T, r *Repo, branch string, n int) {
	t.Helper()
	s, err := r.Snapshot(branch)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if b, err := s.ReadFile(fmt.Sprintf("f/%d", i)); err != nil || string(b) != fmt.Sprint(i) {
			t.Fatalf("f/%d = %q, %v", i, b, err)
		}
	}
}

func writeFiles(t *testing.T, r *Repo, branch string, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		write(t, r, branch, fmt.Sprint("c", i), Change{Path: fmt.Sprintf("f/%d", i), Data: []byte(fmt.Sprint(i))})
	}
}

func stats(t *testing.T, r *Repo) ObjectStats {
	t.Helper()
	st, err := r.Stats()
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestMaintainRollsManyPacksIntoOne(t *testing.T) {
	r := openTemp(t, Options{PackThreshold: 1, MaxPacks: 8, NoFsync: true})
	writeFiles(t, r, "main", 0, 20)
	if st := stats(t, r); st.Packs != 20 || st.Loose != 0 {
		t.Fatalf("before: %+v", st)
	}
	done, err := r.Maintain()
	if err != nil || !done {
		t.Fatalf("Maintain = %v, %v", done, err)
	}
	if st := stats(t, r); st.Packs != 1 || st.Loose != 0 {
		t.Fatalf("after: %+v", st)
	}
	readAll(t, r, "main", 20)
	gitCLI(t, r.Path(), "fsck", "--strict", "--no-dangling")
	if done, err := r.Maintain(); err != nil || done {
		t.Fatalf("second Maintain = %v, %v: nothing should be left to do", done, err)
	}
}

func TestMaintainPacksLooseObjects(t *testing.T) {
	// Single decisions are committed as loose objects: 300 of them left
	// over 2,000 files behind before maintenance existed.
	r := openTemp(t, Options{PackThreshold: 1 << 20, MaxLoose: 100})
	writeFiles(t, r, "main", 0, 300)
	before := stats(t, r)
	if before.Loose < 300 || before.Packs != 0 {
		t.Fatalf("before: %+v", before)
	}
	if done, err := r.Maintain(); err != nil || !done {
		t.Fatalf("Maintain = %v, %v", done, err)
	}
	if st := stats(t, r); st.Loose != 0 || st.Packs != 1 {
		t.Fatalf("after: %+v (before %+v)", st, before)
	}
	readAll(t, r, "main", 300)
	gitCLI(t, r.Path(), "fsck", "--strict", "--no-dangling")
	// The repository stays writable and readable by a fresh Open.
	writeFiles(t, r, "main", 300, 310)
	r2, err := Open(r.Path(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	readAll(t, r2, "main", 310)
}

func TestMaintainLeavesLargePacksAlone(t *testing.T) {
	r := openTemp(t, Options{PackThreshold: 1, MaxPacks: 4, NoFsync: true})
	// One large pack…
	var big []Change
	for i := range 2000 {
		big = append(big, Change{Path: fmt.Sprintf("f/%d", i), Data: []byte(fmt.Sprint(i))})
	}
	write(t, r, "main", "big", big...)
	packsOf := func() []string {
		m, _ := filepath.Glob(filepath.Join(r.Path(), "objects", "pack", "*.pack"))
		return m
	}
	large := packsOf()
	// …and many small ones after it, in another directory so that each
	// commit's trees stay small too.
	for i := range 10 {
		write(t, r, "main", fmt.Sprint("g", i), Change{Path: fmt.Sprintf("g/%d", i), Data: []byte(fmt.Sprint(i))})
	}
	if done, err := r.Maintain(); err != nil || !done {
		t.Fatalf("Maintain = %v, %v", done, err)
	}
	after := packsOf()
	if len(after) != 2 || !slices.Contains(after, large[0]) {
		t.Fatalf("packs after = %v; want the large pack %v kept and the small ones rolled into one", after, large)
	}
	readAll(t, r, "main", 2000)
	gitCLI(t, r.Path(), "fsck", "--strict", "--no-dangling")
}

func TestMaintainLetsCommitsThrough(t *testing.T) {
	r := openTemp(t, Options{PackThreshold: 1 << 20, MaxLoose: 10, NoFsync: true})
	writeFiles(t, r, "main", 0, 200)
	// Between chunks a commit must get the lock: if Maintain held it for
	// the whole copy, the hook would wait forever.
	next := 200
	var mu sync.Mutex
	testHookChunk = func() {
		mu.Lock()
		defer mu.Unlock()
		done := make(chan struct{})
		go func() {
			defer close(done)
			writeFiles(t, r, "main", next, next+1)
		}()
		select {
		case <-done:
			next++
		case <-time.After(10 * time.Second):
			t.Error("a commit waited for maintenance")
		}
	}
	t.Cleanup(func() { testHookChunk = nil })
	if done, err := r.Maintain(); err != nil || !done {
		t.Fatalf("Maintain = %v, %v", done, err)
	}
	testHookChunk = nil
	if next == 200 {
		t.Fatal("the hook never ran")
	}
	readAll(t, r, "main", next)
	gitCLI(t, r.Path(), "fsck", "--strict", "--no-dangling")
	// The commits made during maintenance are loose; the next round packs them.
	if st := stats(t, r); st.Loose == 0 {
		t.Fatalf("after: %+v", st)
	}
	if _, err := r.Maintain(); err != nil {
		t.Fatal(err)
	}
	readAll(t, r, "main", next)
}

func TestMaintainIgnoresPacksBeingWritten(t *testing.T) {
	r := openTemp(t, Options{PackThreshold: 1, MaxPacks: 1, NoFsync: true})
	writeFiles(t, r, "main", 0, 3)
	// A pack whose index is not there yet is still being written.
	partial := filepath.Join(r.Path(), "objects", "pack", "pack-0123456789012345678901234567890123456789.pack")
	if err := os.WriteFile(partial, []byte("PACK"), 0o444); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Maintain(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(partial); err != nil {
		t.Fatalf("a pack being written was touched: %v", err)
	}
	readAll(t, r, "main", 3)
}

func TestMaintainRewritesDeltasFromGitGC(t *testing.T) {
	r := openTemp(t, Options{PackThreshold: 1, MaxPacks: 2, NoFsync: true})
	// Similar blobs, so that git's repack stores most as deltas.
	body := strings.Repeat("a line that repeats in every version of the file\n", 40)
	for i := range 30 {
		write(t, r, "main", fmt.Sprint("v", i), Change{Path: "doc.txt", Data: []byte(body + fmt.Sprint(i))})
	}
	gitCLI(t, r.Path(), "repack", "-a", "-d", "-f", "--window=50")
	if out := gitCLI(t, r.Path(), "verify-pack", "-v", packsGlob(t, r)[0]); !strings.Contains(out, "chain length") {
		t.Fatalf("git stored no deltas:\n%s", out)
	}
	// Reopen, as after a git gc run while preceptd was stopped.
	r.Close()
	r, err := Open(r.Path(), Options{PackThreshold: 1, MaxPacks: 2, NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// Newer packs larger than git's, so that git's is rolled up too.
	rnd := rand.New(rand.NewPCG(1, 2))
	for i := range 3 {
		noise := make([]byte, 10<<10)
		for j := range noise {
			noise[j] = byte(rnd.Uint32())
		}
		write(t, r, "main", fmt.Sprint("noise", i), Change{Path: fmt.Sprintf("f/%d", i), Data: []byte(fmt.Sprint(i))}, Change{Path: fmt.Sprintf("noise/%d", i), Data: noise})
	}
	if done, err := r.Maintain(); err != nil || !done {
		t.Fatalf("Maintain = %v, %v", done, err)
	}
	if st := stats(t, r); st.Packs != 1 {
		t.Fatalf("after: %+v", st)
	}
	gitCLI(t, r.Path(), "fsck", "--strict", "--no-dangling")
	readAll(t, r, "main", 3)
	s, _ := r.Snapshot("main")
	if b, err := s.ReadFile("doc.txt"); err != nil || string(b) != body+"29" {
		t.Fatalf("doc.txt = %.40q…, %v", b, err)
	}
}

func packsGlob(t *testing.T, r *Repo) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(r.Path(), "objects", "pack", "*.idx"))
	if err != nil || len(m) == 0 {
		t.Fatalf("no packs: %v", err)
	}
	return m
}

func TestMaintainBringsThePackCountDownWhileSingleDecisionsArrive(t *testing.T) {
	// Batches become packs and single decisions loose objects; a round
	// that only packed the loose objects would add a pack every time.
	r := openTemp(t, Options{PackThreshold: 8, MaxPacks: 4, MaxLoose: 1 << 20, NoFsync: true})
	for i := range 20 {
		var batch []Change
		for j := range 10 {
			batch = append(batch, Change{Path: fmt.Sprintf("b/%d/%d", i, j), Data: []byte(fmt.Sprint(i, j))})
		}
		write(t, r, "main", fmt.Sprint("batch", i), batch...)
	}
	if st := stats(t, r); st.Packs != 20 {
		t.Fatalf("before: %+v", st)
	}
	for i := range 6 {
		write(t, r, "main", fmt.Sprint("single", i), Change{Path: fmt.Sprintf("f/%d", i), Data: []byte(fmt.Sprint(i))})
		if _, err := r.Maintain(); err != nil {
			t.Fatal(err)
		}
		if st := stats(t, r); st.Packs > 4 {
			t.Fatalf("after round %d: %+v: the pack count did not come down", i, st)
		}
	}
	readAll(t, r, "main", 6)
	gitCLI(t, r.Path(), "fsck", "--strict", "--no-dangling")
}

func TestAnotherProcessReadsOnAfterMaintenance(t *testing.T) {
	// Replicas share the data directory: one's maintenance deletes packs
	// the other has indexed.
	r := openTemp(t, Options{PackThreshold: 1, MaxPacks: 2, NoFsync: true})
	writeFiles(t, r, "main", 0, 10)
	other, err := Open(r.Path(), Options{PackThreshold: 1, MaxPacks: 2, NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	// other has indexed the packs at Open but opened none of them.
	writeFiles(t, r, "main", 10, 12)
	if done, err := r.Maintain(); err != nil || !done {
		t.Fatalf("Maintain = %v, %v", done, err)
	}
	readAll(t, other, "main", 12)
	writeFiles(t, other, "main", 12, 14)
	readAll(t, r, "main", 14)
	gitCLI(t, r.Path(), "fsck", "--strict", "--no-dangling")
}

func TestMaintainRefusesToCopyADamagedObject(t *testing.T) {
	r := openTemp(t, Options{PackThreshold: 1, MaxPacks: 1, NoFsync: true})
	writeFiles(t, r, "main", 0, 3)
	packs, _ := filepath.Glob(filepath.Join(r.Path(), "objects", "pack", "*.pack"))
	b, err := os.ReadFile(packs[0])
	if err != nil {
		t.Fatal(err)
	}
	b[20] ^= 0xff // inside the first entry
	os.Chmod(packs[0], 0o644)
	if err := os.WriteFile(packs[0], b, 0o444); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Maintain(); err == nil || !strings.Contains(err.Error(), "checksum") {
		t.Fatalf("Maintain over a damaged pack = %v", err)
	}
	for _, p := range packs {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("a pack was deleted after a failed round: %v", err)
		}
	}
}

// Ancestry is read through the repository's own object lookup: commits
// another handle wrote and packed after this one indexed its storage are
// found, not "object not found" from go-git's stale pack list.
func TestAncestryAcrossPacksAnotherHandleWrote(t *testing.T) {
	r := openTemp(t, Options{PackThreshold: 1, MaxPacks: 2, NoFsync: true})
	first := write(t, r, "main", "first", Change{Path: "a", Data: []byte("1")})
	other, err := Open(r.Path(), Options{PackThreshold: 1, MaxPacks: 2, NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	writeFiles(t, r, "main", 0, 3)
	second := write(t, r, "main", "second", Change{Path: "c", Data: []byte("3")})
	// other walks the history as it is packed now.
	if ok, err := other.IsAncestor(first, second); err != nil || !ok {
		t.Fatalf("IsAncestor(first, second) = %v, %v", ok, err)
	}
	writeFiles(t, r, "main", 3, 12)
	if done, err := r.Maintain(); err != nil || !done {
		t.Fatalf("Maintain = %v, %v", done, err)
	}
	last := write(t, r, "main", "last", Change{Path: "b", Data: []byte("2")})
	if ok, err := other.IsAncestor(first, last); err != nil || !ok {
		t.Fatalf("IsAncestor(first, last) from the other handle = %v, %v", ok, err)
	}
	if ok, err := other.IsAncestor(last, first); err != nil || ok {
		t.Fatalf("IsAncestor(last, first) = %v, %v", ok, err)
	}
}
