package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"github.com/precept-dev/precept/lib/durable"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/memory"
)

// Change is one file written or deleted by a commit.
type Change struct {
	Path string
	Data []byte
	// Blob, when set, is content the repository holds already (a file
	// of another branch): it is used instead of Data, and nothing is
	// written for it.
	Blob   Hash
	Delete bool
}

// Trailer is a "Key: value" line at the end of a commit message, e.g.
// Approved-by. Trailers are how precept's history doubles as an audit log.
type Trailer struct {
	Key   string
	Value string
}

// CommitSpec describes a commit to make on top of a snapshot.
type CommitSpec struct {
	// Message is the subject line, optionally followed by a blank line and
	// a body. Trailers are appended.
	Message  string
	Trailers []Trailer
	Changes  []Change
	// MergeParents are extra parents after the base commit: a merge.
	MergeParents []Hash
	// Author defaults to the repository's committer.
	Author Signature
	// AllowEmpty commits even when the tree does not change.
	AllowEmpty bool
}

// maxUpdateAttempts bounds how often Update retries after losing a
// compare-and-swap race. Each retry re-reads the tip, so only a livelock
// between many writers could exhaust it.
const maxUpdateAttempts = 64

// Update commits to branch whatever fn computes from the branch's current
// snapshot, and retries with a fresh snapshot when another writer moved
// the branch in between. fn returning a nil spec (or one that changes
// nothing) makes no commit. Update returns the new tip.
func (r *Repo) Update(ctx context.Context, branch string, fn func(*Snapshot) (*CommitSpec, error)) (Hash, error) {
	if err := validBranch(branch); err != nil {
		return ZeroHash, err
	}
	// Goroutines of this process queue instead of racing each other; the
	// compare-and-swap still guards against other processes.
	unlock := r.lockBranch(branch)
	defer unlock()
	for attempt := 1; ; attempt++ {
		snap, spec, err := runUpdate(ctx, r, branch, fn)
		if err != nil || spec == nil {
			return snap.Commit, err
		}
		h, err := r.Commit(branch, snap.Commit, snap, *spec)
		if errors.Is(err, ErrRefChanged) && attempt < maxUpdateAttempts {
			continue
		}
		return h, err
	}
}

var branchLocks sync.Map // path+branch -> *sync.Mutex

// runUpdate runs fn on branch's snapshot; a nil spec means there is
// nothing to commit. On error the snapshot is empty.
func runUpdate(ctx context.Context, r *Repo, branch string, fn func(*Snapshot) (*CommitSpec, error)) (*Snapshot, *CommitSpec, error) {
	if err := ctx.Err(); err != nil {
		return &Snapshot{}, nil, err
	}
	snap, err := r.Snapshot(branch)
	if err != nil {
		return &Snapshot{}, nil, err
	}
	spec, err := fn(snap)
	if err != nil {
		return &Snapshot{}, nil, err
	}
	return snap, spec, nil
}

func (r *Repo) lockBranch(branch string) func() {
	m, _ := branchLocks.LoadOrStore(r.path+"\x00"+branch, &sync.Mutex{})
	mu := m.(*sync.Mutex)
	mu.Lock()
	return mu.Unlock
}

