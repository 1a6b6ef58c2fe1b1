package gitrepo

import (
	"fmt"
	"slices"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// treeEditor rewrites a commit's tree: it reads the trees along changed
// paths from the repository and adds the rewritten trees and the new
// blobs to objs. Only the trees along changed paths are rewritten.
type treeEditor struct {
	r    *Repo
	objs *objectSet
}

// editNode is a directory being rewritten.
type editNode struct {
	entries  map[string]treeEntry
	children map[string]*editNode
}

// load reads a directory to rewrite; the zero hash is an empty one.
func (t *treeEditor) load(tree Hash) (*editNode, error) {
	entries, err := t.r.treeEntries(tree)
	if err != nil {
		return nil, err
	}
	n := &editNode{entries: make(map[string]treeEntry, len(entries)+1), children: map[string]*editNode{}}
	for _, e := range entries {
		n.entries[e.name] = e
	}
	return n, nil
}

// apply returns the hash of base with changes applied.
func (t *treeEditor) apply(base Hash, changes []Change) (Hash, error) {
	root, err := t.load(base)
	if err != nil {
		return ZeroHash, err
	}
	for _, ch := range changes {
		if err := ValidPath(ch.Path); err != nil {
			return ZeroHash, err
		}
		parts := strings.Split(ch.Path, "/")
		node := root
		for _, dir := range parts[:len(parts)-1] {
			child, ok := node.children[dir]
			if !ok {
				e, exists := node.entries[dir]
				var sub Hash
				if exists {
					if !e.isDir() {
						return ZeroHash, fmt.Errorf("path %s: file %s is in the way: %w", ch.Path, dir, ErrInvalidPath)
					}
					sub = e.hash
				}
				if child, err = t.load(sub); err != nil {
					return ZeroHash, err
				}
				node.children[dir] = child
			}
			node = child
		}
		name := parts[len(parts)-1]
		if e, ok := node.entries[name]; ok && e.isDir() || node.children[name] != nil {
			return ZeroHash, fmt.Errorf("path %s is a directory: %w", ch.Path, ErrInvalidPath)
		}
		if ch.Delete {
			delete(node.entries, name)
			continue
		}
		h := ch.Blob
		if h.IsZero() {
			h = t.objs.blob(ch.Data)
		}
		node.entries[name] = treeEntry{name: name, mode: filemode.Regular, hash: h}
	}
	h, _, err := t.write(root, true)
	return h, err
}

// write encodes a rewritten directory and its rewritten children; an
// empty directory other than the root disappears, as in git.
func (t *treeEditor) write(n *editNode, isRoot bool) (Hash, bool, error) {
	for name, child := range n.children {
		h, empty, err := t.write(child, false)
		if err != nil {
			return ZeroHash, false, err
		}
		if empty {
			delete(n.entries, name)
		} else {
			n.entries[name] = treeEntry{name: name, mode: filemode.Dir, hash: h}
		}
	}
	if len(n.entries) == 0 && !isRoot {
		return ZeroHash, true, nil
	}
	entries := make([]treeEntry, 0, len(n.entries))
	for _, e := range n.entries {
		entries = append(entries, e)
	}
	slices.SortFunc(entries, func(a, b treeEntry) int {
		if gitLess(a, b) {
			return -1
		}
		return 1
	})
	tree := &object.Tree{Entries: make([]object.TreeEntry, len(entries))}
	for i, e := range entries {
		tree.Entries[i] = object.TreeEntry{Name: e.name, Mode: e.mode, Hash: e.hash}
	}
	obj := t.objs.st.NewEncodedObject()
	if err := tree.Encode(obj); err != nil {
		return ZeroHash, false, fmt.Errorf("encode tree: %w", err)
	}
	h := t.objs.add(obj)
	t.r.trees.put(h, entries)
	return h, false, nil
}
