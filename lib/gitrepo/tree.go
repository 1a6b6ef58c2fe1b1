package gitrepo

import (
	"container/list"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"unsafe"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// treeEntry is one entry of a decoded tree.
type treeEntry struct {
	name string
	mode filemode.FileMode
	hash Hash
}

func (e treeEntry) isDir() bool { return e.mode == filemode.Dir }

// treeCache keeps decoded trees by hash. Trees are immutable, so entries
// never go stale; the cache is LRU, bounded in trees and in bytes: a
// large directory is rewritten by every commit that changes a file in
// it, and at 100,000 decisions a count bound alone let the versions of
// large directories hold hundreds of MiB.
type treeCache struct {
	mu       sync.Mutex
	max      int
	maxBytes int
	bytes    int
	ll       *list.List
	items    map[Hash]*list.Element
}

type cachedTree struct {
	hash    Hash
	entries []treeEntry
	size    int
}

func newTreeCache(max, maxBytes int) *treeCache {
	return &treeCache{max: max, maxBytes: maxBytes, ll: list.New(), items: make(map[Hash]*list.Element)}
}

// treeSize estimates the memory a decoded tree holds.
func treeSize(entries []treeEntry) int {
	n := 64 + cap(entries)*int(unsafe.Sizeof(treeEntry{}))
	for _, e := range entries {
		n += len(e.name)
	}
	return n
}

func (c *treeCache) get(h Hash) ([]treeEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[h]; ok {
		c.ll.MoveToFront(el)
		return el.Value.(*cachedTree).entries, true
	}
	return nil, false
}

func (c *treeCache) put(h Hash, entries []treeEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[h]; ok {
		c.ll.MoveToFront(el)
		return
	}
	t := &cachedTree{hash: h, entries: entries, size: treeSize(entries)}
	c.items[h] = c.ll.PushFront(t)
	c.bytes += t.size
	for c.ll.Len() > 1 && (c.ll.Len() > c.max || c.bytes > c.maxBytes) {
		old := c.ll.Back()
		c.ll.Remove(old)
		ot := old.Value.(*cachedTree)
		delete(c.items, ot.hash)
		c.bytes -= ot.size
	}
}

// emptyTree is the hash git gives the tree with no entries.
var emptyTree = plumbing.NewHash("4b825dc642cb6eb9a060e54bf8d69288fbee4904")

// treeEntries returns the entries of tree h, sorted as git sorts them.
// The caller must not modify the slice.
func (r *Repo) treeEntries(h Hash) ([]treeEntry, error) {
	if h.IsZero() || h == emptyTree {
		return nil, nil
	}
	if e, ok := r.trees.get(h); ok {
		return e, nil
	}
	r.mu.Lock()
	o, err := r.object(plumbing.TreeObject, h)
	var t *object.Tree
	if err == nil {
		t, err = object.DecodeTree(r.st, o)
	}
	r.mu.Unlock()
	if err != nil {
		return nil, err
	}
	entries := make([]treeEntry, len(t.Entries))
	for i, e := range t.Entries {
		entries[i] = treeEntry{name: e.Name, mode: e.Mode, hash: e.Hash}
	}
	r.trees.put(h, entries)
	return entries, nil
}

func findEntry(entries []treeEntry, name string) (treeEntry, bool) {
	// Entries are in git order, which differs from plain name order only
	// around '/' for directories, so a linear scan is the safe choice for
	// small trees and a search over both orders for large ones.
	if len(entries) < 32 {
		for _, e := range entries {
			if e.name == name {
				return e, true
			}
		}
		return treeEntry{}, false
	}
	for _, key := range []string{name, name + "/"} {
		i := sort.Search(len(entries), func(i int) bool { return gitSortKey(entries[i]) >= key })
		if i < len(entries) && entries[i].name == name {
			return entries[i], true
		}
	}
	return treeEntry{}, false
}

// gitLess orders tree entries as git does, like gitSortKey but without
// allocating.
func gitLess(a, b treeEntry) bool {
	n := min(len(a.name), len(b.name))
	if c := strings.Compare(a.name[:n], b.name[:n]); c != 0 {
		return c < 0
	}
	// One name is a prefix of the other: compare the next byte, where a
	// directory's name continues with '/'.
	next := func(e treeEntry) int {
		switch {
		case len(e.name) > n:
			return int(e.name[n])
		case e.isDir():
			return '/'
		}
		return -1
	}
	return next(a) < next(b)
}

// gitSortKey orders tree entries the way git does: directories compare as
// if their name ended in '/'.
func gitSortKey(e treeEntry) string {
	if e.isDir() {
		return e.name + "/"
	}
	return e.name
}

// ValidPath reports whether p can be stored as a file path: relative,
// clean, no empty, ".", ".." or ".git" components.
func ValidPath(p string) error {
	if p == "" || strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") || strings.ContainsAny(p, "\x00\\") {
		return fmt.Errorf("path %q: %w", p, ErrInvalidPath)
	}
	for _, part := range strings.Split(p, "/") {
		if part == "" || part == "." || part == ".." || strings.EqualFold(part, ".git") {
			return fmt.Errorf("path %q: %w", p, ErrInvalidPath)
		}
	}
	return nil
}

