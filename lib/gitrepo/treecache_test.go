package gitrepo

import (
	"fmt"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
)

// The decoded-tree cache holds at most its bound in bytes, whatever the
// count bound allows, and keeps the trees used last.
func TestTreeCacheStaysWithinItsByteBound(t *testing.T) {
	const maxBytes = 20_000
	c := newTreeCache(1000, maxBytes)
	tree := func(i int) (Hash, []treeEntry) {
		entries := make([]treeEntry, 50)
		for j := range entries {
			entries[j] = treeEntry{name: fmt.Sprintf("decision-%05d-%02d.json", i, j)}
		}
		return plumbing.ComputeHash(plumbing.TreeObject, []byte(fmt.Sprint(i))), entries
	}
	for i := range 100 {
		h, entries := tree(i)
		c.put(h, entries)
		if c.bytes > maxBytes {
			t.Fatalf("after %d trees the cache holds %d bytes, more than %d", i+1, c.bytes, maxBytes)
		}
	}
	if n := c.ll.Len(); n < 2 || n > 10 {
		t.Fatalf("the cache holds %d trees of about 3 kB each under %d bytes", n, maxBytes)
	}
	last, _ := tree(99)
	if _, ok := c.get(last); !ok {
		t.Error("the tree put last was evicted")
	}
	first, _ := tree(0)
	if _, ok := c.get(first); ok {
		t.Error("the tree put first is still held")
	}
	// One tree larger than the bound is still kept until the next one.
	big := make([]treeEntry, 1000)
	h := plumbing.ComputeHash(plumbing.TreeObject, []byte("big"))
	c.put(h, big)
	if _, ok := c.get(h); !ok || c.ll.Len() != 1 {
		t.Errorf("a tree over the bound: held %v, %d trees", ok, c.ll.Len())
	}
}