// Commit writes a commit whose first parent is base.Commit (none when
// base is empty) and whose tree is base's tree with spec's changes, then
// moves branch from expected to it (ZeroHash: the branch must not exist).
// It returns ErrRefChanged when branch is no longer at expected; the
// written objects are then unreferenced and harmless.
func (r *Repo) Commit(branch string, expected Hash, base *Snapshot, spec CommitSpec) (_ Hash, err error) {
	defer func() { r.writes.commit(err) }()
	if err := validBranch(branch); err != nil {
		return ZeroHash, err
	}
	if strings.TrimSpace(spec.Message) == "" {
		return ZeroHash, errors.New("commit: empty message")
	}
	objs := newObjectSet()
	tree, err := (&treeEditor{r: r, objs: objs}).apply(base.Tree, spec.Changes)
	if err != nil {
		return ZeroHash, fmt.Errorf("commit to %s: %w", branch, err)
	}
	if tree == base.Tree && !spec.AllowEmpty && len(spec.MergeParents) == 0 && !base.Commit.IsZero() {
		return base.Commit, nil
	}

	now := r.opts.Now().Truncate(time.Second)
	author := spec.Author
	if author.Name == "" {
		author = r.opts.Committer
	}
	c := &object.Commit{
		Author:    object.Signature{Name: author.Name, Email: author.Email, When: now},
		Committer: object.Signature{Name: r.opts.Committer.Name, Email: r.opts.Committer.Email, When: now},
		Message:   FormatMessage(spec.Message, spec.Trailers),
		TreeHash:  tree,
	}
	if !base.Commit.IsZero() {
		c.ParentHashes = append(c.ParentHashes, base.Commit)
	}
	c.ParentHashes = append(c.ParentHashes, spec.MergeParents...)
	if r.opts.Signer != nil {
		c.Message = r.opts.Signer.signed(c.TreeHash, c.ParentHashes, c.Message)
	}
	obj := objs.st.NewEncodedObject()
	if err := c.Encode(obj); err != nil {
		return ZeroHash, fmt.Errorf("encode commit: %w", err)
	}
	commit := objs.add(obj)

	if err := r.writeObjects(objs); err != nil {
		return ZeroHash, fmt.Errorf("commit to %s: %w", branch, err)
	}
	if err := r.SetBranch(branch, expected, commit); err != nil {
		return ZeroHash, err
	}
	return commit, nil
}

// FormatMessage joins a message and its trailers the way git
// interpret-trailers does.
func FormatMessage(msg string, trailers []Trailer) string {
	msg = strings.TrimRight(msg, "\n")
	if len(trailers) == 0 {
		return msg + "\n"
	}
	var b strings.Builder
	b.WriteString(msg)
	b.WriteString("\n\n")
	for _, t := range trailers {
		// A trailer value is one line; newlines would end the block.
		v := strings.Join(strings.Fields(t.Value), " ")
		fmt.Fprintf(&b, "%s: %s\n", t.Key, v)
	}
	return b.String()
}

// objectSet collects the objects a commit creates, in memory.
type objectSet struct {
	st     *memory.Storage
	hashes []Hash
	seen   map[Hash]bool
}

func newObjectSet() *objectSet {
	return &objectSet{st: memory.NewStorage(), seen: make(map[Hash]bool)}
}

func (s *objectSet) add(o plumbing.EncodedObject) Hash {
	h := o.Hash()
	if !s.seen[h] {
		s.seen[h] = true
		s.hashes = append(s.hashes, h)
		if _, err := s.st.SetEncodedObject(o); err != nil {
			// memory storage cannot fail
			panic(err)
		}
	}
	return h
}

func (s *objectSet) blob(data []byte) Hash {
	o := s.st.NewEncodedObject()
	o.SetType(plumbing.BlobObject)
	o.SetSize(int64(len(data)))
	// An in-memory object's writer cannot fail.
	w, _ := o.Writer()
	w.Write(data)
	w.Close()
	return s.add(o)
}

// writeObjects stores a commit's objects durably: as one packfile when
// there are many (one file to write and fsync instead of thousands), as
// loose objects otherwise.
func (r *Repo) writeObjects(objs *objectSet) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(objs.hashes) >= r.opts.PackThreshold {
		return r.writePack(objs)
	}
	var dirs map[string]bool
	for _, h := range objs.hashes {
		o, err := objs.st.EncodedObject(plumbing.AnyObject, h)
		if err != nil {
			return err
		}
		if _, err := r.st.SetEncodedObject(o); err != nil {
			return fmt.Errorf("write object: %w", err)
		}
		if !r.opts.NoFsync {
			hex := h.String()
			dir := filepath.Join(r.path, "objects", hex[:2])
			if err := syncFile(filepath.Join(dir, hex[2:])); err != nil {
				return err
			}
			if dirs == nil {
				dirs = map[string]bool{}
			}
			dirs[dir] = true
		}
	}
	for dir := range dirs {
		if err := durable.SyncDir(dir); err != nil {
			return err
		}
	}
	return nil
}

func (r *Repo) writePack(objs *objectSet) error {
	checksum, idx, err := writePackFiles(r.path, objs, !r.opts.NoFsync)
	if err != nil {
		return fmt.Errorf("write pack: %w", err)
	}
	r.packs.add(checksum, idx)
	return nil
}