// lookup returns the entry at path p under tree root.
func (r *Repo) lookup(root Hash, p string) (treeEntry, error) {
	if p == "" {
		return treeEntry{name: "", mode: filemode.Dir, hash: root}, nil
	}
	cur := root
	parts := strings.Split(p, "/")
	for i, part := range parts {
		entries, err := r.treeEntries(cur)
		if err != nil {
			return treeEntry{}, err
		}
		e, ok := findEntry(entries, part)
		if !ok {
			return treeEntry{}, fmt.Errorf("%s: %w", p, ErrNotFound)
		}
		if i == len(parts)-1 {
			return e, nil
		}
		if !e.isDir() {
			return treeEntry{}, fmt.Errorf("%s: %w", p, ErrNotFound)
		}
		cur = e.hash
	}
	return treeEntry{}, fmt.Errorf("%s: %w", p, ErrNotFound)
}

// ReadBlob returns the content of a blob.
func (r *Repo) ReadBlob(h Hash) ([]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	obj, err := r.object(plumbing.BlobObject, h)
	if err != nil {
		return nil, err
	}
	rd, err := obj.Reader()
	if err != nil {
		return nil, fmt.Errorf("read blob %s: %w", h, err)
	}
	defer rd.Close()
	b, err := io.ReadAll(rd)
	if err != nil {
		return nil, fmt.Errorf("read blob %s: %w", h, err)
	}
	return b, nil
}

// Snapshot is the state of a branch at one commit. A snapshot of a branch
// that does not exist yet is empty.
type Snapshot struct {
	repo   *Repo
	Commit Hash
	Tree   Hash
}

// Snapshot returns the snapshot at a branch's tip; a missing branch gives
// an empty snapshot with a zero Commit.
func (r *Repo) Snapshot(branch string) (*Snapshot, error) {
	tip, err := r.Tip(branch)
	if errors.Is(err, ErrNotFound) {
		return &Snapshot{repo: r}, nil
	}
	if err != nil {
		return nil, err
	}
	return r.SnapshotAt(tip)
}

// SnapshotAt returns the snapshot at a commit.
func (r *Repo) SnapshotAt(commit Hash) (*Snapshot, error) {
	r.mu.Lock()
	c, err := r.commitObject(commit)
	r.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return &Snapshot{repo: r, Commit: commit, Tree: c.TreeHash}, nil
}

// ReadFile returns the content of the file at path p, or ErrNotFound.
func (s *Snapshot) ReadFile(p string) ([]byte, error) {
	e, err := s.repo.lookup(s.Tree, p)
	if err != nil {
		return nil, err
	}
	if e.isDir() {
		return nil, fmt.Errorf("%s is a directory: %w", p, ErrNotFound)
	}
	return s.repo.ReadBlob(e.hash)
}

// Stat returns the blob hash of the file at p, or ErrNotFound.
func (s *Snapshot) Stat(p string) (Hash, error) {
	e, err := s.repo.lookup(s.Tree, p)
	if err != nil {
		return ZeroHash, err
	}
	if e.isDir() {
		return ZeroHash, fmt.Errorf("%s is a directory: %w", p, ErrNotFound)
	}
	return e.hash, nil
}

