package gitrepo

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"github.com/go-git/go-git/v5/storage/filesystem/dotgit"
)

// Hash is a git object id.
type Hash = plumbing.Hash

// ZeroHash is the hash of nothing: a branch that does not exist yet.
var ZeroHash = plumbing.ZeroHash

// Errors callers branch on.
var (
	// ErrNotFound: the branch, commit or path does not exist.
	ErrNotFound = errors.New("not found")
	// ErrRefChanged: a compare-and-swap found the ref moved.
	ErrRefChanged = errors.New("ref changed concurrently")
	// ErrInvalidPath: a path that git cannot store safely.
	ErrInvalidPath = errors.New("invalid path")
)

// Signature is an author or committer.
type Signature struct {
	Name  string
	Email string
}

// Options configure a Repo. The zero value means the defaults.
type Options struct {
	// DefaultBranch is the branch HEAD points to in a new repository;
	// default "main".
	DefaultBranch string
	// Committer signs commits; default "precept <precept@localhost>".
	Committer Signature
	// NoFsync skips fsync of objects and refs. Only a crash of the machine
	// (not of the process) can lose data then; tests and benchmarks use it
	// to measure what fsync costs.
	NoFsync bool
	// PackThreshold is the number of new objects from which a commit is
	// written as one packfile instead of loose objects; default 64.
	PackThreshold int
	// MaxPacks is the number of packfiles beyond which Maintain rolls
	// packs up; default 64.
	MaxPacks int
	// MaxLoose is the number of loose objects beyond which Maintain packs
	// them; default 2048.
	MaxLoose int
	// TreeCacheSize bounds the decoded-tree cache; default 16384 trees.
	TreeCacheSize int
	// TreeCacheBytes bounds the memory the decoded trees hold; default
	// 32 MiB.
	TreeCacheBytes int
	// Now is the clock for commit times and for the age of temporary
	// files; default time.Now.
	Now func() time.Time
	// Signer, when set, signs every commit the repository writes
	// (SignatureTrailer), so that commits fetched from a remote can be
	// told apart from the repository's own.
	Signer *Signer
	// DebrisAge is how long a temporary object file (tmp_pack_*,
	// tmp_idx_*, …) must have gone unwritten before it counts as the
	// debris of a write that was killed; default 10 minutes. A live write
	// touches its file continuously.
	DebrisAge time.Duration
}

func (o Options) withDefaults() Options {
	if o.DefaultBranch == "" {
		o.DefaultBranch = "main"
	}
	if o.Committer.Name == "" {
		o.Committer = Signature{Name: "precept", Email: "precept@localhost"}
	}
	if o.PackThreshold <= 0 {
		o.PackThreshold = 64
	}
	if o.MaxPacks <= 0 {
		o.MaxPacks = DefaultMaxPacks
	}
	if o.MaxLoose <= 0 {
		o.MaxLoose = DefaultMaxLoose
	}
	if o.TreeCacheSize <= 0 {
		o.TreeCacheSize = 16384
	}
	if o.TreeCacheBytes <= 0 {
		o.TreeCacheBytes = 32 << 20
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.DebrisAge <= 0 {
		o.DebrisAge = DefaultDebrisAge
	}
	return o
}

// Maintenance bounds (docs/thresholds.md, "Repository maintenance").
const (
	DefaultMaxPacks  = 64
	DefaultMaxLoose  = 2048
	DefaultDebrisAge = 10 * time.Minute
)

// Repo is a bare git repository on disk.
type Repo struct {
	path string
	opts Options

	// mu serialises every use of st and repo: go-git's storage keeps
	// unsynchronised caches.
	mu    sync.Mutex
	maint sync.Mutex // serialises Maintain
	st    *filesystem.Storage
	repo  *git.Repository
	packs *packSet
	trees *treeCache
	// debris counts the temporary files removed since Open.
	debris debrisCount
	// writes counts the outcomes of commits and pushes (WriteStats).
	writes writeCount
}

// Open opens the bare repository at path, creating it (like `git init
// --bare`) when the directory does not exist or is empty.
func Open(path string, opts Options) (*Repo, error) {
	opts = opts.withDefaults()
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open repository: %w", err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("open repository: %w", err)
	}
	st := filesystem.NewStorageWithOptions(osfs.New(abs), cache.NewObjectLRU(32*cache.MiByte), filesystem.Options{})
	r := &Repo{path: abs, opts: opts, st: st, packs: newPackSet(abs), trees: newTreeCache(opts.TreeCacheSize, opts.TreeCacheBytes)}

	if _, err := os.Stat(filepath.Join(abs, "HEAD")); errors.Is(err, os.ErrNotExist) {
		if err := r.initBare(); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, fmt.Errorf("open repository: %w", err)
	}
	repo, err := git.Open(st, nil)
	if err != nil {
		return nil, fmt.Errorf("open repository %s: %w", abs, err)
	}
	r.repo = repo
	if _, err := r.packs.refresh(); err != nil {
		return nil, fmt.Errorf("open repository %s: %w", abs, err)
	}
	// What a killed write left behind goes now, not at the first
	// maintenance.
	if err := newMaintenance(r).removeDebris(); err != nil {
		return nil, fmt.Errorf("open repository %s: %w", abs, err)
	}
	return r, nil
}

