package gitrepo

import (
	"errors"
	"math/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/idxfile"
)

// writeTestIndex writes a version-2 index of count random names, with
// go-git's writer and encoder, some offsets past 2 GiB so the 64-bit
// table is used; it returns the file and the offsets by name.
func writeTestIndex(t *testing.T, count int, rng *rand.Rand) (string, map[plumbing.Hash]int64) {
	t.Helper()
	w := new(idxfile.Writer)
	if err := w.OnHeader(uint32(count)); err != nil {
		t.Fatal(err)
	}
	want := make(map[plumbing.Hash]int64, count)
	for i := range count {
		var h plumbing.Hash
		rng.Read(h[:])
		off := int64(12 + 100*i)
		if i%7 == 0 {
			off += 3 << 30
		}
		want[h] = off
		w.Add(h, uint64(off), uint32(i))
	}
	if err := w.OnFooter(plumbing.Hash{1}); err != nil {
		t.Fatal(err)
	}
	mem, err := w.Index()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "pack-test.idx")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := idxfile.NewEncoder(f).Encode(mem); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path, want
}

func TestAFileIndexFindsWhatTheDecodedIndexFinds(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for _, count := range []int{inMemoryEntries + 1, 3*inMemoryEntries + 37} {
		path, want := writeTestIndex(t, count, rng)
		idx, err := openPackIndex(path)
		if err != nil {
			t.Fatal(err)
		}
		fi, ok := idx.(*fileIndex)
		if !ok {
			t.Fatalf("%d entries: index decoded into memory, want read from its file", count)
		}
		for h, off := range want {
			got, err := fi.FindOffset(h)
			if err != nil || got != off {
				t.Fatalf("%d entries: %s at %d, %v; want %d", count, h, got, err, off)
			}
		}
		for range 20000 {
			var h plumbing.Hash
			rng.Read(h[:])
			if _, ok := want[h]; ok {
				continue
			}
			if _, err := fi.FindOffset(h); !errors.Is(err, plumbing.ErrObjectNotFound) {
				t.Fatalf("missing %s: %v", h, err)
			}
		}
		for _, h := range []plumbing.Hash{{}, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}} {
			if _, err := fi.FindOffset(h); !errors.Is(err, plumbing.ErrObjectNotFound) {
				t.Fatalf("missing %s: %v", h, err)
			}
		}
		fi.close()
	}
}

func TestASmallIndexIsDecodedAndABrokenOneRefused(t *testing.T) {
	path, want := writeTestIndex(t, 100, rand.New(rand.NewSource(2)))
	idx, err := openPackIndex(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := idx.(*idxfile.MemoryIndex); !ok {
		t.Fatalf("a 100-entry index is %T, want decoded", idx)
	}
	for h, off := range want {
		if got, err := idx.FindOffset(h); err != nil || got != off {
			t.Fatalf("%s at %d, %v; want %d", h, got, err, off)
		}
	}
	bad := filepath.Join(t.TempDir(), "bad.idx")
	os.WriteFile(bad, []byte("PACK index that is not one, long enough to hold a header and more"), 0o644)
	if _, err := openPackIndex(bad); err == nil {
		t.Fatal("a file that is not an index opened")
	}
}