// Exists reports whether a file exists at p.
func (s *Snapshot) Exists(p string) (bool, error) {
	_, err := s.Stat(p)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// Entry is a file or directory in a listing.
type Entry struct {
	Name  string
	Path  string
	IsDir bool
	Hash  Hash
}

// List returns the direct children of directory dir ("" for the root); a
// missing directory lists as empty.
func (s *Snapshot) List(dir string) ([]Entry, error) {
	e, err := s.repo.lookup(s.Tree, dir)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if !e.isDir() {
		return nil, nil
	}
	entries, err := s.repo.treeEntries(e.hash)
	if err != nil {
		return nil, err
	}
	out := make([]Entry, len(entries))
	for i, te := range entries {
		out[i] = Entry{Name: te.name, Path: joinPath(dir, te.name), IsDir: te.isDir(), Hash: te.hash}
	}
	return out, nil
}

// Walk calls fn for every file under dir, in git order.
func (s *Snapshot) Walk(dir string, fn func(path string, blob Hash) error) error {
	e, err := s.repo.lookup(s.Tree, dir)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if !e.isDir() {
		return fn(dir, e.hash)
	}
	return s.repo.walkTree(e.hash, dir, fn)
}

func (r *Repo) walkTree(tree Hash, prefix string, fn func(string, Hash) error) error {
	entries, err := r.treeEntries(tree)
	if err != nil {
		return err
	}
	for _, e := range entries {
		p := joinPath(prefix, e.name)
		if e.isDir() {
			if err := r.walkTree(e.hash, p, fn); err != nil {
				return err
			}
			continue
		}
		if err := fn(p, e.hash); err != nil {
			return err
		}
	}
	return nil
}

func joinPath(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// ChangeKind says what happened to a path between two snapshots.
type ChangeKind int

// The kinds of change Diff reports.
const (
	Added ChangeKind = iota + 1
	Modified
	Deleted
)

func (k ChangeKind) String() string {
	switch k {
	case Added:
		return "added"
	case Modified:
		return "modified"
	case Deleted:
		return "deleted"
	}
	return "unknown"
}

// PathChange is a file that differs between two trees.
type PathChange struct {
	Path string
	Kind ChangeKind
	// Blob is the new content's hash (the old one for Deleted).
	Blob Hash
}

// Diff lists the files that differ between two commits (from may be
// ZeroHash for "nothing"), under dir only when dir is not empty. Subtrees
// with equal hashes are skipped, so the cost follows the size of the
// change, not of the repository.
func (r *Repo) Diff(from, to Hash, dir string) ([]PathChange, error) {
	treeOf := func(c Hash) (Hash, error) {
		if c.IsZero() {
			return ZeroHash, nil
		}
		s, err := r.SnapshotAt(c)
		if err != nil {
			return ZeroHash, err
		}
		return s.Tree, nil
	}
	a, err := treeOf(from)
	if err != nil {
		return nil, err
	}
	b, err := treeOf(to)
	if err != nil {
		return nil, err
	}
	sub := func(tree Hash) (Hash, error) {
		if dir == "" || tree.IsZero() {
			return tree, nil
		}
		e, err := r.lookup(tree, dir)
		if errors.Is(err, ErrNotFound) {
			return ZeroHash, nil
		}
		if err != nil {
			return ZeroHash, err
		}
		if !e.isDir() {
			return ZeroHash, nil
		}
		return e.hash, nil
	}
	if a, err = sub(a); err != nil {
		return nil, err
	}
	if b, err = sub(b); err != nil {
		return nil, err
	}
	var out []PathChange
	err = r.diffTrees(a, b, dir, &out)
	return out, err
}

func (r *Repo) diffTrees(a, b Hash, prefix string, out *[]PathChange) error {
	if a == b {
		return nil
	}
	ea, err := r.treeEntries(a)
	if err != nil {
		return err
	}
	eb, err := r.treeEntries(b)
	if err != nil {
		return err
	}
	ma := make(map[string]treeEntry, len(ea))
	for _, e := range ea {
		ma[e.name] = e
	}
	seen := make(map[string]bool, len(eb))
	for _, nb := range eb {
		seen[nb.name] = true
		p := joinPath(prefix, nb.name)
		na, ok := ma[nb.name]
		switch {
		case ok && na.hash == nb.hash && na.mode == nb.mode:
		case nb.isDir():
			var old Hash
			if ok && na.isDir() {
				old = na.hash
			} else if ok {
				*out = append(*out, PathChange{Path: p, Kind: Deleted, Blob: na.hash})
			}
			if err := r.diffTrees(old, nb.hash, p, out); err != nil {
				return err
			}
		case ok && !na.isDir():
			*out = append(*out, PathChange{Path: p, Kind: Modified, Blob: nb.hash})
		default:
			if ok {
				if err := r.diffTrees(na.hash, ZeroHash, p, out); err != nil {
					return err
				}
			}
			*out = append(*out, PathChange{Path: p, Kind: Added, Blob: nb.hash})
		}
	}
	for _, na := range ea {
		if seen[na.name] {
			continue
		}
		p := joinPath(prefix, na.name)
		if na.isDir() {
			if err := r.diffTrees(na.hash, ZeroHash, p, out); err != nil {
				return err
			}
			continue
		}
		*out = append(*out, PathChange{Path: p, Kind: Deleted, Blob: na.hash})
	}
	return nil
}