func (r *Repo) initBare() error {
	entries, err := os.ReadDir(r.path)
	if err != nil {
		return fmt.Errorf("init repository: %w", err)
	}
	if len(entries) > 0 {
		return fmt.Errorf("init repository: %s is not empty and not a git repository", r.path)
	}
	repo, err := git.InitWithOptions(r.st, nil, git.InitOptions{DefaultBranch: plumbing.NewBranchReferenceName(r.opts.DefaultBranch)})
	if err != nil {
		return fmt.Errorf("init repository: %w", err)
	}
	cfg, err := repo.Config()
	if err != nil {
		return fmt.Errorf("init repository: %w", err)
	}
	cfg.Core.IsBare = true
	if err := repo.SetConfig(cfg); err != nil {
		return fmt.Errorf("init repository: %w", err)
	}
	return nil
}

// Path returns the repository's directory.
func (r *Repo) Path() string { return r.path }

// DefaultBranch returns the branch HEAD points to for new repositories.
func (r *Repo) DefaultBranch() string { return r.opts.DefaultBranch }

// Close releases open files.
func (r *Repo) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.packs.close()
	return r.st.Close()
}

// Tip returns the commit a branch points to, or ZeroHash and ErrNotFound
// when the branch does not exist.
func (r *Repo) Tip(branch string) (Hash, error) {
	return r.resolve(plumbing.NewBranchReferenceName(branch))
}

func (r *Repo) resolve(name plumbing.ReferenceName) (Hash, error) {
	h, err := readRef(r.path, name)
	if err != nil {
		return ZeroHash, err
	}
	if h.IsZero() {
		return ZeroHash, fmt.Errorf("ref %s: %w", name.Short(), ErrNotFound)
	}
	return h, nil
}

// Branch is a branch and the commit it points to.
type Branch struct {
	Name string
	Tip  Hash
}

// Branches lists local branches whose names start with prefix.
func (r *Repo) Branches(prefix string) ([]Branch, error) {
	return r.listRefs("refs/heads/", prefix)
}

// RemoteBranches lists the remote-tracking branches of a remote whose names
// start with prefix; names are given without "refs/remotes/<remote>/".
func (r *Repo) RemoteBranches(remote, prefix string) ([]Branch, error) {
	return r.listRefs("refs/remotes/"+remote+"/", prefix)
}

