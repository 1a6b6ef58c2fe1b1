package gitrepo

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// debrisWriterEnv names the repository a re-executed test binary writes
// packs into until it is killed.
const debrisWriterEnv = "GITREPO_DEBRIS_WRITER"

// TestDebrisWriterProcess is the child of TestKilledPackWriteLeavesNoDebris:
// run without debrisWriterEnv it does nothing.
func TestDebrisWriterProcess(t *testing.T) {
	dir := os.Getenv(debrisWriterEnv)
	if dir == "" {
		return
	}
	r, err := Open(dir, Options{NoFsync: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	for i := 0; ; i++ {
		changes := make([]Change, 4000)
		for j := range changes {
			changes[j] = Change{Path: fmt.Sprintf("c%d/f%d", i, j), Data: []byte(strings.Repeat(fmt.Sprint(i, j), 64))}
		}
		if _, err := r.Update(context.Background(), "main", func(*Snapshot) (*CommitSpec, error) {
			return &CommitSpec{Message: fmt.Sprint("batch ", i), Changes: changes}, nil
		}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
}

// tempFiles lists the tmp_* files of the object store.
func tempFiles(t *testing.T, repo string) []string {
	t.Helper()
	var out []string
	for _, dir := range debrisDirs {
		matches, err := filepath.Glob(filepath.Join(repo, dir, "tmp_*"))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, matches...)
	}
	return out
}

// writing reports whether a temporary pack has data in it.
func writing(t *testing.T, repo string) bool {
	for _, f := range tempFiles(t, repo) {
		if info, err := os.Stat(f); err == nil && info.Size() > 0 {
			return true
		}
	}
	return false
}

// killMidPackWrite runs a writer process and kills it with SIGKILL while
// a temporary pack is on disk; it returns the temporary files left.
func killMidPackWrite(t *testing.T, repo string) []string {
	t.Helper()
	for attempt := 0; attempt < 20; attempt++ {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestDebrisWriterProcess$")
		cmd.Env = append(os.Environ(), debrisWriterEnv+"="+repo)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for !writing(t, repo) && time.Now().Before(deadline) {
			time.Sleep(200 * time.Microsecond)
		}
		cmd.Process.Kill()
		cmd.Wait()
		if writing(t, repo) {
			return tempFiles(t, repo)
		}
	}
	t.Fatal("the writer was never killed with a temporary pack on disk")
	return nil
}

func TestKilledPackWriteLeavesNoDebris(t *testing.T) {
	repo := filepath.Join(t.TempDir(), "repo.git")
	r, err := Open(repo, Options{})
	if err != nil {
		t.Fatal(err)
	}
	write(t, r, "main", "first", Change{Path: "a", Data: []byte("a")})
	r.Close()

	left := killMidPackWrite(t, repo)
	// Opened at once, the files are as young as a live write's: kept.
	fresh, err := Open(repo, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := tempFiles(t, repo); len(got) != len(left) {
		t.Fatalf("a fresh temporary file was removed: %v left of %v", got, left)
	}
	fresh.Close()

	// Opened once they are older than any live write: gone, and counted.
	later := func() time.Time { return time.Now().Add(DefaultDebrisAge + time.Minute) }
	r, err = Open(repo, Options{Now: later})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got := tempFiles(t, repo); len(got) > 0 {
		t.Fatalf("open left the debris of a killed write: %v", got)
	}
	st := stats(t, r)
	if st.DebrisRemoved != uint64(len(left)) || st.DebrisBytesRemoved == 0 {
		t.Fatalf("stats = %+v, want %d files removed", st, len(left))
	}
	gitCLI(t, repo, "fsck", "--strict", "--no-dangling")
	if b, err := mustSnapshot(t, r).ReadFile("a"); err != nil || string(b) != "a" {
		t.Fatalf("a = %q, %v", b, err)
	}
}

func TestMaintainRemovesDebrisButNotALiveWrite(t *testing.T) {
	now := time.Now()
	r := openTemp(t, Options{NoFsync: true, Now: func() time.Time { return now }})
	write(t, r, "main", "first", Change{Path: "a", Data: []byte("a")})
	old := filepath.Join(r.Path(), "objects", "pack", "tmp_pack_123")
	idx := filepath.Join(r.Path(), "objects", "pack", "tmp_idx_456")
	live := filepath.Join(r.Path(), "objects", "pack", "tmp_pack_789")
	for _, f := range []string{old, idx, live} {
		if err := os.WriteFile(f, []byte("PACK partial"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stale := now.Add(-DefaultDebrisAge - time.Second)
	for _, f := range []string{old, idx} {
		if err := os.Chtimes(f, stale, stale); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.Maintain(); err != nil {
		t.Fatal(err)
	}
	if got := tempFiles(t, r.Path()); len(got) != 1 || got[0] != live {
		t.Fatalf("left %v, want only the live write %s", got, live)
	}
	if st := stats(t, r); st.DebrisRemoved != 2 {
		t.Fatalf("stats = %+v, want 2 removed", st)
	}
}

func mustSnapshot(t *testing.T, r *Repo) *Snapshot {
	t.Helper()
	s, err := r.Snapshot("main")
	if err != nil {
		t.Fatal(err)
	}
	return s
}