// listRefs lists the refs under namespace (e.g. "refs/heads/") whose
// short names start with prefix. It reads the ref files itself rather
// than through go-git, which also reads the empty <ref>.lock files a
// writer holds for a moment and then fails on them.
func (r *Repo) listRefs(namespace, prefix string) ([]Branch, error) {
	seen := map[string]bool{}
	var out []Branch
	root := filepath.Join(r.path, filepath.FromSlash(namespace))
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if d.IsDir() || strings.HasSuffix(p, ".lock") {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		short := filepath.ToSlash(rel)
		if !strings.HasPrefix(short, prefix) {
			return nil
		}
		h, err := readRef(r.path, plumbing.ReferenceName(namespace+short))
		if err != nil {
			return err
		}
		// A ref deleted between the walk and the read is simply gone.
		if !h.IsZero() {
			seen[short] = true
			out = append(out, Branch{Name: short, Tip: h})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list refs: %w", err)
	}
	packed, err := packedRefs(r.path)
	if err != nil {
		return nil, fmt.Errorf("list refs: %w", err)
	}
	for name, h := range packed {
		short, ok := strings.CutPrefix(name, namespace)
		if ok && strings.HasPrefix(short, prefix) && !seen[short] {
			out = append(out, Branch{Name: short, Tip: h})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// SetBranch moves (or creates) a branch from old to new with a
// compare-and-swap: old ZeroHash means the branch must not exist. It
// returns ErrRefChanged when the branch is not at old.
func (r *Repo) SetBranch(branch string, old, new Hash) error {
	if err := validBranch(branch); err != nil {
		return err
	}
	return casRef(r.path, plumbing.NewBranchReferenceName(branch), old, new, !r.opts.NoFsync)
}

// DeleteBranch deletes a branch if it still points to old.
func (r *Repo) DeleteBranch(branch string, old Hash) error {
	if err := validBranch(branch); err != nil {
		return err
	}
	return casRef(r.path, plumbing.NewBranchReferenceName(branch), old, ZeroHash, !r.opts.NoFsync)
}

func validBranch(name string) error {
	ref := plumbing.NewBranchReferenceName(name)
	if name == "" || strings.Contains(name, "..") || strings.HasSuffix(name, ".lock") || strings.ContainsAny(name, " ~^:?*[\\\x00") ||
		strings.HasPrefix(name, "/") || strings.HasSuffix(name, "/") || strings.Contains(name, "//") || !ref.IsBranch() {
		return fmt.Errorf("branch %q: %w", name, ErrInvalidPath)
	}
	return nil
}

// IsAncestor reports whether commit a is reachable from commit b (a
// commit is its own ancestor).
func (r *Repo) IsAncestor(a, b Hash) (bool, error) {
	if a == b {
		return true, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, err := r.commitObject(a); err != nil {
		return false, err
	}
	// The walk reads each commit through r.object, which finds packs
	// written since the storage was indexed; go-git's own walk read
	// parents from its storage alone and failed with "object not found"
	// on commits in a pack it had not seen.
	seen := map[Hash]bool{b: true}
	queue := []Hash{b}
	for len(queue) > 0 {
		h := queue[0]
		queue = queue[1:]
		if h == a {
			return true, nil
		}
		c, err := r.commitObject(h)
		if err != nil {
			return false, fmt.Errorf("ancestry of %s: %w", a, err)
		}
		for _, p := range c.ParentHashes {
			if !seen[p] {
				seen[p] = true
				queue = append(queue, p)
			}
		}
	}
	return false, nil
}

// object reads an object; the caller holds mu. Undeltified objects in
// packs come from the pack set; loose and deltified ones from go-git.
// When nothing has the object it looks for packs that appeared since
// (another process may have written it), then asks go-git to reload.
func (r *Repo) object(t plumbing.ObjectType, h Hash) (plumbing.EncodedObject, error) {
	o, err := r.packs.read(h)
	if errors.Is(err, fs.ErrNotExist) {
		// Another process's maintenance removed a pack this one knew of
		// (docs/thresholds.md, "Repository maintenance"): forget it and look again.
		if _, rerr := r.packs.refresh(); rerr != nil {
			return nil, rerr
		}
		r.st.Reindex()
		o, err = r.packs.read(h)
	}
	if err != nil && (errors.Is(err, plumbing.ErrObjectNotFound) || errors.Is(err, errDelta)) {
		o, err = r.st.EncodedObject(plumbing.AnyObject, h)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, dotgit.ErrPackfileNotFound) {
			// go-git's pack list is stale for the same reason.
			err = plumbing.ErrObjectNotFound
		}
		if errors.Is(err, plumbing.ErrObjectNotFound) {
			if changed, rerr := r.packs.refresh(); rerr != nil {
				return nil, rerr
			} else if changed {
				o, err = r.packs.read(h)
			}
			if err != nil {
				r.st.Reindex()
				o, err = r.st.EncodedObject(plumbing.AnyObject, h)
			}
		}
	}
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		return nil, fmt.Errorf("%s %s: %w", t, h, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s %s: %w", t, h, err)
	}
	if t != plumbing.AnyObject && o.Type() != t {
		return nil, fmt.Errorf("object %s is a %s, not a %s: %w", h, o.Type(), t, ErrNotFound)
	}
	return o, nil
}

// commitObject loads a commit; the caller holds mu.
func (r *Repo) commitObject(h Hash) (*object.Commit, error) {
	o, err := r.object(plumbing.CommitObject, h)
	if err != nil {
		return nil, err
	}
	c, err := object.DecodeCommit(r.st, o)
	if err != nil {
		return nil, fmt.Errorf("decode commit %s: %w", h, err)
	}
	return c, nil
}

// syncStorage makes go-git see every pack before it reads on its own
// (push, fetch, repack); the caller holds mu.
func (r *Repo) syncStorage() { r.st.Reindex() }

// AddRemote configures a remote (or changes its URL).
func (r *Repo) AddRemote(name, url string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	cfg, err := r.repo.Config()
	if err != nil {
		return fmt.Errorf("add remote: %w", err)
	}
	cfg.Remotes[name] = &config.RemoteConfig{
		Name:  name,
		URLs:  []string{url},
		Fetch: []config.RefSpec{config.RefSpec(fmt.Sprintf("+refs/heads/*:refs/remotes/%s/*", name))},
	}
	if err := r.repo.SetConfig(cfg); err != nil {
		return fmt.Errorf("add remote: %w", err)
	}
	return nil
}
